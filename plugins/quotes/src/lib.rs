//! Example resource plugin: a list of quotes at `quote://all`, each quote at `quote://{id}`
//! (a resource template), and a binary resource, `quote://cover.png`.

use mcpbox_sdk::{
    Blob, Completions, Deserialize, Plugin, ResourceInfo, ResourceTemplate, Resources,
};

const COVER_PNG: &[u8] = include_bytes!("../assets/cover.png");

const QUOTES: &[(&str, &str)] = &[
    (
        "Simplicity is prerequisite for reliability.",
        "Edsger W. Dijkstra",
    ),
    ("Make it work, make it right, make it fast.", "Kent Beck"),
    (
        "Premature optimization is the root of all evil.",
        "Donald Knuth",
    ),
    (
        "Programs must be written for people to read.",
        "Harold Abelson",
    ),
    (
        "The cheapest, fastest, and most reliable components are those that aren't there.",
        "Gordon Bell",
    ),
];

/// The variables of `quote://{id}`.
#[derive(Deserialize)]
struct QuoteId {
    id: String,
}

fn quote(QuoteId { id }: QuoteId) -> Option<String> {
    let index: usize = id.parse().ok()?;
    let (text, author) = QUOTES.get(index.checked_sub(1)?)?;
    Some(format!("“{text}” — {author}"))
}

fn all_quotes() -> String {
    QUOTES
        .iter()
        .enumerate()
        .map(|(i, (text, author))| format!("{}. “{text}” — {author}\n", i + 1))
        .collect()
}

struct Quotes;

impl Plugin for Quotes {
    fn resources(resources: &mut Resources) {
        resources
            .add(
                ResourceInfo::new("quote://all", "all-quotes")
                    .title("All quotes")
                    .description("Every quote, numbered")
                    .mime_type("text/plain"),
                all_quotes,
            )
            .add(
                ResourceInfo::new("quote://cover.png", "cover")
                    .description("A tiny cover image")
                    .mime_type("image/png")
                    .size(COVER_PNG.len() as u64),
                || Blob(COVER_PNG.to_vec()),
            )
            .template(
                ResourceTemplate::new("quote://{id}", "quote")
                    .title("One quote")
                    .description("The quote with this number, from 1")
                    .mime_type("text/plain"),
                quote,
            );
    }

    fn completions(completions: &mut Completions) {
        completions.template_variable("quote://{id}", "id", |typed| {
            (1..=QUOTES.len())
                .map(|i| i.to_string())
                .filter(|id| id.starts_with(typed))
                .collect()
        });
    }
}

mcpbox_sdk::export!(Quotes);
