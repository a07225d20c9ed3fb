//! Tests of the router's construction: every gated route refuses what the gate refuses (the
//! handlers do not check it themselves, so this is the only thing keeping them closed), the
//! public routes stay open, and a gated handler reached without the gate fails closed.

use std::collections::BTreeMap;

use axum::extract::FromRequestParts as _;
use axum::http::{Method, StatusCode};
use serde_json::value::RawValue;
use tokio::sync::broadcast;

use super::gate::Admitted;
use super::*;
use crate::protocol::mcp::CompleteParams;
use crate::protocol::{ErrorObject, v2026};
use crate::server::{ListKind, MethodResult, Offers, RequestContext, ServerEvent};

/// A backend that offers nothing: the gate is all these tests reach.
struct Nothing;

fn nothing() -> MethodResult {
    Err(ErrorObject::new(-32601, "nothing here"))
}

impl Backend for Nothing {
    type Target = ();

    fn resolve(&self, _: &crate::protocol::request::ClientRequest) {}

    fn offers(&self) -> Offers {
        Offers::default()
    }

    fn events(&self) -> Option<broadcast::Receiver<ServerEvent>> {
        None
    }

    fn list(&self, _: ListKind, _: Option<&str>, _: &crate::principal::Principal) -> MethodResult {
        nothing()
    }

    async fn call_tool(&self, (): (), _: &str, _: &RawValue, _: RequestContext) -> MethodResult {
        nothing()
    }

    async fn get_prompt(
        &self,
        _: (),
        _: &str,
        _: BTreeMap<String, String>,
        _: RequestContext,
    ) -> MethodResult {
        nothing()
    }

    async fn read_resource(&self, _: (), _: &str, _: RequestContext) -> MethodResult {
        nothing()
    }

    async fn complete(&self, _: (), _: CompleteParams, _: RequestContext) -> MethodResult {
        nothing()
    }
}

/// Every route behind the gate, with a method it serves.
const GATED: [(Method, &str); 7] = [
    (Method::POST, "/mcp"),
    (Method::GET, "/mcp"),
    (Method::DELETE, "/mcp"),
    (Method::GET, "/sse"),
    (Method::POST, "/messages?session_id=x"),
    (Method::GET, "/metrics"),
    (Method::GET, "/"),
];

/// The routes outside the gate.
const PUBLIC: [&str; 4] = [
    "/healthz",
    "/readyz",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
];

const TOKEN: &str = "s3cret";

/// A server with a bearer token on a free loopback port; its base URL and its stop switch.
async fn start() -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound address"));
    let mut tokens = crate::principal::Tokens::default();
    tokens.add_auth_token(TOKEN).expect("one token");
    let config = HttpConfig {
        tokens: Arc::new(tokens),
        status_page: Some(StatusPage(Arc::new(|| "<p>status</p>".to_owned()))),
        ..HttpConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(
        Arc::new(Nothing),
        listener,
        config,
        async move {
            let _ = stopped.await;
        },
        Duration::from_millis(100),
    ));
    (base, stop)
}

fn request(
    client: &reqwest::Client,
    base: &str,
    method: &Method,
    path: &str,
) -> reqwest::RequestBuilder {
    let request = client
        .request(method.clone(), format!("{base}{path}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if *method == Method::POST {
        request.body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
    } else {
        request
    }
}

#[tokio::test]
async fn every_gated_route_refuses_what_the_gate_refuses_and_public_routes_stay_open() {
    let (base, _stop) = start().await;
    let client = reqwest::Client::new();
    let bearer = format!("Bearer {TOKEN}");
    for (method, path) in &GATED {
        let what = format!("{method} {path}");
        let no_token = request(&client, &base, method, path)
            .send()
            .await
            .expect("an answer");
        assert_eq!(no_token.status(), StatusCode::UNAUTHORIZED, "{what}");
        assert_eq!(
            no_token.headers()["www-authenticate"],
            r#"Bearer realm="mcpbox""#,
            "{what}"
        );
        let wrong_token = request(&client, &base, method, path)
            .header("authorization", "Bearer nope")
            .send()
            .await
            .expect("an answer");
        assert_eq!(wrong_token.status(), StatusCode::UNAUTHORIZED, "{what}");
        let foreign_origin = request(&client, &base, method, path)
            .header("authorization", &bearer)
            .header("origin", "http://evil.example.com")
            .send()
            .await
            .expect("an answer");
        assert_eq!(foreign_origin.status(), StatusCode::FORBIDDEN, "{what}");
        let foreign_host = request(&client, &base, method, path)
            .header("authorization", &bearer)
            .header("host", "evil.example.com")
            .send()
            .await
            .expect("an answer");
        assert_eq!(foreign_host.status(), StatusCode::FORBIDDEN, "{what}");
        let repeated = request(&client, &base, method, path)
            .header("authorization", &bearer)
            .header("mcp-method", "ping")
            .header("mcp-method", "tools/call")
            .send()
            .await
            .expect("an answer");
        assert_eq!(repeated.status(), StatusCode::BAD_REQUEST, "{what}");
        let body: serde_json::Value = repeated.json().await.expect("a JSON-RPC error");
        assert_eq!(body["error"]["code"], v2026::HEADER_MISMATCH, "{what}");
        let admitted = request(&client, &base, method, path)
            .header("authorization", &bearer)
            .send()
            .await
            .expect("an answer")
            .status();
        assert!(
            ![StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&admitted),
            "{what} with the token: {admitted}"
        );
    }
    for path in PUBLIC {
        let status = request(&client, &base, &Method::GET, path)
            .header("origin", "http://evil.example.com")
            .send()
            .await
            .expect("an answer")
            .status();
        assert!(
            status == StatusCode::OK || status == StatusCode::NOT_FOUND,
            "{path} without the token, from a foreign origin: {status}"
        );
    }
}

#[tokio::test]
async fn a_gated_handler_reached_without_the_gate_refuses() {
    let (mut parts, ()) = axum::http::Request::new(()).into_parts();
    let refused = Admitted::from_request_parts(&mut parts, &())
        .await
        .expect_err("no gate, no admission");
    assert_eq!(refused.status(), StatusCode::INTERNAL_SERVER_ERROR);
    parts.extensions.insert(Admitted {
        caller: crate::principal::Principal::local(),
    });
    assert!(Admitted::from_request_parts(&mut parts, &()).await.is_ok());
}

#[tokio::test]
async fn the_link_routes_are_public_when_a_broker_is_configured_and_absent_otherwise() {
    let setup = crate::credentials::tests::setup().await;
    let broker = Arc::new(setup.broker(Arc::new(crate::credentials::tests::Recorder::default())));
    let (without, _stop) = start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound address"));
    let mut tokens = crate::principal::Tokens::default();
    tokens.add_auth_token(TOKEN).expect("one token");
    let config = HttpConfig {
        tokens: Arc::new(tokens),
        credentials: Some(broker),
        ..HttpConfig::default()
    };
    tokio::spawn(serve(
        Arc::new(Nothing),
        listener,
        config,
        std::future::pending(),
        Duration::from_millis(100),
    ));
    let client = reqwest::Client::new();
    for path in [
        "/oauth/link/start?ticket=nonsense",
        "/oauth/link/callback?state=x",
    ] {
        let answer = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("an answer");
        // No bearer token, yet the broker answered (its page), not the gate (401).
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{path}");
        let body = answer.text().await.expect("body");
        assert!(body.contains("This link is not valid"), "{path}: {body}");
        let absent = client
            .get(format!("{without}{path}"))
            .send()
            .await
            .expect("an answer");
        assert_ne!(absent.status(), StatusCode::BAD_REQUEST, "{path}");
    }
}
