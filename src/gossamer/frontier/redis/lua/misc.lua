-- the small calls of one shard. ARGV: prefix, op, ...
open_shard(ARGV[1])
local op = ARGV[2]
if op == 'extend' then  -- token, until: {'ok', expiry} or {'stale'}
  local tok = ARGV[3]
  local h = redis.call('HGET', TK, tok)
  if not h then return {'stale'} end
  local t = redis.call('HMGET', hkey(h), 'tk', 'ex')
  if t[1] ~= tok then return {'stale'} end
  if tonumber(ARGV[4]) > tonumber(t[2]) then
    redis.call('HSET', hkey(h), 'ex', ARGV[4])
    redis.call('ZADD', EK, ARGV[4], tok)
    return {'ok', ARGV[4]}
  end
  return {'ok', t[2]}
elseif op == 'delay' then  -- host, crawl delay ('' none), now
  local hk = new_host(ARGV[3], tonumber(ARGV[5]))
  if ARGV[4] == '' then redis.call('HDEL', hk, 'cd') else redis.call('HSET', hk, 'cd', ARGV[4]) end
  hint()  -- the counters (a new host)
  return {'ok'}
elseif op == 'held' then  -- token: {'stale'} or {'ok', host, members, timing}
  local tok = ARGV[3]
  local h = redis.call('HGET', TK, tok)
  if not h then return {'stale'} end
  local t = redis.call('HMGET', hkey(h), 'tk', 'lf')
  if t[1] ~= tok then return {'stale'} end
  local map, order = leased(t[2])
  local members = {}
  for k, fp in ipairs(order) do members[k] = map[fp][2] end
  return {'ok', h, members, redis.call('HMGET', hkey(h), 'nx', 'cd', 'ad', 'bo', 'er', 'dd')}
elseif op == 'stats' then
  -- now: {queued leased done failed retries hosts dead dropped dups, ready hosts, leased
  -- hosts, min next of a ready host, min next of a resting host, Bloom false positives
  -- expected, hint}
  local now = tonumber(ARGV[3])
  refresh(now)
  local best = ''
  for _, h in ipairs(redis.call('ZRANGE', RK, 0, -1)) do
    local nx = tonumber(redis.call('HGET', hkey(h), 'nx'))
    if best == '' or nx < best then best = nx end
  end
  local w = redis.call('ZRANGE', WK, 0, 0, 'WITHSCORES')
  local out = {}
  for k, name in ipairs({'queued', 'leased', 'done', 'failed', 'retries', 'hosts', 'dead',
    'dropped', 'dups'}) do out[k] = C[name] end
  out[10] = redis.call('ZCARD', RK)
  out[11] = redis.call('HLEN', TK)
  out[12] = best == '' and '' or fmt(best)
  out[13] = w[2] or ''
  out[14] = redis.call('HGET', NK, 'bfp') or '0'
  moved = true  -- the sweep repairs the index from this hint: always send it
  out[15] = hint()
  return out
end
return redis.error_reply('unknown op ' .. op)
