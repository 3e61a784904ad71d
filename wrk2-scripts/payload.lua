-- Replay a Chopper payload (written by `loadgen generate`) with wrk2 or wrk.
--
--   wrk2 (open loop, constant rate, coordinated-omission corrected):
--     wrk -t2 -c64 -d360s -R3500 -s wrk2-scripts/payload.lua http://127.0.0.1:8080 -- payload.txt 2
--   Debian's wrk 4 (same Lua API, no -R: closed loop, as fast as the connections go):
--     wrk -t2 -c64 -d30s -s wrk2-scripts/payload.lua http://127.0.0.1:8080 -- payload.txt 2
--
-- Script arguments after "--": the payload file, then the thread count, which
-- must equal -t. Thread k replays payload lines k, k+T, k+2T, ..., so together
-- the threads walk the sequence in order (phases included) at the full rate.
-- Lua cannot see -t, so done() warns if the two differ. When a thread
-- reaches the end of its lines it starts again, and done() reports the wraps.
--
-- Payload format: "# phase ... path=/kv?key={key} content_type=..." lines set
-- the path template for the request lines after them; request lines are
-- METHOD<TAB>KEY<TAB>VALUE_SIZE. PUT bodies are VALUE_SIZE bytes of filler.
--
-- done() prints latency percentiles, per-server counts from X-Served-By,
-- imbalance (max/mean over servers) and status classes, then one
-- machine-readable line: CHOPPER_WRK_RESULT {json}.

local threads = {}

function setup(thread)
   thread:set("thread_index", #threads)
   table.insert(threads, thread)
end

local function urlencode(s)
   return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

local function copy_headers(extra)
   local h = {}
   for k, v in pairs(wrk.headers) do h[k] = v end
   for k, v in pairs(extra) do h[k] = v end
   return h
end

function init(args)
   -- wrk passes the URL as args[0]; script arguments start at args[1].
   local file = args[1]
   if not file then
      error("usage: wrk ... -s payload.lua <url> -- <payload file> <threads (= -t)>")
   end
   declared_threads = tonumber(args[2] or "1")
   if not declared_threads or declared_threads < 1 then
      error("payload.lua: the second script argument must be the thread count (-t), got " .. tostring(args[2]))
   end
   local me = thread_index or 0

   methods, paths, sizes, types = {}, {}, {}, {}
   local template, content_type = "/kv?key={key}", "application/octet-stream"
   local seen, max_size = 0, 0
   local fh = io.open(file, "r")
   if not fh then error("payload.lua: cannot open payload file " .. file) end
   for line in fh:lines() do
      if line:sub(1, 1) == "#" then
         if line:sub(1, 8) == "# phase " then
            template = line:match(" path=(%S+)") or template
            content_type = line:match(" content_type=(%S+)") or content_type
         end
      elseif line ~= "" then
         if seen % declared_threads == me then
            local method, key, size = line:match("^(%u+)\t([^\t]+)\t(%d+)$")
            if not method then error("payload.lua: bad payload line " .. (seen + 1) .. ": " .. line) end
            local encoded = urlencode(key)
            local n = #methods + 1
            methods[n] = method
            -- A function replacement, because an encoded key contains "%", which gsub would treat specially.
            paths[n] = template:gsub("{key}", function() return encoded end)
            sizes[n] = tonumber(size)
            types[n] = content_type
            if sizes[n] > max_size then max_size = sizes[n] end
         end
         seen = seen + 1
      end
   end
   fh:close()
   count = #methods
   if count == 0 then error("payload.lua: no request lines for thread " .. me .. " in " .. file) end
   payload_lines = seen

   local chunk = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
   filler = string.rep(chunk, math.floor(max_size / #chunk) + 1):sub(1, max_size)
   get_headers = copy_headers({})
   put_headers = {}

   cursor, wraps, responses, requests = 1, 0, 0, 0
   served, statuses = {}, {}
end

-- Note: wrk calls request() once on thread 0 before the run, to check the
-- request parses. That call consumes thread 0's first line, which is never
-- sent; `requests` counts it.
function request()
   requests = requests + 1
   local i = cursor
   cursor = cursor + 1
   if cursor > count then
      cursor = 1
      wraps = wraps + 1
   end
   local method = methods[i]
   if method == "PUT" then
      local ct = types[i]
      local h = put_headers[ct]
      if not h then
         h = copy_headers({ ["Content-Type"] = ct })
         put_headers[ct] = h
      end
      return wrk.format(method, paths[i], h, filler:sub(1, sizes[i]))
   end
   return wrk.format(method, paths[i], get_headers, nil)
end

function response(status, headers, body)
   responses = responses + 1
   local id = headers["X-Served-By"] or headers["x-served-by"]
   if not id then
      for k, v in pairs(headers) do
         if k:lower() == "x-served-by" then id = v break end
      end
   end
   id = id or "(none)"
   served[id] = (served[id] or 0) + 1
   local class = math.floor(status / 100) .. "xx"
   statuses[class] = (statuses[class] or 0) + 1
end

local function json(v)
   local t = type(v)
   if t == "number" then
      if v ~= v or v == math.huge or v == -math.huge then return "null" end
      if v == math.floor(v) then return string.format("%d", v) end
      return string.format("%.4f", v)
   elseif t == "string" then
      return '"' .. v:gsub('[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end) .. '"'
   elseif t == "table" then
      if #v > 0 then
         local items = {}
         for i = 1, #v do items[i] = json(v[i]) end
         return "[" .. table.concat(items, ",") .. "]"
      end
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = k end
      table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
      local parts = {}
      for _, k in ipairs(keys) do parts[#parts + 1] = json(tostring(k)) .. ":" .. json(v[k]) end
      return "{" .. table.concat(parts, ",") .. "}"
   end
   return "null"
end

function done(summary, latency, requests)
   local served_all, status_all = {}, {}
   local total, wrapped, lines, declared = 0, 0, 0, nil
   local per_thread = {}
   for i, t in ipairs(threads) do
      local served = t:get("served") or {}
      for k, v in pairs(served) do served_all[k] = (served_all[k] or 0) + v end
      for k, v in pairs(t:get("statuses") or {}) do status_all[k] = (status_all[k] or 0) + v end
      total = total + (t:get("responses") or 0)
      per_thread[i] = { index = i - 1, requests = t:get("requests") or 0, responses = t:get("responses") or 0, servedBy = served, wraps = t:get("wraps") or 0 }
      wrapped = math.max(wrapped, t:get("wraps") or 0)
      lines = t:get("payload_lines") or lines
      declared = declared or t:get("declared_threads")
   end

   local pct = {}
   for _, p in ipairs({ 50, 90, 99, 99.9 }) do pct["p" .. p] = latency:percentile(p) / 1000 end
   pct.max = latency.max / 1000
   pct.mean = latency.mean / 1000

   local ids, max, sum = {}, 0, 0
   for id, n in pairs(served_all) do
      if id ~= "(none)" then
         ids[#ids + 1] = id
         sum = sum + n
         if n > max then max = n end
      end
   end
   table.sort(ids)
   local imbalance = #ids > 0 and sum > 0 and max / (sum / #ids) or nil

   io.write("------------------------------------------------------------\n")
   io.write(string.format("chopper payload.lua: %d responses in %.2f s (%.1f/s), %d threads\n",
      total, summary.duration / 1e6, total / (summary.duration / 1e6), #threads))
   io.write(string.format("  latency ms: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
      pct.p50, pct.p90, pct.p99, pct["p99.9"], pct.max))
   io.write("  served by:")
   for _, id in ipairs(ids) do io.write(string.format("  %s %d (%.1f%%)", id, served_all[id], 100 * served_all[id] / total)) end
   if served_all["(none)"] then io.write(string.format("  (no X-Served-By) %d", served_all["(none)"])) end
   io.write("\n")
   if imbalance then io.write(string.format("  imbalance (max/mean): %.3f\n", imbalance)) end
   io.write("  status:")
   for _, c in ipairs({ "1xx", "2xx", "3xx", "4xx", "5xx" }) do
      if status_all[c] then io.write(string.format("  %s %d", c, status_all[c])) end
   end
   io.write("\n")
   local e = summary.errors
   io.write(string.format("  socket errors: connect %d, read %d, write %d, timeout %d\n", e.connect, e.read, e.write, e.timeout))
   io.write(string.format("  payload: %d lines; %s\n", lines,
      wrapped > 0 and ("replayed from the start " .. wrapped .. " time(s): the payload is shorter than rate x duration") or "not exhausted"))
   if declared ~= #threads then
      io.write(string.format("  WARNING: the script was told %s threads but wrk ran %d (-t); pass the same number after the payload file\n",
         tostring(declared), #threads))
   end

   io.write("CHOPPER_WRK_RESULT " .. json({
      responses = total,
      durationMs = summary.duration / 1000,
      threads = #threads,
      declaredThreads = declared,
      latencyMs = pct,
      servedBy = served_all,
      imbalance = imbalance,
      status = status_all,
      socketErrors = { connect = e.connect, read = e.read, write = e.write, timeout = e.timeout },
      payloadLines = lines,
      wraps = wrapped,
      perThread = per_thread
   }) .. "\n")
end
