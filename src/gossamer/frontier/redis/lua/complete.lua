-- complete for one shard (the settlement and the new timing are computed by the client).
-- ARGV: prefix, now, token, nx (without the Crawl-delay: applied here from the host's state),
-- ad, bo, er, dd, lead, max lead, max crawl delay, renew, renew slots (-1: none), new token,
-- new expiry, n done, n failed, n requeued, n unfinished, then the fps (requeued as fp,
-- attempts). Reply: {'stale'} or {'ok', renewed batch or {}, hint, dead now (0/1)}
local now, tok = tonumber(ARGV[2]), ARGV[3]
local h = redis.call('HGET', TK, tok)
if not h then return {'stale'} end
local hk, qk = hkey(h), qkey(h)
if redis.call('HGET', hk, 'tk') ~= tok then return {'stale'} end
local nd, nf, nr, nu = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19])
local i = 20
if nd + nf > 0 then
  redis.call('HDEL', UK, unpack(ARGV, i, i + nd + nf - 1))
  i = i + nd + nf
end
for _ = 1, nr do requeue(h, ARGV[i], ARGV[i + 1]); i = i + 2 end
for _ = 1, nu do requeue(h, ARGV[i], nil); i = i + 1 end
release(h, tok)
redis.call('HINCRBY', NK, 'leased', 0 - (nd + nf + nr + nu))
redis.call('HINCRBY', NK, 'done', nd)
redis.call('HINCRBY', NK, 'failed', nf)
redis.call('HINCRBY', NK, 'queued', nr + nu)
redis.call('HINCRBY', NK, 'retries', nr)
local was_dead = redis.call('HGET', hk, 'dd')
local nx = tonumber(ARGV[4])
local cd = redis.call('HGET', hk, 'cd')
if cd and cd ~= '' then nx = math.max(nx, now + math.min(tonumber(cd), tonumber(ARGV[11]))) end
redis.call('HSET', hk, 'nx', fmt(nx), 'ad', ARGV[5], 'bo', ARGV[6], 'er', ARGV[7], 'dd', ARGV[8])
local dead = ARGV[8] == '1'
if dead then
  if was_dead ~= '1' then redis.call('HINCRBY', NK, 'dead', 1) end
  local rest = redis.call('ZRANGE', qk, 0, -1)
  for _, fp in ipairs(rest) do redis.call('HDEL', UK, fp) end
  redis.call('DEL', qk)
  redis.call('HINCRBY', NK, 'queued', 0 - #rest)
  redis.call('HINCRBY', NK, 'failed', #rest)
end
local backlog = redis.call('ZCARD', qk)
local lead = math.min(backlog * tonumber(ARGV[9]), tonumber(ARGV[10]))
redis.call('HSET', hk, 'od', fmt(nx - lead))
local renew, slots = tonumber(ARGV[12]), tonumber(ARGV[13])
local batch = {}
if renew > 0 and backlog > 0 and not dead and nx <= now and slots ~= 0 then
  local take = renew
  if slots > 0 and slots < take then take = slots end
  batch = lease_host(h, take, ARGV[14], ARGV[15])
else
  place(h, now)
end
refresh(now)
return {'ok', batch, hint()}
