-- wrk script for bench/load.py: one scenario, configured through environment variables.
--
--   BENCH_METHOD     GET or POST (default POST)
--   BENCH_TOKEN      the gateway token (Authorization: Bearer), when set
--   BENCH_TOOL       tools/call: the tool name (empty: send BENCH_BODY as is)
--   BENCH_ARGS       tools/call: the arguments, as JSON text
--   BENCH_ERA        legacy (MCP-Protocol-Version 2025-11-25) or modern (2026-07-28 envelope)
--   BENCH_KEY        none | fresh (a new idempotency key per request) | <a fixed key>
--   BENCH_CONV       fresh (a new conversation per request) | pool:<n> | <a fixed id>
--   BENCH_RUN        a run id, so fresh keys and conversations never repeat across runs
--   BENCH_STOP_AFTER stop each thread after this many responses (0: run for the duration)
--   BENCH_PLAIN      the baselines instead of MCP: read:<n> (GET <path>/item-<k>, k spread over
--                    n keys) or write (POST a note with a fresh unique key)
--
-- It counts answers that are not a 200 tool success (HTTP status, or "isError":true) and
-- prints one line "BENCH_JSON {...}" with throughput and latency percentiles.

local method = os.getenv("BENCH_METHOD") or "POST"
local token = os.getenv("BENCH_TOKEN") or ""
local tool = os.getenv("BENCH_TOOL") or ""
local args = os.getenv("BENCH_ARGS") or "{}"
local era = os.getenv("BENCH_ERA") or "legacy"
local key_mode = os.getenv("BENCH_KEY") or "none"
local conv_mode = os.getenv("BENCH_CONV") or "bench-conversation"
local run = os.getenv("BENCH_RUN") or "0"
local stop_after = tonumber(os.getenv("BENCH_STOP_AFTER") or "0")
local plain = os.getenv("BENCH_PLAIN") or ""
local plain_keys = tonumber(plain:match("^read:(%d+)$") or "0")

-- Globals, not locals: wrk's thread:get and thread:set read and write a thread's globals.
threads = {}
counter = 0
responses = 0
failures = 0
thread_id = 0

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

function init(argv)
  wrk.method = method
  wrk.headers["Accept"] = "application/json, text/event-stream"
  if token ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. token
  end
  if method == "POST" then
    wrk.headers["Content-Type"] = "application/json"
  end
  if era == "modern" then
    wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = tool
  elseif tool ~= "" then
    wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
  end
end

local function conversation()
  if conv_mode == "fresh" then
    return "bench-" .. run .. "-c" .. thread_id .. "-" .. counter
  end
  local pool = conv_mode:match("^pool:(%d+)$")
  if pool then
    return "bench-pool-" .. ((thread_id * 7 + counter) % tonumber(pool))
  end
  return conv_mode
end

local function meta()
  local parts = { '"com.asixto/conversationId":"' .. conversation() .. '"' }
  if key_mode == "fresh" then
    table.insert(parts, '"com.asixto/idempotencyKey":"bench-' .. run .. "-k" .. thread_id .. "-" .. counter .. '"')
  elseif key_mode ~= "none" then
    table.insert(parts, '"com.asixto/idempotencyKey":"' .. key_mode .. '"')
  end
  if era == "modern" then
    table.insert(parts, '"io.modelcontextprotocol/protocolVersion":"2026-07-28"')
    table.insert(parts, '"io.modelcontextprotocol/clientCapabilities":{}')
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

function request()
  counter = counter + 1
  if plain_keys > 0 then
    local k = (thread_id * 7919 + counter * 104729) % plain_keys
    return wrk.format(nil, wrk.path .. "/item-" .. k)
  end
  if plain == "write" then
    return wrk.format(nil, nil, nil, '{"key":"bench-' .. run .. "-k" .. thread_id .. "-" .. counter
      .. '","subject":"No funciona","description":"Prueba de carga."}')
  end
  if tool == "" then
    return wrk.format(nil, nil, nil, os.getenv("BENCH_BODY"))
  end
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"'
    .. tool .. '","arguments":' .. args .. ',"_meta":' .. meta() .. "}}"
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 or (tool ~= "" and not body:find('"isError":false', 1, true)) then
    failures = failures + 1
    if failures <= 3 then
      io.stderr:write("unexpected answer " .. status .. ": " .. body:sub(1, 300) .. "\n")
    end
  end
  if stop_after > 0 and responses >= stop_after then
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local answered, failed = 0, 0
  for _, thread in ipairs(threads) do
    answered = answered + thread:get("responses")
    failed = failed + thread:get("failures")
  end
  local errors = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"rps":%.2f,"p50_ms":%.3f,"p95_ms":%.3f,'
      .. '"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f,"answered":%d,"failed":%d,'
      .. '"socket_errors":%d,"timeouts":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, latency.mean / 1000, answered, failed,
    errors.connect + errors.read + errors.write, errors.timeout
  ))
end
