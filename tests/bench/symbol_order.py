#!/usr/bin/env python3
"""Write host/symbol-order.txt: the functions of mcpbox that a start and served calls run.

The release build links the functions listed first, in this order (host/build.rs passes the
file to the linker), so the code that starting, idling and answering calls run sits together
instead of being spread over the whole 29 MB of machine code. The kernel maps a file's pages
64 KiB at a time around each first touch, and every page mapped counts in the process's
resident memory: with the functions spread out, an idle process held 15 MiB of code to have
run 6.5 MB of it (BENCHMARKS.md, "Start-up and idle memory, the code laid out").

How: the release binary runs under Valgrind's callgrind, which records every function that
runs and the instructions each ran, with a warm compiled-component cache (a start that
compiles would also list the compiler, 2 MB of code a warm start never runs). The cache is
filled under Valgrind too: Valgrind's CPU lacks some of the host's instruction sets, so the
engine it runs compiles for another target than the host's and misses entries the host
wrote. One process serves a stdio session (initialize, the three lists, calls one at a time,
then 64 at once and 64 held `wait` calls at once, as a loaded server runs them), another an
HTTP one (calls at both revisions); `callgrind_control --dump` splits each into its start (until mcpbox logs that it
serves), its session's opening (initialize and the lists), its calls and the rest. The list
is what the calls ran, the most run first (the call path packed together for the instruction
cache and TLB), then what the openings ran and then what the starts ran, each in the order it
ran, then the rest, each function of the mcpbox binary by its linker name. Once started,
mcpbox gives back the pages only starting up touched (host/src/file_pages.rs): what
serving runs afterwards, calls and openings, is then faulted back in from one stretch of
the file instead of from pages shared with start-up code.

The names carry hashes that change when a dependency, the toolchain, the features or a build
setting changes; an edit of mcpbox's own code keeps them, but for the few percent of names
that LTO numbers (`name.12345`, local copies it renames), which any edit renumbers. A name
the linker does not find is skipped: a stale file lays the code out no better than no file,
never wrongly. Run this again after `cargo update`, a toolchain change, or before measuring
a release; `--check` reports how many names the current release binary still has
(tests/bench/run.sh prints it).

    python3 tests/bench/symbol_order.py            # build, profile, write the file
    python3 tests/bench/symbol_order.py --check    # how much of the file still matches

Needs Valgrind (Debian's `valgrind`, installed with apt-get when missing and running as root).
Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "host", "symbol-order.txt")
BINARY = os.path.join(ROOT, "target", "release", "mcpbox")
PLUGIN = os.path.join(ROOT, "target", "bench-plugins", "bench_tools.wasm")
# Valgrind cannot reserve the pooling allocator's default address space (terabytes of
# reservations for 256 instances); four instances need a few gigabytes.
SERVE = ["--max-instances", "4"]
CALLS = 100
LINKER_NAME = re.compile(r"^[A-Za-z0-9_$.]+$")
ECHO = {"name": "echo", "arguments": {"text": "hello"}}
WAIT = {"name": "wait", "arguments": {"ms": 20}}
BURST = 64


def need_valgrind():
    if shutil.which("valgrind"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update"], stdout=subprocess.DEVNULL, check=False)
        subprocess.run(["apt-get", "install", "-y", "valgrind"], stdout=subprocess.DEVNULL, check=False)
    if not shutil.which("valgrind"):
        sys.exit("symbol_order.py needs Valgrind: apt-get install -y valgrind")


def build():
    subprocess.run([os.path.join(ROOT, "plugins", "build.sh"), "--with-bench-plugin"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "mcpbox", "--bin", "mcpbox"], check=True, cwd=ROOT)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_log(log, line, p):
    """Wait until mcpbox, writing its log to the file `log`, has logged `line`."""
    deadline = time.monotonic() + 120
    while line not in open(log, errors="replace").read():
        if p.poll() is not None:
            sys.exit(f"mcpbox ended before logging {line!r}: see {log}")
        if time.monotonic() > deadline:
            sys.exit(f"mcpbox did not log {line!r} within 120 s: see {log}")
        time.sleep(0.05)


def stdio_session(argv, log, mark=lambda pid: None):
    with open(log, "w") as err:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0)
    wait_for_log(log, "serving MCP on stdio", p)
    mark(p.pid)

    def send(message):
        p.stdin.write((json.dumps(message) + "\n").encode())
        if "id" in message:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"mcpbox ended before answering {message['method']}")
            answer = json.loads(line)
            if "error" in answer:
                sys.exit(f"{message['method']} failed: {answer['error']}")

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "symbol-order", "version": "1"}}})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for i, method in enumerate(["tools/list", "prompts/list", "resources/list"]):
        send({"jsonrpc": "2.0", "id": 1 + i, "method": method, "params": {}})
    mark(p.pid)
    for i in range(CALLS):
        send({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": ECHO})
    # Calls in flight together, as under load: what the scheduler, the instance slots and the
    # timers run with many at once (held calls each hold an instance while they sleep).
    for first, params in ((1000, ECHO), (2000, WAIT)):
        for i in range(BURST):
            p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": first + i, "method": "tools/call",
                                       "params": params}) + "\n").encode())
        for _ in range(BURST):
            answer = json.loads(p.stdout.readline() or "null")
            if not answer or "error" in answer:
                sys.exit(f"a call of the burst failed: {answer}")
    mark(p.pid)
    time.sleep(1.5)  # idle: the timers and the epoch ticker run
    p.stdin.close()
    p.wait(timeout=60)


def http_session(argv, port, log, mark=lambda pid: None):
    with open(log, "w") as err:
        p = subprocess.Popen(argv + ["--http", f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_log(log, "plugins ready", p)
        mark(p.pid)
        deadline = time.monotonic() + 60
        session = None

        def post(message, headers):
            request = urllib.request.Request(url, data=json.dumps(message).encode(), method="POST", headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = answer.read()
                return answer.headers.get("mcp-session-id"), body

        while True:
            try:
                session, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "symbol-order", "version": "1"}}}, {})
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("mcpbox did not start serving HTTP within 60 s")
                time.sleep(0.2)
        old = {"mcp-session-id": session or "", "mcp-protocol-version": "2025-11-25"}
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, old)
        post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, old)
        mark(p.pid)
        for i in range(CALLS):
            post({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": ECHO}, old)
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
        for i in range(CALLS):
            post({"jsonrpc": "2.0", "id": 20 + i, "method": "tools/call", "params": {**ECHO, "_meta": meta}},
                 {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"})
        mark(p.pid)
        time.sleep(1.5)
    finally:
        p.terminate()
        p.wait(timeout=60)


def functions(path, binary):
    """The functions of `binary` in one callgrind output file, in the order first named, each
    with the instructions it ran itself."""
    objects, names, cost = {}, {}, {}
    current, function, skip = None, None, False
    pattern = re.compile(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$")
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("calls="):
                skip = True  # the next cost line is the call's, not the function's own
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                if skip:
                    skip = False
                elif function is not None:
                    fields = line.split()
                    if len(fields) > 1:
                        cost[function] += int(fields[1])
                continue
            m = pattern.match(line)
            if not m:
                continue
            called, kind, number, name = m.groups()
            table = objects if kind == "ob" else names
            if name:
                table[number] = name
            if called:
                continue
            if kind == "ob":
                current = objects.get(number)
            elif current and os.path.realpath(current) == binary:
                function = re.sub(r"'\d+$", "", names[number])  # a cycle's 'N suffix
                cost.setdefault(function, 0)
            else:
                function = None
    return cost


def defined(binary):
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    return {line.split(None, 2)[2] for line in out.splitlines() if len(line.split(None, 2)) == 3}


def check(binary):
    names = [n for n in open(OUT).read().splitlines() if n and not n.startswith("#")]
    have = defined(binary)
    found = sum(1 for n in names if n in have)
    print(f"{found} of the {len(names)} names in {os.path.relpath(OUT, ROOT)} are in {binary} "
          f"({100 * found / max(1, len(names)):.0f}%)")
    if found < len(names):
        # Each function the list misses lies elsewhere, and running it maps 64 KiB around it:
        # 4% missing measured 5 MiB more resident at start (BENCHMARKS.md).
        print(f"the list is stale ({len(names) - found} names moved): regenerate it with "
              f"`python3 tests/bench/symbol_order.py` before measuring start-up or memory")
    return found, len(names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report how much of the file the binary has")
    parser.add_argument("--no-build", action="store_true", help="profile target/release/mcpbox as it is")
    args = parser.parse_args()
    binary = os.path.realpath(BINARY)
    if args.check:
        check(binary)
        return
    need_valgrind()
    if not args.no_build:
        build()
    work = tempfile.mkdtemp(prefix="mcpbox-order-")
    try:
        plugins = os.path.join(work, "plugins")
        os.makedirs(plugins)
        shutil.copy(PLUGIN, plugins)
        base = [binary, "serve", "--plugins", plugins, "--state-dir", os.path.join(work, "state"),
                "--cache-dir", os.path.join(work, "cache")] + SERVE
        log = os.path.join(work, "mcpbox.log")
        # Fills the cache for the engine Valgrind's CPU makes: the profiled starts are warm.
        stdio_session(["valgrind", "--tool=none", "-q"] + base, log)
        grind = ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                 f"--callgrind-out-file={work}/callgrind.%p"]

        def mark(pid):
            # A dump between phases: file .1 is the start, .2 the session's opening, .3 the
            # calls, the last the rest.
            subprocess.run(["callgrind_control", "--dump", str(pid)], check=True, stdout=subprocess.DEVNULL)

        stdio_session(grind + base, log, mark)
        http_session(grind + base, free_port(), log, mark)
        parts = {".1": [], ".2": [], ".3": [], "": []}
        for name in sorted(os.listdir(work)):
            if name.startswith("callgrind."):
                suffix = next((s for s in (".1", ".2", ".3") if name.endswith(s)), "")
                parts[suffix].append(functions(os.path.join(work, name), binary))
        # What every call runs first, the most run first: the call path packed together for
        # the instruction cache and TLB. Then what opening a session runs, then what only the
        # start runs (given back once started), each in the order it ran, then the rest (idle
        # timers, the end).
        hot = {}
        for cost in parts[".3"]:
            for fn, ir in cost.items():
                hot[fn] = hot.get(fn, 0) + ir
        order = sorted(hot, key=lambda fn: -hot[fn])
        seen = set(order)
        for cost in parts[".2"] + parts[".1"] + parts[""]:
            for fn in cost:
                if fn not in seen:
                    seen.add(fn)
                    order.append(fn)
        # Linker names only: not Valgrind's "(below main)", not a bare address.
        order = [fn for fn in order if LINKER_NAME.match(fn) and not fn.startswith("0x")]
        if len(order) < 500:
            sys.exit(f"only {len(order)} functions recorded: did mcpbox run under valgrind?")
        with open(OUT, "w") as f:
            f.write("# Written by tests/bench/symbol_order.py: the functions served calls (the most run\n"
                    "# first) and a warm start run, linked first in release builds (host/build.rs).\n"
                    "# Regenerate after a dependency or toolchain change; the linker skips a name it\n"
                    "# does not find.\n")
            f.write("\n".join(order) + "\n")
        print(f"wrote {len(order)} names to {os.path.relpath(OUT, ROOT)}")
        check(binary)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
