-- the small calls of one shard. ARGV: prefix, op, ...
local op = ARGV[2]
if op == 'extend' then  -- token, until: {'ok'} or {'stale'}
  local tok = ARGV[3]
  local h = redis.call('HGET', TK, tok)
  if not h or redis.call('HGET', hkey(h), 'tk') ~= tok then return {'stale'} end
  local ex = tonumber(redis.call('HGET', hkey(h), 'ex'))
  local u = tonumber(ARGV[4])
  if u > ex then
    redis.call('HSET', hkey(h), 'ex', ARGV[4])
    redis.call('ZADD', EK, ARGV[4], tok)
  end
  return {'ok'}
elseif op == 'delay' then  -- host, crawl delay ('' none), now
  local hk = new_host(ARGV[3], tonumber(ARGV[5]))
  if ARGV[4] == '' then redis.call('HDEL', hk, 'cd') else redis.call('HSET', hk, 'cd', ARGV[4]) end
  return {'ok'}
elseif op == 'held' then  -- token: {'stale'} or {'ok', host, fps, records, timing}
  local tok = ARGV[3]
  local h = redis.call('HGET', TK, tok)
  if not h or redis.call('HGET', hkey(h), 'tk') ~= tok then return {'stale'} end
  local fps = words(redis.call('HGET', hkey(h), 'lf') or '')
  local recs = {}
  for k, fp in ipairs(fps) do recs[k] = redis.call('HGET', UK, fp) end
  return {'ok', h, fps, recs, redis.call('HMGET', hkey(h), 'nx', 'cd', 'ad', 'bo', 'er', 'dd'),
    redis.call('HGET', hkey(h), 'ex')}
elseif op == 'stats' then  -- now: {counters..., ready, leased hosts, min next ready, min next waiting, hint}
  local now = tonumber(ARGV[3])
  refresh(now)
  local c = redis.call('HMGET', NK, 'queued', 'leased', 'done', 'failed', 'retries', 'hosts',
    'dead', 'dropped', 'dups')
  local best = ''
  for _, h in ipairs(redis.call('ZRANGE', RK, 0, -1)) do
    local nx = tonumber(redis.call('HGET', hkey(h), 'nx'))
    if best == '' or nx < best then best = nx end
  end
  local w = redis.call('ZRANGE', WK, 0, 0, 'WITHSCORES')
  local c2 = {}
  for k = 1, 9 do c2[k] = c[k] or '0' end
  c2[10] = redis.call('ZCARD', RK)
  c2[11] = redis.call('HLEN', TK)
  c2[12] = best == '' and '' or fmt(best)
  c2[13] = w[2] or ''
  c2[14] = hint()
  return c2
end
return redis.error_reply('unknown op ' .. op)
