-- wrk script: rotate through a file of distinct (Host, path) pairs, one request each in turn.
--   wrk -t2 -c64 -d10s --latency -s bench/wrk_rotate.lua http://127.0.0.1:PORT/ -- targets.txt
-- targets.txt: one "host<TAB>path" per line. Each thread starts at a different offset so
-- the threads do not walk the same pages in lockstep. done() prints machine-readable
-- "GOSSAMER key value" lines that bench_testweb.py parses.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  local path = args[1]
  if path == nil then
    error("usage: wrk ... -s wrk_rotate.lua URL -- targets.txt")
  end
  requests_list = {}
  for line in io.lines(path) do
    local host, target = line:match("^([^\t]+)\t(.+)$")
    if host then
      requests_list[#requests_list + 1] =
        wrk.format("GET", target, { ["Host"] = host, ["User-Agent"] = "gossamer-bench/1" })
    end
  end
  if #requests_list == 0 then
    error("no targets in " .. path)
  end
  -- spread the threads over the list
  local n = #requests_list
  local t = tonumber(wrk.thread:get("tid")) or 1
  index = ((t - 1) * math.floor(n / 7919 + 1) * 7919) % n
end

function request()
  index = index + 1
  if index > #requests_list then
    index = 1
  end
  return requests_list[index]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("GOSSAMER requests %d\n", summary.requests))
  io.write(string.format("GOSSAMER duration_us %d\n", summary.duration))
  io.write(string.format("GOSSAMER bytes %d\n", summary.bytes))
  io.write(string.format("GOSSAMER errors_connect %d\n", e.connect))
  io.write(string.format("GOSSAMER errors_read %d\n", e.read))
  io.write(string.format("GOSSAMER errors_write %d\n", e.write))
  io.write(string.format("GOSSAMER errors_status %d\n", e.status))
  io.write(string.format("GOSSAMER errors_timeout %d\n", e.timeout))
  io.write(string.format("GOSSAMER latency_mean_us %.1f\n", latency.mean))
  io.write(string.format("GOSSAMER latency_max_us %d\n", latency.max))
  for _, p in ipairs({ 50, 90, 99 }) do
    io.write(string.format("GOSSAMER latency_p%d_us %d\n", p, latency:percentile(p)))
  end
end
