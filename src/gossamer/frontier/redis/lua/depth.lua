-- the depth bookkeeping of one shard, used only by a crawl with a max_depth (see
-- RedisFrontier._put_relaxing: the client runs the relaxation's worklist, a call per shard and
-- round, since a child may live in another shard than its parent). ARGV: prefix, op, ...
--
-- Keys of the shard: `dp` (hash) fingerprint -> depth of every URL accepted, the truth about
-- a URL's depth (a queued entry keeps the depth it was queued at; lease reads `dp`); `pk`
-- (hash) fingerprint -> parked URL (seen only beyond max_depth, not accepted), depth \0
-- priority \0 host \0 parent (+url or -) \0 url; `ch` (hash) parent fingerprint -> its
-- recorded children, packed by the client (RedisFrontier's _EDGE: fp, shard, delta; 11
-- bytes an edge, the bulk of a max_depth crawl's Redis memory) and only concatenated here;
-- `dc` (hash) the parked and lowered counters.
--
-- A worker may die between the calls of one relaxation (SIGKILL, a lost machine): its leased
-- pages are then fetched again and their links offered again, and that replay must finish
-- what the dead worker began. Two marks make it so: `uq` (hash) fingerprint -> the record of
-- a URL accepted here whose queueing (put.lua, the client's next call) is not confirmed yet
-- (an offer of it is accepted again: put.lua's seen-set drops it if it was queued), and `lw`
-- (hash) fingerprint -> the depth of a URL lowered here whose children's relaxation is not
-- confirmed yet (an offer at that depth answers it as lowered again). The client clears
-- both (op 'clear', only the mark it set: a later mark stays) once the step after is done.
open_shard(ARGV[1])
local op = ARGV[2]
local DP, PK, CH, DC = P .. 'dp', P .. 'pk', P .. 'ch', P .. 'dc'
local UQ, LW = P .. 'uq', P .. 'lw'

-- a parked or unconfirmed record: depth, priority, host, parent, url
local function unpack_rec(rec)
  local g, at = {}, 1
  for _ = 1, 4 do  -- plain finds: Lua 5.1 patterns cannot hold \0
    local cut = string.find(rec, '\0', at, true)
    g[#g + 1] = string.sub(rec, at, cut - 1)
    at = cut + 1
  end
  return tonumber(g[1]), tonumber(g[2]), g[3], g[4], string.sub(rec, at)
end

if op == 'edges' then
  -- n, then per parent: fp, its children's records (packed). A parent the shard has
  -- accepted gets the records appended; reply: each parent's depth ('' when not accepted)
  local out = {}
  local n = tonumber(ARGV[3])
  for k = 0, n - 1 do
    local fp, rec = ARGV[4 + 2 * k], ARGV[5 + 2 * k]
    local d = redis.call('HGET', DP, fp)
    if d then
      local old = redis.call('HGET', CH, fp)
      redis.call('HSET', CH, fp, old and (old .. rec) or rec)
      out[#out + 1] = d
    else
      out[#out + 1] = ''
    end
  end
  return out
end

if op == 'relax' then
  -- max_depth, n, then per URL 7 fields: fp, depth, offered (1: an offer, counted as a
  -- duplicate when known; 0: a recorded child, which only the shard may know), priority,
  -- host, parent (+url or -), url. Reply: {accepted, lowered}: accepted, the URLs to queue
  -- now (their `dp` written here: a concurrent offer finds them known) as fp, depth,
  -- priority, host, parent, url; lowered, the known URLs whose depth fell, as fp, depth,
  -- children records
  local max_depth, n = tonumber(ARGV[3]), tonumber(ARGV[4])
  local accepted, lowered = {}, {}
  local parked, nlowered = 0, 0
  for k = 0, n - 1 do
    local i = 5 + 7 * k
    local fp, d, offered = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2] == '1'
    local cur = redis.call('HGET', DP, fp)
    if cur then
      cur = tonumber(cur)
      local q = redis.call('HGET', UQ, fp)
      if d < cur then
        redis.call('HSET', DP, fp, d)
        redis.call('HSET', LW, fp, d)
        nlowered = nlowered + 1
        lowered[#lowered + 1] = {fp, d, redis.call('HGET', CH, fp) or ''}
      elseif d == cur and redis.call('HGET', LW, fp) == tostring(d) then
        -- lowered here, its children's relaxation unconfirmed: again (a replay, or a
        -- concurrent offer; relaxing twice changes nothing)
        lowered[#lowered + 1] = {fp, d, redis.call('HGET', CH, fp) or ''}
      end
      if q then
        -- accepted, its queueing unconfirmed: accepted again at its depth now (put.lua
        -- counts it a duplicate if it was queued)
        local qd, pr, host, parent, url = unpack_rec(q)
        local nd = math.min(d, cur)
        pr = pr - (qd - nd)
        redis.call('HSET', UQ, fp, table.concat({nd, pr, host, parent, url}, '\0'))
        accepted[#accepted + 1] = {fp, nd, pr, host, parent, url}
      elseif offered then
        C.dups = C.dups + 1
      end
    else
      local rec = redis.call('HGET', PK, fp)
      local pr, host, parent, url
      local pd
      if rec then
        pd, pr, host, parent, url = unpack_rec(rec)
        pr = pr - (pd - d)  -- the priority moves with the depth
      elseif offered then
        pr, host, parent, url = tonumber(ARGV[i + 3]), ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
      end
      if host then
        if d > max_depth then
          if not rec or d < pd then
            if not rec then parked = parked + 1 end
            redis.call('HSET', PK, fp, table.concat({d, pr, host, parent, url}, '\0'))
          end
        else
          if rec then
            redis.call('HDEL', PK, fp)
            parked = parked - 1
          end
          redis.call('HSET', DP, fp, d)
          redis.call('HSET', UQ, fp, table.concat({d, pr, host, parent, url}, '\0'))
          accepted[#accepted + 1] = {fp, d, pr, host, parent, url}
        end
      end
    end
  end
  if parked ~= 0 then redis.call('HINCRBY', DC, 'parked', parked) end
  if nlowered ~= 0 then redis.call('HINCRBY', DC, 'lowered', nlowered) end
  hint()  -- the duplicates counter
  return {accepted, lowered}
end

if op == 'clear' then
  -- n, then n of: which mark ('q': uq, 'w': lw), fp, the depth it was set at. A mark set
  -- again since (another depth) stays. Reply: how many were cleared
  local n, cleared = tonumber(ARGV[3]), 0
  for k = 0, n - 1 do
    local i = 4 + 3 * k
    local key, fp, d = ARGV[i] == 'q' and UQ or LW, ARGV[i + 1], ARGV[i + 2]
    local v = redis.call('HGET', key, fp)
    if v and (key == LW and v == d or key == UQ and string.sub(v, 1, #d + 1) == d .. '\0') then
      redis.call('HDEL', key, fp)
      cleared = cleared + 1
    end
  end
  return cleared
end

if op == 'depths' then  -- fps: their depths ('' when unknown)
  local fps = {}
  for k = 3, #ARGV do fps[#fps + 1] = ARGV[k] end
  if #fps == 0 then return {} end
  local out = redis.call('HMGET', DP, unpack(fps))
  for k = 1, #out do out[k] = out[k] or '' end
  return out
end

return redis.error_reply('depth.lua: unknown op ' .. tostring(op))
