//! JSON Schema validation of tool arguments (before the plugin runs) and of structured output
//! (before the client sees it), with validators compiled once: when the plugin loads, or, for
//! a schema proven usable in an earlier run ([`super::proofs`]), when its tool is first called.
//!
//! Schemas are JSON Schema 2020-12 unless they say otherwise (`$schema`). Remote `$ref`s are
//! never fetched: a schema that needs one is refused at load. So is a tool whose `x-mcp-header`
//! annotations are invalid (SEP-2243); the valid ones are kept for checking `Mcp-Param-*`.
//!
//! A plugin supplies both a schema and (for output) the value checked against it, so a schema
//! must not be able to make the host work without bound. At load, each schema's size with
//! every local `$ref` expanded is computed (linear time, shared subschemas counted once per
//! use, recursion counted once); a schema over [`MAX_SCHEMA_COST`] is refused, naming its cost.
//! That refuses "billion laughs" schemas (levels of `allOf` of `$ref`s to the level below).
//! Validation then costs at most that bound per instance node, and instances are bounded by the
//! message and result size limits.

use std::sync::{Arc, OnceLock};

use jsonschema::Validator;
use serde_json::Value;
use serde_json::value::RawValue;

use super::proofs::Proofs;
use crate::engine::Tool;
use crate::protocol::v2026::{HeaderParam, header_params};

/// How many validation errors a message lists.
const MAX_REPORTED: usize = 5;

/// The largest schema accepted, counted in nodes with every local `$ref` expanded. Real tool
/// schemas, even generated ones with hundreds of properties, stay in the low thousands.
pub const MAX_SCHEMA_COST: u64 = 20_000;

/// Build the JSON Schema 2020-12 meta-schema's validator, which checks every schema when it
/// is compiled, on a thread of its own. Called a moment after the start is served (`host`,
/// after the client's opening): a start whose schemas were all [proven](super::proofs) before
/// needs none until a tool is first called, and the validator's 2–4 ms of CPU would otherwise
/// compete with the start's loading, and then with the first answers, on two cores
/// (BENCHMARKS.md, "Against wasmtime's own floor" and "The start's own work, after the
/// client's opening"); a schema compiled at load builds it there (a new plugin, a first
/// start).
pub fn warm_up() {
    let started = std::thread::Builder::new()
        .name("mcpbox-schemas".into())
        .spawn(|| {
            let _ = jsonschema::draft202012::meta::validator();
        });
    if let Err(e) = started {
        tracing::debug!("the meta-schema is built when the first plugin loads: {e}");
    }
}

/// The expanded size of `schema`: nodes counted with each local `$ref` replaced by its target
/// (memoised, so computing it is linear in the schema's text; a `$ref` back into a node being
/// expanded — recursion — counts 1).
pub fn schema_cost(schema: &Value) -> u64 {
    let mut memo = std::collections::HashMap::new();
    let mut stack = Vec::new();
    cost_of(schema, schema, &mut memo, &mut stack)
}

fn cost_of<'a>(
    node: &'a Value,
    root: &'a Value,
    memo: &mut std::collections::HashMap<*const Value, u64>,
    stack: &mut Vec<*const Value>,
) -> u64 {
    let key: *const Value = node;
    if let Some(cost) = memo.get(&key) {
        return *cost;
    }
    if stack.contains(&key) {
        return 1;
    }
    stack.push(key);
    let mut cost: u64 = 1;
    match node {
        Value::Object(map) => {
            for (name, child) in map {
                cost = cost.saturating_add(cost_of(child, root, memo, stack));
                if name == "$ref"
                    && let Some(target) = child.as_str().and_then(|r| resolve(root, r))
                {
                    cost = cost.saturating_add(cost_of(target, root, memo, stack));
                }
            }
        }
        Value::Array(items) => {
            for child in items {
                cost = cost.saturating_add(cost_of(child, root, memo, stack));
            }
        }
        _ => {}
    }
    stack.pop();
    memo.insert(key, cost);
    cost
}

/// The node a local `$ref` (`#/json/pointer`) names in `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    let decoded = percent_decode(pointer);
    root.pointer(&decoded)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One of a tool's schemas: compiled, or proven usable in an earlier run and compiled when
/// first needed ([`super::proofs`]).
struct Schema {
    /// Its text, until compiled (a proven schema's).
    text: Option<Box<str>>,
    /// `input schema` or `output schema`, for messages.
    what: &'static str,
    validator: OnceLock<Result<Validator, String>>,
}

impl Schema {
    /// The compiled validator, compiling a proven schema now; the error says why the schema
    /// is not usable (a proof that was wrong: the call is refused, never run unchecked).
    fn validator(&self) -> Result<&Validator, String> {
        self.validator
            .get_or_init(|| {
                let text = self.text.as_deref().unwrap_or_default();
                let schema: Value = serde_json::from_str(text)
                    .map_err(|e| format!("its {} is not valid JSON: {e}", self.what))?;
                jsonschema::validator_for(&schema)
                    .map_err(|e| format!("its {} is not a usable JSON Schema: {e}", self.what))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// A tool's schemas, compiled (or proven, to compile at first use).
pub struct ToolSchemas {
    input: Schema,
    output: Option<Schema>,
    /// Its arguments clients mirror into `Mcp-Param-*` headers.
    pub headers: Arc<[HeaderParam]>,
}

impl ToolSchemas {
    /// Compile a tool's schemas, or say why one is not a usable JSON Schema. A schema this
    /// process's [proofs](super::proofs) hold is checked for size here and compiled when
    /// first used; one compiled here is recorded in them.
    pub fn compile(tool: &Tool) -> Result<Self, String> {
        Self::compile_with(tool, super::proofs::current())
    }

    /// [`Self::compile`], with the proofs `proofs`.
    pub fn compile_with(tool: &Tool, proofs: Option<&Proofs>) -> Result<Self, String> {
        let compile = |what: &'static str, text: &str| -> Result<Schema, String> {
            let schema: Value = serde_json::from_str(text)
                .map_err(|e| format!("its {what} is not valid JSON: {e}"))?;
            let cost = schema_cost(&schema);
            if cost > MAX_SCHEMA_COST {
                return Err(format!(
                    "its {what} is too complex: {} nodes with its $refs expanded, over the limit of {MAX_SCHEMA_COST}",
                    if cost == u64::MAX {
                        "more than 10^19".to_owned()
                    } else {
                        cost.to_string()
                    }
                ));
            }
            let digest = super::proofs::digest(text);
            if proofs.is_some_and(|proofs| proofs.holds(&digest)) {
                return Ok(Schema {
                    text: Some(text.into()),
                    what,
                    validator: OnceLock::new(),
                });
            }
            let validator = jsonschema::validator_for(&schema)
                .map_err(|e| format!("its {what} is not a usable JSON Schema: {e}"))?;
            if let Some(proofs) = proofs {
                proofs.record(digest);
            }
            Ok(Schema {
                text: None,
                what,
                validator: OnceLock::from(Ok(validator)),
            })
        };
        let headers = serde_json::from_str::<Value>(&tool.input_schema)
            .ok()
            .map(|schema| header_params(&schema))
            .transpose()?
            .unwrap_or_default();
        Ok(Self {
            headers: headers.into(),
            input: compile("input schema", &tool.input_schema)?,
            output: tool
                .output_schema
                .as_deref()
                .map(|s| compile("output schema", s))
                .transpose()?,
        })
    }

    /// Check arguments against the input schema; the problems, if any, as one message.
    /// Arguments of more than [`MAX_ARGUMENT_VALUES`] values are refused before any tree is
    /// built (a tree costs tens of bytes per value, hundreds per small object).
    pub fn check_arguments(&self, tool: &str, arguments: &RawValue) -> Result<(), String> {
        let text = arguments.get();
        if text.len() > MAX_ARGUMENT_VALUES {
            count_values(text, MAX_ARGUMENT_VALUES)
                .map_err(|e| format!("invalid arguments for tool `{tool}`: {e}"))?;
        }
        let value: Value = serde_json::from_str(arguments.get())
            .map_err(|e| format!("invalid arguments for tool `{tool}`: {e}"))?;
        let validator = self
            .input
            .validator()
            .map_err(|e| format!("tool `{tool}` cannot check its arguments: {e}"))?;
        problems(validator, &value).map_err(|p| format!("invalid arguments for tool `{tool}`: {p}"))
    }

    /// Check structured output against the output schema. A tool with an output schema must
    /// return structured content (unless it reports an error).
    pub fn check_output(&self, structured: Option<&str>, is_error: bool) -> Result<(), String> {
        let Some(schema) = &self.output else {
            return Ok(());
        };
        let Some(text) = structured else {
            return if is_error {
                Ok(())
            } else {
                Err("has an output schema but returned no structured content".to_owned())
            };
        };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("returned structured content that is not valid JSON: {e}"))?;
        let validator = schema
            .validator()
            .map_err(|e| format!("cannot check its structured content: {e}"))?;
        problems(validator, &value).map_err(|p| {
            format!("returned structured content that does not match its output schema: {p}")
        })
    }
}

/// The most JSON values (objects, arrays, strings, numbers, booleans, nulls) a tool's
/// arguments may hold.
pub const MAX_ARGUMENT_VALUES: usize = 65_536;

/// Count the values in JSON `text` without building anything, refusing past `most`.
fn count_values(text: &str, most: usize) -> Result<usize, String> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::cell::Cell;

    struct Counter<'a> {
        count: &'a Cell<usize>,
        most: usize,
    }
    impl Counter<'_> {
        fn one<E: serde::de::Error>(&self) -> Result<(), E> {
            self.count.set(self.count.get() + 1);
            if self.count.get() > self.most {
                return Err(E::custom(format!(
                    "more than {} values (the most a tool call may carry)",
                    self.most
                )));
            }
            Ok(())
        }
    }
    impl<'de> DeserializeSeed<'de> for Counter<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Counter<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
            self.one()
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
            self.one()
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
            self.one()
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
            self.one()
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
            self.one()
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
            self.one()
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            self.one()?;
            let (count, most) = (self.count, self.most);
            while seq.next_element_seed(Counter { count, most })?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            self.one()?;
            let (count, most) = (self.count, self.most);
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value_seed(Counter { count, most })?;
            }
            Ok(())
        }
    }
    let count = Cell::new(0);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Counter {
        count: &count,
        most,
    }
    .deserialize(&mut deserializer)
    .map_err(|e| e.to_string())?;
    Ok(count.get())
}

fn problems(validator: &Validator, value: &Value) -> Result<(), String> {
    // The common case first: `is_valid` stops at the first failure and builds no error
    // values, where collecting errors walks the schema allocating as it goes.
    if validator.is_valid(value) {
        return Ok(());
    }
    let mut found: Vec<String> = validator
        .iter_errors(value)
        .take(MAX_REPORTED + 1)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{e} (at {path})")
            }
        })
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    if found.len() > MAX_REPORTED {
        found.truncate(MAX_REPORTED);
        found.push("…".to_owned());
    }
    Err(found.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_without_building_and_bounded() {
        assert_eq!(
            count_values(r#"{"a":[1,2,{"b":null}],"c":"x"}"#, 100),
            Ok(7)
        );
        let many = format!("[{}]", vec!["{}"; 100].join(","));
        assert!(
            count_values(&many, 50)
                .unwrap_err()
                .contains("more than 50 values")
        );
        let schemas = ToolSchemas::compile(&tool(r#"{"type":"object"}"#, None)).unwrap();
        let entries: Vec<String> = (0..40_000)
            .map(|i| format!(r#""k{i}":{{"a":1}}"#))
            .collect();
        let big = raw(&format!("{{{}}}", entries.join(",")));
        let refused = schemas.check_arguments("t", &big).unwrap_err();
        assert!(refused.contains("more than 65536 values"), "{refused}");
    }

    fn tool(input: &str, output: Option<&str>) -> Tool {
        Tool {
            name: "t".into(),
            title: None,
            description: "d".into(),
            input_schema: input.into(),
            output_schema: output.map(str::to_owned),
            annotations: None,
        }
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    const INPUT: &str =
        r#"{"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}"#;
    const OUTPUT: &str = r#"{"type":"object","required":["n"]}"#;

    #[test]
    fn schemas_compiled_at_load_are_recorded_as_proven() {
        let dir = tempfile::tempdir().unwrap();
        let proofs = Proofs::open(dir.path());
        let schemas = ToolSchemas::compile_with(&tool(INPUT, Some(OUTPUT)), Some(&proofs)).unwrap();
        assert!(schemas.input.validator.get().is_some(), "compiled at load");
        assert!(proofs.holds(&super::super::proofs::digest(INPUT)));
        assert!(proofs.holds(&super::super::proofs::digest(OUTPUT)));
        // A schema that does not compile is refused at load, and not recorded.
        let bad = r#"{"type":"object","minProperties":"two"}"#;
        let refused = ToolSchemas::compile_with(&tool(bad, None), Some(&proofs))
            .err()
            .unwrap();
        assert!(refused.contains("not a usable JSON Schema"), "{refused}");
        assert!(!proofs.holds(&super::super::proofs::digest(bad)));
    }

    #[test]
    fn proven_schemas_compile_at_first_use_and_still_check() {
        let dir = tempfile::tempdir().unwrap();
        let proofs = Proofs::open(dir.path());
        proofs.record(super::super::proofs::digest(INPUT));
        proofs.record(super::super::proofs::digest(OUTPUT));
        let schemas = ToolSchemas::compile_with(&tool(INPUT, Some(OUTPUT)), Some(&proofs)).unwrap();
        assert!(
            schemas.input.validator.get().is_none(),
            "not compiled at load"
        );
        assert!(schemas.check_arguments("t", &raw(r#"{"a": 1}"#)).is_ok());
        let wrong = schemas
            .check_arguments("t", &raw(r#"{"a": "one"}"#))
            .unwrap_err();
        assert!(wrong.contains("invalid arguments for tool `t`"), "{wrong}");
        assert!(schemas.check_output(Some(r#"{"n": 1}"#), false).is_ok());
        assert!(schemas.check_output(Some("{}"), false).is_err());
        // Too complex is refused at load even when proven: the bound is checked every time.
        let deep = format!(
            r##"{{"$defs":{{{}}},"$ref":"#/$defs/d30"}}"##,
            (0..=30)
                .map(|i| if i == 0 {
                    r#""d0":{"type":"string"}"#.to_owned()
                } else {
                    format!(
                        r##""d{i}":{{"allOf":[{{"$ref":"#/$defs/d{p}"}},{{"$ref":"#/$defs/d{p}"}}]}}"##,
                        p = i - 1
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        );
        proofs.record(super::super::proofs::digest(&deep));
        let refused = ToolSchemas::compile_with(&tool(&deep, None), Some(&proofs))
            .err()
            .unwrap();
        assert!(refused.contains("too complex"), "{refused}");
    }

    #[test]
    fn a_false_proof_refuses_the_call_never_skips_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let proofs = Proofs::open(dir.path());
        let bad = r#"{"type":"object","minProperties":"two"}"#;
        proofs.record(super::super::proofs::digest(bad));
        let schemas = ToolSchemas::compile_with(&tool(bad, None), Some(&proofs)).unwrap();
        for _ in 0..2 {
            let refused = schemas.check_arguments("t", &raw("{}")).unwrap_err();
            assert!(
                refused.contains("tool `t` cannot check its arguments")
                    && refused.contains("not a usable JSON Schema"),
                "{refused}"
            );
        }
    }

    #[test]
    fn arguments_are_checked_against_2020_12_schemas() {
        let schemas = ToolSchemas::compile(&tool(
            r#"{"type":"object","properties":{"a":{"type":"number"}},"required":["a"],"additionalProperties":false,
                "$defs":{"x":{"$anchor":"ax","type":"string"}}}"#,
            None,
        ))
        .unwrap();
        assert!(schemas.check_arguments("t", &raw(r#"{"a": 1}"#)).is_ok());
        let e = schemas
            .check_arguments("t", &raw(r#"{"a": "one"}"#))
            .unwrap_err();
        assert!(
            e.starts_with("invalid arguments for tool `t`: ") && e.contains("/a"),
            "{e}"
        );
        assert!(
            schemas
                .check_arguments("t", &raw("{}"))
                .unwrap_err()
                .contains("required")
        );
        assert!(
            schemas
                .check_arguments("t", &raw(r#"{"a":1,"b":2}"#))
                .is_err()
        );
    }

    #[test]
    fn structured_output_is_checked() {
        let schemas = ToolSchemas::compile(&tool(
            r#"{"type":"object"}"#,
            Some(r#"{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}"#),
        ))
        .unwrap();
        assert!(schemas.check_output(Some(r#"{"sum": 3}"#), false).is_ok());
        assert!(
            schemas
                .check_output(Some(r#"{"total": 3}"#), false)
                .unwrap_err()
                .contains("does not match")
        );
        assert!(
            schemas
                .check_output(None, false)
                .unwrap_err()
                .contains("no structured content")
        );
        assert!(schemas.check_output(None, true).is_ok());
    }

    /// A schema of `levels` levels, each an `allOf` of two `$ref`s to the level below.
    fn bomb(levels: u32) -> String {
        let mut defs = serde_json::Map::new();
        defs.insert("l0".into(), serde_json::json!({"type": "object"}));
        for level in 1..=levels {
            let below = format!("#/$defs/l{}", level - 1);
            defs.insert(
                format!("l{level}"),
                serde_json::json!({"allOf": [{"$ref": below}, {"$ref": below}]}),
            );
        }
        serde_json::json!({"$defs": defs, "$ref": format!("#/$defs/l{levels}")}).to_string()
    }

    #[test]
    fn schema_bombs_are_refused_at_load_and_recursion_is_fine() {
        let error = ToolSchemas::compile(&tool(r#"{"type":"object"}"#, Some(&bomb(48))))
            .err()
            .unwrap();
        assert!(error.contains("output schema is too complex"), "{error}");
        assert!(ToolSchemas::compile(&tool(&bomb(48), None)).is_err());
        assert!(schema_cost(&serde_json::from_str(&bomb(3)).unwrap()) < 200);
        let tree = r##"{"type":"object","$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"properties":{"root":{"$ref":"#/$defs/node"}}}"##;
        let schemas = ToolSchemas::compile(&tool(tree, None)).unwrap();
        assert!(
            schemas
                .check_arguments("t", &raw(r#"{"root":{"children":[{"children":[]}]}}"#))
                .is_ok()
        );
    }

    #[test]
    fn unusable_schemas_are_refused() {
        assert!(ToolSchemas::compile(&tool(r#"{"type": 5}"#, None)).is_err());
        assert!(
            ToolSchemas::compile(&tool(r#"{"$ref": "https://example.com/s.json"}"#, None)).is_err()
        );
    }
}
