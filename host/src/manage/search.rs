//! `mcpbox_search_plugins`: the words of a query matched against what the operator's sources
//! offer and against the tools installed that the caller may see. A source's artifacts are
//! its repository's tags (at most `registry::install::MAX_TAGS` each; at most
//! [`MAX_ARTIFACTS`] a search, within [`MAX_SEARCH_TIME`] for all its registry reads
//! together, the result saying what was left out), and a source
//! `REGISTRY/PATH/*` stands for the repositories the registry's catalog lists under PATH
//! (`registry::index`, bounded; a registry that does not serve its catalog to mcpbox is named
//! in the result, and the other sources are still searched). Each artifact is known by its
//! manifest: the repository's name, the description and the tools `mcpbox push` wrote into
//! its annotations (listed on the author's machine; nothing is run here). Installed tools
//! come from the catalog as the caller sees it (`PluginSet::visible_to`): a tool the caller's
//! scopes hide is never matched.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::consent::shown;
use super::tools::{MAX_QUERY_CHARS, MAX_RESULTS};
use super::{Installs, done, failed};
use crate::registry::install::{DESCRIPTION_ANNOTATION, TOOLS_ANNOTATION};
use crate::server::{MethodResult, RequestContext};

/// The most words of a query used.
const MAX_WORDS: usize = 8;
/// The most artifacts one search reads.
const MAX_ARTIFACTS: usize = 100;
/// The longest one search takes, all its registry reads together: what is not read by then
/// is left out, and the result says so.
pub(super) const MAX_SEARCH_TIME: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    query: String,
    limit: Option<usize>,
}

/// The query's words: lower case, letters and digits, at least two characters, distinct.
pub fn words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2)
    {
        if !words.contains(&word) {
            words.push(word);
        }
        if words.len() == MAX_WORDS {
            break;
        }
    }
    words
}

/// How many of `words` occur in `text` (lower case).
fn score(words: &[String], text: &str) -> usize {
    let text = text.to_lowercase();
    words.iter().filter(|w| text.contains(w.as_str())).count()
}

pub(super) async fn search(
    installs: &Installs,
    arguments: &RawValue,
    ctx: &RequestContext,
) -> MethodResult {
    let args: Arguments = match serde_json::from_str(arguments.get()) {
        Ok(args) => args,
        Err(e) => return failed(&format!("invalid arguments for the search: {e}")),
    };
    if args.query.chars().count() > MAX_QUERY_CHARS {
        return failed(&format!("a query is at most {MAX_QUERY_CHARS} characters"));
    }
    let words = words(&args.query);
    if words.is_empty() {
        return failed("the query has no word to look for");
    }
    let limit = args.limit.unwrap_or(10).clamp(1, MAX_RESULTS);
    let mut found: Vec<(usize, Value)> = Vec::new();

    for plugin in installs.plugins.visible_to(ctx.caller()) {
        for (tool, description) in &plugin.tools {
            let hits = score(&words, &format!("{tool} {description} {}", plugin.name));
            if hits > 0 {
                found.push((
                    hits,
                    json!({"installed": true, "plugin": plugin.name, "tool": tool,
                        "description": shown(description)}),
                ));
            }
        }
    }

    let mut read = 0usize;
    let mut unreachable = Vec::new();
    let mut unlisted = Vec::new();
    // Why the sources were not all read: the artifacts' cap, or the search's time limit.
    let mut cut = None;
    let deadline = tokio::time::Instant::now() + installs.search_time;
    let timed_out = format!(
        "The search stopped at its time limit of {} s: sources not read by then were left out.",
        installs.search_time.as_secs_f64()
    );
    let listed = tokio::time::timeout_at(deadline, repositories(installs, &mut unlisted)).await;
    let listed = listed.unwrap_or_else(|_| {
        cut = Some(timed_out.clone());
        Vec::new()
    });
    'sources: for repository in listed {
        if read == MAX_ARTIFACTS {
            cut = Some(format!(
                "A search reads at most {MAX_ARTIFACTS} artifacts: the sources after them were not searched."
            ));
            break;
        }
        let source = repository.as_str();
        let tags = match tokio::time::timeout_at(deadline, installs.registry.tags(source)).await {
            Err(_) => {
                cut = Some(timed_out);
                break;
            }
            Ok(Ok(tags)) => tags,
            Ok(Err(e)) => {
                tracing::warn!(source, "could not list a source's tags: {e}");
                unreachable.push(repository.clone());
                continue;
            }
        };
        let name = source.rsplit('/').next().unwrap_or_default();
        for tag in tags {
            if read == MAX_ARTIFACTS {
                break;
            }
            read += 1;
            let reference = format!("{source}:{tag}");
            let resolved = match tokio::time::timeout_at(
                deadline,
                installs.registry.resolve(&reference),
            )
            .await
            {
                Err(_) => {
                    cut = Some(timed_out);
                    break 'sources;
                }
                Ok(Ok(resolved)) => resolved,
                Ok(Err(e)) => {
                    tracing::debug!(reference, "skipped in a search: {e}");
                    continue;
                }
            };
            let description = resolved
                .annotations
                .get(DESCRIPTION_ANNOTATION)
                .map(|d| shown(d))
                .unwrap_or_default();
            let tools: Vec<String> = resolved
                .annotations
                .get(TOOLS_ANNOTATION)
                .map(|t| t.split(',').take(100).map(shown).collect())
                .unwrap_or_default();
            let hits = score(&words, &format!("{name} {description} {}", tools.join(" ")));
            if hits > 0 {
                found.push((
                    hits,
                    json!({"installed": false, "reference": reference, "digest": resolved.digest,
                        "name": name, "description": description, "tools": tools,
                        "asksForGrants": resolved.plugin_manifest.is_some()}),
                ));
            }
        }
    }
    // Best first; ties in the order found (installed first, then by source and tag).
    found.sort_by_key(|(hits, _)| std::cmp::Reverse(*hits));
    let results: Vec<Value> = found.into_iter().take(limit).map(|(_, v)| v).collect();
    let lines: Vec<String> = results
        .iter()
        .map(|r| match r["installed"].as_bool() {
            Some(true) => format!(
                "- installed tool {} (plugin {}): {}",
                r["tool"].as_str().unwrap_or_default(),
                r["plugin"].as_str().unwrap_or_default(),
                r["description"].as_str().unwrap_or_default()
            ),
            _ => format!(
                "- {} ({}): {}; tools: {}",
                r["reference"].as_str().unwrap_or_default(),
                r["digest"].as_str().unwrap_or_default(),
                r["description"].as_str().unwrap_or_default(),
                r["tools"]
                    .as_array()
                    .map(|t| t
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default()
            ),
        })
        .collect();
    let mut text = if lines.is_empty() {
        "Nothing matches.".to_owned()
    } else {
        format!("Found:\n{}", lines.join("\n"))
    };
    if !unreachable.is_empty() {
        text.push_str(&format!("\n(Could not reach: {}.)", unreachable.join(", ")));
    }
    for (source, why) in &unlisted {
        text.push_str(&format!("\n(Could not list the source {source}: {why}.)"));
    }
    if let Some(cut) = cut {
        tracing::info!("{cut}");
        text.push_str(&format!("\n({cut})"));
    }
    done(&text, &json!({"results": results}))
}

/// The repositories the sources name, in their order, each once: a source `REGISTRY/PATH/*`
/// stands for the repositories its registry's catalog lists under PATH (at most
/// `registry::index::MAX_INDEX_REPOSITORIES`); one whose catalog cannot be read is added to
/// `unlisted` with why.
async fn repositories(installs: &Installs, unlisted: &mut Vec<(String, String)>) -> Vec<String> {
    let mut repositories: Vec<String> = Vec::new();
    for source in &installs.settings.sources {
        let listed = match source.strip_suffix("/*") {
            None => vec![source.clone()],
            Some(under) => match installs.registry.repositories(under).await {
                Ok(listed) => listed,
                Err(e) => {
                    tracing::warn!(source, "could not list a source's repositories: {e}");
                    unlisted.push((source.clone(), e.to_string()));
                    continue;
                }
            },
        };
        for repository in listed {
            if !repositories.contains(&repository) {
                repositories.push(repository);
            }
        }
    }
    repositories
}
