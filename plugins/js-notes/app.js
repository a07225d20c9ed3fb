// Example plugin in JavaScript: a tool, a prompt and a resource, plus notes kept in durable
// state (each caller's own), who is calling, and a value the operator configures. Built into
// a component with jco (see README.md); the helper `mcpbox.js` (guest-sdk/js/) turns these
// functions into MCP tools, prompts and resources.

import { Plugin, State, caller, config, notifyResourceUpdated } from "./mcpbox.js";

const plugin = new Plugin();

plugin.tool(
  "shout",
  { description: "Upper-case a text", input: { text: "string", times: "integer?" }, readOnly: true },
  ({ text, times = 1 }) => Array(times).fill(text.toUpperCase()).join(" "),
);

plugin.tool(
  "spin",
  { description: "Busy-loop for `ms` milliseconds of CPU (to see the limits work)", input: { ms: "integer" } },
  ({ ms }) => {
    const end = Date.now() + ms;
    let n = 0;
    while (Date.now() < end) n++;
    return `spun ${n} times`;
  },
);

plugin.tool(
  "add_note",
  { description: "Keep a note (in the `notes` caller bucket granted in js_notes.toml: each user's own)", input: { text: "string" } },
  ({ text }) => {
    const state = new State("notes");
    const number = state.increment("next");
    state.set(`note:${String(number).padStart(6, "0")}`, text);
    notifyResourceUpdated("notes://all");
    return `note ${number} kept`;
  },
);

plugin.tool(
  "whoami",
  { description: "Who is calling: an opaque id, how they were recognised, their name and scopes", readOnly: true },
  () => {
    const who = caller();
    if (who === undefined) return { caller: null };
    return { id: who.id, kind: who.kind, name: who.name ?? null, scopes: who.scopes };
  },
);

plugin.tool(
  "greeting",
  { description: "The greeting the operator configured (`greeting` in the manifest's [config])", readOnly: true },
  () => config("greeting") ?? "Hello.",
);

plugin.prompt(
  "limerick",
  { description: "Ask for a limerick about a topic", arguments: ["topic"] },
  ({ topic }) => `Write a limerick about ${topic}.`,
);

plugin.resource("notes://about", { name: "about", mimeType: "text/plain" }, () =>
  "A JavaScript plugin for mcpbox, built with jco.",
);

plugin.resource("notes://all", { name: "all-notes", mimeType: "application/json" }, () => {
  const state = new State("notes");
  return Object.fromEntries(state.keys("note:").map((key) => [key, state.get(key)]));
});

export const { tools, prompts, resources, completion } = plugin.exports();
