-- reclaim the expired leases of one shard. ARGV: prefix, now, rest from, default delay,
-- max crawl delay. Reply: {URLs returned, hint}
local now, rest_from = tonumber(ARGV[2]), tonumber(ARGV[3])
local default_delay, max_cd = tonumber(ARGV[4]), tonumber(ARGV[5])
local n = 0
local toks = redis.call('ZRANGEBYSCORE', EK, '-inf', ARGV[2])
for _, tok in ipairs(toks) do
  local h = redis.call('HGET', TK, tok)
  if h then
    local hk = hkey(h)
    local fps = words(redis.call('HGET', hk, 'lf') or '')
    for _, fp in ipairs(fps) do requeue(h, fp, nil) end
    release(h, tok)
    n = n + #fps
    local t = redis.call('HMGET', hk, 'nx', 'cd', 'ad')
    local delay = default_delay
    if t[2] and t[2] ~= '' then delay = math.max(delay, math.min(tonumber(t[2]), max_cd)) end
    delay = math.max(delay, math.min(tonumber(t[3]), max_cd))
    local nx = math.max(tonumber(t[1]), rest_from + delay)
    redis.call('HSET', hk, 'nx', fmt(nx), 'od', fmt(nx))
    place(h, math.min(now, rest_from))
  else
    redis.call('ZREM', EK, tok)
  end
end
redis.call('HINCRBY', NK, 'leased', 0 - n)
redis.call('HINCRBY', NK, 'queued', n)
refresh(math.min(now, rest_from))
return {n, hint()}
