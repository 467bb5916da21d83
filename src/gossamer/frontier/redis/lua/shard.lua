-- gossamer: the per-shard part of the Redis frontier (prepended to every shard entry script).
-- Every key of one call carries the shard's hash tag, so a call runs on one Redis Cluster node.
-- ARGV[1] is the key prefix with the tag (gs:<crawl>:{<shard>}:); fingerprints travel as
-- signed 64-bit decimal strings and are never converted to Lua numbers (doubles).
local P = ARGV[1]
local NK = P .. 'n'   -- counters: queued leased done failed retries hosts dead dropped dups ver
local UK = P .. 'u'   -- fp -> score \0 attempts \0 depth \0 parent \0 url (queued and leased URLs)
local RK = P .. 'r'   -- ready hosts (not leased, URLs queued, next_fetch_at <= now) by lease order
local WK = P .. 'w'   -- resting hosts (not leased, URLs queued) by next_fetch_at
local TK = P .. 't'   -- lease token -> host
local EK = P .. 'e'   -- lease token -> expiry
local function hkey(h) return P .. 'h:' .. h end   -- host state (hash)
local function qkey(h) return P .. 'q:' .. h end   -- host queue: fp by priority * 2^32 + seq
local function fmt(x) return string.format('%.17g', x) end

local function split(s)
  local out, i = {}, 1
  while true do
    local j = string.find(s, '\0', i, true)
    if not j then out[#out + 1] = string.sub(s, i); return out end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

local function words(s)
  local out = {}
  for w in string.gmatch(s, '%S+') do out[#out + 1] = w end
  return out
end

-- a host not leased goes to R (ready) or W (resting), or nowhere without queued URLs
local function place(h, now)
  local hk = hkey(h)
  if redis.call('HEXISTS', hk, 'tk') == 1 then return end
  if redis.call('ZCARD', qkey(h)) == 0 then
    redis.call('ZREM', RK, h)
    redis.call('ZREM', WK, h)
    return
  end
  if redis.call('ZSCORE', RK, h) then return end
  local nx = redis.call('HGET', hk, 'nx')
  if tonumber(nx) <= now then
    redis.call('ZREM', WK, h)
    redis.call('ZADD', RK, redis.call('HGET', hk, 'od'), h)
  else
    redis.call('ZADD', WK, nx, h)
  end
end

-- resting hosts whose time has come become ready; the reply's hint: the shard's best host
local function refresh(now)
  while true do
    local due = redis.call('ZRANGEBYSCORE', WK, '-inf', fmt(now), 'LIMIT', 0, 256)
    for _, h in ipairs(due) do
      redis.call('ZREM', WK, h)
      redis.call('ZADD', RK, redis.call('HGET', hkey(h), 'od'), h)
    end
    if #due < 256 then break end
  end
end

local function hint()
  local ver = redis.call('HINCRBY', NK, 'ver', 1)
  local r = redis.call('ZRANGE', RK, 0, 0, 'WITHSCORES')
  if #r > 0 then return {ver, r[2], r[1]} end
  local w = redis.call('ZRANGE', WK, 0, 0, 'WITHSCORES')
  if #w > 0 then return {ver, w[2], w[1]} end
  return {ver, '', ''}
end

-- lease host h (ready) with up to `take` URLs under token tok until exp
local function lease_host(h, take, tok, exp)
  local qk, hk = qkey(h), hkey(h)
  local fps = redis.call('ZRANGE', qk, 0, take - 1)
  redis.call('ZREMRANGEBYRANK', qk, 0, #fps - 1)
  local recs = {}
  if #fps > 0 then recs = redis.call('HMGET', UK, unpack(fps)) end
  redis.call('HSET', hk, 'tk', tok, 'ex', exp, 'lf', table.concat(fps, ' '))
  redis.call('HSET', TK, tok, h)
  redis.call('ZADD', EK, exp, tok)
  redis.call('ZREM', RK, h)
  redis.call('ZREM', WK, h)
  redis.call('HINCRBY', NK, 'queued', 0 - #fps)
  redis.call('HINCRBY', NK, 'leased', #fps)
  local t = redis.call('HMGET', hk, 'nx', 'cd', 'ad', 'bo', 'er', 'dd')
  return {h, tok, redis.call('ZCARD', qk), fps, recs, t}
end

-- a leased URL goes back to its host's queue (attempts given, or unchanged when nil)
local function requeue(h, fp, attempts)
  local rec = redis.call('HGET', UK, fp)
  local f = split(rec)
  if attempts then
    f[2] = attempts
    redis.call('HSET', UK, fp, table.concat(f, '\0'))
  end
  redis.call('ZADD', qkey(h), f[1], fp)
end

local function release(h, tok)
  redis.call('HDEL', hkey(h), 'tk', 'ex', 'lf')
  redis.call('HDEL', TK, tok)
  redis.call('ZREM', EK, tok)
end

local function new_host(h, now)
  local hk = hkey(h)
  if redis.call('EXISTS', hk) == 0 then
    redis.call('HSET', hk, 'nx', fmt(now), 'od', fmt(now), 'tt', 0, 'sq', 0, 'dd', 0,
      'er', 0, 'bo', 0, 'ad', 0)
    redis.call('HINCRBY', NK, 'hosts', 1)
  end
  return hk
end
