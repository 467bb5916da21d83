-- reclaim the expired leases of one shard. ARGV: prefix, now, rest from, default delay,
-- max crawl delay, cutoff (leases that expired before it: now minus the reclaim grace),
-- sweep ('1': the hint is answered even if this call changed nothing, so that the index
-- learns what a worker that died before sending its hints left unsaid). Reply: {URLs
-- returned, hint}
open_shard(ARGV[1])
local now, rest_from = tonumber(ARGV[2]), tonumber(ARGV[3])
local default_delay, max_cd = tonumber(ARGV[4]), tonumber(ARGV[5])
local at = math.min(now, rest_from)
refresh(at)
local n = 0
local toks = redis.call('ZRANGEBYSCORE', EK, '-inf', ARGV[6])
for _, tok in ipairs(toks) do
  local h = redis.call('HGET', TK, tok)
  if h then
    local hk = hkey(h)
    local t = redis.call('HMGET', hk, 'nx', 'cd', 'ad', 'lf')
    local map, order = leased(t[4])
    local back = {}
    for _, fp in ipairs(order) do back[#back + 1] = map[fp] end
    requeue(h, back)
    release(h, tok)
    n = n + #order
    local delay = default_delay
    if t[2] and t[2] ~= '' then delay = math.max(delay, math.min(tonumber(t[2]), max_cd)) end
    delay = math.max(delay, math.min(tonumber(t[3]), max_cd))
    local nx = fmt(math.max(tonumber(t[1]), rest_from + delay))
    redis.call('HSET', hk, 'nx', nx, 'od', nx)
    if #back > 0 or redis.call('EXISTS', pkey(h)) == 1 then place(h, nx, nx, at) end
  else
    redis.call('ZREM', EK, tok)
  end
end
C.leased = C.leased - n
C.queued = C.queued + n
if ARGV[7] == '1' then moved = true end
return {n, hint()}
