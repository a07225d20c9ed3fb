"""Test fixture: a WASI 0.3 plugin (`mcpbox:plugin@0.3.0`) in Python, built by componentize-py
(0.25.1 generates the 0.3 world's async exports, `stream` and `future`). `count_py` streams
1..=n, then answers."""

import json
import componentize_py_async_support
from componentize_py_types import Ok, Err
from wit_world import exports, types_content_stream, result_types_tool_result_types_error_future
from wit_world.imports import types


class Tools(exports.Tools):
    def list_tools(self):
        return [types.Tool("count_py", None, "Stream 1..=n", '{"type":"object"}', None, None)]

    async def call_tool(self, name, arguments):
        n = json.loads(arguments).get("n", 3)
        writer, reader = types_content_stream()
        fwriter, freader = result_types_tool_result_types_error_future(
            lambda: Err(types.Error_Internal("no result")))

        async def run():
            with writer:
                for i in range(1, n + 1):
                    await writer.write_all([types.Content_Text(str(i))])
            with fwriter:
                await fwriter.write(Ok(types.ToolResult([types.Content_Text(f"counted to {n}")], None, False)))

        componentize_py_async_support.spawn(run())
        return (reader, freader)


class Prompts(exports.Prompts):
    def list_prompts(self):
        return []

    async def get_prompt(self, name, arguments):
        raise Err(types.Error_NotFound(name))


class Resources(exports.Resources):
    def list_resources(self):
        return []

    def list_templates(self):
        return []

    async def read_resource(self, uri):
        raise Err(types.Error_NotFound(uri))


class Completion(exports.Completion):
    async def complete(self, reference, argument, value, context):
        return types.CompletionResult([], None, False)
