"""Write mcpbox plugins in Python, built into components with componentize-py.

A plugin module creates one ``Plugin``, registers functions with its decorators, and exports
its four interfaces (``Tools``, ``Prompts``, ``Resources``, ``Completion``) at module level,
which is where componentize-py looks for them::

    from mcpbox_sdk import Plugin

    plugin = Plugin()

    @plugin.tool(read_only=True)
    def add(a: float, b: float) -> str:
        "Add two numbers."
        return str(a + b)

    @plugin.prompt()
    def greet(name: str) -> str:
        "Greet someone."
        return f"Say hello to {name}."

    @plugin.resource("hello://motd", mime_type="text/plain")
    def motd() -> str:
        "The message of the day."
        return "Have a nice day."

    Tools, Prompts, Resources, Completion = plugin.exports()

Build it against mcpbox's WIT (``wit/`` of the mcpbox repository, or the copy ``mcpbox new``
writes)::

    componentize-py -d wit -w mcpbox:multi-user/plugin@0.1.0 componentize app -o my_plugin.wasm

The same module builds a WASI 0.3 component (``mcpbox:plugin@0.3.0``, what ``mcpbox new --lang
python --wasi 0.3`` writes) when the app is built against the 0.3 world; it tells which from the
bindings componentize-py generated::

    componentize-py -d wit/0.3 -w mcpbox:plugin/plugin-full@0.3.0 componentize app -o my_plugin.wasm

In a 0.3 plugin a tool (and a prompt or resource) may also be an ``async def``, awaiting the
client (``await sample(...)``, ``await elicit(...)``, ``await list_roots()``: several at once
with ``asyncio.gather``), and a tool may take a parameter annotated ``Output`` (left out of
its schema) through which it streams content as it goes: ``await out.text("...")`` reaches
the client at once (as progress) and is part of the result, before what the tool returns::

    @plugin.tool()
    async def count(n: int, out: Output) -> str:
        "Count to n, streaming each number."
        for i in range(1, n + 1):
            await out.text(str(i))
        return f"counted to {n}"

A write raises ``Cancelled`` once the host stopped reading (the client cancelled, or the call's
time is up): the 0.3 world has no ``cancelled()``, the host stops the call.

- A tool's input schema comes from its parameters' type hints (``str``, ``int``, ``float``,
  ``bool``, ``list[...]``, ``dict``, ``Optional[...]``, ``Literal[...]``); a parameter with a
  default is optional. The docstring is the description. Return a ``str``, or a ``dict`` /
  ``list`` (sent as JSON text and as structured content). Raise any exception to give the
  model an ``isError`` result carrying its message.
- A prompt's parameters are strings (MCP prompt arguments are); it returns a ``str`` (one user
  message) or a list of ``("user" | "assistant", text)`` pairs.
- A resource returns ``str`` (text) or ``bytes`` (a blob).
- ``log``, ``progress``, ``cancelled`` and ``notify_resource_updated`` reach the host;
  ``State`` keeps data between calls (``wasi:keyvalue``; the operator grants a bucket in the
  plugin's manifest; a bucket granted as a caller bucket, ``[keyvalue] caller-buckets``, is
  each caller's own: ``State("notes")`` then reaches the calling user's notes only).
- ``caller()`` says who is calling (``None`` while the host reads the lists): a ``Caller``
  with an opaque, stable ``id``, ``kind`` (``"local"``, ``"token"`` or ``"oauth"``), ``name``,
  ``scopes``, ``all_scopes`` and ``has_scope(scope)``. Tokens never reach a plugin.
- ``config(key)`` reads a configuration value or secret the operator gives the plugin
  (``wasi:config``; the manifest's ``[config]`` table names the keys), ``None`` when it has
  none; ``config_all()`` all of them as a dict. ``ConfigError`` names the key, never a value.

Every call runs in a fresh instance: module-level variables do not survive between calls.
"""

import inspect
import json
import re
import typing

import wit_world
from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import host

# The 0.3 world's calls are `async`; its `types` is `mcpbox_plugin_types` in `plugin-full`,
# whose WASI HTTP has a `types` of its own.
_P3 = inspect.iscoroutinefunction(exports.Tools.call_tool)
try:
    from wit_world.imports import mcpbox_plugin_types as types
except ImportError:
    from wit_world.imports import types

__all__ = ["Plugin", "State", "StateError", "Caller", "caller", "config", "config_all",
           "ConfigError", "log", "progress", "cancelled", "notify_resource_updated", "Output",
           "Cancelled", "sample", "elicit", "list_roots"]


# ---- schemas from type hints ----

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema(hint) -> dict:
    """The JSON Schema of one parameter's type hint."""
    if hint is inspect.Parameter.empty or hint is typing.Any:
        return {}
    if hint in _SCALARS:
        schema = {"type": _SCALARS[hint]}
        if hint is int:
            schema["format"] = "int64"
        return schema
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema(options[0])
        return {"anyOf": [_schema(a) for a in options]}
    if origin in (list, typing.List):
        return {"type": "array", "items": _schema(args[0]) if args else {}}
    if hint is dict or origin in (dict, typing.Dict):
        return {"type": "object"}
    raise TypeError(f"mcpbox_sdk: cannot describe the type {hint!r} as JSON Schema")


def _output_parameter(function):
    """The name of the parameter annotated ``Output``, if any."""
    hints = typing.get_type_hints(function)
    return next((name for name, hint in hints.items() if hint is Output), None)


def _input_schema(function) -> dict:
    signature = inspect.signature(function)
    hints = typing.get_type_hints(function)
    properties, required = {}, []
    for name, parameter in signature.parameters.items():
        if hints.get(name) is Output:
            continue
        properties[name] = _schema(hints.get(name, parameter.annotation))
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _check(value, schema: dict, where: str):
    """Check what JSON Schema checks for the hints above; raise ValueError naming the field."""
    kind = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        raise ValueError(f"`{where}` must be one of {allowed}, not {json.dumps(value)}")
    expected = {"string": str, "boolean": bool, "array": list, "object": dict}
    if kind in expected and not isinstance(value, expected[kind]):
        raise ValueError(f"`{where}` must be a {kind}")
    if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"`{where}` must be an integer")
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"`{where}` must be a number")


def _doc(function) -> str:
    return inspect.getdoc(function) or function.__name__


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# ---- registration ----

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

class Plugin:
    """The tools, prompts, resources and completions of one plugin."""

    def __init__(self):
        self._tools = {}
        self._prompts = {}
        self._resources = {}

    def tool(self, name=None, *, title=None, description=None, read_only=None,
             destructive=None, idempotent=None, open_world=None):
        """Register a function as a tool (its name by default)."""
        def register(function):
            tool_name = name or function.__name__
            if not _TOOL_NAME.fullmatch(tool_name):
                raise ValueError(f"mcpbox_sdk: invalid tool name `{tool_name}`: use 1 to 64 "
                                 "of A-Z a-z 0-9 _ -")
            output = _output_parameter(function)
            if not _P3 and (output or inspect.iscoroutinefunction(function)):
                raise TypeError(f"mcpbox_sdk: tool `{tool_name}`: async tools and `Output` need "
                                "the WASI 0.3 world (mcpbox:plugin/plugin-full@0.3.0)")
            schema = _input_schema(function)
            annotations = None
            if any(v is not None for v in (read_only, destructive, idempotent, open_world)):
                annotations = types.ToolAnnotations(read_only, destructive, idempotent,
                                                    open_world)
            info = types.Tool(tool_name, title, description or _doc(function),
                              json.dumps(schema), None, annotations)
            self._tools[tool_name] = (info, function, schema, output)
            return function
        return register

    def prompt(self, name=None, *, title=None, description=None):
        """Register a function as a prompt; its parameters are the prompt's arguments."""
        def register(function):
            prompt_name = name or function.__name__
            signature = inspect.signature(function)
            hints = typing.get_type_hints(function)
            arguments = []
            for parameter in signature.parameters.values():
                hint = hints.get(parameter.name, str)
                if hint not in (str, typing.Optional[str]):
                    raise TypeError(
                        f"mcpbox_sdk: prompt `{prompt_name}`: argument `{parameter.name}` "
                        f"must be a str (MCP prompt arguments are strings), not {hint!r}")
                arguments.append(types.PromptArgument(
                    parameter.name, None, None,
                    parameter.default is inspect.Parameter.empty))
            info = types.Prompt(prompt_name, title, description or _doc(function), arguments)
            self._prompts[prompt_name] = (info, function)
            return function
        return register

    def resource(self, uri, *, name=None, title=None, description=None, mime_type=None):
        """Register a function as the resource at `uri`."""
        def register(function):
            info = types.ResourceInfo(uri, name or function.__name__, title,
                                      description or inspect.getdoc(function), mime_type, None)
            self._resources[uri] = (info, function)
            return function
        return register

    def _tool_call(self, name, arguments):
        """The function a tool call runs and its keyword arguments, checked against the
        schema; raises ``Err`` for an unknown tool or bad arguments."""
        entry = self._tools.get(name)
        if entry is None:
            raise Err(types.Error_NotFound(f"no tool `{name}`"))
        _, function, schema, output = entry
        try:
            args = json.loads(arguments or "{}")
            for key, value in args.items():
                if key in schema["properties"]:
                    _check(value, schema["properties"][key], key)
        except ValueError as error:
            raise Err(types.Error_InvalidParams(str(error)))
        return function, args, output

    def _prompt_call(self, name, arguments):
        entry = self._prompts.get(name)
        if entry is None:
            raise Err(types.Error_NotFound(f"no prompt `{name}`"))
        return entry[1], dict(arguments)

    def _resource_call(self, uri):
        entry = self._resources.get(uri)
        if entry is None:
            raise Err(types.Error_NotFound(f"no resource `{uri}`"))
        return entry

    def exports(self):
        """The classes componentize-py instantiates: `Tools, Prompts, Resources, Completion`."""
        if _P3:
            return _exports_p3(self)
        plugin = self

        class Tools(exports.Tools):
            def list_tools(self):
                return [entry[0] for entry in plugin._tools.values()]

            def call_tool(self, name, arguments):
                function, args, _ = plugin._tool_call(name, arguments)
                try:
                    value = function(**args)
                except Exception as error:  # the model reads it as an isError result
                    return _error_result(error, [])
                return _tool_result(value, [])

        class Prompts(exports.Prompts):
            def list_prompts(self):
                return [info for info, _ in plugin._prompts.values()]

            def get_prompt(self, name, arguments):
                function, args = plugin._prompt_call(name, arguments)
                return _prompt_messages(function(**args))

        class Resources(exports.Resources):
            def list_resources(self):
                return [info for info, _ in plugin._resources.values()]

            def list_templates(self):
                return []

            def read_resource(self, uri):
                info, function = plugin._resource_call(uri)
                return _resource_contents(uri, info, function())

        class Completion(exports.Completion):
            def complete(self, reference, argument, value, context):
                return types.CompletionResult([], None, False)

        return Tools, Prompts, Resources, Completion


def _error_result(error, streamed):
    message = str(error) or type(error).__name__
    return types.ToolResult(streamed + [types.Content_Text(message)], None, True)


def _tool_result(value, streamed):
    structured = None if isinstance(value, str) else json.dumps(value)
    if isinstance(value, list):
        structured = None  # structured content is an object
    return types.ToolResult(streamed + [types.Content_Text(_text(value))], structured, False)


def _prompt_messages(value):
    if isinstance(value, str):
        value = [("user", value)]
    roles = {"user": types.Role.USER, "assistant": types.Role.ASSISTANT}
    return [types.PromptMessage(roles[role], types.Content_Text(text)) for role, text in value]


def _resource_contents(uri, info, value):
    if isinstance(value, bytes):
        return [types.ResourceContents_Blob(types.BlobContents(uri, info.mime_type, value))]
    return [types.ResourceContents_Text(types.TextContents(uri, info.mime_type, _text(value)))]


# ---- WASI 0.3: async calls and streamed output ----

class Cancelled(Exception):
    """The host no longer reads the call's output: the client cancelled, or the call's time is
    up. Stop."""

    def __init__(self):
        super().__init__("the call was cancelled")


class Output:
    """Where a 0.3 tool streams content while it runs (a parameter annotated ``Output``). Each
    item reaches the client at once and is part of the result, before what the tool returns."""

    def __init__(self, writer):
        self._writer = writer

    async def send(self, content):
        """Send one content item (a ``types.Content_*``); raises ``Cancelled`` once the host
        no longer reads."""
        await self._writer.write_all([content])
        if self._writer.reader_dropped:
            raise Cancelled()

    async def text(self, text: str):
        """Send a text item."""
        await self.send(types.Content_Text(text))


def _constructor(test):
    """The stream or future constructor componentize-py generated whose name passes `test`."""
    for name in dir(wit_world):
        if test(name):
            return getattr(wit_world, name)
    raise ImportError("mcpbox_sdk: the 0.3 world's content stream and result future are "
                      "missing from the bindings")


async def _resolve(value):
    """A function's value, awaited if it is awaitable (an `async def`)."""
    return await value if inspect.isawaitable(value) else value


def _exports_p3(plugin):
    import componentize_py_async_support

    content_stream = _constructor(lambda n: n.endswith("content_stream"))
    result_future = _constructor(
        lambda n: n.startswith("result_") and "tool_result" in n and n.endswith("error_future"))

    async def run(name, arguments, writer):
        """The call's result: Ok(tool-result) or Err(error). Streamed items come first in the
        result the host builds, so a failure's message follows them."""
        with writer:
            try:
                function, args, output = plugin._tool_call(name, arguments)
            except Err as error:
                return error
            if output:
                args[output] = Output(writer)
            try:
                value = await _resolve(function(**args))
            except Exception as error:  # the model reads it as an isError result
                return Ok(_error_result(error, []))
            return Ok(_tool_result(value, []))

    class Tools(exports.Tools):
        def list_tools(self):
            return [entry[0] for entry in plugin._tools.values()]

        async def call_tool(self, name, arguments):
            writer, reader = content_stream()
            result_writer, result = result_future(
                lambda: Err(types.Error_Internal("the tool ended without a result")))

            async def answer():
                # The stream ends (in `run`) before the result is written, so the host has
                # every item by then.
                outcome = await run(name, arguments, writer)
                await result_writer.write(outcome)

            componentize_py_async_support.spawn(answer())
            return (reader, result)

    class Prompts(exports.Prompts):
        def list_prompts(self):
            return [info for info, _ in plugin._prompts.values()]

        async def get_prompt(self, name, arguments):
            function, args = plugin._prompt_call(name, arguments)
            return _prompt_messages(await _resolve(function(**args)))

    class Resources(exports.Resources):
        def list_resources(self):
            return [info for info, _ in plugin._resources.values()]

        def list_templates(self):
            return []

        async def read_resource(self, uri):
            info, function = plugin._resource_call(uri)
            return _resource_contents(uri, info, await _resolve(function()))

    class Completion(exports.Completion):
        async def complete(self, reference, argument, value, context):
            return types.CompletionResult([], None, False)

    return Tools, Prompts, Resources, Completion


# ---- host functions ----

def log(message: str, level: str = "info"):
    """Log a message (to mcpbox's log, and to clients that asked for logs)."""
    host.log(getattr(types.LogLevel, level.upper()), message)


def progress(done: float, total=None, message=None):
    """Report progress of the current call."""
    host.progress(float(done), None if total is None else float(total), message)


def cancelled() -> bool:
    """Whether the client cancelled the current call (0.2; in 0.3 a write to the call's
    ``Output`` raises ``Cancelled`` instead, and the host stops the call)."""
    if _P3:
        raise RuntimeError("mcpbox_sdk: the WASI 0.3 world has no cancelled(): a write to the "
                           "call's Output raises Cancelled once the host stopped reading")
    return host.cancelled()


async def _ask(request):
    try:
        return json.loads(await request)
    except Err as error:
        raise RuntimeError(error.value) from None


async def sample(request: dict) -> dict:
    """0.3: ask the client's model (the params of MCP's ``sampling/createMessage``); its
    answer. Raises ``RuntimeError`` with the host's reason when it cannot."""
    return await _ask(host.sample(json.dumps(request)))


async def elicit(request: dict) -> dict:
    """0.3: ask the client's user (the params of MCP's ``elicitation/create``); the answer."""
    return await _ask(host.elicit(json.dumps(request)))


async def list_roots() -> dict:
    """0.3: the client's roots (the answer to ``roots/list``)."""
    return await _ask(host.list_roots())


def notify_resource_updated(uri: str):
    """Tell subscribed clients that the resource at `uri` changed (with caller buckets
    granted, only the current caller's subscriptions)."""
    host.notify_resource_updated(uri)


# ---- durable state (wasi:keyvalue) ----

class StateError(Exception):
    """A state operation failed: not granted, over a quota, or the store unavailable."""


def _state_error(error, bucket):
    from wit_world.imports import wasi_keyvalue_store as store
    value = getattr(error, "value", error)
    if isinstance(value, store.Error_AccessDenied):
        return StateError(
            f"state is not available: bucket `{bucket}` is not granted to this plugin "
            f"(the operator grants it in the plugin's manifest: [keyvalue] buckets = "
            f"[\"{bucket}\"], shared by every caller, or caller-buckets = [\"{bucket}\"], "
            f"each caller's own)")
    if isinstance(value, store.Error_Other):
        return StateError(value.value)
    return StateError(f"state store error: {value!r}")


class State:
    """A bucket of the plugin's durable state; values are JSON. A caller bucket (``[keyvalue]
    caller-buckets`` in the manifest) is opened the same way and holds the calling user's keys
    only; any other granted bucket is shared by every caller."""

    def __init__(self, bucket: str = "default"):
        from wit_world.imports import wasi_keyvalue_store as store
        self._name = bucket
        try:
            self._bucket = store.open(bucket)
        except Err as error:
            raise _state_error(error, bucket) from None

    def get(self, key: str, default=None):
        """The JSON value at `key`, or `default`."""
        try:
            raw = self._bucket.get(key)
        except Err as error:
            raise _state_error(error, self._name) from None
        return default if raw is None else json.loads(raw)

    def set(self, key: str, value):
        """Store `value` (anything JSON can hold) at `key`."""
        try:
            self._bucket.set(key, json.dumps(value).encode())
        except Err as error:
            raise _state_error(error, self._name) from None

    def delete(self, key: str):
        """Remove `key`."""
        try:
            self._bucket.delete(key)
        except Err as error:
            raise _state_error(error, self._name) from None

    def increment(self, key: str, delta: int = 1) -> int:
        """Add `delta` to the integer at `key`, atomically; the new value."""
        from wit_world.imports import atomics
        try:
            return atomics.increment(self._bucket, key, delta)
        except Err as error:
            raise _state_error(error, self._name) from None

    def keys(self, prefix: str = "") -> list:
        """Every key starting with `prefix`, sorted."""
        keys, cursor = [], None
        try:
            while True:
                page = self._bucket.list_keys(cursor)
                keys.extend(k for k in page.keys if k.startswith(prefix))
                cursor = page.cursor
                if cursor is None:
                    break
        except Err as error:
            raise _state_error(error, self._name) from None
        return sorted(set(keys))


class Caller:
    """Who is calling: an opaque, stable ``id`` (the same for the same user in every call, and
    another in another plugin), ``kind`` (``"local"``, ``"token"`` or ``"oauth"``), a ``name``
    to show (or ``None``), the ``scopes`` held, and ``all_scopes`` for the local user."""

    def __init__(self, principal):
        self.id = principal.id
        self.kind = principal.kind.name.lower()
        self.name = principal.name
        self.scopes = list(principal.scopes)
        self.all_scopes = principal.all_scopes

    def has_scope(self, scope: str) -> bool:
        """Whether the caller holds ``scope`` (always, for the local user)."""
        return self.all_scopes or scope in self.scopes

    def __repr__(self):
        return f"Caller(id={self.id!r}, kind={self.kind!r}, name={self.name!r})"


def caller():
    """The caller of the current request, or ``None`` while the host reads the lists."""
    from wit_world.imports import caller as imported
    principal = imported.current()
    return None if principal is None else Caller(principal)


class ConfigError(Exception):
    """The configuration could not be read (the message names the key, never a value)."""


def _config_error(error, what):
    value = getattr(error, "value", error)
    reason = getattr(value, "value", value)
    return ConfigError(f"cannot read the configuration ({what}): {reason}")


def config(key: str):
    """The value of configuration key ``key``, or ``None`` when it has none (the manifest
    names the keys a plugin may read, in its ``[config]`` table)."""
    from wit_world.imports import wasi_config_store
    try:
        return wasi_config_store.get(key)
    except Err as error:
        raise _config_error(error, f"key `{key}`") from None


def config_all() -> dict:
    """Every configuration key the plugin may read that has a value, with its value."""
    from wit_world.imports import wasi_config_store
    try:
        return dict(wasi_config_store.get_all())
    except Err as error:
        raise _config_error(error, "all keys") from None
