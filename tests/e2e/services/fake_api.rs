//! A loopback fake of the few GitHub REST endpoints the GitHub plugin uses, for the
//! brokered-credentials tests. It records every request it receives: method,
//! path, the `Authorization` header and the `sub` of the JWT in it (decoded, not verified:
//! the test provider's tokens are JWTs naming the user), the other headers and the body. It
//! never echoes a request header back. Without `Authorization` the repository endpoints
//! answer 401, as GitHub does for a private repository.
//!
//! Besides the API: `GET /redirect?to=URL` (a 302 to URL, to show a redirect drops the
//! credential), `GET /plain` (200, no authorization needed) and `GET /user` (the caller's
//! login, the token's `sub`).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

/// One request as the fake API received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// The path with its query.
    pub path: String,
    pub authorization: Option<String>,
    /// The `sub` of the bearer JWT, if it carried one.
    pub sub: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The fake API, serving until the test's runtime ends.
pub struct FakeApi {
    pub port: u16,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FakeApi {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let port = listener.local_addr().expect("address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new().fallback(handle).with_state(Arc::clone(&seen));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            port,
            url: format!("http://127.0.0.1:{port}"),
            seen,
        }
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests whose path starts with `prefix`.
    pub fn seen_at(&self, prefix: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.path.starts_with(prefix))
            .collect()
    }
}

/// The `sub` claim of a bearer JWT, unverified.
fn sub_of(authorization: &str) -> Option<String> {
    let token = authorization.strip_prefix("Bearer ")?;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims["sub"].as_str().map(str::to_owned)
}

async fn handle(
    State(seen): State<Arc<Mutex<Vec<Seen>>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path,
        sub: authorization.as_deref().and_then(sub_of),
        authorization: authorization.clone(),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let query = uri.query().unwrap_or_default();
    match segments.as_slice() {
        ["plain"] => (StatusCode::OK, "plain").into_response(),
        ["redirect"] => {
            let to = query
                .split('&')
                .find_map(|p| p.strip_prefix("to="))
                .map(url_decode)
                .unwrap_or_default();
            (StatusCode::FOUND, [("location", to)], "").into_response()
        }
        _ if authorization.is_none() => json_answer(
            StatusCode::UNAUTHORIZED,
            &json!({"message": "Requires authentication", "status": "401"}),
        ),
        ["user"] => json_answer(
            StatusCode::OK,
            &json!({"login": authorization.as_deref().and_then(sub_of), "id": 1}),
        ),
        ["repos", owner, repo, rest @ ..] => repository(&method, owner, repo, rest, query),
        _ => not_found(),
    }
}

fn url_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                if let Ok(b) = u8::from_str_radix(hex, 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_answer(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [("content-type", "application/json; charset=utf-8")],
        value.to_string(),
    )
        .into_response()
}

fn not_found() -> Response {
    json_answer(StatusCode::NOT_FOUND, &json!({"message": "Not Found"}))
}

fn user(login: &str) -> Value {
    json!({"login": login, "id": 7, "avatar_url": "https://example.invalid/a.png", "type": "User"})
}

fn issue(owner: &str, repo: &str, number: u64) -> Value {
    json!({
        "id": 1000 + number,
        "number": number,
        "title": format!("Issue {number} of {owner}/{repo}"),
        "body": "It breaks.",
        "state": "open",
        "html_url": format!("https://github.com/{owner}/{repo}/issues/{number}"),
        "comments": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-02T00:00:00Z",
        "closed_at": null,
        "user": user("octocat"),
        "labels": [{"id": 1, "name": "bug", "color": "d73a4a"}],
        "assignees": [user("hubot")],
        "node_id": "I_kwDOAAAA",
    })
}

fn pull(owner: &str, repo: &str, number: u64) -> Value {
    json!({
        "id": 2000 + number,
        "number": number,
        "title": format!("Pull {number} of {owner}/{repo}"),
        "body": "Fixes it.",
        "state": "open",
        "draft": false,
        "merged": false,
        "html_url": format!("https://github.com/{owner}/{repo}/pull/{number}"),
        "user": user("octocat"),
        "labels": [],
        "head": {"ref": "fix", "sha": "abc123", "label": "octocat:fix", "repo": {}},
        "base": {"ref": "main", "sha": "def456", "label": "octocat:main", "repo": {}},
        "created_at": "2026-01-03T00:00:00Z",
        "updated_at": "2026-01-04T00:00:00Z",
    })
}

fn comment(owner: &str, repo: &str, number: u64) -> Value {
    json!({
        "id": 3000 + number,
        "body": "Me too.",
        "html_url": format!("https://github.com/{owner}/{repo}/issues/{number}#issuecomment-{}", 3000 + number),
        "user": user("hubot"),
        "created_at": "2026-01-05T00:00:00Z",
        "updated_at": "2026-01-05T00:00:00Z",
    })
}

fn repository(method: &Method, owner: &str, repo: &str, rest: &[&str], query: &str) -> Response {
    let number = |s: &str| s.parse::<u64>().ok();
    match (method.as_str(), rest) {
        ("GET", ["issues"]) => {
            let page = query
                .split('&')
                .find_map(|p| p.strip_prefix("page="))
                .and_then(number)
                .unwrap_or(1);
            let mut with_pull = issue(owner, repo, 3);
            with_pull["pull_request"] = json!({"url": "https://example.invalid/pulls/3"});
            let list = json!([issue(owner, repo, 1), issue(owner, repo, 2), with_pull]);
            let mut response = json_answer(StatusCode::OK, &list);
            if page == 1 {
                let next = format!(
                    "<https://api.github.com/repos/{owner}/{repo}/issues?page=2>; rel=\"next\""
                );
                if let Ok(value) = next.parse() {
                    response.headers_mut().insert("link", value);
                }
            }
            response
        }
        ("POST", ["issues"]) => json_answer(StatusCode::CREATED, &issue(owner, repo, 42)),
        ("GET", ["issues", n]) if number(n).is_some() => {
            json_answer(StatusCode::OK, &issue(owner, repo, number(n).unwrap_or(0)))
        }
        ("PATCH", ["issues", n]) if number(n).is_some() => {
            json_answer(StatusCode::OK, &issue(owner, repo, number(n).unwrap_or(0)))
        }
        ("GET", ["issues", n, "comments"]) if number(n).is_some() => json_answer(
            StatusCode::OK,
            &json!([comment(owner, repo, number(n).unwrap_or(0))]),
        ),
        ("POST", ["issues", n, "comments"]) if number(n).is_some() => json_answer(
            StatusCode::CREATED,
            &comment(owner, repo, number(n).unwrap_or(0)),
        ),
        ("GET", ["issues", n, "labels"]) if number(n).is_some() => json_answer(
            StatusCode::OK,
            &json!([{"id": 1, "name": "bug", "color": "d73a4a", "description": "Broken"}]),
        ),
        ("POST", ["issues", n, "reactions"]) if number(n).is_some() => json_answer(
            StatusCode::CREATED,
            &json!({"id": 9, "content": "+1", "user": user("hubot")}),
        ),
        ("GET", ["pulls"]) => json_answer(StatusCode::OK, &json!([pull(owner, repo, 7)])),
        ("GET", ["pulls", n]) if number(n).is_some() => {
            json_answer(StatusCode::OK, &pull(owner, repo, number(n).unwrap_or(0)))
        }
        ("GET", ["pulls", n, "files"]) if number(n).is_some() => json_answer(
            StatusCode::OK,
            &json!([{"filename": "src/lib.rs", "status": "modified", "additions": 3, "deletions": 1, "changes": 4, "patch": "@@ -1 +1 @@", "sha": "f00"}]),
        ),
        ("GET", ["pulls", n, "reviews"]) if number(n).is_some() => json_answer(
            StatusCode::OK,
            &json!([{"id": 5, "state": "APPROVED", "body": "LGTM", "user": user("hubot"), "submitted_at": "2026-01-06T00:00:00Z"}]),
        ),
        _ => not_found(),
    }
}
