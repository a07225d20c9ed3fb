// Write mcpbox plugins in JavaScript, built into components with jco (componentize-js).
//
//   import { Plugin } from "./mcpbox.js";
//   const plugin = new Plugin();
//   plugin.tool("add", {
//     description: "Add two numbers",
//     input: { a: "number", b: "number" },   // or a full JSON Schema: { type: "object", ... }
//     readOnly: true,
//   }, ({ a, b }) => String(a + b));
//   plugin.prompt("greet", { description: "Greet someone", arguments: ["name"] },
//     ({ name }) => `Say hello to ${name}.`);
//   plugin.resource("hello://motd", { mimeType: "text/plain" }, () => "Have a nice day.");
//   export const { tools, prompts, resources, completion } = plugin.exports();
//
// Build: jco componentize app.js --wit wit --world-name mcpbox:multi-user/plugin@0.1.0 -o app.wasm
//
// - `input` maps each argument to a type ("string", "number", "integer", "boolean", "array",
//   "object"; append "?" for an optional one, or give an array of allowed strings for an
//   enum), or is a JSON Schema object. The host validates arguments against it before the
//   handler runs.
// - A tool returns a string, or an object (sent as JSON text and as structured content).
//   Throw an Error to give the model an `isError` result with its message.
// - A prompt's arguments are strings; it returns a string (one user message) or a list of
//   [role, text] pairs.
// - A resource returns a string (text) or a Uint8Array (a blob).
// - `log`, `progress`, `cancelled` and `notifyResourceUpdated` reach the host; `State` keeps
//   data between calls (wasi:keyvalue; the operator grants a bucket in the manifest; a bucket
//   granted as a caller bucket, `[keyvalue] caller-buckets`, is each caller's own, so
//   `new State("notes")` reaches the calling user's notes only).
// - `caller()` says who is calling (undefined while the host reads the lists): `{ id, kind,
//   name, scopes, allScopes, hasScope(scope) }`, `id` opaque and stable, `kind` "local",
//   "token" or "oauth". Tokens never reach a plugin.
// - `config(key)` reads a configuration value or secret the operator gives the plugin
//   (wasi:config; the manifest's `[config]` table names the keys), undefined when it has none;
//   `configAll()` all of them as an object. A `ConfigError` names the key, never a value.
//
// Every call runs in a fresh instance: module state does not survive between calls.

import * as host from "mcpbox:plugin/host@0.1.0";
import { open } from "wasi:keyvalue/store@0.2.0-draft2";
import { increment } from "wasi:keyvalue/atomics@0.2.0-draft2";
import { current } from "mcpbox:multi-user/caller@0.1.0";
import { get as configGet, getAll as configGetAll } from "wasi:config/store@0.2.0-rc.1";

function schemaOf(input) {
  if (input === undefined) return { type: "object", properties: {} };
  if (input.type === "object") return input;
  const properties = {};
  const required = [];
  for (const [name, spec] of Object.entries(input)) {
    if (Array.isArray(spec)) {
      properties[name] = { type: "string", enum: spec };
      required.push(name);
      continue;
    }
    const optional = spec.endsWith("?");
    const type = optional ? spec.slice(0, -1) : spec;
    const known = ["string", "number", "integer", "boolean", "array", "object"];
    if (!known.includes(type)) {
      throw new Error(`mcpbox: argument \`${name}\` has unknown type \`${spec}\`; use one of ${known.join(", ")}`);
    }
    properties[name] = { type };
    if (!optional) required.push(name);
  }
  return required.length ? { type: "object", properties, required } : { type: "object", properties };
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export class Plugin {
  constructor() {
    this.tools = new Map();
    this.prompts = new Map();
    this.resources = new Map();
  }

  tool(name, options, handler) {
    if (!TOOL_NAME.test(name)) {
      throw new Error(`mcpbox: invalid tool name \`${name}\`: use 1 to 64 of A-Z a-z 0-9 _ -`);
    }
    const annotations = ["readOnly", "destructive", "idempotent", "openWorld"].some((k) => k in options)
      ? {
          readOnly: options.readOnly,
          destructive: options.destructive,
          idempotent: options.idempotent,
          openWorld: options.openWorld,
        }
      : undefined;
    this.tools.set(name, {
      info: {
        name,
        title: options.title,
        description: options.description ?? name,
        inputSchema: JSON.stringify(schemaOf(options.input)),
        outputSchema: undefined,
        annotations,
      },
      handler,
    });
    return this;
  }

  prompt(name, options, handler) {
    const args = (options.arguments ?? []).map((a) =>
      typeof a === "string"
        ? { name: a, title: undefined, description: undefined, required: true }
        : { name: a.name, title: a.title, description: a.description, required: a.required ?? true },
    );
    this.prompts.set(name, {
      info: { name, title: options.title, description: options.description ?? name, arguments: args },
      handler,
    });
    return this;
  }

  resource(uri, options, handler) {
    this.resources.set(uri, {
      info: {
        uri,
        name: options.name ?? uri,
        title: options.title,
        description: options.description,
        mimeType: options.mimeType,
        size: undefined,
      },
      handler,
    });
    return this;
  }

  exports() {
    const plugin = this;
    return {
      tools: {
        listTools: () => [...plugin.tools.values()].map((t) => t.info),
        callTool(name, argumentsJson) {
          const tool = plugin.tools.get(name);
          if (!tool) throw { tag: "not-found", val: `no tool \`${name}\`` };
          let value;
          try {
            value = tool.handler(JSON.parse(argumentsJson || "{}"));
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            return { content: [{ tag: "text", val: message }], structured: undefined, isError: true };
          }
          const text = typeof value === "string" ? value : JSON.stringify(value);
          const structured = value !== null && typeof value === "object" && !Array.isArray(value)
            ? JSON.stringify(value)
            : undefined;
          return { content: [{ tag: "text", val: text }], structured, isError: false };
        },
      },
      prompts: {
        listPrompts: () => [...plugin.prompts.values()].map((p) => p.info),
        getPrompt(name, args) {
          const prompt = plugin.prompts.get(name);
          if (!prompt) throw { tag: "not-found", val: `no prompt \`${name}\`` };
          let value = prompt.handler(Object.fromEntries(args));
          if (typeof value === "string") value = [["user", value]];
          return value.map(([role, text]) => ({ role, content: { tag: "text", val: text } }));
        },
      },
      resources: {
        listResources: () => [...plugin.resources.values()].map((r) => r.info),
        listTemplates: () => [],
        readResource(uri) {
          const resource = plugin.resources.get(uri);
          if (!resource) throw { tag: "not-found", val: `no resource \`${uri}\`` };
          const value = resource.handler();
          const mimeType = resource.info.mimeType;
          if (value instanceof Uint8Array) return [{ tag: "blob", val: { uri, mimeType, blob: value } }];
          const text = typeof value === "string" ? value : JSON.stringify(value);
          return [{ tag: "text", val: { uri, mimeType, text } }];
        },
      },
      completion: {
        complete: () => ({ values: [], total: undefined, hasMore: false }),
      },
    };
  }
}

export function log(message, level = "info") {
  host.log(level, message);
}

export function progress(done, total, message) {
  host.progress(done, total, message);
}

export function cancelled() {
  return host.cancelled();
}

export function notifyResourceUpdated(uri) {
  host.notifyResourceUpdated(uri);
}

function stateError(error, bucket) {
  const payload = error?.payload ?? error;
  if (payload?.tag === "access-denied") {
    return new Error(
      `state is not available: bucket \`${bucket}\` is not granted to this plugin ` +
        `(the operator grants it in the plugin's manifest: [keyvalue] buckets = ["${bucket}"], ` +
        `shared by every caller, or caller-buckets = ["${bucket}"], each caller's own)`,
    );
  }
  if (payload?.tag === "other") return new Error(payload.val);
  return new Error(`state store error: ${JSON.stringify(payload)}`);
}

// A bucket of the plugin's durable state; values are JSON. A caller bucket (`[keyvalue]
// caller-buckets` in the manifest) is opened the same way and holds the calling user's keys
// only; any other granted bucket is shared by every caller.
export class State {
  constructor(bucket = "default") {
    this.name = bucket;
    try {
      this.bucket = open(bucket);
    } catch (error) {
      throw stateError(error, bucket);
    }
  }

  get(key, fallback = undefined) {
    let raw;
    try {
      raw = this.bucket.get(key);
    } catch (error) {
      throw stateError(error, this.name);
    }
    return raw === undefined ? fallback : JSON.parse(new TextDecoder().decode(raw));
  }

  set(key, value) {
    try {
      this.bucket.set(key, new TextEncoder().encode(JSON.stringify(value)));
    } catch (error) {
      throw stateError(error, this.name);
    }
  }

  increment(key, delta = 1) {
    try {
      return Number(increment(this.bucket, key, BigInt(delta)));
    } catch (error) {
      throw stateError(error, this.name);
    }
  }

  keys(prefix = "") {
    const keys = [];
    let cursor;
    try {
      do {
        const page = this.bucket.listKeys(cursor);
        keys.push(...page.keys.filter((k) => k.startsWith(prefix)));
        cursor = page.cursor;
      } while (cursor !== undefined);
    } catch (error) {
      throw stateError(error, this.name);
    }
    return [...new Set(keys)].sort();
  }
}

// Who is calling, or undefined while the host reads the plugin's lists.
export function caller() {
  const principal = current();
  if (principal === undefined || principal === null) return undefined;
  return {
    id: principal.id,
    kind: principal.kind,
    name: principal.name ?? undefined,
    scopes: [...principal.scopes],
    allScopes: principal.allScopes,
    hasScope(scope) {
      return this.allScopes || this.scopes.includes(scope);
    },
  };
}

// The configuration could not be read (the message names the key, never a value).
export class ConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = "ConfigError";
  }
}

function configError(error, what) {
  const payload = error?.payload ?? error;
  const reason = payload?.val ?? JSON.stringify(payload);
  return new ConfigError(`cannot read the configuration (${what}): ${reason}`);
}

// The value of configuration key `key`, or undefined when it has none.
export function config(key) {
  try {
    return configGet(key) ?? undefined;
  } catch (error) {
    throw configError(error, `key \`${key}\``);
  }
}

// Every configuration key the plugin may read that has a value, as an object.
export function configAll() {
  try {
    return Object.fromEntries(configGetAll());
  } catch (error) {
    throw configError(error, "all keys");
  }
}
