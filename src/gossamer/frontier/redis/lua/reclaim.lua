-- reclaim the expired leases of one shard, and the leases of dead owners. ARGV: prefix, now,
-- rest from, default delay, max crawl delay, cutoff (leases that expired before it: now minus
-- the reclaim grace), sweep ('1': the hint is answered even if this call changed nothing, so
-- that the index learns what a worker that died before sending its hints left unsaid), then
-- dead owners as pairs (worker id, incarnation): a lease whose token names that worker with
-- an incarnation up to it is reclaimed now, expired or not (its worker's heartbeat stopped;
-- a later incarnation is the same worker back, after a freeze, and keeps its leases).
-- Reply: {URLs returned, hint}
open_shard(ARGV[1])
local now, rest_from = tonumber(ARGV[2]), tonumber(ARGV[3])
local default_delay, max_cd = tonumber(ARGV[4]), tonumber(ARGV[5])
local at = math.min(now, rest_from)
refresh(at)
local n = 0
local function give_back(tok, h)
  local hk = hkey(h)
  local t = redis.call('HMGET', hk, 'nx', 'cd', 'ad', 'lf')
  local map, order = leased(t[4])
  local back = {}
  for _, fp in ipairs(order) do back[#back + 1] = map[fp] end
  requeue(h, back)
  release(h, tok)
  n = n + #order
  local delay = host_delay(default_delay, t[2], t[3], max_cd)
  -- not before a delay from now: the holder's last request may have just ended
  local nx = fmt(math.max(tonumber(t[1]), rest_from + delay))
  redis.call('HSET', hk, 'nx', nx, 'od', nx)
  if #back > 0 or redis.call('EXISTS', pkey(h)) == 1 then place(h, nx, nx, at) end
end
local toks = redis.call('ZRANGEBYSCORE', EK, '-inf', ARGV[6])
for _, tok in ipairs(toks) do
  local h = redis.call('HGET', TK, tok)
  if h then give_back(tok, h) else redis.call('ZREM', EK, tok) end
end
if #ARGV >= 9 then
  local dead = {}
  for j = 8, #ARGV - 1, 2 do dead[ARGV[j]] = tonumber(ARGV[j + 1]) end
  local all = redis.call('HGETALL', TK)
  for j = 1, #all, 2 do
    -- a token: shard-worker_incarnation.random (tokens without an owner have no '_')
    local who, inc = string.match(all[j], '^%d+%-(%w+)_(%d+)%.')
    if who and dead[who] and tonumber(inc) <= dead[who] then give_back(all[j], all[j + 1]) end
  end
end
C.leased = C.leased - n
C.queued = C.queued + n
if ARGV[7] == '1' then moved = true end
return {n, hint()}
