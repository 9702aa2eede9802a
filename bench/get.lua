-- wrk script: GET /messages/{id}, cycling through the ids listed in a file (one a line).
--
--   wrk -t2 -c32 -d10s --latency -s bench/get.lua http://127.0.0.1:PORT/api/public/v1/messages/ \
--       -- API_KEY IDS_FILE
--
-- Every response other than 200 is counted; done() prints one RESULT line like send.lua.

local threads = {}
local next_tid = 1

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  local key = args[1] or error("usage: -- API_KEY IDS_FILE")
  local file = args[2] or error("usage: -- API_KEY IDS_FILE")
  wrk.headers["Authorization"] = "Bearer " .. key
  ids = {}
  for line in io.lines(file) do
    if line ~= "" then table.insert(ids, line) end
  end
  if #ids == 0 then error("no ids in " .. file) end
  base = wrk.path
  if string.sub(base, -1) ~= "/" then base = base .. "/" end
  n = tid * 7919 -- threads start at different places in the list
  responses = 0
  non200 = 0
  first_error = ""
end

function request()
  n = n + 1
  return wrk.format("GET", base .. ids[(n % #ids) + 1])
end

function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 then
    non200 = non200 + 1
    if first_error == "" then
      first_error = tostring(status) .. " " .. string.sub(body or "", 1, 300)
    end
  end
end

function done(summary, latency, requests)
  local bad, err = 0, ""
  for _, t in ipairs(threads) do
    bad = bad + (t:get("non200") or 0)
    local e = t:get("first_error") or ""
    if err == "" and e ~= "" then err = e end
  end
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d rps=%.1f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f non_expected=%d " ..
    "sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d\n",
    summary.requests, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    bad, e.connect, e.read, e.write, e.timeout))
  if err ~= "" then
    io.write("FIRST_UNEXPECTED " .. string.gsub(err, "\n", " ") .. "\n")
  end
end
