//! The reference server `mcp-server-fetch`, as an mcpbox plugin: its tool `fetch` (name,
//! description, input schema and annotations verbatim, in `src/tool.json`, taken from its
//! `tools/list`) and its prompt `fetch`, with the same answers and error texts: robots.txt
//! honoured for the tool (each redirect hop too), HTML reduced to Markdown unless `raw`,
//! other content returned as it is, and the answer paged by characters (`start_index`,
//! `max_length`).
//!
//! The original reaches any public address (and, with `--allow-private-ips`, any address at
//! all). The plugin reaches what its manifest grants: `[http] public = true` is "the public
//! internet", checked by mcpbox after DNS and on every redirect hop (each hop is a request of
//! its own through the host), and internal addresses only when the manifest names them in
//! `[http] allow`. The original's options are configuration keys: `user-agent` and
//! `ignore-robots-txt`.

mod robots;

use mcpbox_sdk::http::{self, Response};
use mcpbox_sdk::{
    Deserialize, JsonSchema, Plugin, Prompt, PromptMessage, Prompts, ToolResult, Tools, config,
};

const USER_AGENT_AUTONOMOUS: &str =
    "ModelContextProtocol/1.0 (Autonomous; +https://github.com/modelcontextprotocol/servers)";
const USER_AGENT_MANUAL: &str =
    "ModelContextProtocol/1.0 (User-Specified; +https://github.com/modelcontextprotocol/servers)";

/// Redirects followed at most (httpx's default, as the original uses it).
const MAX_REDIRECTS: usize = 20;
/// The largest response body read (the original reads any; the plugin's memory is bounded).
const MAX_BODY: usize = 16 << 20;

#[derive(Deserialize, JsonSchema)]
struct FetchArgs {
    url: String,
    #[serde(default = "default_max_length")]
    max_length: u64,
    #[serde(default)]
    start_index: u64,
    #[serde(default)]
    raw: bool,
}

fn default_max_length() -> u64 {
    5000
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// URL to fetch
    url: String,
}

/// The operator's settings: the original's command-line options.
struct Settings {
    user_agent: Option<String>,
    ignore_robots: bool,
}

fn settings() -> Settings {
    let get = |key: &str| config::get(key).ok().flatten();
    Settings {
        user_agent: get("user-agent").filter(|s| !s.is_empty()),
        ignore_robots: get("ignore-robots-txt").is_some_and(|v| v == "true"),
    }
}

/// A failure, worded as the original words it.
type Failure = String;

/// `GET url` with the user agent, following redirects; each hop after the first is checked
/// against its own origin's robots.txt when `robots` is set.
fn get(url: &url::Url, user_agent: &str, robots: bool) -> Result<(url::Url, Response), Failure> {
    let mut current = url.clone();
    for hop in 0..=MAX_REDIRECTS {
        if hop > 0 && robots {
            check_robots(&current, user_agent)?;
        }
        let response = http::send_bounded(
            "GET",
            current.as_str(),
            &[("User-Agent", user_agent)],
            None,
            MAX_BODY,
        )
        .map_err(|e| failure(url, &current, &e))?;
        let location = header(&response, "location");
        match (response.status, location) {
            (301 | 302 | 303 | 307 | 308, Some(location)) => {
                current = current.join(&location).map_err(|e| {
                    format!("Failed to fetch {url}: RemoteProtocolError('Invalid URL in location header: {e}.')")
                })?;
            }
            _ => return Ok((current, response)),
        }
    }
    Err(format!(
        "Failed to fetch {url}: TooManyRedirects('Exceeded maximum allowed redirects.')"
    ))
}

/// A request for the page `current` (`url`, or a redirect hop from it) that did not get an
/// answer: refused by the grants, or failed.
fn failure(url: &url::Url, current: &url::Url, error: &http::HttpError) -> Failure {
    let text = error.to_string();
    if text.contains("not granted") {
        return refusal(current, current);
    }
    format!("Failed to fetch {url}: {text}")
}

/// The grants refused the request for `refused`, made to fetch `page` (the page itself, or its
/// robots.txt): the refusal names the page, as the caller asked for it (or the redirect hop, as
/// the original names it), and then the request refused if that was another.
fn refusal(page: &url::Url, refused: &url::Url) -> Failure {
    let host = refused.host_str().unwrap_or_default();
    let mut text = format!(
        "Refused to fetch {page}: {host} is not a public address, and the operator has not \
         granted it to this plugin (a manifest's [http] allow names internal addresses that may \
         be fetched)."
    );
    if refused != page {
        text.push_str(&format!(
            " The request refused was {refused}, made to read the page's robots.txt."
        ));
    }
    text
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
}

/// The origin's robots.txt URL (scheme, user and host as given, `/robots.txt`).
fn robots_url(url: &url::Url) -> String {
    let mut robots = url.clone();
    robots.set_path("/robots.txt");
    robots.set_query(None);
    robots.set_fragment(None);
    robots.to_string()
}

/// The original's `check_may_autonomously_fetch_url`: may `url` be fetched, by its origin's
/// robots.txt?
fn check_robots(url: &url::Url, user_agent: &str) -> Result<(), Failure> {
    let robots_url = robots_url(url);
    let mut current = url::Url::parse(&robots_url).map_err(|e| e.to_string())?;
    let mut response = None;
    for _ in 0..=MAX_REDIRECTS {
        let answer = http::send_bounded(
            "GET",
            current.as_str(),
            &[("User-Agent", user_agent)],
            None,
            MAX_BODY,
        );
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) if e.to_string().contains("not granted") => {
                return Err(refusal(url, &current));
            }
            Err(_) => {
                return Err(format!(
                    "Failed to fetch robots.txt {robots_url} due to a connection issue"
                ));
            }
        };
        match (answer.status, header(&answer, "location")) {
            (301 | 302 | 303 | 307 | 308, Some(location)) => {
                current = current.join(&location).map_err(|_| {
                    format!("Failed to fetch robots.txt {robots_url} due to a connection issue")
                })?;
            }
            _ => {
                response = Some(answer);
                break;
            }
        }
    }
    let Some(response) = response else {
        return Err(format!(
            "Failed to fetch robots.txt {robots_url} due to a connection issue"
        ));
    };
    if matches!(response.status, 401 | 403) {
        return Err(format!(
            "When fetching robots.txt ({robots_url}), received status {} so assuming that autonomous fetching is not allowed, the user can try manually fetching by using the fetch prompt",
            response.status
        ));
    }
    if (400..500).contains(&response.status) {
        return Ok(());
    }
    let text = response.text();
    let processed: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().starts_with('#'))
        .collect();
    if robots::Robots::parse(&processed.join("\n")).can_fetch(url, user_agent) {
        return Ok(());
    }
    Err(format!(
        "The sites robots.txt ({robots_url}), specifies that autonomous fetching of this page is not allowed, <useragent>{user_agent}</useragent>\n<url>{url}</url><robots>\n{text}\n</robots>\nThe assistant must let the user know that it failed to view the page. The assistant may provide further guidance based on the above information.\nThe assistant can tell the user that they can try manually fetching the page by using the fetch prompt within their UI."
    ))
}

/// HTML reduced to Markdown: scripts, styles and page furniture left out.
fn markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "head", "nav", "footer", "header", "iframe", "svg",
            "form", "button",
        ])
        .build();
    let failed = "<error>Page failed to be simplified from HTML</error>".to_owned();
    match converter.convert(html) {
        Ok(text) if !text.trim().is_empty() => text,
        _ => failed,
    }
}

/// The original's `fetch_url`: the content for the model and a prefix saying what it is.
fn fetch_url(
    url: &url::Url,
    user_agent: &str,
    raw: bool,
    robots: bool,
) -> Result<(String, String), Failure> {
    let (_, response) = get(url, user_agent, robots)?;
    if response.status >= 400 {
        return Err(format!(
            "Failed to fetch {url} - status code {}",
            response.status
        ));
    }
    let page = response.text();
    let content_type = header(&response, "content-type").unwrap_or_default();
    let head: String = page.chars().take(100).collect();
    let html =
        head.contains("<html") || content_type.contains("text/html") || content_type.is_empty();
    if html && !raw {
        return Ok((markdown(&page), String::new()));
    }
    Ok((
        page,
        format!(
            "Content type {content_type} cannot be simplified to markdown, but here is the raw content:\n"
        ),
    ))
}

/// The URL as the original's pydantic `AnyUrl` reads and writes it.
fn parse_url(url: &str) -> Result<url::Url, Failure> {
    let parsed = url::Url::parse(url).map_err(|e| format!("Invalid URL {url:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "Failed to fetch {parsed}: UnsupportedProtocol(\"Request URL has an unsupported protocol '{}://'.\")",
            parsed.scheme()
        ));
    }
    Ok(parsed)
}

fn fetch(args: &FetchArgs) -> Result<String, Failure> {
    let settings = settings();
    let user_agent = settings
        .user_agent
        .as_deref()
        .unwrap_or(USER_AGENT_AUTONOMOUS);
    let url = parse_url(&args.url)?;
    if !settings.ignore_robots {
        check_robots(&url, user_agent)?;
    }
    let (content, prefix) = fetch_url(&url, user_agent, args.raw, !settings.ignore_robots)?;
    // Paged by characters, as Python counts them.
    let chars: Vec<char> = content.chars().collect();
    let length = chars.len();
    let start = usize::try_from(args.start_index).unwrap_or(usize::MAX);
    let max = usize::try_from(args.max_length).unwrap_or(usize::MAX);
    let content = if start >= length {
        "<error>No more content available.</error>".to_owned()
    } else {
        let end = start.saturating_add(max).min(length);
        let mut page: String = chars[start..end].iter().collect();
        let taken = end - start;
        let remaining = length - (start + taken);
        if taken == max && remaining > 0 {
            page.push_str(&format!(
                "\n\n<error>Content truncated. Call the fetch tool with a start_index of {} to get more content.</error>",
                start + taken
            ));
        }
        page
    };
    Ok(format!("{prefix}Contents of {url}:\n{content}"))
}

fn fetch_prompt(args: &PromptArgs) -> Vec<PromptMessage> {
    let settings = settings();
    let user_agent = settings.user_agent.as_deref().unwrap_or(USER_AGENT_MANUAL);
    let text = match url::Url::parse(&args.url) {
        Ok(url) => match fetch_url(&url, user_agent, false, false) {
            Ok((content, prefix)) => prefix + &content,
            Err(failure) => failure,
        },
        Err(e) => format!("Failed to fetch {}: {e}", args.url),
    };
    vec![PromptMessage::user(text)]
}

/// The original's tool, as its `tools/list` entry (`tool.json`) describes it.
const LISTING: &str = concat!("[", include_str!("tool.json"), "]");

struct Fetch;

impl Plugin for Fetch {
    fn tools(tools: &mut Tools) {
        tools.add_listed(LISTING, "fetch", |args: FetchArgs| match fetch(&args) {
            Ok(text) => ToolResult::text(text),
            // The original's SDK words a tool's failure so.
            Err(failure) => ToolResult::error(format!("Error executing tool fetch: {failure}")),
        });
    }

    fn prompts(prompts: &mut Prompts) {
        prompts.add(
            Prompt::new("fetch", "Fetch a URL and extract its contents as markdown"),
            |args: PromptArgs| fetch_prompt(&args),
        );
    }
}

mcpbox_sdk::export!(Fetch);
