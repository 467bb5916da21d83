-- gossamer: the per-shard part of the Redis frontier (prepended to every shard entry script).
-- Every key of one call carries the shard's hash tag, so a call runs on one Redis Cluster node.
-- ARGV[1] is the key prefix with the tag (gs:<crawl>:{<shard>}:), except for put, which
-- takes several shards; fingerprints travel as signed 64-bit decimal strings and are never
-- converted to Lua numbers (doubles).
--
-- A queued URL is one entry, fp \0 attempts \0 depth \0 parent \0 url, of its host's list
-- for its priority (FIFO); the host's sorted set `p` holds the priorities whose lists are
-- not empty (lowest first). (Lists, not one sorted set a host: a sorted set's insert and
-- range delete cost several times a list's push and pop, and twice the memory.) How many a
-- host has queued is counted when a lease or a completion needs it (queue_len), not kept:
-- put then costs one RPUSH for a host with URLs queued already. A leased URL lives in its
-- host's `lf` field (priority \1 entry, joined by \2) until the batch completes.
-- Each command costs ~1-2.5 µs from Lua, so the counters are read once and written once per
-- shard and call (the index version moves only when the shard's best host may have
-- changed), packed in one string: a hash of 14 counters cost ~8 µs a shard to read (HMGET
-- scans the listpack per field, and each field is a decimal to convert), the string ~1 µs.
local P, NK, CK, RK, WK, TK, EK
-- NK the Bloom filter's state (a hash), CK the counters (a string), RK ready hosts (not
-- leased, URLs queued, next_fetch_at <= now) by lease order, WK resting hosts (not leased,
-- URLs queued) by next_fetch_at, TK lease token -> host, EK lease token -> expiry
local function hkey(h) return P .. 'h:' .. h end   -- host state (hash)
local function pkey(h) return P .. 'p:' .. h end   -- host's queued priorities (sorted set)
local function lkey(pr, h) return P .. 'q:' .. pr .. ':' .. h end   -- host's queue at pr (list)
local function fmt(x) return string.format('%.17g', x) end

-- the rest between two batches of a host, back-off aside: the largest of the configured
-- delay, its robots.txt Crawl-delay (cd: nil or '' when it gave none) and its adaptive delay
-- (ad), the last two capped by max_cd. The twin of host_delay in frontier/_politeness.py
-- (tests/frontier/test_frontier_redis_delay.py holds the two equal)
local function host_delay(default_delay, cd, ad, max_cd)
  local delay = default_delay
  if cd and cd ~= '' then delay = math.max(delay, math.min(tonumber(cd), max_cd)) end
  return math.max(delay, math.min(tonumber(ad), max_cd))
end

-- counters, with the exact seen-set's linear-hashing state (sl level, sp split pointer, seen),
-- packed in CK after `hs` as little-endian doubles (exact for integers below 2^53); CR: the
-- packed string as read (or last written), to write only a changed one
local CFMT = '<' .. string.rep('d', 14)
local C, CR
-- set when a host may have entered, left or moved in R or W: the shard's best host (its
-- index hint) may have changed
local moved
-- the score of the shard's best host when its hint was last computed (`hs` in CK; math.huge:
-- none), so that put, which only adds hosts, skips the hint when none of them comes first
local HS

-- work on the shard with key prefix `prefix` (gs:<crawl>:{<shard>}:) from here on: a call
-- may open several shards in turn (one Redis; on Redis Cluster a call opens one shard)
local function open_shard(prefix)
  P = prefix
  NK, CK, RK, WK, TK, EK = P .. 'n', P .. 'c', P .. 'r', P .. 'w', P .. 't', P .. 'e'
  moved = false
  CR = redis.call('GET', CK)
  local v
  if CR then
    v = {struct.unpack(CFMT, CR)}
  else
    v = {math.huge, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
  end
  HS = v[1]
  -- one constructor: a table grown field by field rehashes several times (the order is
  -- CFMT's, as hint packs them: hs, then these)
  C = {queued = v[2], leased = v[3], done = v[4], failed = v[5], retries = v[6], hosts = v[7],
    dead = v[8], dropped = v[9], dups = v[10], ver = v[11], sl = v[12], sp = v[13], seen = v[14]}
end

-- the open shard's state, to come back to it with resume_shard (without reading it again)
local function shard_state() return {P = P, C = C, CR = CR, moved = moved, HS = HS} end
local function resume_shard(st)
  P = st.P
  NK, CK, RK, WK, TK, EK = P .. 'n', P .. 'c', P .. 'r', P .. 'w', P .. 't', P .. 'e'
  C, CR, moved, HS = st.C, st.CR, st.moved, st.HS
end

-- resting hosts whose time has come become ready (their score: the lease order)
local function refresh(now)
  while true do
    local due = redis.call('ZRANGEBYSCORE', WK, '-inf', fmt(now), 'LIMIT', 0, 256)
    if #due == 0 then break end
    moved = true
    local args = {}
    for _, h in ipairs(due) do
      args[#args + 1] = redis.call('HGET', hkey(h), 'od')
      args[#args + 1] = h
    end
    redis.call('ZREM', WK, unpack(due))
    redis.call('ZADD', RK, unpack(args))
    if #due < 256 then break end
  end
end

-- write the counters back if they changed and return the index hint: {} when the shard's
-- best host cannot have changed, else {version, score, best host} (the version moves with it)
local function hint()
  local best
  if moved then
    C.ver = C.ver + 1
    best = redis.call('ZRANGE', RK, 0, 0, 'WITHSCORES')
    if #best == 0 then best = redis.call('ZRANGE', WK, 0, 0, 'WITHSCORES') end
    HS = tonumber(best[2] or '') or math.huge
  end
  local packed = struct.pack(CFMT, HS, C.queued, C.leased, C.done, C.failed, C.retries, C.hosts,
    C.dead, C.dropped, C.dups, C.ver, C.sl, C.sp, C.seen)
  if packed ~= CR then
    redis.call('SET', CK, packed)
    CR = packed
  end
  if not best then return {} end
  return {C.ver, best[2] or '', best[1] or ''}
end

-- a host not leased, with URLs queued, next fetch nx and lease order od, goes to R or W.
-- `new`: h is in neither set (put): it changes the shard's best host only if it comes
-- before the best of the last hint.
local function place(h, nx, od, now, new)
  local ch, score
  if tonumber(nx) <= now then
    ch, score = redis.call('ZADD', RK, 'CH', od, h), od
  else
    ch, score = redis.call('ZADD', WK, 'CH', nx, h), nx
  end
  if ch > 0 and not (new and tonumber(score) > HS) then moved = true end
end

local function fp_of(member)
  return string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
end

-- the leased URLs of a host: {fp -> {priority, entry}} and their order
local function leased(lf)
  local map, order = {}, {}
  if not lf or lf == '' then return map, order end
  for entry in string.gmatch(lf, '[^\2]+') do
    local cut = string.find(entry, '\1', 1, true)
    local member = string.sub(entry, cut + 1)
    local fp = fp_of(member)
    map[fp] = {string.sub(entry, 1, cut - 1), member}
    order[#order + 1] = fp
  end
  return map, order
end

-- how many URLs host h has queued
local function queue_len(h)
  local n = 0
  for _, pr in ipairs(redis.call('ZRANGE', pkey(h), 0, -1)) do
    n = n + redis.call('LLEN', lkey(pr, h))
  end
  return n
end

-- lease ready host h with up to `take` URLs under token tok until exp: the lowest priority's
-- list first
local function lease_host(h, take, tok, exp)
  local hk, pk = hkey(h), pkey(h)
  local members, lf = {}, {}
  while #members < take do
    local pr = redis.call('ZRANGE', pk, 0, 0)[1]
    if not pr then break end
    local lk, want = lkey(pr, h), take - #members
    local got = redis.call('LPOP', lk, want) or {}
    for _, m in ipairs(got) do
      members[#members + 1] = m
      lf[#lf + 1] = pr .. '\1' .. m
    end
    if #got < want or redis.call('LLEN', lk) == 0 then redis.call('ZREM', pk, pr) end
    if #got == want then break end
  end
  local n = #members
  local t = redis.call('HMGET', hk, 'nx', 'cd', 'ad', 'bo', 'er', 'dd')
  local ql = queue_len(h)
  redis.call('HSET', hk, 'tk', tok, 'ex', exp, 'lf', table.concat(lf, '\2'))
  redis.call('HSET', TK, tok, h)
  redis.call('ZADD', EK, exp, tok)
  redis.call('ZREM', RK, h)
  moved = true
  C.queued = C.queued - n
  C.leased = C.leased + n
  return {h, tok, ql, members, t}
end

-- put leased URLs back at the front of their host's queue, in lease order; `back` is a list
-- of {priority, entry}. Returns how many.
local function requeue(h, back)
  local by, order = {}, {}
  for _, e in ipairs(back) do
    local l = by[e[1]]
    if not l then
      l = {}
      by[e[1]] = l
      order[#order + 1] = e[1]
    end
    l[#l + 1] = e[2]
  end
  for _, pr in ipairs(order) do
    local l, rev = by[pr], {}
    for k = #l, 1, -1 do rev[#rev + 1] = l[k] end
    redis.call('LPUSH', lkey(pr, h), unpack(rev))
    redis.call('ZADD', pkey(h), pr, pr)
  end
  return #back
end

-- drop a host's whole queue
local function drop_queue(h)
  local pk = pkey(h)
  for _, pr in ipairs(redis.call('ZRANGE', pk, 0, -1)) do redis.call('DEL', lkey(pr, h)) end
  redis.call('DEL', pk)
end

local function release(h, tok)
  redis.call('HDEL', hkey(h), 'tk', 'ex', 'lf')
  redis.call('HDEL', TK, tok)
  redis.call('ZREM', EK, tok)
end

-- a new host's state (hash hk): ready at `at` (a formatted time), nothing accepted, no errors
local function create_host(hk, at)
  redis.call('HSET', hk, 'nx', at, 'od', at, 'tt', 0, 'dd', 0, 'er', 0, 'bo', 0, 'ad', 0)
  C.hosts = C.hosts + 1
end

local function new_host(h, now)
  local hk = hkey(h)
  if redis.call('EXISTS', hk) == 0 then create_host(hk, fmt(now)) end
  return hk
end
