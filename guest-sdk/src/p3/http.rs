//! Outgoing HTTP for 0.3 plugins, through `wasi:http/client@0.3.0`: [`get`] is an `async fn`,
//! so a tool may have several requests in flight (`futures::join!`, or [`super::spawn`]).
//! The host sends only to the hosts the plugin's manifest grants, as for 0.2 plugins.

use super::bindings::wasi::http::client;
use super::bindings::wasi::http::types::{ErrorCode, Fields, Method, Request, Response, Scheme};
use super::bindings::wit_future;

/// A response: its status and its whole body.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// `GET url` (`http://` or `https://`), the whole body read.
pub async fn get(url: &str) -> Result<Reply, String> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (Scheme::Http, rest)
    } else {
        return Err(format!("not an http(s) URL: {url}"));
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let (_trailers, trailers_reader) =
        wit_future::new::<Result<Option<Fields>, ErrorCode>>(|| Ok(None));
    let (request, _sent) = Request::new(Fields::new(), None, trailers_reader, None);
    request
        .set_method(&Method::Get)
        .map_err(|()| "invalid method".to_owned())?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| "invalid scheme".to_owned())?;
    request
        .set_authority(Some(authority))
        .map_err(|()| format!("invalid authority: {authority}"))?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| format!("invalid path: {path}"))?;
    let response = client::send(request).await.map_err(|e| describe(&e))?;
    let status = response.get_status_code();
    let (_done, done_reader) = wit_future::new::<Result<(), ErrorCode>>(|| Ok(()));
    let (body, trailers) = Response::consume_body(response, done_reader);
    let body = body.collect().await;
    drop(trailers);
    Ok(Reply { status, body })
}

fn describe(error: &ErrorCode) -> String {
    match error {
        ErrorCode::HttpRequestDenied => {
            "the request was denied (the host is not granted)".to_owned()
        }
        other => format!("{other:?}"),
    }
}
