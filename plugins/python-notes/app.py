"""Example plugin in Python: a tool, a prompt and a resource, plus notes kept in durable state
(each caller's own), who is calling, and a value the operator configures.

Built into a component with componentize-py (see README.md); the helper module
`mcpbox_sdk` (guest-sdk/python/) turns these functions into MCP tools, prompts and resources.
"""

from typing import Literal

from mcpbox_sdk import Plugin, State, caller, config, notify_resource_updated

plugin = Plugin()


@plugin.tool(read_only=True)
def word_count(text: str, unit: Literal["words", "characters"] = "words") -> dict:
    """Count the words (or characters) in a text."""
    count = len(text.split()) if unit == "words" else len(text)
    return {"count": count, "unit": unit}


@plugin.tool(read_only=True)
def fibonacci(n: int) -> str:
    """The n-th Fibonacci number, computed the slow (exponential) way: heavy for n over 30."""
    if n < 0:
        raise ValueError("n must not be negative")

    def fib(k):
        return k if k < 2 else fib(k - 1) + fib(k - 2)

    return str(fib(n))


@plugin.tool()
def add_note(text: str) -> str:
    """Keep a note (in the `notes` bucket, granted in python_notes.toml as a caller bucket:
    each user keeps notes of their own)."""
    state = State("notes")
    number = state.increment("next")
    state.set(f"note:{number:06}", text)
    notify_resource_updated("notes://all")
    return f"note {number} kept"


@plugin.tool(read_only=True)
def whoami() -> dict:
    """Who is calling: an opaque id, how they were recognised, their name and scopes."""
    who = caller()
    if who is None:
        return {"caller": None}
    return {"id": who.id, "kind": who.kind, "name": who.name, "scopes": who.scopes}


@plugin.tool(read_only=True)
def greeting() -> str:
    """The greeting the operator configured (`greeting` in the manifest's [config])."""
    return config("greeting") or "Hello."


@plugin.prompt()
def haiku(topic: str) -> str:
    """Ask for a haiku about a topic."""
    return f"Write a haiku about {topic}."


@plugin.resource("notes://about", mime_type="text/plain")
def about() -> str:
    """What this plugin is."""
    return "A Python plugin for mcpbox, built with componentize-py."


@plugin.resource("notes://all", mime_type="application/json")
def all_notes() -> dict:
    """Every note the caller kept with add_note."""
    state = State("notes")
    return {key: state.get(key) for key in state.keys("note:")}


Tools, Prompts, Resources, Completion = plugin.exports()
