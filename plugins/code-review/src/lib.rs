//! Example prompt plugin: `code_review`, a prompt with a required `language` argument, and
//! completion of that argument; and the `code-review` skill (`skills/code-review/`), shipped
//! in the component with one line.

use mcpbox_sdk::{Completions, Deserialize, JsonSchema, Plugin, Prompt, PromptMessage, Prompts};

/// Languages the `language` argument completes to.
const LANGUAGES: &[&str] = &[
    "c",
    "c++",
    "c#",
    "go",
    "haskell",
    "java",
    "javascript",
    "kotlin",
    "python",
    "ruby",
    "rust",
    "scala",
    "swift",
    "typescript",
    "zig",
];

/// Arguments of `code_review`.
#[derive(Deserialize, JsonSchema)]
struct ReviewArgs {
    /// The programming language of the code.
    language: String,
    /// What to pay most attention to, such as "performance" or "error handling".
    focus: Option<String>,
}

fn review(args: ReviewArgs) -> Result<Vec<PromptMessage>, String> {
    let language = args.language.trim();
    if language.is_empty() {
        return Err("`language` must not be empty".to_owned());
    }
    let focus = args
        .focus
        .filter(|f| !f.trim().is_empty())
        .map(|f| format!(" Pay particular attention to {}.", f.trim()))
        .unwrap_or_default();
    Ok(vec![
        PromptMessage::user(format!(
            "Please review the following {language} code. Point out bugs, unclear names and \
             unidiomatic {language}, and suggest concrete fixes.{focus}"
        )),
        PromptMessage::assistant(format!(
            "Happy to. Paste the {language} code and I will go through it."
        )),
    ])
}

struct CodeReview;

impl Plugin for CodeReview {
    fn prompts(prompts: &mut Prompts) {
        prompts.add(
            Prompt::new("code_review", "Ask the model for a careful code review")
                .title("Code review"),
            review,
        );
    }

    fn completions(completions: &mut Completions) {
        completions.prompt_argument("code_review", "language", |typed| {
            let typed = typed.to_ascii_lowercase();
            LANGUAGES
                .iter()
                .filter(|l| l.starts_with(&typed))
                .map(|l| (*l).to_owned())
                .collect()
        });
    }
}

mcpbox_sdk::export!(CodeReview);

// The skills under `skills/` (each a directory holding a SKILL.md) go into the component.
mcpbox_sdk::skills!("skills");
