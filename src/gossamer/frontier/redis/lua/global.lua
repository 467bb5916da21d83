-- gossamer: the crawl-wide index of the Redis frontier (one hash slot, tag {g}).
-- ARGV: prefix (gs:<crawl>:{g}:), now, published delta, reserve (-1: none), max pages,
-- allowed shards ('' any, else a string of 0/1 by shard), candidates wanted (k),
-- expired leases wanted, n hint updates, n expiry adds, n expiry deletes, then the updates
-- (shard, version, score, host: '' = no work), the adds (shard|token, expiry), the deletes.
-- Reply: {granted, candidates (host, shard, score)..., expired (shard|token)...}
local G = ARGV[1]
local HINT, HM, HV, ACT, PUB, EXP = G .. 'hint', G .. 'hm', G .. 'hv', G .. 'act', G .. 'pub', G .. 'exp'
local now = ARGV[2]
local i = 12
for _ = 1, tonumber(ARGV[9]) do
  local shard, ver, score, host = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  redis.call('SADD', ACT, shard)
  local old = tonumber(redis.call('HGET', HV, shard) or '0')
  if ver > old then
    redis.call('HSET', HV, shard, ver)
    local m = redis.call('HGET', HM, shard)
    if m then redis.call('ZREM', HINT, m) end
    if host == '' then
      redis.call('HDEL', HM, shard)
    else
      local member = host .. '\t' .. shard
      redis.call('HSET', HM, shard, member)
      redis.call('ZADD', HINT, score, member)
    end
  end
end
for _ = 1, tonumber(ARGV[10]) do redis.call('ZADD', EXP, ARGV[i + 1], ARGV[i]); i = i + 2 end
for _ = 1, tonumber(ARGV[11]) do redis.call('ZREM', EXP, ARGV[i]); i = i + 1 end
local delta = tonumber(ARGV[3])
local pub = 0
if delta ~= 0 then pub = redis.call('INCRBY', PUB, delta) else pub = tonumber(redis.call('GET', PUB) or '0') end
local granted = -1
local want = tonumber(ARGV[4])
if want >= 0 then
  granted = math.max(0, math.min(want, tonumber(ARGV[5]) - pub))
  if granted > 0 then redis.call('INCRBY', PUB, granted) end
end
local out = {granted}
local k, allowed = tonumber(ARGV[6 + 1]), ARGV[6]
if k > 0 then
  local found, start = 0, 0
  while found < k do
    local page = redis.call('ZRANGE', HINT, start, start + 127, 'WITHSCORES')
    if #page == 0 then break end
    for j = 1, #page, 2 do
      local m = page[j]
      local tab = string.find(m, '\t', 1, true)
      local shard = string.sub(m, tab + 1)
      if allowed == '' or string.byte(allowed, tonumber(shard) + 1) == 49 then
        out[#out + 1] = string.sub(m, 1, tab - 1)
        out[#out + 1] = shard
        out[#out + 1] = page[j + 1]
        found = found + 1
        if found >= k then break end
      end
    end
    if allowed == '' then break end
    start = start + 128
  end
end
out[#out + 1] = '|'
if tonumber(ARGV[8]) > 0 then
  for _, e in ipairs(redis.call('ZRANGEBYSCORE', EXP, '-inf', now, 'LIMIT', 0, tonumber(ARGV[8]))) do
    out[#out + 1] = e
  end
end
return out
