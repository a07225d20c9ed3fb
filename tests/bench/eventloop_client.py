#!/usr/bin/env python3
"""The benchmark's second kind of client: an event loop (asyncio, one thread).

mcpbench's own client runs on a multi-threaded tokio runtime; an MCP client written with the
official Python SDK runs on one asyncio loop, with a task reading the server's stdout and
handing each answer to the request waiting for it. This script drives a stdio server the same
way, with nothing but the standard library: a reader task, a future per request id, one write
per request. It starts the server (the command after `--`), runs `initialize`, warms up, then
times `--calls` sequential `tools/call echo` round trips, checks every answer, and prints the
round trips in microseconds as one JSON array on stdout.

With `--http HOST:PORT` it speaks Streamable HTTP (2025-11-25, with the session the server
issues) to a server already listening there instead: HTTP/1.1 on one keep-alive connection
over asyncio's streams, each answer read from the JSON body or the SSE stream, as an SDK
client on an event loop does. Used by `mcpbench` (the stdio and HTTP parts); see
BENCHMARKS.md.
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


class HttpClient:
    """Streamable HTTP on one keep-alive connection."""

    def __init__(self, addr):
        self.host, port = addr.rsplit(":", 1)
        self.port = int(port)
        self.next_id = 0
        self.session = None
        self.reader = self.writer = None

    async def connect(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def post(self, message):
        body = json.dumps(message, separators=(",", ":")).encode()
        head = [
            "POST /mcp HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(body)}",
        ]
        if self.session is not None:
            head += [f"Mcp-Session-Id: {self.session}", "MCP-Protocol-Version: 2025-11-25"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await self.writer.drain()
        status = (await self.reader.readline()).split()
        if len(status) < 2:
            raise RuntimeError("the server closed the connection")
        headers = {}
        while True:
            line = (await self.reader.readline()).rstrip(b"\r\n")
            if not line:
                break
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
        else:
            data = b""
        if not status[1].startswith(b"2"):
            raise RuntimeError(f"HTTP {status[1].decode()}: {data[:200]!r}")
        if "mcp-session-id" in headers:
            self.session = headers["mcp-session-id"]
        if "id" not in message:
            return None
        if headers.get("content-type", "").startswith("text/event-stream"):
            for event in data.replace(b"\r\n", b"\n").split(b"\n\n"):
                payload = b"".join(
                    line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")
                )
                if payload:
                    answer = json.loads(payload)
                    if answer.get("id") == message["id"]:
                        return answer
            raise RuntimeError("the event stream ended before the answer")
        return json.loads(data)

    async def request(self, method, params):
        self.next_id += 1
        message = await self.post(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        if "error" in message:
            raise RuntimeError(f"{method} failed: {message['error']}")
        return message["result"]

    async def notify(self, method):
        await self.post({"jsonrpc": "2.0", "method": method})


INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "mcpbench-eventloop", "version": "0"},
}


async def echo(client):
    """One `tools/call echo` through either client, its answer checked."""
    result = await client.request(
        "tools/call", {"name": "echo", "arguments": {"text": TEXT}}
    )
    text = result["content"][0]["text"]
    if text != TEXT:
        raise RuntimeError(f"echo answered {text!r}")


async def timed(client, warmup, calls):
    for _ in range(warmup):
        await echo(client)
    round_trips = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        await echo(client)
        round_trips.append((time.perf_counter_ns() - start) / 1000)
    return round_trips


async def over_http(addr, warmup, calls):
    client = HttpClient(addr)
    await client.connect()
    try:
        await asyncio.wait_for(client.request("initialize", INITIALIZE), timeout=60)
        await client.notify("notifications/initialized")
        return await timed(client, warmup, calls)
    finally:
        client.writer.close()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--http", metavar="HOST:PORT")
    parser.add_argument("server", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.http:
        json.dump(await over_http(args.http, args.warmup, args.calls), sys.stdout)
        return
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
        await asyncio.wait_for(client.request("initialize", INITIALIZE), timeout=60)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        round_trips = await timed(client, args.warmup, args.calls)
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
