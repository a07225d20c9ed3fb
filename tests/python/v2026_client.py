"""Drive mcpbox with the official Python MCP SDK (`mcp` 2.3) at MCP 2026-07-28.

Run by the end-to-end tests (tests/e2e/services/python.rs), never by hand-written expectations of the
SDK: the SDK does the envelope, the headers, `subscriptions/listen` and input requests (MRTR)
itself, and this script checks what a user of it would see.

    v2026_client.py --mode 2026-07-28|auto (--stdio MCPBOX PLUGIN_DIR | --url URL)

It prints `listening` once its listen stream is acknowledged, waits for a list change (the
test changes the plugin directory), prints `changed`, and exits 0 when every check passed.
"""

import argparse
import os
import sys

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def say(line):
    print(line, flush=True)


async def elicit(context, params):
    # The conformance fixture asks for `name` under the key `user_name`.
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def main(args):
    if args.url:
        server = args.url
    else:
        server = StdioServerParameters(
            command=args.stdio[0],
            args=["serve", "--plugins", args.stdio[1]],
            env={**os.environ, "MCPBOX_LOG": "warn"},
        )
    async with Client(server, mode=args.mode, elicitation_callback=elicit, read_timeout_seconds=60) as client:
        check(client.protocol_version == "2026-07-28", f"negotiated {client.protocol_version}")

        tools = {t.name for t in (await client.list_tools()).tools}
        check({"echo", "test_input_required_result_elicitation"} <= tools, f"tools: {sorted(tools)}")
        result = await client.call_tool("echo", {"text": "hello 2026"})
        check(not result.is_error, f"echo failed: {result}")
        check(result.content[0].text == "hello 2026", f"echo said {result.content}")

        read = await client.read_resource("test://static-text")
        check("static text resource" in read.contents[0].text, f"read {read}")
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        check("arg1='a'" in prompt.messages[0].content.text, f"prompt {prompt}")
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "test"},
        )
        check(completion.completion.values == ["test1", "test2", "test3"], f"completion {completion}")

        # An input request (MRTR): the SDK asks the callback and retries with the answer.
        asked = await client.call_tool("test_input_required_result_elicitation", {})
        check(not asked.is_error, f"elicitation tool failed: {asked}")
        check(asked.content[0].text == "Hello, Ada!", f"elicitation tool said {asked.content}")

        # A tampered requestState is refused with a clear error.
        first = await client.session.call_tool(
            "test_input_required_result_tampered_state", {}, allow_input_required=True
        )
        check(isinstance(first, types.InputRequiredResult), f"expected input_required, got {first}")
        try:
            await client.session.call_tool(
                "test_input_required_result_tampered_state",
                {},
                input_responses={"confirm": {"action": "accept", "content": {"ok": "yes"}}},
                request_state=first.request_state[:-2] + "xx",
                allow_input_required=True,
            )
            raise AssertionError("a tampered requestState was accepted")
        except MCPError as error:
            check(error.code == -32602, f"tampered state gave {error.code}: {error}")
            check("requestState" in str(error), f"tampered state error: {error}")

        # Hot reload reaches a listen stream.
        async with client.listen(
            tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
        ) as subscription:
            check(subscription.honored.tools_list_changed, f"honoured {subscription.honored}")
            say("listening")
            with anyio.fail_after(60):
                async for event in subscription:
                    say(f"changed {type(event).__name__}")
                    break
    say("done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--stdio", nargs=2, metavar=("MCPBOX", "PLUGIN_DIR"))
    parser.add_argument("--url")
    anyio.run(main, parser.parse_args())
