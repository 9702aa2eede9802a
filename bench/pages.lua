-- wrk script: GET one app page with a signed-in session's cookie.
--
--   wrk -t1 -c4 -d10s --latency -s bench/pages.lua http://127.0.0.1:PORT/app/keys -- SESSION_COOKIE
--
-- Every response other than 200 is counted; done() prints one RESULT line like get.lua.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local cookie = args[1] or error("usage: -- SESSION_COOKIE")
  wrk.headers["Cookie"] = "tern_session=" .. cookie
  non200 = 0
  first_error = ""
end

function response(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
    if first_error == "" then
      first_error = tostring(status) .. " " .. string.sub(body or "", 1, 200)
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
  local secs = summary.duration / 1e6
  io.write(string.format("RESULT requests=%d rps=%.1f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f non_expected=%d\n",
    summary.requests, summary.requests / secs, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, bad))
  if err ~= "" then io.write("FIRST_UNEXPECTED " .. string.gsub(err, "\n", " ") .. "\n") end
end
