//! Sending a plugin's granted HTTP request to the addresses the gate checked, and only to
//! them: the connection goes to an address the gate resolved and judged, never to a second
//! lookup of the name (which a rebinding DNS server could answer differently). TLS verifies
//! the certificate against the request's host name, with the host's client configuration
//! (`crate::tls`: webpki's roots, aws-lc-rs).
//!
//! The timeouts are the request's options, as `wasi:http` gives them, else 600 s each (the
//! call's own time limit bounds it anyway).

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// What a sent request gives back: the response, and the connection's work to drive.
pub type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connect to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr], timeout: Duration) -> Result<TcpStream, Error> {
    let mut last = Error::ConnectionRefused;
    for address in addresses {
        match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = Error::Connect(e),
            Err(_) => last = Error::ConnectionTimeout,
        }
    }
    Err(last)
}

/// Send `request` over a connection to one of `addresses`.
pub async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    addresses: Vec<SocketAddr>,
) -> Result<Sent, Error> {
    let option = |pick: fn(&RequestOptions) -> Option<Duration>| {
        options
            .as_ref()
            .and_then(pick)
            .unwrap_or(Duration::from_secs(600))
    };
    let connect_timeout = option(|o| o.connect_timeout);
    let first_byte_timeout = option(|o| o.first_byte_timeout);
    let host = request
        .uri()
        .host()
        .ok_or(Error::HttpRequestUriInvalid)?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let tls = request.uri().scheme() == Some(&http::uri::Scheme::HTTPS);

    let tcp = connect(&addresses, connect_timeout).await?;
    let stream: Box<dyn Stream> = if tls {
        let config = crate::tls::client_config().ok_or(Error::TlsProtocolError)?;
        let name = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => rustls::pki_types::ServerName::try_from(host.clone()).map_err(|_| {
                Error::DnsError {
                    rcode: Some("invalid dns name".to_owned()),
                    info_code: None,
                }
            })?,
        };
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // The request line carries the path only (the host travels in the Host header).
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str)
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    let mut connection = Some(Box::pin(connection));
    let send = tokio::time::timeout(first_byte_timeout, sender.send_request(request));
    tokio::pin!(send);
    // Drive the connection while waiting for the response.
    let response = loop {
        let Some(driving) = connection.as_mut() else {
            // The connection ended first: the response, if any, is ready now.
            break (&mut send)
                .await
                .map_err(|_| Error::ConnectionReadTimeout)?
                .map_err(Error::from)?;
        };
        tokio::select! {
            answer = &mut send => {
                break answer.map_err(|_| Error::ConnectionReadTimeout)?.map_err(Error::from)?;
            }
            done = driving => {
                connection = None;
                done.map_err(Error::from)?;
            }
        }
    };
    let response = response.map(|body| body.map_err(Error::from).boxed_unsync());
    let driver = async move {
        match connection {
            Some(connection) => connection.await.map_err(Error::from),
            None => Ok(()),
        }
    };
    Ok((response, Box::new(driver)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// SECURITY.md, "HTTP egress in detail" (3): the connection goes to the addresses the gate
    /// checked, never to a second lookup of the name. The name here resolves nowhere
    /// (`.invalid`), so a request that looked it up again would fail; it reaches the checked
    /// address, with the name still in its `Host`.
    #[tokio::test]
    async fn a_request_goes_to_the_checked_address_without_a_second_lookup() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let checked = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buffer = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buffer).await.unwrap();
                assert!(n > 0, "the request ended early");
                head.extend_from_slice(&buffer[..n]);
            }
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nchecked",
                )
                .await
                .unwrap();
            String::from_utf8(head).unwrap()
        });
        let name = format!("rebound.invalid:{}", checked.port());
        let body = http_body_util::Empty::<bytes::Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = http::Request::get(format!("http://{name}/path?q=1"))
            .header(http::header::HOST, &name)
            .body(body)
            .unwrap();
        let (response, driver) = send(request, None, vec![checked])
            .await
            .unwrap_or_else(|e| panic!("the request did not reach the checked address: {e}"));
        tokio::spawn(Box::into_pin(driver));
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"checked");
        let head = server.await.unwrap();
        assert!(head.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("\r\nhost: {name}\r\n")),
            "{head}"
        );
    }
}
