//! Six of the official GitHub MCP server's tools (`github/github-mcp-server` v1.10.1:
//! `list_issues`, `issue_read`, `issue_write`, `add_issue_comment`, `list_pull_requests`,
//! `pull_request_read`, with its names, argument names and annotations; descriptions in
//! `src/tools.json`), as an mcpbox plugin that acts as the person calling it.
//!
//! The plugin never holds a token. Its manifest grants `api.github.com` as the caller
//! (`[http.credentials] "api.github.com" = "github"`): mcpbox attaches the calling user's own
//! GitHub token, linked once from their client, to each request for that host, and to no other.
//! A request never carries `Authorization` from here (mcpbox refuses one that does). When the
//! caller has not linked GitHub, mcpbox answers the request itself (a `401` with
//! `mcpbox-credential: link-required`), asks the user to link, and runs the call again once
//! they have; the plugin only says the account is needed. Each tool makes its one GitHub
//! request before anything else, so a re-run repeats nothing.
//!
//! The API's base URL is the configuration key `api-url` (default `https://api.github.com`;
//! GitHub Enterprise Server's is `https://HOST/api/v3`), which the tests point at a loopback
//! fake of the endpoints used here.

use mcpbox_sdk::http::{self, Response};
use mcpbox_sdk::{Deserialize, JsonSchema, Plugin, ToolResult, Tools, config};
use serde_json::{Number, Value, json};

const DEFAULT_API_URL: &str = "https://api.github.com";
/// The largest answer read from GitHub.
const MAX_BODY: usize = 8 << 20;
/// Sent on every request: GitHub refuses a request without a user agent.
const HEADERS: [(&str, &str); 3] = [
    ("User-Agent", "mcpbox-github"),
    ("Accept", "application/vnd.github+json"),
    ("X-GitHub-Api-Version", "2022-11-28"),
];
/// What a tool answers when the caller has not linked their GitHub account (mcpbox is asking
/// them to, and runs the call again once they have).
pub const LINK_REQUIRED: &str = "Link your GitHub account to use this tool.";
const UNAVAILABLE: &str = "mcpbox could not get your access to GitHub just now; try again in a \
                           moment, or sign in again.";

/// A failure, as the text of an `isError` result.
type Failure = String;

/// The GitHub REST API, at the operator's base URL.
struct Api {
    base: String,
}

impl Api {
    fn from_config() -> Self {
        let base = config::get("api-url")
            .ok()
            .flatten()
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_URL.to_owned());
        Self {
            base: base.trim().trim_end_matches('/').to_owned(),
        }
    }

    /// `method path` (with its query), with a JSON body if any; `what` names the operation in
    /// errors, as the original words them ("failed to get issue").
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Response, Failure> {
        let url = format!("{}{path}", self.base);
        let body = body.map(Value::to_string);
        let mut headers = HEADERS.to_vec();
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        let response = http::send_bounded(
            method,
            &url,
            &headers,
            body.as_deref().map(str::as_bytes),
            MAX_BODY,
        )
        .map_err(|e| format!("{what}: {e}"))?;
        if response.link_required().is_some() {
            return Err(LINK_REQUIRED.to_owned());
        }
        if response.credential_unavailable() {
            return Err(match response.credential_message() {
                Some(why) => format!("{UNAVAILABLE} ({why})"),
                None => UNAVAILABLE.to_owned(),
            });
        }
        if response.status >= 400 {
            return Err(format!(
                "{what}: {method} {url}: {} {}",
                response.status,
                api_message(&response)
            ));
        }
        Ok(response)
    }

    fn json(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<(Value, Response), Failure> {
        let response = self.send(method, path, body, what)?;
        let value = if response.body.is_empty() {
            Value::Null
        } else {
            response
                .json()
                .map_err(|e| format!("{what}: GitHub's answer: {e}"))?
        };
        Ok((value, response))
    }
}

/// GitHub's `message` in an error answer, or the body as text.
fn api_message(response: &Response) -> String {
    response
        .json::<Value>()
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| response.text().chars().take(500).collect())
}

/// `s` percent-encoded for a path segment or query value (RFC 3986 unreserved kept).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for byte in s.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A query string from the pairs that have a value.
fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}={}", encode(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// `/repos/OWNER/REPO`.
fn repo_path(owner: &str, repo: &str) -> String {
    format!("/repos/{}/{}", encode(owner), encode(repo))
}

/// A whole number from a JSON number (the original's schemas say `number`, so `3.0` is 3).
fn whole(n: &Number, name: &str) -> Result<u64, Failure> {
    if let Some(n) = n.as_u64() {
        return Ok(n);
    }
    let text = n.to_string();
    text.strip_suffix(".0")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("{name} must be a positive whole number, not {text}"))
}

fn optional_whole(n: Option<&Number>, name: &str) -> Result<Option<String>, Failure> {
    n.map(|n| whole(n, name).map(|n| n.to_string())).transpose()
}

/// Whether GitHub's `Link` header names a next page.
fn has_next(response: &Response) -> bool {
    response
        .header("link")
        .is_some_and(|link| link.split(',').any(|l| l.contains("rel=\"next\"")))
}

/// The fields of `item` worth a model's context.
fn pick(item: &Value, fields: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for field in fields {
        if let Some(value) = item.get(*field).filter(|v| !v.is_null()) {
            out.insert((*field).to_owned(), value.clone());
        }
    }
    Value::Object(out)
}

fn login(user: Option<&Value>) -> Value {
    user.and_then(|u| u.get("login"))
        .map_or(Value::Null, |login| json!({ "login": login }))
}

fn names(items: Option<&Value>, field: &str) -> Value {
    let names: Vec<Value> = items
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(|i| i.get(field).cloned()).collect())
        .unwrap_or_default();
    Value::Array(names)
}

/// An issue, reduced as the original's minimal issue is.
fn minimal_issue(issue: &Value) -> Value {
    let mut out = pick(
        issue,
        &[
            "number",
            "title",
            "body",
            "state",
            "state_reason",
            "html_url",
            "comments",
            "created_at",
            "updated_at",
            "closed_at",
        ],
    );
    if let Value::Object(map) = &mut out {
        map.insert("user".into(), login(issue.get("user")));
        map.insert("labels".into(), names(issue.get("labels"), "name"));
        map.insert("assignees".into(), names(issue.get("assignees"), "login"));
    }
    out
}

fn minimal_comment(comment: &Value) -> Value {
    let mut out = pick(
        comment,
        &["id", "body", "html_url", "created_at", "updated_at"],
    );
    if let Value::Object(map) = &mut out {
        map.insert("user".into(), login(comment.get("user")));
    }
    out
}

fn minimal_pull(pull: &Value) -> Value {
    let mut out = pick(
        pull,
        &[
            "number",
            "title",
            "body",
            "state",
            "draft",
            "merged",
            "mergeable_state",
            "html_url",
            "additions",
            "deletions",
            "changed_files",
            "commits",
            "comments",
            "created_at",
            "updated_at",
            "closed_at",
            "merged_at",
        ],
    );
    if let Value::Object(map) = &mut out {
        map.insert("user".into(), login(pull.get("user")));
        map.insert("labels".into(), names(pull.get("labels"), "name"));
        for side in ["head", "base"] {
            if let Some(branch) = pull.get(side) {
                map.insert(side.into(), pick(branch, &["ref", "sha", "label"]));
            }
        }
    }
    out
}

fn each(list: &Value, f: fn(&Value) -> Value) -> Value {
    Value::Array(
        list.as_array()
            .map(|items| items.iter().map(f).collect())
            .unwrap_or_default(),
    )
}

/// What a write answers, as the original's minimal response: the new object's id and URL.
fn created(value: &Value) -> Value {
    json!({
        "id": value.get("id").map_or(String::new(), |id| match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        "url": value.get("html_url").cloned().unwrap_or(Value::Null),
    })
}

fn text(value: &Value) -> ToolResult {
    ToolResult::text(serde_json::to_string_pretty(value).unwrap_or_default())
}

fn answer(result: Result<Value, Failure>) -> ToolResult {
    match result {
        Ok(value) => text(&value),
        Err(failure) => ToolResult::error(failure),
    }
}

#[derive(Deserialize, JsonSchema)]
struct ListIssues {
    owner: String,
    repo: String,
    state: Option<String>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(rename = "orderBy")]
    order_by: Option<String>,
    direction: Option<String>,
    since: Option<String>,
    #[serde(rename = "perPage")]
    per_page: Option<Number>,
    after: Option<String>,
}

/// `list_issues`, over REST: the cursor is the next page's number.
fn list_issues(api: &Api, args: &ListIssues) -> Result<Value, Failure> {
    let state = match args
        .state
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None => "all",
        Some("OPEN") => "open",
        Some("CLOSED") => "closed",
        Some(other) => return Err(format!("state must be OPEN or CLOSED, not {other}")),
    };
    let sort = match args.order_by.as_deref() {
        None => None,
        Some("CREATED_AT") => Some("created"),
        Some("UPDATED_AT") => Some("updated"),
        Some("COMMENTS") => Some("comments"),
        Some(other) => {
            return Err(format!(
                "orderBy must be CREATED_AT, UPDATED_AT or COMMENTS, not {other}"
            ));
        }
    };
    let page: u64 = match args.after.as_deref().filter(|a| !a.is_empty()) {
        None => 1,
        Some(cursor) => cursor
            .parse()
            .map_err(|_| format!("after: {cursor:?} is not a cursor this server gave"))?,
    };
    let path = repo_path(&args.owner, &args.repo)
        + "/issues"
        + &query(&[
            ("state", Some(state.to_owned())),
            (
                "labels",
                (!args.labels.is_empty()).then(|| args.labels.join(",")),
            ),
            ("sort", sort.map(str::to_owned)),
            (
                "direction",
                args.direction.as_deref().map(str::to_ascii_lowercase),
            ),
            ("since", args.since.clone()),
            (
                "per_page",
                optional_whole(args.per_page.as_ref(), "perPage")?,
            ),
            ("page", Some(page.to_string())),
        ]);
    let (list, response) = api.json("GET", &path, None, "failed to list issues")?;
    // The REST list holds pull requests too; the original's does not.
    let issues: Vec<Value> = list
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|i| i.get("pull_request").is_none())
                .map(minimal_issue)
                .collect()
        })
        .unwrap_or_default();
    let next = has_next(&response);
    Ok(json!({
        "issues": issues,
        "pageInfo": {
            "hasNextPage": next,
            "hasPreviousPage": page > 1,
            "endCursor": if next { Value::String((page + 1).to_string()) } else { Value::Null },
        },
    }))
}

#[derive(Deserialize, JsonSchema)]
struct IssueRead {
    method: String,
    owner: String,
    repo: String,
    issue_number: Number,
    page: Option<Number>,
    #[serde(rename = "perPage")]
    per_page: Option<Number>,
}

fn issue_read(api: &Api, args: &IssueRead) -> Result<Value, Failure> {
    let number = whole(&args.issue_number, "issue_number")?;
    let issue = format!("{}/issues/{number}", repo_path(&args.owner, &args.repo));
    let paging = query(&[
        ("page", optional_whole(args.page.as_ref(), "page")?),
        (
            "per_page",
            optional_whole(args.per_page.as_ref(), "perPage")?,
        ),
    ]);
    match args.method.as_str() {
        "get" => {
            let (value, _) = api.json("GET", &issue, None, "failed to get issue")?;
            Ok(minimal_issue(&value))
        }
        "get_comments" => {
            let path = format!("{issue}/comments{paging}");
            let (list, _) = api.json("GET", &path, None, "failed to get issue comments")?;
            Ok(each(&list, minimal_comment))
        }
        "get_labels" => {
            let path = format!("{issue}/labels{paging}");
            let (list, _) = api.json("GET", &path, None, "failed to get issue labels")?;
            let labels = each(&list, |l| pick(l, &["name", "color", "description"]));
            let count = labels.as_array().map_or(0, Vec::len);
            Ok(json!({ "labels": labels, "totalCount": count }))
        }
        other => Err(format!(
            "unknown method {other}: this server reads an issue with get, get_comments or get_labels"
        )),
    }
}

#[derive(Deserialize, JsonSchema)]
struct IssueWrite {
    method: String,
    owner: String,
    repo: String,
    issue_number: Option<Number>,
    title: Option<String>,
    body: Option<String>,
    assignees: Option<Vec<String>>,
    labels: Option<Vec<String>>,
    milestone: Option<Number>,
    state: Option<String>,
    state_reason: Option<String>,
}

fn issue_write(api: &Api, args: &IssueWrite) -> Result<Value, Failure> {
    let mut fields = serde_json::Map::new();
    let mut set = |name: &str, value: Value| {
        fields.insert(name.to_owned(), value);
    };
    if let Some(title) = &args.title {
        set("title", json!(title));
    }
    if let Some(body) = &args.body {
        set("body", json!(body));
    }
    if let Some(assignees) = &args.assignees {
        set("assignees", json!(assignees));
    }
    if let Some(labels) = &args.labels {
        set("labels", json!(labels));
    }
    if let Some(milestone) = &args.milestone {
        set("milestone", json!(whole(milestone, "milestone")?));
    }
    let base = repo_path(&args.owner, &args.repo);
    match args.method.as_str() {
        "create" => {
            if args.title.as_deref().is_none_or(str::is_empty) {
                return Err("missing required parameter: title".to_owned());
            }
            let body = Value::Object(fields);
            let path = format!("{base}/issues");
            let (value, _) = api.json("POST", &path, Some(&body), "failed to create issue")?;
            Ok(created(&value))
        }
        "update" => {
            let number = args
                .issue_number
                .as_ref()
                .ok_or("missing required parameter: issue_number")?;
            let number = whole(number, "issue_number")?;
            if let Some(state) = &args.state {
                fields.insert("state".into(), json!(state));
                if let Some(reason) = &args.state_reason {
                    fields.insert("state_reason".into(), json!(reason));
                }
            }
            let body = Value::Object(fields);
            let path = format!("{base}/issues/{number}");
            let (value, _) = api.json("PATCH", &path, Some(&body), "failed to update issue")?;
            Ok(created(&value))
        }
        other => Err(format!(
            "unknown method {other}: issue_write takes create or update"
        )),
    }
}

#[derive(Deserialize, JsonSchema)]
struct AddIssueComment {
    owner: String,
    repo: String,
    issue_number: Number,
    body: Option<String>,
    reaction: Option<String>,
    comment_id: Option<u64>,
}

fn add_issue_comment(api: &Api, args: &AddIssueComment) -> Result<Value, Failure> {
    let number = whole(&args.issue_number, "issue_number")?;
    let base = repo_path(&args.owner, &args.repo);
    let body = args.body.as_deref().filter(|b| !b.is_empty());
    if body.is_none() && args.reaction.is_none() {
        return Err("at least one of body or reaction is required".to_owned());
    }
    if body.is_some() && args.comment_id.is_some() {
        return Err("comment_id reacts to a comment and cannot be combined with body".to_owned());
    }
    let mut result = serde_json::Map::new();
    if let Some(body) = body {
        let path = format!("{base}/issues/{number}/comments");
        let (value, _) = api.json(
            "POST",
            &path,
            Some(&json!({ "body": body })),
            "failed to create comment",
        )?;
        if args.reaction.is_none() {
            return Ok(created(&value));
        }
        result.insert("comment".into(), created(&value));
    }
    if let Some(reaction) = &args.reaction {
        let path = match args.comment_id {
            Some(id) => format!("{base}/issues/comments/{id}/reactions"),
            None => format!("{base}/issues/{number}/reactions"),
        };
        let (value, _) = api.json(
            "POST",
            &path,
            Some(&json!({ "content": reaction })),
            "failed to add reaction",
        )?;
        let reaction = json!({ "id": value.get("id"), "content": value.get("content") });
        if result.is_empty() {
            return Ok(reaction);
        }
        result.insert("reaction".into(), reaction);
    }
    Ok(Value::Object(result))
}

#[derive(Deserialize, JsonSchema)]
struct ListPullRequests {
    owner: String,
    repo: String,
    state: Option<String>,
    head: Option<String>,
    base: Option<String>,
    sort: Option<String>,
    direction: Option<String>,
    page: Option<Number>,
    #[serde(rename = "perPage")]
    per_page: Option<Number>,
}

fn list_pull_requests(api: &Api, args: &ListPullRequests) -> Result<Value, Failure> {
    let path = repo_path(&args.owner, &args.repo)
        + "/pulls"
        + &query(&[
            ("state", args.state.clone()),
            ("head", args.head.clone()),
            ("base", args.base.clone()),
            ("sort", args.sort.clone()),
            ("direction", args.direction.clone()),
            ("page", optional_whole(args.page.as_ref(), "page")?),
            (
                "per_page",
                optional_whole(args.per_page.as_ref(), "perPage")?,
            ),
        ]);
    let (list, _) = api.json("GET", &path, None, "failed to list pull requests")?;
    Ok(each(&list, minimal_pull))
}

#[derive(Deserialize, JsonSchema)]
struct PullRequestRead {
    method: String,
    owner: String,
    repo: String,
    #[serde(rename = "pullNumber")]
    pull_number: Number,
    page: Option<Number>,
    #[serde(rename = "perPage")]
    per_page: Option<Number>,
}

fn pull_request_read(api: &Api, args: &PullRequestRead) -> Result<Value, Failure> {
    let number = whole(&args.pull_number, "pullNumber")?;
    let base = repo_path(&args.owner, &args.repo);
    let paging = query(&[
        ("page", optional_whole(args.page.as_ref(), "page")?),
        (
            "per_page",
            optional_whole(args.per_page.as_ref(), "perPage")?,
        ),
    ]);
    match args.method.as_str() {
        "get" => {
            let path = format!("{base}/pulls/{number}");
            let (value, _) = api.json("GET", &path, None, "failed to get pull request")?;
            Ok(minimal_pull(&value))
        }
        "get_files" => {
            let path = format!("{base}/pulls/{number}/files{paging}");
            let (list, _) = api.json("GET", &path, None, "failed to get pull request files")?;
            Ok(each(&list, |f| {
                pick(
                    f,
                    &[
                        "filename",
                        "status",
                        "additions",
                        "deletions",
                        "changes",
                        "patch",
                        "previous_filename",
                    ],
                )
            }))
        }
        "get_comments" => {
            let path = format!("{base}/issues/{number}/comments{paging}");
            let (list, _) = api.json("GET", &path, None, "failed to get pull request comments")?;
            Ok(each(&list, minimal_comment))
        }
        "get_reviews" => {
            let path = format!("{base}/pulls/{number}/reviews{paging}");
            let (list, _) = api.json("GET", &path, None, "failed to get pull request reviews")?;
            Ok(each(&list, |r| {
                let mut out = pick(r, &["id", "state", "body", "html_url", "submitted_at"]);
                if let Value::Object(map) = &mut out {
                    map.insert("user".into(), login(r.get("user")));
                }
                out
            }))
        }
        other => Err(format!(
            "unknown method {other}: this server reads a pull request with get, get_files, \
             get_comments or get_reviews"
        )),
    }
}

/// The tools, as `tools.json` lists them.
const LISTING: &str = include_str!("tools.json");

struct GitHub;

impl Plugin for GitHub {
    fn tools(tools: &mut Tools) {
        tools
            .add_listed(LISTING, "list_issues", |args: ListIssues| {
                answer(list_issues(&Api::from_config(), &args))
            })
            .add_listed(LISTING, "issue_read", |args: IssueRead| {
                answer(issue_read(&Api::from_config(), &args))
            })
            .add_listed(LISTING, "issue_write", |args: IssueWrite| {
                answer(issue_write(&Api::from_config(), &args))
            })
            .add_listed(LISTING, "add_issue_comment", |args: AddIssueComment| {
                answer(add_issue_comment(&Api::from_config(), &args))
            })
            .add_listed(LISTING, "list_pull_requests", |args: ListPullRequests| {
                answer(list_pull_requests(&Api::from_config(), &args))
            })
            .add_listed(LISTING, "pull_request_read", |args: PullRequestRead| {
                answer(pull_request_read(&Api::from_config(), &args))
            });
    }
}

mcpbox_sdk::export!(GitHub);
