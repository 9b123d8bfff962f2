-- wrk script of bench/hooks.py: POSTs one hook request template with a fresh hookInstance and
-- fresh resource ids on every request, and writes what bench/hooks.py reads back.
--
-- Environment (set by bench/hooks.py):
--   BENCH_BODY    the request template: "00000000-0000-4000-8000-000000000000" is the
--                 hookInstance, "@U@" marks where each resource id gets its unique suffix
--   BENCH_NONCE   eight hex digits, different for every wrk run
--   BENCH_OUT     where done() writes the summary and the latency quantiles

local PLACEHOLDER = "00000000%-0000%-4000%-8000%-000000000000"
local counter = 0
local template = nil
local nonce = os.getenv("BENCH_NONCE") or "00000000"

local next_thread = 0

function setup(thread)
   next_thread = next_thread + 1
   thread:set("thread_no", next_thread)  -- a global of that thread's own Lua state
end

function init(args)
   local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
   template = f:read("*a")
   f:close()
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
end

function request()
   counter = counter + 1
   -- a valid UUID: the run's nonce, this thread, a counter of this thread
   local instance = string.format("%s-%04x-4000-8000-%012x", nonce, thread_no or 0, counter)
   local unique = string.format("%s%x-%x", nonce, thread_no or 0, counter)
   local body = template:gsub(PLACEHOLDER, instance):gsub("@U@", unique)
   return wrk.format(nil, nil, nil, body)
end

function done(summary, latency, requests)
   local out = assert(io.open(os.getenv("BENCH_OUT"), "w"))
   local e = summary.errors
   out:write(string.format("requests %d\n", summary.requests))
   out:write(string.format("duration_us %d\n", summary.duration))
   out:write(string.format(
      "errors connect=%d read=%d write=%d status=%d timeout=%d\n",
      e.connect, e.read, e.write, e.status, e.timeout))
   -- the latency distribution as quantiles, so that several runs can be merged: 0.1 % steps up
   -- to 99 %, 0.01 % steps above (each quantile stands for the requests of its step)
   for i = 0, 989 do
      local p = 0.05 + i * 0.1
      out:write(string.format("q %.3f %.4f %d\n", p, 0.1, latency:percentile(p)))
   end
   for i = 0, 99 do
      local p = 99.005 + i * 0.01
      out:write(string.format("q %.3f %.4f %d\n", p, 0.01, latency:percentile(p)))
   end
   out:close()
end
