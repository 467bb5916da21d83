-- lease across several shards of one Redis (not Redis Cluster: a call's keys would span slots):
-- the best ready hosts of all the given shards in exact lease order (score, host), so one call
-- does what the client would otherwise do with a call per shard. ARGV: crawl prefix
-- (gs:<crawl>:), now, want hosts, per_host, slots (-1: no limit), expiry, token base, then the
-- shard numbers. Reply: {batches (each with its shard's index in the list), hints (per shard,
-- {} when unchanged)}
local base, now, want = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local per_host, slots, exp, tbase = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]
local shards, states, hints, cands = {}, {}, {}, {}
for j = 8, #ARGV do shards[#shards + 1] = ARGV[j] end
local function prefix(j) return base .. '{' .. shards[j] .. '}:' end
-- each shard's best `want` ready hosts (at most `want` of them can be taken in all)
for j = 1, #shards do
  open_shard(prefix(j))
  refresh(now)
  local r = redis.call('ZRANGE', RK, 0, want - 1, 'WITHSCORES')
  for x = 1, #r, 2 do cands[#cands + 1] = {tonumber(r[x + 1]), r[x], j} end
  if #r == 0 then moved = true end  -- the index thought it ready: correct it
  states[j] = shard_state()
end
table.sort(cands, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[2] < b[2]
end)
local out, used, cur = {}, 0, nil
for _, c in ipairs(cands) do
  if #out >= want then break end
  if slots >= 0 and slots - used <= 0 then break end
  local j = c[3]
  if j ~= cur then
    if cur then states[cur] = shard_state() end
    resume_shard(states[j])
    cur = j
  end
  local take = per_host
  if slots >= 0 and slots - used < take then take = slots - used end
  local b = lease_host(c[2], take, shards[j] .. '-' .. tbase .. string.format('%02x', #out), exp)
  used = used + #b[4]
  b[6] = j
  out[#out + 1] = b
end
if cur then states[cur] = shard_state() end
-- each shard's changed counters written once, and its hint
for j = 1, #shards do
  resume_shard(states[j])
  hints[j] = hint()
end
return {out, hints}
