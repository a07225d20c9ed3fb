"""An MCP client using the official Python SDK's OAuth support against mcpbox.

It connects to URL with no token, so it must: read the 401's `WWW-Authenticate`, fetch the
Protected Resource Metadata, discover the authorization server, run the authorization-code
flow with PKCE (the test server approves at once: the redirect is followed by hand), exchange
the code for a token for this resource, and retry. Then it calls a tool whose plugin requires
another scope: mcpbox answers 403 `insufficient_scope`, and the SDK must step up (authorize
again with the union of scopes) and retry; the tool, unlisted before, is listed after. Prints
one line per step, `done` at the end.

Usage: python oauth_client.py URL
"""

import sys
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT = "http://127.0.0.1:1/callback"


def say(line):
    print(line, flush=True)


class Memory(TokenStorage):
    """A pre-registered client (the test server has no dynamic registration) and its tokens."""

    def __init__(self):
        self.tokens = None
        self.client = OAuthClientInformationFull(
            client_id="mcpbox-test-client",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        say(f"token scope={tokens.scope}")

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """Stands in for the user's browser: follows the authorization URL and catches the redirect."""

    def __init__(self):
        self.location = None

    async def redirect(self, url: str) -> None:
        say("authorizing")
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(url)
        assert response.status_code in (302, 303), f"authorize answered {response.status_code}"
        self.location = response.headers["location"]

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlparse(self.location).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])


async def main(url):
    browser = Browser()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="mcpbox test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    async with create_mcp_http_client(auth=provider) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                say("initialized")
                tools = {t.name for t in (await session.list_tools()).tools}
                # `ok` belongs to a plugin that requires the `admin` scope, which the first
                # token lacks: it is not listed.
                assert "echo" in tools and "ok" not in tools, sorted(tools)
                result = await session.call_tool("echo", {"text": "hello oauth"})
                assert not result.is_error and result.content[0].text == "hello oauth", result
                say("echo ok")
                # `ok` belongs to a plugin that requires the `admin` scope: a step-up.
                result = await session.call_tool("ok", {})
                assert not result.is_error and result.content[0].text == "fine", result
                say("step-up ok")
                # With the stepped-up token, it is listed.
                tools = {t.name for t in (await session.list_tools()).tools}
                assert "ok" in tools, sorted(tools)
    say("done")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
