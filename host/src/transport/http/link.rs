//! The browser's side of linking an account (per-user credentials): `GET /oauth/link/start`
//! (`?ticket=`: a 302 to the provider, with `state`, the PKCE challenge and a cookie binding
//! the flow to this browser) and `GET /oauth/link/callback` (`?code&state` or `?error&state`:
//! the code exchanged and the link stored, answered with a small page). They are public (a
//! browser holds no MCP token): the ticket, the state and the cookie are what bind a flow to
//! its caller, all checked by the broker. Served on the public router of the HTTP transport,
//! and for stdio on a loopback listener of their own ([`serve_link_routes`]).
//!
//! Every page says no-store and no-referrer (the callback's URL holds a code, the start's a
//! ticket), and shows neither a token nor anything from the query.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, html};

use crate::credentials::{Broker, CALLBACK_PATH, CallbackError, CallbackQuery, START_PATH};

/// The query of `/oauth/link/start`.
#[derive(Debug, serde::Deserialize)]
struct StartQuery {
    #[serde(default)]
    ticket: Option<String>,
}

/// The two routes, for a router whose state is the broker.
pub fn routes() -> Router<Arc<Broker>> {
    Router::new()
        .route(START_PATH, get(start))
        .route(CALLBACK_PATH, get(callback))
}

/// Serve the two routes alone on `listener` (stdio: a loopback listener, RFC 8252's redirect
/// for native apps), until the process ends.
pub async fn serve_link_routes(
    listener: tokio::net::TcpListener,
    broker: Arc<Broker>,
) -> std::io::Result<()> {
    axum::serve(listener, routes().with_state(broker)).await
}

async fn start(State(broker): State<Arc<Broker>>, Query(query): Query<StartQuery>) -> Response {
    let Some(ticket) = query.ticket.filter(|t| !t.is_empty()) else {
        return refused(&CallbackError::Invalid);
    };
    match broker.start(&ticket).await {
        Ok(redirect) => {
            let mut response = StatusCode::FOUND.into_response();
            let headers = response.headers_mut();
            match (
                HeaderValue::from_str(&redirect.location),
                HeaderValue::from_str(&redirect.set_cookie),
            ) {
                (Ok(location), Ok(cookie)) => {
                    headers.insert(header::LOCATION, location);
                    headers.insert(header::SET_COOKIE, cookie);
                }
                _ => return refused(&CallbackError::Internal("an unusable redirect".to_owned())),
            }
            private(headers);
            response
        }
        Err(error) => {
            tracing::info!("a link did not start: {}", error.reason());
            refused(&error)
        }
    }
}

async fn callback(
    State(broker): State<Arc<Broker>>,
    Query(query): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Response {
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(crate::credentials::link_cookie);
    match broker.complete(query, cookie).await {
        Ok(linked) => page(
            StatusCode::OK,
            "Account linked",
            &format!(
                "Your {} account is linked to mcpbox (as {}). You can close this window.",
                linked.display_name, linked.caller
            ),
        ),
        Err(error) => {
            tracing::info!("a link callback linked nothing: {}", error.reason());
            refused(&error)
        }
    }
}

/// The page for a refused start or callback: 400 (500 for mcpbox's own failure).
fn refused(error: &CallbackError) -> Response {
    let status = match error {
        CallbackError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        CallbackError::Provider(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::BAD_REQUEST,
    };
    page(status, "Nothing was linked", &error.to_string())
}

/// A small HTML page.
fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "mcpbox: " (title) }
            }
            body style="font-family: system-ui, sans-serif; max-width: 36em; margin: 4em auto; padding: 0 1em" {
                h1 { (title) }
                p { (message) }
            }
        }
    };
    let mut response = (status, body.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    private(headers);
    response
}

/// Kept by no cache, sent to no one as a referrer, framed by no page.
fn private(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::tests::{Recorder, setup};

    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client")
    }

    #[tokio::test]
    async fn the_routes_link_once_and_refuse_other_browsers_replays_and_forgeries() {
        let setup = setup().await;
        let broker = Arc::new(setup.broker(Arc::new(Recorder::default())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(serve_link_routes(listener, Arc::clone(&broker)));
        let prompt = broker
            .begin_link("token:alice", "fake", None)
            .await
            .expect("begin");
        let url = url::Url::parse(&prompt.url).expect("url");
        let start = format!("{base}{}?{}", url.path(), url.query().unwrap_or_default());
        let client = client();
        let answer = client.get(&start).send().await.expect("answer");
        assert_eq!(answer.status(), StatusCode::FOUND);
        assert_eq!(answer.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(answer.headers()[header::REFERRER_POLICY], "no-referrer");
        let location = answer.headers()[header::LOCATION]
            .to_str()
            .expect("location")
            .to_owned();
        let cookie = answer.headers()[header::SET_COOKIE]
            .to_str()
            .expect("cookie")
            .split(';')
            .next()
            .expect("pair")
            .to_owned();
        let query = setup.authorize(&location, "code-1");
        let state = query.state.clone().expect("state");
        let mut callback = url::Url::parse(&format!("{base}{CALLBACK_PATH}")).expect("url");
        callback
            .query_pairs_mut()
            .append_pair("code", "code-1")
            .append_pair("state", &state);
        let page = |answer: reqwest::Response| async move {
            (answer.status(), answer.text().await.expect("page"))
        };
        // Another browser (no cookie): refused, and nothing of the query is on the page.
        let (status, body) = page(client.get(callback.clone()).send().await.expect("answer")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("started in another browser"), "{body}");
        assert!(!body.contains(&state) && !body.contains("code-1"), "{body}");
        // This browser: linked.
        let (status, body) = page(
            client
                .get(callback.clone())
                .header(header::COOKIE, format!("theme=dark; {cookie}"))
                .send()
                .await
                .expect("answer"),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            body.contains("Your Fake account is linked to mcpbox (as token:alice)"),
            "{body}"
        );
        assert!(!body.contains("at-1"), "{body}");
        // Again: used.
        let (status, body) = page(
            client
                .get(callback.clone())
                .header(header::COOKIE, cookie.clone())
                .send()
                .await
                .expect("answer"),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("used already"), "{body}");
        // A forged state, and a start without a ticket.
        let (status, body) = page(
            client
                .get(format!(
                    "{base}{CALLBACK_PATH}?code=x&state={}",
                    crate::credentials::store::expiring_key(
                        crate::credentials::now_ms() + 60_000,
                        "forged"
                    )
                ))
                .header(header::COOKIE, cookie)
                .send()
                .await
                .expect("answer"),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("not valid"), "{body}");
        let (status, _) = page(
            client
                .get(format!("{base}{START_PATH}"))
                .send()
                .await
                .expect("answer"),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(setup.fake_issued(), 1);
    }
}
