"""An MCP client (the official Python SDK) whose user links a downstream account when asked.

It connects to mcpbox at URL over Streamable HTTP (2025-11-25, a session) with a bearer TOKEN
of mcpbox's own OAuth, then calls each tool of CALLS in turn. When mcpbox asks through a
URL-mode elicitation (`elicitation/create`, `mode: "url"`), the callback stands in for the
user, per MODE:

- `accept`: open the URL in a "browser" (httpx, following redirects, keeping cookies, and
  sending `X-Test-User: USER` so that the test provider signs that user in), then accept;
- `accept-unvisited`: accept without opening the URL (the user never finishes);
- `decline` / `cancel`: answer so, without opening the URL;
- `no-url`: declare elicitation without its `url` mode (as a client that cannot open URLs).

Every event is printed as one JSON line: `elicitation` (what was asked), `browser` (where the
browser ended and with what status), `notification` (`notifications/elicitation/complete`),
`result` (a tool's result) or `error` (a JSON-RPC error: code, message, data), then `done`.

Usage: python link_client.py URL TOKEN USER MODE CALLS
  CALLS is a JSON array of [tool, arguments] pairs.
"""

import json
import sys

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


class FormOnlySession(ClientSession):
    """Declares `elicitation` with its form mode only: a client that cannot open URLs."""

    def _build_capabilities(self, version):
        capabilities = super()._build_capabilities(version)
        capabilities.elicitation = types.ElicitationCapability(form=types.FormElicitationCapability())
        return capabilities


def make_elicitation(user, mode):
    async def elicitation(context, params):
        asked = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        emit("elicitation", **asked)
        if getattr(params, "mode", "form") != "url":
            return types.ElicitResult(action="decline")
        if mode == "no-url":
            # It declared no URL mode: a server asking for one anyway is in the wrong.
            return types.ErrorData(code=types.INVALID_PARAMS, message="this client cannot open URLs")
        if mode in ("decline", "cancel"):
            return types.ElicitResult(action=mode)
        if mode == "accept":
            # The user's browser: its own cookie jar, redirects followed across hosts.
            async with httpx2.AsyncClient(
                follow_redirects=True, headers={"X-Test-User": user}, timeout=60
            ) as browser:
                page = await browser.get(params.url)
            emit(
                "browser",
                status=page.status_code,
                url=str(page.url),
                hops=[str(r.url) for r in page.history],
                body=page.text[:2000],
            )
        return types.ElicitResult(action="accept")

    return elicitation


async def on_message(message):
    if isinstance(message, Exception):
        return
    method = getattr(message, "method", None)
    if method == "notifications/elicitation/complete":
        emit("notification", method=method, params=message.params.model_dump(mode="json", by_alias=True))


async def main(url, token, user, mode, calls):
    session_type = FormOnlySession if mode == "no-url" else ClientSession
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with session_type(
                read,
                write,
                elicitation_callback=make_elicitation(user, mode),
                message_handler=on_message,
            ) as session:
                await session.initialize()
                for tool, arguments in calls:
                    try:
                        result = await session.call_tool(tool, arguments)
                    except MCPError as error:
                        emit("error", tool=tool, code=error.code, message=error.message, data=error.data)
                        continue
                    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
                    emit(
                        "result",
                        tool=tool,
                        isError=bool(result.is_error),
                        text="\n".join(texts),
                        structured=result.structured_content,
                    )
    emit("done")


if __name__ == "__main__":
    url, token, user, mode, calls = sys.argv[1:6]
    anyio.run(main, url, token, user, mode, json.loads(calls))
