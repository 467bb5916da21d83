-- lease for one shard. ARGV: prefix, now, want hosts, per_host, slots (-1: no limit), expiry,
-- limit score, limit host ('' none: hosts ordered after (limit score, limit host) stay, but
-- one host is always taken), shard number, token base (a token: shard-base and its index in
-- the reply, in hex). Reply: {batches, hint}
open_shard(ARGV[1])
local now, want, per_host = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local slots, exp = tonumber(ARGV[5]), ARGV[6]
local ls, lh = ARGV[7], ARGV[8]
refresh(now)
local out, used = {}, 0
local cands = redis.call('ZRANGE', RK, 0, want - 1, 'WITHSCORES')
for j = 1, #cands, 2 do
  if #out >= want then break end
  if slots >= 0 and slots - used <= 0 then break end
  local h, sc = cands[j], tonumber(cands[j + 1])
  if ls ~= '' and #out > 0 then
    local l = tonumber(ls)
    if sc > l or (sc == l and h > lh) then break end
  end
  local take = per_host
  if slots >= 0 and slots - used < take then take = slots - used end
  local b = lease_host(h, take, ARGV[9] .. '-' .. ARGV[10] .. string.format('%02x', #out), exp)
  used = used + #b[4]
  out[#out + 1] = b
end
moved = true  -- the client merges shards by this hint: always send it
return {out, hint()}
