"""What serving many users costs a call: stdio round trips (raw JSON-RPC, one request at a
time) for a plugin built against the released WIT alone, and for the caller probe reading its
configuration, asking who calls, and reading a shared bucket against a caller bucket.

Usage: python3 tests/bench/multi_user.py target/release/mcpbox
(after `plugins/build.sh --with-test-plugins`; the figures are in BENCHMARKS.md).
"""
import json, os, statistics, subprocess, sys, tempfile, time

binary = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
built = os.path.join(root, "target", "test-plugins")
work = tempfile.mkdtemp(prefix="mcpbox-multi-user-")
plugins, state = os.path.join(work, "plugins"), os.path.join(work, "state")
os.makedirs(plugins)
for source, target in [("tools_only", "tools_only"), ("caller_probe", "caller_probe"), ("caller_probe", "s")]:
    with open(os.path.join(built, source + ".wasm"), "rb") as f, open(os.path.join(plugins, target + ".wasm"), "wb") as g:
        g.write(f.read())
with open(os.path.join(plugins, "caller_probe.toml"), "w") as f:
    f.write('[keyvalue]\nbuckets = ["shared"]\ncaller-buckets = ["mine"]\n[config]\ngreeting = "hello"\n')
# The same code with both buckets shared, under the prefix s_.
with open(os.path.join(plugins, "s.toml"), "w") as f:
    f.write('prefix = "s_"\n[keyvalue]\nbuckets = ["mine", "shared"]\n[config]\ngreeting = "hello"\n')
secrets = os.path.join(work, "secrets.toml")
with open(secrets, "w") as f:
    f.write('unused = "x"\n')
os.chmod(secrets, 0o600)
proc = subprocess.Popen([binary, "serve", "--plugins", plugins, "--state-dir", state, "--secrets", secrets,
                         "--no-watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                        env={**os.environ, "MCPBOX_CACHE_DIR": os.path.join(work, "cache")})
n = 0
def rpc(method, params):
    global n
    n += 1
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}, separators=(",", ":")) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = json.loads(proc.stdout.readline())
        if line.get("id") == n:
            return line
rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}})
proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); proc.stdin.flush()

def measure(name, args, count, warm=200):
    for _ in range(warm):
        r = rpc("tools/call", {"name": name, "arguments": args})
    assert not r["result"].get("isError"), r
    times = []
    for _ in range(count):
        t = time.perf_counter()
        r = rpc("tools/call", {"name": name, "arguments": args})
        times.append((time.perf_counter() - t) * 1e6)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]

rows = []
for turn in range(3):
    for label, name, args, count in [
        ("released WIT, no imports (tools_only `shout`)", "shout", {"text": "x"}, 2000),
        ("config: one key (`config_get`)", "config_get", {"key": "greeting"}, 2000),
        ("caller: who is calling (`whoami`)", "whoami", {}, 2000),
        ("shared bucket: read (`s_recall` over an empty bucket)", "s_recall", {}, 2000),
        ("caller bucket: read (`recall` over an empty bucket)", "recall", {}, 2000),
    ]:
        p50, p99 = measure(name, args, count)
        rows.append((turn, label, p50, p99))
for label in dict.fromkeys(r[1] for r in rows):
    mine = [r for r in rows if r[1] == label]
    print(f"| {label} | " + " / ".join(f"{r[2]:.0f}" for r in mine) + " | " + " / ".join(f"{r[3]:.0f}" for r in mine) + " |")
proc.stdin.close(); proc.wait(timeout=10)
