"""An MCP client (the official Python SDK) whose user answers mcpbox's install questions.

It connects to mcpbox at URL over Streamable HTTP with the bearer TOKEN, at MODE (`legacy`:
2025-11-25 with a session, where a question is `elicitation/create`; `2026-07-28`: stateless,
where it is an input request the SDK answers and retries), then calls each tool of CALLS in
turn. Each form mcpbox asks is answered by the next entry of ANSWERS, standing in for the user:

- `"accept"`: tick the confirmation, leave every grant as offered (ticked);
- `{"untick": [N, ...]}`: accept with grants N (1-based, as the form numbers them) unticked;
- `{"run": [ARGV...], "then": ANSWER}`: run a command first (the test moves a tag), then answer;
- `"decline"` / `"cancel"`: answer so;
- `"none"` as the only answer: declare no elicitation at all (a client that cannot be asked).

`listen` as MODE instead: a 2026-07-28 client that holds a `subscriptions/listen` stream, prints
`listening`, and at each change lists the tools; once CALLS[0]'s tool is served it calls it
(`called`), and once it is gone again it prints `gone` and ends.

Every event is printed as one JSON line: `elicitation` (what was asked), `result` (a tool's
result, with the milliseconds it took), `error`, `tools`, then `done`.

Usage: python manage_client.py URL TOKEN MODE ANSWERS CALLS
"""

import json
import subprocess
import sys
import time

import anyio
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def make_elicitation(answers):
    pending = list(answers)

    async def elicitation(context, params):
        asked = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        emit("elicitation", **asked)
        answer = pending.pop(0) if pending else "decline"
        if isinstance(answer, dict) and "run" in answer:
            subprocess.run(answer["run"], check=True, capture_output=True)
            answer = answer["then"]
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        untick = answer.get("untick", []) if isinstance(answer, dict) else []
        content = {}
        for field, schema in asked.get("requestedSchema", {}).get("properties", {}).items():
            if field == "confirm":
                content[field] = True
            elif field.startswith("grant_"):
                content[field] = int(field.split("_")[1]) not in untick
            elif "default" in schema:
                content[field] = schema["default"]
        return types.ElicitResult(action="accept", content=content)

    return elicitation


def report(tool, result, started):
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    emit(
        "result",
        tool=tool,
        isError=bool(result.is_error),
        text="\n".join(texts),
        structured=result.structured_content,
        ms=round((time.monotonic() - started) * 1000),
    )


async def tool_names(client):
    return sorted(t.name for t in (await client.list_tools()).tools)


async def listen(client, target, arguments):
    async with client.listen(tools_list_changed=True) as subscription:
        emit("listening")
        served = False
        with anyio.fail_after(120):
            async for _ in subscription:
                names = await tool_names(client)
                emit("tools", names=names)
                if not served and target in names:
                    served = True
                    started = time.monotonic()
                    report(target, await client.call_tool(target, arguments), started)
                elif served and target not in names:
                    emit("gone")
                    return


async def main(url, token, mode, answers, calls):
    headers = {"Authorization": f"Bearer {token}"}
    callback = None if answers == ["none"] else make_elicitation(answers)
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        version = "2026-07-28" if mode == "listen" else mode
        async with Client(
            transport, mode=version, elicitation_callback=callback, read_timeout_seconds=120
        ) as client:
            emit("tools", names=await tool_names(client))
            if mode == "listen":
                await listen(client, calls[0][0], calls[0][1])
            else:
                for tool, arguments in calls:
                    started = time.monotonic()
                    try:
                        result = await client.call_tool(tool, arguments)
                    except MCPError as error:
                        emit("error", tool=tool, code=error.code, message=error.message)
                        continue
                    report(tool, result, started)
    emit("done")


if __name__ == "__main__":
    url, token, mode, answers, calls = sys.argv[1:6]
    anyio.run(main, url, token, mode, json.loads(answers), json.loads(calls))
