-- gossamer: the crawl-wide index of the Redis frontier (one hash slot, tag {g}).
-- ARGV: prefix (gs:<crawl>:{g}:), cutoff (now minus the reclaim grace), published delta,
-- reserve (-1: none), max pages, allowed shards ('' any, else a string of 0/1 by shard),
-- candidates wanted (k), expired leases wanted, n hint updates, n expiry adds, n expiry
-- deletes, n new shards, now, then the updates (shard, version, score, host: '' = no work),
-- the adds (shard|token, expiry), the deletes, the new shards. Reply: {granted, leases out,
-- shards with a ready host, shards with a host with URLs queued (ready or resting),
-- candidates (host, shard, score)..., '|', expired (shard|token)...}; the counts are what a
-- worker's fair share of hosts is taken of (RedisFrontier._fair, hosts_over_share)
--
-- `hm` holds, per shard, "version \t score \t member" of its entry in `hint` (member: best
-- host \t shard). An update older than the stored version is dropped; one that changes
-- nothing writes nothing (writes cost ~2.5 µs each from Lua, reads ~0.3).
local G = ARGV[1]
local HINT, HM, ACT, PUB, EXP = G .. 'hint', G .. 'hm', G .. 'act', G .. 'pub', G .. 'exp'
local cutoff = ARGV[2]  -- leases that expired before it may be reclaimed
local i = 14
for _ = 1, tonumber(ARGV[9]) do
  local shard, ver, score, host = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local cur = redis.call('HGET', HM, shard)
  local cver, cscore, cmember = 0, '', ''
  if cur then
    local a = string.find(cur, '\t', 1, true)
    local b = string.find(cur, '\t', a + 1, true)
    cver, cscore, cmember = tonumber(string.sub(cur, 1, a - 1)), string.sub(cur, a + 1, b - 1),
      string.sub(cur, b + 1)
  end
  if ver > cver then
    local member = host == '' and '' or (host .. '\t' .. shard)
    if member ~= cmember or score ~= cscore then
      if member ~= cmember and cmember ~= '' then redis.call('ZREM', HINT, cmember) end
      if member ~= '' then redis.call('ZADD', HINT, score, member) end
      redis.call('HSET', HM, shard, ver .. '\t' .. score .. '\t' .. member)
    end
  end
end
for _ = 1, tonumber(ARGV[10]) do redis.call('ZADD', EXP, ARGV[i + 1], ARGV[i]); i = i + 2 end
local ndel = tonumber(ARGV[11])
if ndel > 0 then
  redis.call('ZREM', EXP, unpack(ARGV, i, i + ndel - 1))
  i = i + ndel
end
local nact = tonumber(ARGV[12])
if nact > 0 then redis.call('SADD', ACT, unpack(ARGV, i, i + nact - 1)) end
local delta = tonumber(ARGV[3])
local pub = 0
if delta ~= 0 then pub = redis.call('INCRBY', PUB, delta) else pub = tonumber(redis.call('GET', PUB) or '0') end
local granted = -1
local want = tonumber(ARGV[4])
if want >= 0 then
  granted = math.max(0, math.min(want, tonumber(ARGV[5]) - pub))
  if granted > 0 then redis.call('INCRBY', PUB, granted) end
end
-- leases out (one a leased host; an entry a worker never removed waits for the sweep), the
-- shards whose best host is ready now (a hint's score is its lease order, at most its next
-- fetch time, when ready; its next fetch time when resting) and the shards with a hint at all
-- (an unleased host with URLs queued, ready or resting)
local out = {granted, redis.call('ZCARD', EXP), redis.call('ZCOUNT', HINT, '-inf', ARGV[13]),
  redis.call('ZCARD', HINT)}
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
  for _, e in ipairs(redis.call('ZRANGEBYSCORE', EXP, '-inf', cutoff, 'LIMIT', 0, tonumber(ARGV[8]))) do
    out[#out + 1] = e
  end
end
return out
