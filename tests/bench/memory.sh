#!/usr/bin/env bash
# Memory per request (BENCHMARKS.md): RSS of mcpbox serving HTTP before, at its peak and after
# rounds of eight 3.1 MiB 2026-07-28 requests sent at once (four carrying 100,000
# `inputResponses` entries, four carrying the same object as a tool's arguments), with a
# benign call meanwhile. Usage: memory.sh [MCPBOX] [PLUGIN.wasm] [ROUNDS]; defaults: the
# release binary, the echo example, 4 rounds. Needs curl and python3; talks to loopback only.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mcpbox="${1:-$root/target/release/mcpbox}"
plugin="${2:-$root/target/plugins/echo_tools.wasm}"
rounds="${3:-4}"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/plugins"
cp "$plugin" "$work/plugins/"

python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
entries = ",".join('"key%06d":{"action":"accept"}' % i for i in range(100000))
meta = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientCapabilities":{}}')
call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo",%s,%s}}'
open(f"{work}/arguments.json", "w").write(call % (2, '"arguments":{%s}' % entries, meta))
open(f"{work}/answers.json", "w").write(
    call % (1, '"arguments":{"text":"x"},"inputResponses":{%s}' % entries, meta))
open(f"{work}/benign.json", "w").write(call % (3, '"arguments":{"text":"hi"}', meta))
PY

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$mcpbox" serve --plugins "$work/plugins" --http "127.0.0.1:$port" --cache-dir "$work/cache" 2>"$work/log" &
pid=$!
for _ in $(seq 100); do
  grep -q "serving MCP over HTTP" "$work/log" && break
  sleep 0.1
done
headers=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream'
  -H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/call' -H 'mcp-name: echo')
post() { curl -s -o /dev/null -w '%{http_code}\n' "${headers[@]}" --data-binary "@$work/$1" "http://127.0.0.1:$port/mcp"; }
rss() { awk -v f="$1" '$1 == f":" { printf "%.1f", $2 / 1024 }' "/proc/$pid/status"; }

post benign.json >/dev/null
post arguments.json >/dev/null
idle=$(rss VmRSS)
for _ in $(seq "$rounds"); do
  for _ in 1 2 3 4; do post arguments.json >/dev/null & post answers.json >/dev/null & done
  post benign.json >"$work/benign.status"
  wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
done
peak=$(rss VmHWM)
after=$(rss VmRSS)
request_mib=$(python3 -c "import os; print(round(os.path.getsize('$work/arguments.json') / 2**20, 2))")
echo "request: ${request_mib} MiB, ${rounds} rounds of 8 at once; benign call: $(cat "$work/benign.status")"
echo "RSS MiB: before ${idle}, peak ${peak}, after ${after}"
python3 -c "
b, p, a, r = $idle, $peak, $after, $request_mib
print(f'peak over before per MiB of requests in flight: {(p - b) / (8 * r):.2f}')
print(f'retained after per MiB of requests served: {(a - b) / (8 * r * $rounds):.3f}')"
