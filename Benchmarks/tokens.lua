-- wrk script: sends App Check tokens read from a file (one per line) in the X-Firebase-AppCheck header.
--
--   wrk -t T -c C -d D -s Benchmarks/tokens.lua URL -- TOKENS_FILE [MODE] [T] [HEADER]
--
-- MODE
--   cycle        (default) every thread cycles through all tokens, forever; thread k starts at offset
--                k*N/T so threads do not move in lockstep. Repeats are expected: the token-cache hit path.
--   unique       never repeats a token. Thread k takes the disjoint slice of lines k, k+T, k+2T, ... When its
--                slice is exhausted the thread says so on stderr and stops (wrk.thread:stop()); the one request
--                built at that moment carries no token but `X-Bench-Tokens-Exhausted: 1`, so it can never be
--                a silent replay (on an enforce route it shows up as a non-2xx). Size the file so this never
--                happens: tokens >= expected req/s x duration (+ one per thread, see below).
--   unique-wrap  like unique, but wraps around to the start of the slice instead of stopping, and reports
--                every wrap on stderr and in the summary: from then on tokens DO repeat (replay results are
--                no longer "fresh token" results). For soak runs where running out must not end the run.
-- T       must equal wrk's -t (a wrk script cannot see it before the threads start); the summary checks it.
-- HEADER  defaults to X-Firebase-AppCheck.
--
-- Headers given with wrk -H are kept; method, path and body come from the URL / wrk.method / wrk.body.
-- wrk calls request() once on thread 0 before the run to check for pipelining; that token is never sent
-- (skipped, not repeated), so thread 0 "uses" one token more than it sends.
-- At the end it prints one line per thread: tokens in its slice, requests built, wraps, exhausted.

local threads = {}   -- setup/done environment only
local thread_count = 0

function setup(thread)
   thread:set("thread_id", thread_count)
   thread_count = thread_count + 1
   table.insert(threads, thread)
end

-- running environment (one per thread) ------------------------------------------------------------------
local tokens, n, pos
local head, tail_ -- request split around the token header line
local header_name
mode = "cycle"
local exhausted_request
issued, wraps, exhausted, slice, nthreads, file_name = 0, 0, false, 0, 1, ""

function init(args)
   file_name = args[1]
   mode = args[2] or "cycle"
   nthreads = tonumber(args[3] or "1")
   header_name = args[4] or "X-Firebase-AppCheck"
   assert(file_name, "tokens.lua: usage: -- TOKENS_FILE [cycle|unique|unique-wrap] [THREADS] [HEADER]")
   assert(mode == "cycle" or mode == "unique" or mode == "unique-wrap", "tokens.lua: unknown mode " .. mode)
   assert(nthreads and nthreads >= 1, "tokens.lua: THREADS must be a positive number")
   local id = thread_id or 0

   tokens, n = {}, 0
   local line_no = 0
   for line in io.lines(file_name) do
      line = line:gsub("%s+$", "")
      if line ~= "" then
         if mode == "cycle" or line_no % nthreads == id then
            n = n + 1
            tokens[n] = line
         end
         line_no = line_no + 1
      end
   end
   slice = n
   assert(n > 0, string.format("tokens.lua: thread %d got no tokens from %s (%d lines, %d threads)",
      id, file_name, line_no, nthreads))
   pos = (mode == "cycle") and math.floor(id * n / nthreads) or 0

   -- Build the request once and splice the token header line in per request (cheap concatenation).
   local headers = {}
   for k, v in pairs(wrk.headers) do headers[k] = v end
   local req = wrk.format(nil, nil, headers)
   local split = req:find("\r\n\r\n", 1, true)
   head = req:sub(1, split + 1)                     -- request line + headers, each ending \r\n
   local rest = req:sub(split + 2)                  -- "\r\n" .. body
   head = head .. header_name .. ": "
   tail_ = "\r\n" .. rest
   exhausted_request = req:sub(1, split + 1) .. "X-Bench-Tokens-Exhausted: 1\r\n" .. rest
end

function request()
   if pos >= n then
      if mode == "cycle" then
         pos = 0
      elseif mode == "unique-wrap" then
         pos = 0
         wraps = wraps + 1
         io.stderr:write(string.format("tokens.lua: thread %d WRAPPED its %d tokens (wrap %d): tokens repeat from now on\n",
            thread_id or 0, n, wraps))
      else
         if not exhausted then
            exhausted = true
            io.stderr:write(string.format("tokens.lua: thread %d EXHAUSTED its %d tokens after %d requests; stopping this thread\n",
               thread_id or 0, n, issued))
            wrk.thread:stop()
         end
         return exhausted_request
      end
   end
   pos = pos + 1
   issued = issued + 1
   return head .. tokens[pos] .. tail_
end

-- done environment ------------------------------------------------------------------------------------------
function done(summary, latency, requests)
   local declared = threads[1] and threads[1]:get("nthreads") or thread_count
   if declared ~= thread_count then
      io.stderr:write(string.format("tokens.lua: WARNING: THREADS argument is %s but wrk ran %d threads: slices were %s\n",
         tostring(declared), thread_count, declared > thread_count and "not all used" or "OVERLAPPING (tokens repeated)"))
   end
   for _, t in ipairs(threads) do
      io.write(string.format("tokens.lua: thread %d mode %s: %d tokens, %d requests built, %d wraps%s\n",
         t:get("thread_id"), t:get("mode"), t:get("slice"), t:get("issued"), t:get("wraps"),
         t:get("exhausted") and ", EXHAUSTED (stopped early)" or ""))
   end
end
