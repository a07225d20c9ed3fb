//! Asking the user with form elicitation, and reading their answer. The question shows the
//! plugin, the reference and digest, the signer, every grant (each a box the user may untick),
//! the limits, the manifest's other keys copied (its title, naming, tasks, instances), what
//! the ceiling removed and what the caller's arguments left out or asked for
//! in vain; the one required field is the confirmation. Only `accept` with the confirmation
//! ticked is an accept; the grants approved are those the user left ticked (a grant the client
//! does not send back is not approved).
//!
//! On 2026-07-28 the question is an input request keyed by its consent id
//! (`mcpbox-install-ID`): an answer given to another offer (a tag moved, a ceiling changed)
//! answers another key, so the user is asked anew.

use serde_json::{Map, Value, json};

use super::grants::{Grant, Offer};
use crate::server::{INPUT_KEY_META, RequestContext, ServerRequest};

/// The most characters of an author's text (a title, a value) shown in a question.
const MAX_SHOWN_CHARS: usize = 200;

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Accepted, with these grants ticked.
    Accept(Vec<Grant>),
    /// Declined (or accepted without ticking the confirmation).
    Decline,
    /// Cancelled.
    Cancel,
    /// The client is being asked (a 2026-07-28 round ends with `input_required`).
    Asked,
    /// The client could not be asked, or its answer is not one: why.
    Failed(String),
}

/// The text `text` made safe to show: control characters replaced, at most
/// [`MAX_SHOWN_CHARS`].
pub fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_SHOWN_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().count() > MAX_SHOWN_CHARS {
        out.push('…');
    }
    out
}

/// The property of grant `index` in the form.
fn grant_field(index: usize) -> String {
    format!("grant_{}", index + 1)
}

/// What an install asks.
pub fn install_question(offer: &Offer, changed: bool) -> (String, Value) {
    let mut lines = Vec::new();
    if changed {
        lines.push(
            "The artifact or its grants changed since you were asked: nothing was installed. Here is what it is now."
                .to_owned(),
        );
    }
    lines.push(format!(
        "Install the plugin `{}` from {}?",
        offer.name,
        shown(&offer.reference)
    ));
    lines.push(format!("Digest: {}", offer.digest));
    if let Some(installed) = &offer.replaces {
        lines.push(format!(
            "It replaces the `{}` installed now ({installed}).",
            offer.name
        ));
    }
    lines.push(match &offer.signer {
        Some((signer, key)) => format!("Signed by `{signer}` (key {key})"),
        None => "Not signed (the operator's signature policy does not require it)".to_owned(),
    });
    if offer.capped.grants.is_empty() {
        lines.push("It would be granted nothing beyond computing on its arguments.".to_owned());
    } else {
        lines.push("It would be granted:".to_owned());
        for (i, grant) in offer.capped.grants.iter().enumerate() {
            lines.push(format!("  {}. {}", i + 1, shown(&grant.describe())));
        }
    }
    if !offer.capped.limits.is_empty() {
        let limits: Vec<String> = offer
            .capped
            .limits
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        lines.push(format!("Limits: {}", limits.join(", ")));
    }
    if !offer.capped.kept.is_empty() {
        lines.push("Also set by its manifest (as capped):".to_owned());
        for (key, value) in &offer.capped.kept {
            lines.push(format!("  - {}", shown(&format!("{key} = {value}"))));
        }
    }
    if !offer.capped.removed.is_empty() {
        lines.push("The operator's ceiling removed:".to_owned());
        for removed in &offer.capped.removed {
            lines.push(format!("  - {}", shown(removed)));
        }
    }
    if !offer.left_out.is_empty() {
        lines.push("Left out at the request's asking:".to_owned());
        for left in &offer.left_out {
            lines.push(format!("  - {}", shown(left)));
        }
    }
    if !offer.ignored.is_empty() {
        lines.push("The request named grants the plugin is not offered (ignored):".to_owned());
        for ignored in &offer.ignored {
            lines.push(format!("  - {}", shown(ignored)));
        }
    }
    lines.push(
        "Untick a grant to install without it. Nothing is installed unless you tick the confirmation and accept."
            .to_owned(),
    );
    let mut properties = Map::new();
    for (i, grant) in offer.capped.grants.iter().enumerate() {
        properties.insert(
            grant_field(i),
            json!({
                "type": "boolean",
                "title": shown(&grant.describe()),
                "default": true,
            }),
        );
    }
    let short = offer.digest.get(..19).unwrap_or(&offer.digest);
    properties.insert(
        "confirm".to_owned(),
        json!({
            "type": "boolean",
            "title": format!("Install {} ({short}…) with the grants ticked", offer.name),
            "default": false,
        }),
    );
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": ["confirm"],
    });
    (lines.join("\n"), schema)
}

/// What a removal asks.
pub fn remove_question(name: &str, reference: &str, digest: &str) -> (String, Value) {
    let message = format!(
        "Remove the plugin `{name}` ({}, {digest})? Its tools stop being served to every client. Nothing is removed unless you tick the confirmation and accept.",
        shown(reference)
    );
    let schema = json!({
        "type": "object",
        "properties": {
            "confirm": {"type": "boolean", "title": format!("Remove {name}"), "default": false}
        },
        "required": ["confirm"],
    });
    (message, schema)
}

/// Ask the client of `ctx` `message` with `schema`, keyed `key` on 2026-07-28; the grants of
/// `offered` are those the form's `grant_N` boxes stand for.
pub async fn ask(
    ctx: &RequestContext,
    key: &str,
    message: String,
    schema: Value,
    offered: &[Grant],
) -> Answer {
    let mut params = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema,
    });
    if ctx.is_v2026() {
        params["_meta"] = json!({ INPUT_KEY_META: key });
    }
    let Ok(params) = serde_json::value::to_raw_value(&params) else {
        return Answer::Failed("could not write the question".to_owned());
    };
    let answer = match ctx.request(ServerRequest::Elicitation, &params).await {
        Ok(answer) => answer,
        Err(_) if ctx.is_v2026() && ctx.asked_client() => return Answer::Asked,
        Err(why) => return Answer::Failed(why),
    };
    read_answer(answer.get(), offered)
}

/// Read the client's answer `raw` to a question offering `offered`.
pub fn read_answer(raw: &str, offered: &[Grant]) -> Answer {
    let Ok(answer) = serde_json::from_str::<Value>(raw) else {
        return Answer::Failed("the client's answer is not JSON".to_owned());
    };
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => {}
        Some("decline") => return Answer::Decline,
        Some("cancel") => return Answer::Cancel,
        _ => return Answer::Failed("the client's answer has no known action".to_owned()),
    }
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    if content.get("confirm") != Some(&Value::Bool(true)) {
        return Answer::Decline;
    }
    let approved = offered
        .iter()
        .enumerate()
        .filter(|(i, _)| content.get(grant_field(*i)) == Some(&Value::Bool(true)))
        .map(|(_, g)| g.clone())
        .collect();
    Answer::Accept(approved)
}
