-- wrk script: POST /messages with a unique Idempotency-Key per request.
--
--   wrk -t2 -c32 -d10s --latency -s bench/send.lua http://127.0.0.1:PORT/api/public/v1/messages \
--       -- API_KEY RUN_ID [RECIPIENTS [PREFIX]]
--
-- The key is RUN_ID-<thread number>-<per-thread counter>: unique within a run, and across
-- runs as long as RUN_ID differs. Recipients go round-robin over PREFIX..0000 …
-- PREFIX..(RECIPIENTS-1) (4 digits appended; default 1 recipient, PREFIX +1415556), so the
-- messages spread over RECIPIENTS conversations, whose windows the caller has opened. Every response other than 202 is counted; done() prints
-- one machine-readable line (RESULT …) with exact p50/p99 from wrk's latency histogram.

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local threads = {}
local next_tid = 1

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  local key = args[1] or error("usage: -- API_KEY RUN_ID [RECIPIENTS [PREFIX]]")
  run_id = args[2] or "bench"
  recipients = tonumber(args[3] or "1")
  prefix = args[4] or "+1415556"
  if recipients < 1 or recipients > 10000 then error("RECIPIENTS must be 1 to 10000") end
  wrk.headers["Authorization"] = "Bearer " .. key
  n = 0
  responses = 0
  non202 = 0
  first_error = ""
end

function request()
  n = n + 1
  -- wrk.format replaces wrk.headers when given a table: copy the defaults first.
  local h = {}
  for k, v in pairs(wrk.headers) do h[k] = v end
  h["Idempotency-Key"] = string.format("%s-%d-%d", run_id, tid, n)
  local to = string.format("%s%04d", prefix, (tid * 7919 + n) % recipients)
  local body = string.format('{"to":"%s","type":"text","text":{"body":"bench %s"}}', to, run_id)
  return wrk.format(nil, nil, h, body)
end

function response(status, headers, body)
  responses = responses + 1
  if status ~= 202 then
    non202 = non202 + 1
    if first_error == "" then
      first_error = tostring(status) .. " " .. string.sub(body or "", 1, 300)
    end
  end
end

function done(summary, latency, requests)
  local total, bad, err = 0, 0, ""
  for _, t in ipairs(threads) do
    total = total + (t:get("responses") or 0)
    bad = bad + (t:get("non202") or 0)
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
