-- complete for one shard (the settlement and the new timing are computed by the client).
-- ARGV: prefix, now, token, nx (without the Crawl-delay: applied here from the host's state),
-- ad, bo, er, dd, lead, max lead, max crawl delay, renew, renew slots (-1: none), new token,
-- new expiry, n done, n failed, n requeued, n unfinished, then the requeued (fp, attempts)
-- and the unfinished fps (the done and failed ones only count). Reply: {'stale'} or {'ok',
-- renewed batch or {}, hint}
open_shard(ARGV[1])
local now, tok = tonumber(ARGV[2]), ARGV[3]
local h = redis.call('HGET', TK, tok)
if not h then return {'stale'} end
local hk = hkey(h)
local st = redis.call('HMGET', hk, 'tk', 'dd', 'cd')
if st[1] ~= tok then return {'stale'} end
refresh(now)
local nd, nf, nr, nu = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19])
if nr + nu > 0 then
  local map, order = leased(redis.call('HGET', hk, 'lf'))
  local i, again = 20, {}  -- fp -> its entry, back to the queue
  for _ = 1, nr do
    local m = map[ARGV[i]][2]
    local a = string.find(m, '\0', 1, true)
    local b = string.find(m, '\0', a + 1, true)
    again[ARGV[i]] = string.sub(m, 1, a) .. ARGV[i + 1] .. string.sub(m, b)
    i = i + 2
  end
  for _ = 1, nu do
    again[ARGV[i]] = map[ARGV[i]][2]
    i = i + 1
  end
  local back = {}
  for _, fp in ipairs(order) do
    if again[fp] then back[#back + 1] = {map[fp][1], again[fp]} end
  end
  requeue(h, back)
end
local backlog = queue_len(h)
release(h, tok)
C.leased = C.leased - (nd + nf + nr + nu)
C.done = C.done + nd
C.failed = C.failed + nf
C.queued = C.queued + nr + nu
C.retries = C.retries + nr
-- ARGV[4] holds the configured and adaptive delays: the Crawl-delay (capped) is added here
local nx = tonumber(ARGV[4])
if st[3] and st[3] ~= '' then nx = math.max(nx, now + host_delay(0, st[3], 0, tonumber(ARGV[11]))) end
local dead = ARGV[8] == '1'
if dead then
  if st[2] ~= '1' then C.dead = C.dead + 1 end
  drop_queue(h)
  C.queued = C.queued - backlog
  C.failed = C.failed + backlog
  backlog = 0
end
local od = fmt(nx - math.min(backlog * tonumber(ARGV[9]), tonumber(ARGV[10])))
redis.call('HSET', hk, 'nx', fmt(nx), 'od', od, 'ad', ARGV[5], 'bo', ARGV[6], 'er', ARGV[7],
  'dd', ARGV[8])
local renew, slots = tonumber(ARGV[12]), tonumber(ARGV[13])
local batch = {}
if renew > 0 and backlog > 0 and not dead and nx <= now and slots ~= 0 then
  local take = renew
  if slots > 0 and slots < take then take = slots end
  batch = lease_host(h, take, ARGV[14], ARGV[15])
elseif backlog > 0 then
  place(h, fmt(nx), od, now)
end
return {'ok', batch, hint()}
