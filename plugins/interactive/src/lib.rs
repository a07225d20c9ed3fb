//! Example plugin that talks back to the client while it works: a long task that reports
//! progress and logs and stops when cancelled, tools that ask the client's model (sampling)
//! and user (elicitation) and read the client's roots, and a prompt whose argument completes.

use std::time::Duration;

use mcpbox_sdk::serde_json::{Value, json};
use mcpbox_sdk::{
    Completions, Deserialize, JsonSchema, NoArgs, Plugin, Prompt, Prompts, Tool, Tools, host,
};

/// Arguments of `countdown`.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
struct Countdown {
    /// How many steps, 1 to 1000.
    #[schemars(range(min = 1, max = 1000))]
    steps: u32,
    /// Pause after each step, in milliseconds (at most 1000).
    #[serde(default)]
    #[schemars(range(max = 1000))]
    delay_ms: u32,
}

fn countdown(Countdown { steps, delay_ms }: Countdown) -> String {
    for step in 1..=steps {
        if host::cancelled() {
            host::warn(&format!("cancelled at step {step} of {steps}"));
            return format!("cancelled after {} of {steps} steps", step - 1);
        }
        host::info(&format!("step {step} of {steps}"));
        host::progress(
            f64::from(step),
            Some(f64::from(steps)),
            Some(&format!("step {step} of {steps}")),
        );
        if delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(u64::from(delay_ms)));
        }
    }
    format!("done after {steps} steps")
}

/// Arguments of `summarize`.
#[derive(Deserialize, JsonSchema)]
struct Summarize {
    /// The text to summarize.
    text: String,
}

fn summarize(Summarize { text }: Summarize) -> Result<String, String> {
    let request = json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": format!("Summarize in one sentence:\n\n{text}") } }],
        "maxTokens": 200,
    });
    let answer = host::sample(&request)?;
    let summary = answer["content"]["text"]
        .as_str()
        .ok_or("the client's answer had no text")?;
    Ok(format!("Summary: {summary}"))
}

/// Arguments of `confirm`.
#[derive(Deserialize, JsonSchema)]
struct Confirm {
    /// The question to put to the user.
    question: String,
}

fn confirm(Confirm { question }: Confirm) -> Result<String, String> {
    let request = json!({
        "message": question,
        "requestedSchema": {
            "type": "object",
            "properties": { "confirm": { "type": "boolean", "description": "Yes or no" } },
            "required": ["confirm"],
        },
    });
    let answer = host::elicit(&request)?;
    let action = answer["action"].as_str().unwrap_or("unknown");
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    Ok(format!("action={action}, content={content}"))
}

fn roots(_: NoArgs) -> Result<String, String> {
    let answer = host::list_roots()?;
    let uris: Vec<&str> = answer["roots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    Ok(format!("{} root(s): {}", uris.len(), uris.join(", ")))
}

/// Arguments of the `translate` prompt.
#[derive(Deserialize, JsonSchema)]
struct Translate {
    /// The language to translate into.
    language: String,
    /// The text to translate.
    text: String,
}

const LANGUAGES: &[&str] = &[
    "Dutch",
    "English",
    "French",
    "German",
    "Greek",
    "Italian",
    "Japanese",
    "Portuguese",
    "Spanish",
];

struct Interactive;

impl Plugin for Interactive {
    fn tools(tools: &mut Tools) {
        tools
            .add(
                Tool::new(
                    "countdown",
                    "Count through steps, reporting progress; stops when cancelled",
                )
                .read_only(true),
                countdown,
            )
            .add(
                Tool::new(
                    "summarize",
                    "Summarize text with the client's model (sampling)",
                ),
                summarize,
            )
            .add(
                Tool::new("confirm", "Ask the user a yes/no question (elicitation)"),
                confirm,
            )
            .add(
                Tool::new("roots", "List the client's roots").read_only(true),
                roots,
            );
    }

    fn prompts(prompts: &mut Prompts) {
        prompts.add(
            Prompt::new("translate", "Translate text into another language"),
            |t: Translate| {
                format!(
                    "Translate the following text into {}:\n\n{}",
                    t.language, t.text
                )
            },
        );
    }

    fn completions(completions: &mut Completions) {
        completions.prompt_argument("translate", "language", |typed| {
            let typed = typed.to_lowercase();
            LANGUAGES
                .iter()
                .filter(|l| l.to_lowercase().starts_with(&typed))
                .map(|l| (*l).to_owned())
                .collect()
        });
    }
}

mcpbox_sdk::export!(Interactive);
