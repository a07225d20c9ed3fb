#!/usr/bin/env python3
"""The benchmark's second kind of client: an event loop (asyncio, one thread).

mcpbench's own client runs on a multi-threaded tokio runtime; an MCP client written with the
official Python SDK runs on one asyncio loop, with a task reading the server's stdout and
handing each answer to the request waiting for it. This script drives a stdio server the same
way, with nothing but the standard library: a reader task, a future per request id, one write
per request. It starts the server (the command after `--`), runs `initialize`, warms up, then
times `--calls` sequential `tools/call echo` round trips, checks every answer, and prints the
round trips in microseconds as one JSON array on stdout. Used by `mcpbench` (the stdio part);
see BENCHMARKS.md.
"""

import argparse
import asyncio
import json
import sys
import time

TEXT = "hello from mcpbench"


class Client:
    def __init__(self, process):
        self.process = process
        self.next_id = 0
        self.waiting = {}
        self.reader = asyncio.get_running_loop().create_task(self.read())

    async def read(self):
        while True:
            line = await self.process.stdout.readline()
            if not line:
                for future in self.waiting.values():
                    future.set_exception(RuntimeError("the server closed its stdout"))
                return
            message = json.loads(line)
            future = self.waiting.pop(message.get("id"), None)
            if future is not None:
                future.set_result(message)

    def send(self, message):
        self.process.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    async def request(self, method, params):
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        await self.process.stdin.drain()
        message = await future
        if "error" in message:
            raise RuntimeError(f"{method} failed: {message['error']}")
        return message["result"]

    async def echo(self):
        result = await self.request(
            "tools/call", {"name": "echo", "arguments": {"text": TEXT}}
        )
        text = result["content"][0]["text"]
        if text != TEXT:
            raise RuntimeError(f"echo answered {text!r}")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("server", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.server[1:] if args.server[:1] == ["--"] else args.server
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=16 << 20,
    )
    client = Client(process)
    try:
        await asyncio.wait_for(
            client.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "mcpbench-eventloop", "version": "0"},
                },
            ),
            timeout=60,
        )
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for _ in range(args.warmup):
            await client.echo()
        round_trips = []
        for _ in range(args.calls):
            start = time.perf_counter_ns()
            await client.echo()
            round_trips.append((time.perf_counter_ns() - start) / 1000)
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        client.reader.cancel()
    json.dump(round_trips, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
