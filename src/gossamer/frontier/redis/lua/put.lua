-- put_discovered for one shard. ARGV: prefix, now, budget (-1: none), then per host: host,
-- n, and n URLs of 5 fields: fp, priority, depth, parent (+url or -), url.
-- Reply: {added, hint}
--
-- The seen-set: the shard's fingerprints in compact integer sets (intsets, 8 bytes a URL up
-- to Redis's set-max-intset-entries, 512) addressed by linear hashing: level L and split
-- pointer S give bucket fp mod 2^L, or fp mod 2^(L+1) for the buckets already split; one
-- bucket splits whenever the shard averages more than SPLIT_AT URLs a bucket, so buckets
-- stay compact and a split moves ~SPLIT_AT entries (bounded work per call). A bucket not
-- yet split in its round holds up to twice the average: SPLIT_AT = 200 keeps the largest
-- under 512 (a set that grew past it would stay a hash table for good).
local SPLIT_AT, MAX_LEVEL = 200, 15
local now, budget = tonumber(ARGV[2]), tonumber(ARGV[3])
local sb = redis.call('HMGET', NK, 'sl', 'sp', 'seen')
local L, S, seen = tonumber(sb[1] or '0'), tonumber(sb[2] or '0'), tonumber(sb[3] or '0')

-- fp mod 2^k (k <= 15) of a signed decimal fingerprint, exactly: 10^15 is a multiple of 2^15
local function low_bits(fp, k)
  local m = 2 ^ k
  local neg = string.byte(fp, 1) == 45
  local digits = neg and string.sub(fp, 2) or fp
  local r = tonumber(string.sub(digits, -15)) % m
  if neg and r ~= 0 then r = m - r end
  return r
end

local function bucket(fp)
  local b = low_bits(fp, L)
  if b < S then b = low_bits(fp, L + 1) end
  return P .. 's:' .. b
end

local function split_one()
  local src, dst = P .. 's:' .. S, P .. 's:' .. (S + 2 ^ L)
  local moving = {}
  for _, fp in ipairs(redis.call('SMEMBERS', src)) do
    if low_bits(fp, L + 1) ~= S then moving[#moving + 1] = fp end
  end
  if #moving > 0 then
    redis.call('SREM', src, unpack(moving))
    redis.call('SADD', dst, unpack(moving))
  end
  S = S + 1
  if S == 2 ^ L then L, S = L + 1, 0 end
end

refresh(now)
local added = 0
local i = 4
while i <= #ARGV do
  local h, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local hk, qk = hkey(h), qkey(h)
  local st = redis.call('HMGET', hk, 'tt', 'dd', 'sq', 'tk', 'nx', 'od')
  if not st[1] then
    redis.call('HSET', hk, 'nx', fmt(now), 'od', fmt(now), 'dd', 0, 'er', 0, 'bo', 0, 'ad', 0)
    C.hosts = C.hosts + 1
    st = {'0', '0', '0', false, fmt(now), fmt(now)}
  end
  local tt, dead, sq = tonumber(st[1]), st[2] == '1', tonumber(st[3])
  local zargs = {}
  for _ = 1, n do
    local fp = ARGV[i]
    local sk = bucket(fp)
    if budget >= 0 and tt >= budget then
      if redis.call('SISMEMBER', sk, fp) == 1 then C.dups = C.dups + 1 else C.dropped = C.dropped + 1 end
    elseif redis.call('SADD', sk, fp) == 0 then
      C.dups = C.dups + 1
    else
      tt = tt + 1
      seen = seen + 1
      if seen > SPLIT_AT * (2 ^ L + S) and L < MAX_LEVEL then split_one() end
      if dead then
        C.failed = C.failed + 1
      else
        sq = sq + 1
        zargs[#zargs + 1] = fmt(tonumber(ARGV[i + 1]) * 4294967296 + sq)
        zargs[#zargs + 1] = fp .. '\0' .. '0' .. '\0' .. ARGV[i + 2] .. '\0' .. ARGV[i + 3]
          .. '\0' .. ARGV[i + 4]
        added = added + 1
      end
    end
    i = i + 5
  end
  redis.call('HSET', hk, 'tt', tt, 'sq', sq)
  if #zargs > 0 then
    redis.call('ZADD', qk, unpack(zargs))
    if not st[4] then place(h, st[5], st[6], now) end
  end
end
redis.call('HSET', NK, 'sl', L, 'sp', S, 'seen', seen)
C.queued = C.queued + added
return {added, hint()}
