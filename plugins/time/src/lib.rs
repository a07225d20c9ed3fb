//! The reference server `mcp-server-time` (PyPI), as an mcpbox plugin: `get_current_time` and
//! `convert_time` over IANA time zones, with the original's names, descriptions, input and
//! output schemas, annotations, results (structured content, and the same JSON as text) and
//! error texts.
//!
//! The original reads the host's time zone database and guesses the local zone from the
//! host. This plugin carries the IANA database inside the component (jiff's bundled copy) and
//! reads nothing of the host but the clock (`wasi:clocks`); the local zone the descriptions
//! name is the operator's `local-timezone` configuration key (UTC without one), as the
//! original's `--local-timezone`. jiff's copy is the database's rearguard data; `is_dst` is
//! still the original's, read from the main data ([`dst`]).

mod dst;

use mcpbox_sdk::serde_json::{self, Value, json};
use mcpbox_sdk::{Deserialize, JsonSchema, Plugin, Serialize, Tool, ToolResult, Tools, config};

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{self, TimeZone};
use jiff::{Timestamp, Zoned};

/// A time in a zone, as the original reports it.
#[derive(Serialize)]
struct TimeResult {
    timezone: String,
    datetime: String,
    day_of_week: String,
    is_dst: bool,
}

/// A conversion, as the original reports it.
#[derive(Serialize)]
struct TimeConversionResult {
    source: TimeResult,
    target: TimeResult,
    time_difference: String,
}

/// `get_current_time`'s arguments (the schema served is the original's, below).
#[derive(Deserialize, JsonSchema)]
struct CurrentArgs {
    timezone: String,
}

/// `convert_time`'s arguments.
#[derive(Deserialize, JsonSchema)]
struct ConvertArgs {
    source_timezone: String,
    time: String,
    target_timezone: String,
}

/// The local zone the descriptions name: the operator's `local-timezone`, else UTC.
fn local_zone() -> String {
    config::get("local-timezone")
        .ok()
        .flatten()
        .filter(|name| zone(name).is_ok())
        .unwrap_or_else(|| "UTC".to_owned())
}

/// A zone description, as the original words it.
fn zone_description(prefix: &str, examples: &str, local: &str, which: &str) -> String {
    format!(
        "{prefix}IANA timezone name (e.g., {examples}). Use '{local}' as local timezone if no {which}timezone provided by the user."
    )
}

/// The original's input schema of `get_current_time`.
fn current_input(local: &str) -> Value {
    json!({
        "properties": {
            "timezone": {
                "description": zone_description("", "'America/New_York', 'Europe/London'", local, ""),
                "title": "Timezone",
                "type": "string",
            }
        },
        "required": ["timezone"],
        "type": "object",
        "title": "get_current_timeArguments",
    })
}

/// The original's input schema of `convert_time`.
fn convert_input(local: &str) -> Value {
    json!({
        "properties": {
            "source_timezone": {
                "description": zone_description("Source ", "'America/New_York', 'Europe/London'", local, "source "),
                "title": "Source Timezone",
                "type": "string",
            },
            "time": {
                "description": "Time to convert in 24-hour format (HH:MM)",
                "title": "Time",
                "type": "string",
            },
            "target_timezone": {
                "description": zone_description("Target ", "'Asia/Tokyo', 'America/San_Francisco'", local, "target "),
                "title": "Target Timezone",
                "type": "string",
            },
        },
        "required": ["source_timezone", "time", "target_timezone"],
        "type": "object",
        "title": "convert_timeArguments",
    })
}

/// The schema of a [`TimeResult`], as the original publishes it.
fn time_result_schema() -> Value {
    json!({
        "properties": {
            "timezone": { "title": "Timezone", "type": "string" },
            "datetime": { "title": "Datetime", "type": "string" },
            "day_of_week": { "title": "Day Of Week", "type": "string" },
            "is_dst": { "title": "Is Dst", "type": "boolean" },
        },
        "required": ["timezone", "datetime", "day_of_week", "is_dst"],
        "title": "TimeResult",
        "type": "object",
    })
}

/// The original's output schema of `convert_time`.
fn conversion_schema() -> Value {
    json!({
        "properties": {
            "source": { "$ref": "#/$defs/TimeResult" },
            "target": { "$ref": "#/$defs/TimeResult" },
            "time_difference": { "title": "Time Difference", "type": "string" },
        },
        "required": ["source", "target", "time_difference"],
        "type": "object",
        "$defs": { "TimeResult": time_result_schema() },
        "title": "TimeConversionResult",
    })
}

/// What Python's `posixpath.normpath` makes of a relative key.
fn normpath(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// The zone named exactly `name` (an IANA key, case and all), or the original's reason why
/// not (zoneinfo's own wording: it checks a key as a path before looking it up).
fn zone(name: &str) -> Result<TimeZone, String> {
    if name.starts_with('/') {
        return Err(format!(
            "ZoneInfo keys may not be absolute paths, got: {name}"
        ));
    }
    let normal = normpath(name);
    if normal.len() != name.len() {
        return Err(format!(
            "ZoneInfo keys must be normalized relative paths, got: {name}"
        ));
    }
    if normal == ".." || normal.starts_with("../") {
        return Err(format!(
            "ZoneInfo keys must refer to subdirectories of TZPATH, got: {name}"
        ));
    }
    if name.contains('\0') {
        return Err("embedded null byte".to_owned());
    }
    // The database looks names up without regard to case; only the exact key is one.
    if let Ok(zone) = tz::db().get(name)
        && zone.iana_name() == Some(name)
    {
        return Ok(zone);
    }
    {
        // A key naming a directory of the database (`America`) is a directory to zoneinfo.
        let directory = format!("{name}/");
        if tz::db()
            .available()
            .any(|key| key.as_str().starts_with(&directory))
        {
            return Err(format!("[Errno 21] Is a directory: '{name}'"));
        }
        Err(format!("'No time zone found with key {name}'"))
    }
}

/// `zone`, failing as the original's tools do.
fn zone_or_error(name: &str) -> Result<TimeZone, String> {
    zone(name).map_err(|why| format!("Invalid timezone: {why}"))
}

/// A time as `datetime.strptime(text, "%H:%M")` reads it: hours `2[0-3]|[0-1]\d|\d`, a colon,
/// minutes `[0-5]\d|\d`, the first match taken, nothing after it.
fn parse_time(text: &str) -> Option<Time> {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).filter(|c| c.is_ascii_digit()).map(|c| c - b'0');
    // Each alternative: (value, length), in the regex's order.
    let hours = [
        (b.first() == Some(&b'2'))
            .then(|| digit(1).filter(|d| *d <= 3).map(|d| (20 + d, 2)))
            .flatten(),
        digit(0)
            .filter(|d| *d <= 1)
            .and_then(|h| digit(1).map(|d| (h * 10 + d, 2))),
        digit(0).map(|h| (h, 1)),
    ];
    for (hour, at) in hours.into_iter().flatten() {
        if b.get(at) != Some(&b':') {
            continue;
        }
        let m = at + 1;
        let minutes = [
            digit(m)
                .filter(|d| *d <= 5)
                .and_then(|t| digit(m + 1).map(|d| (t * 10 + d, 2))),
            digit(m).map(|d| (d, 1)),
        ];
        if let Some((minute, len)) = minutes.into_iter().flatten().next() {
            if m + len != b.len() {
                return None;
            }
            return Time::new(i8::try_from(hour).ok()?, i8::try_from(minute).ok()?, 0, 0).ok();
        }
    }
    None
}

/// `datetime.isoformat(timespec="seconds")`: `2026-11-26T11:30:00+09:00`.
fn iso(zoned: &Zoned) -> String {
    let offset = zoned.offset().seconds();
    let sign = if offset < 0 { '-' } else { '+' };
    let offset = offset.unsigned_abs();
    let (h, m, s) = (offset / 3600, offset % 3600 / 60, offset % 60);
    let suffix = if s == 0 {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    };
    format!("{}{suffix}", zoned.datetime().strftime("%Y-%m-%dT%H:%M:%S"))
}

fn time_result(name: &str, zoned: &Zoned) -> TimeResult {
    TimeResult {
        timezone: name.to_owned(),
        datetime: iso(zoned),
        day_of_week: zoned.strftime("%A").to_string(),
        is_dst: dst::is_dst(
            name,
            zoned.timestamp(),
            zoned
                .time_zone()
                .to_offset_info(zoned.timestamp())
                .dst()
                .is_dst(),
        ),
    }
}

/// The result: the structured content, and the same as JSON indented by two as text.
fn result(value: &impl Serialize) -> Result<ToolResult, String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    let structured = serde_json::to_string(value).map_err(|e| e.to_string())?;
    Ok(ToolResult::text(text).with_structured(structured))
}

/// An empty zone name is reported as missing, as the original does.
fn require(name: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("Missing required argument: {name}"));
    }
    Ok(())
}

fn get_current_time(CurrentArgs { timezone }: &CurrentArgs) -> Result<ToolResult, String> {
    require("timezone", timezone)?;
    let zone = zone_or_error(timezone)?;
    let now = Timestamp::now().to_zoned(zone);
    result(&time_result(timezone, &now))
}

/// `+9.0h`, `-3.5h`, `+5.75h`: Python's `f"{h:+.1f}h"` for whole hours, else `f"{h:+.2f}"`
/// without trailing zeros.
fn difference(seconds: i32) -> String {
    let hours = f64::from(seconds) / 3600.0;
    if hours.fract() == 0.0 {
        format!("{hours:+.1}h")
    } else {
        let text = format!("{hours:+.2}");
        format!("{}h", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

fn convert_time(args: &ConvertArgs) -> Result<ToolResult, String> {
    require("source_timezone", &args.source_timezone)?;
    require("target_timezone", &args.target_timezone)?;
    let source_zone = zone_or_error(&args.source_timezone)?;
    let target_zone = zone_or_error(&args.target_timezone)?;
    let time = parse_time(&args.time)
        .ok_or_else(|| "Invalid time format. Expected HH:MM [24-hour format]".to_owned())?;
    let today: Date = Timestamp::now().to_zoned(source_zone.clone()).date();
    let local = DateTime::from_parts(today, time);
    // The earlier of two readings of an hour a clock change repeats (Python's `fold=0`); an
    // hour it skips does not exist.
    let ambiguous = source_zone.to_ambiguous_zoned(local);
    if matches!(ambiguous.offset(), tz::AmbiguousOffset::Gap { .. }) {
        return Err(format!(
            "Invalid time: {} does not exist in {} on {today} (skipped by a clock change)",
            args.time, args.source_timezone
        ));
    }
    let source = ambiguous.earlier().map_err(|e| e.to_string())?;
    let target = source.with_time_zone(target_zone);
    let seconds = target.offset().seconds() - source.offset().seconds();
    result(&TimeConversionResult {
        source: time_result(&args.source_timezone, &source),
        target: time_result(&args.target_timezone, &target),
        time_difference: difference(seconds),
    })
}

/// The original's annotations: read-only, not destructive, idempotent, closed world.
fn read_only(tool: Tool) -> Tool {
    tool.read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// Failures read as the original's: `Error executing tool NAME: …`.
fn answer(name: &str, outcome: Result<ToolResult, String>) -> ToolResult {
    outcome.unwrap_or_else(|why| ToolResult::error(format!("Error executing tool {name}: {why}")))
}

struct TimeServer;

impl Plugin for TimeServer {
    fn tools(tools: &mut Tools) {
        // The descriptions (which name the local zone) are built only when tools are listed.
        tools
            .add_with(
                "get_current_time",
                || {
                    read_only(
                        Tool::new(
                            "get_current_time",
                            "Get current time in a specific timezone",
                        )
                        .input_schema(current_input(&local_zone()).to_string())
                        .output_schema(time_result_schema().to_string()),
                    )
                },
                |args: CurrentArgs| answer("get_current_time", get_current_time(&args)),
            )
            .add_with(
                "convert_time",
                || {
                    read_only(
                        Tool::new("convert_time", "Convert time between timezones")
                            .input_schema(convert_input(&local_zone()).to_string())
                            .output_schema(conversion_schema().to_string()),
                    )
                },
                |args: ConvertArgs| answer("convert_time", convert_time(&args)),
            );
    }
}

mcpbox_sdk::export!(TimeServer);
