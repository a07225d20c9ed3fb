import subprocess, time, json, sys, tempfile, shutil, statistics, os
binary, plugins = sys.argv[1], sys.argv[2]
def first_list(cache):
    start = time.perf_counter()
    p = subprocess.Popen([binary, "serve", "--plugins", plugins, "--cache-dir", cache, "--no-watch", "--log", "error"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdin.write('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}\n')
    p.stdin.write('{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'); p.stdin.flush()
    while True:
        line = p.stdout.readline()
        if json.loads(line).get("id") == 2: break
    elapsed = (time.perf_counter() - start) * 1000
    p.stdin.close(); p.wait()
    return elapsed
cold, warm = [], []
for _ in range(5):
    d = tempfile.mkdtemp(); cold.append(first_list(d)); warm.append(first_list(d)); shutil.rmtree(d)
n = len([f for f in os.listdir(plugins) if f.endswith(".wasm")])
print(f"{n} plugins: cold cache median {statistics.median(cold):.0f} ms (min {min(cold):.0f}); warm cache median {statistics.median(warm):.0f} ms (min {min(warm):.0f})")
