-- put_discovered for one or more shards (one call per shard on Redis Cluster). ARGV: now,
-- budget (-1: none), seen-set ('exact' or 'bloom'), then per shard: prefix, number of hosts,
-- and per host: host, n, and n URLs of 4 fields: the fingerprint's seen-set integer (below),
-- its low 15 bits (fp mod 2^15, computed by the client: the seen-set bucket without string
-- work here), priority, and the queue member (fp \0 0 \0 depth \0 parent (+url or -) \0
-- url) — 6 with a Bloom filter: the fingerprint's low and high 32 bits follow. Reply: per
-- shard {added, hint}
--
-- The seen-set: the shard's fingerprints in compact integer sets (intsets, 8 bytes a URL up
-- to Redis's set-max-intset-entries, 512) addressed by linear hashing: level L and split
-- pointer S give bucket fp mod 2^L, or fp mod 2^(L+1) for the buckets already split; one
-- bucket splits whenever the shard averages more than SPLIT_AT URLs a bucket, so buckets
-- stay compact and a split moves ~SPLIT_AT entries (bounded work per call). A bucket not
-- yet split in its round holds up to twice the average: SPLIT_AT = 200 keeps the largest
-- under 512 (a set that grew past it would stay a hash table for good). A set holds each
-- fingerprint as the integer whose 16 top bits are the fingerprint's 16 low bits reversed
-- (bit k of fp is bit 63-k) and whose other 48 are the fingerprint's high bits (a
-- bijection, made by the client): all of bucket S at level L then share the top L bits, and
-- bit L of fp, which decides a split, is the next one, so a split compares each member with
-- one threshold (as decimal strings: no conversion; a substring and a conversion a member
-- cost ~5 times more).
--
-- Where the time goes (perf on redis-server): the Lua VM and its number and string
-- conversions as much as the commands. So the exact seen-set is asked and written with one
-- SADD a URL (1: new), which also answers for a URL twice in a call, without a table of
-- this call's URLs (a URL the host budget drops is taken out again: SREM); a host with URLs
-- queued already costs one RPUSH (its state is read only when its queue was empty: see
-- enqueue; its count of URLs accepted is kept only under a host budget); the shard's
-- resting hosts are not refreshed here (lease does it).
local SPLIT_AT, MAX_LEVEL = 200, 15
local now, budget, bloom = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == 'bloom'
local F = bloom and 6 or 4
local nowS = fmt(now)
local L, S, M, M2  -- level, split pointer, 2^L, 2^(L+1)

-- the bucket of a fingerprint from its low 15 bits (a number)
local function bucket_of(lb)
  local b = lb % M
  if b < S then b = lb % M2 end
  return b
end
local function set_level(l, s)
  L, S, M, M2 = l, s, 2 ^ l, 2 ^ (l + 1)
end

-- decimal integers m >= t, both of t's sign (neg), without converting them: a longer one is
-- larger (smaller when negative), and digits of equal length compare as strings
local function dec_ge(m, t, neg)
  if #m ~= #t then
    if neg then return #m < #t end
    return #m > #t
  end
  if neg then return m <= t end
  return m >= t
end

-- split bucket S of level L: the members with bit L of fp set (bit 63-L of the stored
-- integer, the other top L bits being S's reversed) move to bucket S + 2^L. At level 0 they
-- are the negative members; above, the members from threshold T on (they share T's sign).
local function split_one()
  local src, dst = P .. 's:' .. S, P .. 's:' .. (S + 2 ^ L)
  local moving = {}
  local members = redis.call('SMEMBERS', src)
  if L == 0 then
    for _, m in ipairs(members) do
      if string.byte(m, 1) == 45 then moving[#moving + 1] = m end
    end
  else
    local t, s = 2 ^ (63 - L), S
    for k = 0, L - 1 do
      if s % 2 == 1 then t = t + 2 ^ (63 - k) end
      s = (s - s % 2) / 2
    end
    local neg = S % 2 == 1
    if neg then t = t - 2 ^ 64 end  -- exact: t has no bit below 2^(63-L)
    local ts = string.format('%.0f', t)
    for _, m in ipairs(members) do
      if dec_ge(m, ts, neg) then moving[#moving + 1] = m end
    end
  end
  if #moving > 0 then
    redis.call('SREM', src, unpack(moving))
    redis.call('SADD', dst, unpack(moving))
  end
  if S + 1 == M then set_level(L + 1, 0) else set_level(L, S + 1) end
end

-- a bucket's key (cached for the shard being worked on)
local BK
local function bkey(b)
  local k = BK[b]
  if not k then
    k = P .. 's:' .. b
    BK[b] = k
  end
  return k
end

-- the Bloom path: the URLs of this call taken as seen (a Bloom filter cannot take one back)
local fresh

-- The Bloom seen-set (optional): a scalable Bloom filter per shard (Almeida et al.): filters
-- 0..nf-1, each with K hash positions (h1 + j*h2) mod m; a URL is taken as seen when every
-- filter that has all its K bits set; new URLs go into the last filter, and a full one
-- (n >= capacity) gets a successor of twice the capacity and 2 more bits a URL, up to 22
-- (tighter, so the compound false-positive rate stays bounded). `bfp` accumulates the expected number of
-- false positives (new URLs wrongly taken as seen: pages never fetched).
local K, CAP0, BITS0, BITS_MAX = 7, 256, 14, 22
local nf, bm, bn
local function bloom_load()
  local raw = redis.call('HMGET', NK, 'nf', 'bm', 'bn', 'bfp')
  nf = tonumber(raw[1] or '0')
  bm, bn = {}, {}
  if nf > 0 then
    local j = 0
    for v in string.gmatch(raw[2], '[^,]+') do j = j + 1; bm[j] = tonumber(v) end
    j = 0
    for v in string.gmatch(raw[3], '[^,]+') do j = j + 1; bn[j] = tonumber(v) end
  end
  return tonumber(raw[4] or '0')
end
local bfp
local function capacity(j) return CAP0 * 2 ^ (j - 1) end
local function fp_rate()  -- the compound false-positive probability now
  local miss = 1
  for f = 1, nf do miss = miss * (1 - (1 - math.exp(-K * bn[f] / bm[f])) ^ K) end
  return 1 - miss
end
-- the bits to set, BITFIELD SET operations for filter pend_f, written in one command a
-- filter and at most BATCH URLs (Lua's unpack takes < 8000 values)
local BATCH = 250
local pend, pend_f = {}, 0
local function bloom_flush()
  if #pend > 0 then
    redis.call('BITFIELD', P .. 'b:' .. pend_f, unpack(pend))
    pend = {}
  end
end
local function bloom_add(h1, h2)
  if nf == 0 or bn[nf] >= capacity(nf) then
    bloom_flush()
    nf = nf + 1
    bm[nf] = capacity(nf) * math.min(BITS0 + 2 * (nf - 1), BITS_MAX)
    bn[nf] = 0
    -- allocated whole and exactly (BITFIELD growing the string would over-allocate by ~2x)
    redis.call('SET', P .. 'b:' .. nf, string.rep('\0', math.ceil(bm[nf] / 8)))
  end
  if #pend >= 4 * K * BATCH then bloom_flush() end
  pend_f = nf
  local m = bm[nf]
  for j = 0, K - 1 do
    pend[#pend + 1] = 'SET'
    pend[#pend + 1] = 'u1'
    pend[#pend + 1] = (h1 + j * h2) % m
    pend[#pend + 1] = 1
  end
  bn[nf] = bn[nf] + 1
  local p = fp_rate()
  bfp = bfp + p / (1 - p)
end

-- Bloom: which URLs of a shard's section (hosts from ARGV[i]) the filter already holds, as
-- of the call's start: {ARGV index -> true}. One BITFIELD_RO a filter and BATCH URLs (a URL
-- that a filter holds is not asked of the next)
local function known_of(i, nhosts)
  local idx = {}
  for _ = 1, nhosts do
    local n = tonumber(ARGV[i + 1])
    i = i + 2
    for _ = 1, n do
      idx[#idx + 1] = i
      i = i + F
    end
  end
  local known = {}
  for f = 1, nf do
    local m, key = bm[f], P .. 'b:' .. f
    for lo = 1, #idx, BATCH do
      local get, ask = {}, {}
      for x = lo, math.min(lo + BATCH - 1, #idx) do
        local j = idx[x]
        if not known[j] then
          ask[#ask + 1] = j
          local h1, h2 = tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5])
          for k = 0, K - 1 do
            get[#get + 1] = 'GET'
            get[#get + 1] = 'u1'
            get[#get + 1] = (h1 + k * h2) % m
          end
        end
      end
      if #ask > 0 then
        local bits = redis.call('BITFIELD_RO', key, unpack(get))
        for a, j in ipairs(ask) do
          local all = true
          for k = (a - 1) * K + 1, a * K do
            if bits[k] == 0 then
              all = false
              break
            end
          end
          if all then known[j] = true end
        end
      end
    end
  end
  return known
end

-- queue a host's accepted URLs (ARGV indexes `acc`, in order); returns how many were queued.
-- A host with URLs queued already (most visits) costs one RPUSH: it is alive (a dead host's
-- queue is dropped when it dies, and stays empty) and in the ready or the resting set, or
-- leased. Only a host whose queue was empty has its state read: created if new, placed in
-- the ready or resting set unless leased, and its URLs failed if it is dead.
local function enqueue(h, acc)
  local by, order = {}, {}  -- the new entries by priority
  for _, j in ipairs(acc) do
    local pr = ARGV[j + 2]
    local l = by[pr]
    if not l then
      l = {}
      by[pr] = l
      order[#order + 1] = pr
    end
    l[#l + 1] = ARGV[j + 3]
  end
  local fresh_lists = 0  -- the priorities whose list was empty
  for _, pr in ipairs(order) do
    local l = by[pr]
    if redis.call('RPUSH', lkey(pr, h), unpack(l)) == #l then
      redis.call('ZADD', pkey(h), pr, pr)
      fresh_lists = fresh_lists + 1
    end
  end
  if fresh_lists > 0 and redis.call('ZCARD', pkey(h)) == fresh_lists then  -- was empty
    local hk = hkey(h)
    local st = redis.call('HMGET', hk, 'dd', 'tk', 'nx', 'od')
    if not st[3] then
      create_host(hk, nowS)
      place(h, nowS, nowS, now, true)
    elseif st[1] == '1' then
      drop_queue(h)
      C.failed = C.failed + #acc
      return 0
    elseif not st[2] then
      place(h, st[3], st[4], now, true)
    end
  end
  return #acc
end

-- the URLs (ARGV indexes `new`, not seen before) a host's budget accepts; with a budget, the
-- host's count of URLs accepted (`tt`) is kept. Returns them and, when the budget dropped
-- some, the set of their fingerprints.
local function admit(h, new)
  if budget < 0 then return new, nil end
  local hk = hkey(h)
  local tt0 = tonumber(redis.call('HGET', hk, 'tt') or '0')
  local tt, acc, dropped = tt0, {}, nil
  for _, j in ipairs(new) do
    if tt >= budget then
      dropped = dropped or {}
      dropped[ARGV[j]] = true
    else
      tt = tt + 1
      acc[#acc + 1] = j
    end
  end
  if tt ~= tt0 then
    if redis.call('EXISTS', hk) == 0 then create_host(hk, nowS) end
    redis.call('HSET', hk, 'tt', tt)
  end
  return acc, dropped
end

-- count a host's URLs from ARGV[first] (n of them; `new`: the ARGV indexes of those not
-- seen before, once each; `dropped`: the fingerprints the budget dropped) as duplicates or
-- dropped: a dropped URL's repeat in the same call is dropped too. `unsee(j)` takes a
-- dropped URL back out of the seen-set (a later call may find room).
local function tally(first, n, new, dropped, unsee)
  C.dups = C.dups + n - #new
  if not dropped then return end
  local isnew = {}
  for _, j in ipairs(new) do isnew[j] = true end
  for j = first, first + (n - 1) * F, F do
    if dropped[ARGV[j]] then
      C.dropped = C.dropped + 1
      if isnew[j] then unsee(j) else C.dups = C.dups - 1 end
    end
  end
end

local function unsee_exact(j)
  C.seen = C.seen - 1
  redis.call('SREM', bkey(bucket_of(tonumber(ARGV[j + 1]))), ARGV[j])
end

-- one host's URLs from ARGV[i], exact seen-set; returns the next i and the URLs queued. A
-- host whose URLs are all known (most links of a page) costs no host command. One SADD a
-- URL both asks and writes the seen-set (1: new), and answers for a URL twice in the call.
local function put_host_exact(i)
  local h, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local first, new = i, {}
  for _ = 1, n do
    if redis.call('SADD', bkey(bucket_of(tonumber(ARGV[i + 1]))), ARGV[i]) == 1 then
      new[#new + 1] = i
      C.seen = C.seen + 1
      if C.seen > SPLIT_AT * (M + S) and L < MAX_LEVEL then split_one() end
    end
    i = i + F
  end
  if #new == 0 then
    C.dups = C.dups + n
    return i, 0
  end
  local acc, dropped = admit(h, new)
  tally(first, n, new, dropped, unsee_exact)
  if #acc == 0 then return i, 0 end
  return i, enqueue(h, acc)
end

-- the same with the Bloom filter (the URLs of this call taken as seen: `fresh`)
local function put_host_bloom(i, known)
  local h, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local first, new = i, {}
  for _ = 1, n do
    local fp = ARGV[i]
    if not known[i] and not fresh[fp] then
      fresh[fp] = true
      new[#new + 1] = i
    end
    i = i + F
  end
  if #new == 0 then
    C.dups = C.dups + n
    return i, 0
  end
  local acc, dropped = admit(h, new)
  tally(first, n, new, dropped, function(j) fresh[ARGV[j]] = nil end)
  for _, j in ipairs(acc) do bloom_add(tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5])) end
  if #acc == 0 then return i, 0 end
  return i, enqueue(h, acc)
end

local out = {}
local i = 4
while i <= #ARGV do
  open_shard(ARGV[i])
  local nhosts = tonumber(ARGV[i + 1])
  i = i + 2
  local added, a = 0, 0
  if bloom then
    bfp = bloom_load()
    fresh = {}
    local known = known_of(i, nhosts)
    for _ = 1, nhosts do
      i, a = put_host_bloom(i, known)
      added = added + a
    end
    bloom_flush()
    redis.call('HSET', NK, 'nf', nf, 'bm', table.concat(bm, ','), 'bn', table.concat(bn, ','),
      'bfp', fmt(bfp))
  else
    set_level(C.sl, C.sp)
    BK = {}
    for _ = 1, nhosts do
      i, a = put_host_exact(i)
      added = added + a
    end
    C.sl, C.sp = L, S
  end
  C.queued = C.queued + added
  out[#out + 1] = {added, hint()}
end
return out
