//! Outgoing HTTP from a plugin, through `wasi:http` (enable the `http` feature).
//!
//! Requests only reach hosts the operator granted in the plugin's manifest (`[http] allow`);
//! anything else fails with an [`HttpError`] saying the request was denied. Calls block the
//! plugin until the response has arrived, within the call's time limit.
//!
//! ```no_run
//! let response = mcpbox_sdk::http::get("https://api.example.com/v1/status")?;
//! let status: mcpbox_sdk::serde_json::Value = response.json()?;
//! # Ok::<(), mcpbox_sdk::http::HttpError>(())
//! ```

use std::fmt;

use serde::de::DeserializeOwned;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasip2::io::streams::StreamError;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(String);

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

/// A response, read in full.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| HttpError(format!("the response is not the expected JSON: {e}")))
    }

    /// The first value of the header `name` (compared case-insensitively), if it is text.
    ///
    /// ```
    /// # use mcpbox_sdk::http::Response;
    /// let response = Response {
    ///     status: 200,
    ///     headers: vec![("Content-Type".into(), b"application/json".to_vec())],
    ///     body: Vec::new(),
    /// };
    /// assert_eq!(response.header("content-type"), Some("application/json"));
    /// assert_eq!(response.header("etag"), None);
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
    }

    /// The provider whose account the caller must link, when mcpbox answered a request to a
    /// host it calls as the caller (the manifest's `[http.credentials]`) instead of sending it:
    /// the caller has not linked that account, or the link was revoked or can no longer be
    /// refreshed. The answer is a `401` with the header
    /// `mcpbox-credential: link-required; provider="NAME"`; the request never left mcpbox.
    ///
    /// mcpbox is already asking the user to link (a URL their client opens), and runs the
    /// call again from the start once they have: return a short error saying the account is
    /// needed, and make brokered requests before any other side effect.
    ///
    /// ```
    /// # use mcpbox_sdk::http::Response;
    /// # use mcpbox_sdk::ToolResult;
    /// let response = Response {
    ///     status: 401,
    ///     headers: vec![(
    ///         "mcpbox-credential".into(),
    ///         br#"link-required; provider="github""#.to_vec(),
    ///     )],
    ///     body: Vec::new(),
    /// };
    /// // In a tool: `let response = mcpbox_sdk::http::get("https://api.github.com/user")?;`
    /// if let Some(provider) = response.link_required() {
    ///     assert_eq!(provider, "github");
    ///     let _ = ToolResult::error("Link your GitHub account to use this tool.");
    /// }
    /// // The upstream's own 401 (a bad token, say) is not mcpbox asking for a link.
    /// let upstream = Response { status: 401, headers: Vec::new(), body: Vec::new() };
    /// assert_eq!(upstream.link_required(), None);
    /// ```
    pub fn link_required(&self) -> Option<&str> {
        let (kind, provider) = self.credential()?;
        (self.status == 401 && kind == "link-required").then_some(provider)
    }

    /// Whether mcpbox could not get the caller's credential for a brokered host just now (the
    /// provider could not be reached to refresh it): a `503` with the header
    /// `mcpbox-credential: unavailable; provider="NAME"`, the request never sent. Trying
    /// again later may work; linking again is not needed.
    ///
    /// ```
    /// # use mcpbox_sdk::http::Response;
    /// let response = Response {
    ///     status: 503,
    ///     headers: vec![(
    ///         "mcpbox-credential".into(),
    ///         br#"unavailable; provider="github""#.to_vec(),
    ///     )],
    ///     body: Vec::new(),
    /// };
    /// assert!(response.credential_unavailable());
    /// assert_eq!(response.link_required(), None);
    /// ```
    pub fn credential_unavailable(&self) -> bool {
        self.status == 503
            && self
                .credential()
                .is_some_and(|(kind, _)| kind == "unavailable")
    }

    /// Why mcpbox answered in place of the service (a [`Self::link_required`] or
    /// [`Self::credential_unavailable`] answer): the `message` of its JSON body, which names
    /// the provider and the reason (never a token). `None` for a service's own answer.
    ///
    /// ```
    /// # use mcpbox_sdk::http::Response;
    /// let response = Response {
    ///     status: 503,
    ///     headers: vec![(
    ///         "mcpbox-credential".into(),
    ///         "unavailable; provider=\"github\"".into(),
    ///     )],
    ///     body: br#"{"error":"mcpbox_credential_unavailable","message":"the provider refused"}"#.to_vec(),
    /// };
    /// assert_eq!(response.credential_message().as_deref(), Some("the provider refused"));
    /// ```
    pub fn credential_message(&self) -> Option<String> {
        self.credential()?;
        let body: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        body.get("message")?.as_str().map(str::to_owned)
    }

    /// The `mcpbox-credential` header's kind and provider: `KIND; provider="NAME"`.
    fn credential(&self) -> Option<(&str, &str)> {
        let value = self.header(CREDENTIAL_HEADER)?;
        let (kind, params) = value.split_once(';').unwrap_or((value, ""));
        let provider = params.split(';').find_map(|param| {
            let (name, value) = param.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("provider")
                .then(|| value.trim().trim_matches('"'))
        })?;
        Some((kind.trim(), provider))
    }
}

/// The header mcpbox sets on its own answer to a request for a brokered host it did not send
/// (see [`Response::link_required`]); a real upstream's answer never carries it.
pub const CREDENTIAL_HEADER: &str = "mcpbox-credential";

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    send("GET", url, &[], None)
}

/// Send a request with `method` (`GET`, `POST`, …), headers and an optional body, and read
/// the whole response.
pub fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Response, HttpError> {
    send_bounded(method, url, headers, body, usize::MAX)
}

/// [`send`], reading at most `max_body` bytes of the response's body: a longer body is an
/// error saying so (a plugin fetching what others serve bounds what it holds).
pub fn send_bounded(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    max_body: usize,
) -> Result<Response, HttpError> {
    let fail = |what: &str| HttpError(format!("{method} {url}: {what}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| fail("the URL has no scheme"))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => return Err(fail(&format!("unsupported scheme `{other}`"))),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_owned()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_owned()),
    };

    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| fail(&format!("bad header `{name}`: {e:?}")))?;
    }
    let request = OutgoingRequest::new(fields);
    let method_value = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "HEAD" => Method::Head,
        other => Method::Other(other.to_owned()),
    };
    request
        .set_method(&method_value)
        .map_err(|()| fail("invalid method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| fail("invalid scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|()| fail("invalid host"))?;
    request
        .set_path_with_query(Some(&path))
        .map_err(|()| fail("invalid path"))?;

    let outgoing = request
        .body()
        .map_err(|()| fail("cannot open the request body"))?;
    if let Some(bytes) = body {
        let stream = outgoing
            .write()
            .map_err(|()| fail("cannot write the request body"))?;
        for chunk in bytes.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| fail(&format!("writing the body: {e:?}")))?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(|e| fail(&describe(&e)))?;

    let pending = outgoing_handler::handle(request, None).map_err(|e| fail(&describe(&e)))?;
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or_else(|| fail("no response"))?
        .map_err(|()| fail("the response was already taken"))?
        .map_err(|e| fail(&describe(&e)))?;

    let status = response.status();
    let headers = response.headers().entries();
    let incoming = response
        .consume()
        .map_err(|()| fail("cannot read the response body"))?;
    let stream = incoming
        .stream()
        .map_err(|()| fail("cannot read the response body"))?;
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                if body.len().saturating_add(chunk.len()) > max_body {
                    return Err(fail(&format!(
                        "the response body is larger than {max_body} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(fail(&format!("reading the body: {}", e.to_debug_string())));
            }
        }
    }
    drop(stream);
    let _ = IncomingBody::finish(incoming);
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// What went wrong, in three kinds an operator can act on: not granted (the manifest), could
/// not resolve (DNS), could not connect (the server or the network).
fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::HttpRequestDenied => "not granted: the request was denied because this host \
             is not granted to the plugin (the operator grants hosts in its manifest: [http] allow)"
            .to_owned(),
        ErrorCode::DnsError(payload) => format!(
            "could not resolve the host name{}",
            payload
                .rcode
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        ErrorCode::DnsTimeout => "could not resolve the host name (timed out)".to_owned(),
        ErrorCode::ConnectionRefused => "could not connect: the connection was refused".to_owned(),
        ErrorCode::ConnectionTimeout => "could not connect: the connection timed out".to_owned(),
        ErrorCode::DestinationNotFound
        | ErrorCode::DestinationUnavailable
        | ErrorCode::DestinationIpUnroutable => {
            format!("could not connect: the destination is unreachable ({code:?})")
        }
        ErrorCode::ConnectionTerminated | ErrorCode::ConnectionReadTimeout => {
            format!("the connection failed ({code:?})")
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, headers: &[(&str, &[u8])], body: &[u8]) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.to_vec()))
                .collect(),
            body: body.to_vec(),
        }
    }

    #[test]
    fn the_body_reads_as_text_or_json() {
        let ok = response(200, &[], br#"{"n":1}"#);
        assert_eq!(ok.text(), r#"{"n":1}"#);
        assert_eq!(ok.json::<serde_json::Value>().unwrap()["n"], 1);
        let error = response(200, &[], b"<html>")
            .json::<serde_json::Value>()
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the response is not the expected JSON: "),
            "{error}"
        );
        assert_eq!(response(200, &[], b"caf\xc3").text(), "caf\u{fffd}");
    }

    #[test]
    fn a_header_is_its_first_text_value_by_any_case() {
        let r = response(
            200,
            &[("ETag", b"\"1\""), ("etag", b"\"2\""), ("X-Bin", b"\xff")],
            b"",
        );
        assert_eq!(r.header("etag"), Some("\"1\""));
        assert_eq!(r.header("ETAG"), Some("\"1\""));
        assert_eq!(r.header("x-bin"), None, "not text");
        assert_eq!(r.header("missing"), None);
    }

    #[test]
    fn only_mcpbox_s_own_answers_ask_for_a_link() {
        let link = |status, value: &[u8]| response(status, &[("MCPBOX-Credential", value)], b"");
        assert_eq!(
            link(401, b"link-required; provider=\"github\"").link_required(),
            Some("github")
        );
        assert_eq!(
            link(401, b" link-required ;  Provider = github ").link_required(),
            Some("github")
        );
        // The kind must match the status, and a provider must be named.
        assert_eq!(
            link(403, b"link-required; provider=\"github\"").link_required(),
            None
        );
        assert_eq!(link(401, b"link-required").link_required(), None);
        assert_eq!(
            link(401, b"unavailable; provider=\"github\"").link_required(),
            None
        );
        assert!(link(503, b"unavailable; provider=\"github\"").credential_unavailable());
        assert!(!link(503, b"link-required; provider=\"github\"").credential_unavailable());
        assert!(!response(503, &[], b"").credential_unavailable());
    }
}
