//! Accepting connections when descriptors run short. The process's soft `RLIMIT_NOFILE` is
//! raised to its hard limit at startup, and a reserve of descriptors is kept out of the listen
//! streams' budget ([`listen_stream_budget`]) so that calls are still served when streams are
//! at their cap. Should descriptors run out all the same, [`Acceptor`] says so at warn (once
//! per interval, not once per attempt) and tries again shortly, where axum's own accept loop
//! logs nothing and waits a whole second.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};

/// Descriptors kept out of the listen streams' budget: at least this many...
const MIN_RESERVE: u64 = 64;
/// ...and at least this fraction (1/4) of the limit.
const RESERVE_DIVISOR: u64 = 4;
/// How long to wait before accepting again after descriptors ran out.
const RETRY_ACCEPT: Duration = Duration::from_millis(20);
/// Descriptor exhaustion is logged at warn at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Raise the soft limit on open descriptors to the hard limit; returns the soft limit in force
/// (`None`: unlimited or unknown).
pub fn raise_descriptor_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current?;
    let Some(maximum) = limit.maximum.filter(|max| *max > current) else {
        return Some(current);
    };
    let raised = Rlimit {
        current: Some(maximum),
        maximum: Some(maximum),
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::debug!(
                from = current,
                to = maximum,
                "raised the open-descriptor limit"
            );
            Some(maximum)
        }
        Err(e) => {
            tracing::debug!("could not raise the open-descriptor limit: {e}");
            Some(current)
        }
    }
}

/// The most listen streams that leave a reserve of descriptors for calls: `configured`, or
/// fewer when the descriptor limit is `descriptors`.
pub fn listen_stream_budget(configured: usize, descriptors: Option<u64>) -> usize {
    let Some(descriptors) = descriptors else {
        return configured;
    };
    let reserve = (descriptors / RESERVE_DIVISOR).max(MIN_RESERVE);
    let budget = usize::try_from(descriptors.saturating_sub(reserve)).unwrap_or(usize::MAX);
    if budget < configured {
        tracing::info!(
            descriptors,
            reserve,
            listen_streams = budget,
            "the open-descriptor limit allows fewer listen streams than configured; raise it (ulimit -n) for more"
        );
    }
    budget.min(configured)
}

/// A TCP listener for axum that sets `TCP_NODELAY` on each connection and survives running
/// out of descriptors.
pub struct Acceptor {
    listener: TcpListener,
    warned: Option<Instant>,
}

impl Acceptor {
    /// Accept on `listener`.
    pub fn new(listener: TcpListener) -> Self {
        Self {
            listener,
            warned: None,
        }
    }

    fn failed(&mut self, error: &io::Error) {
        use rustix::io::Errno;
        let errno = error.raw_os_error().map(Errno::from_raw_os_error);
        let out_of_descriptors = errno == Some(Errno::MFILE) || errno == Some(Errno::NFILE);
        let due = self.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if due {
            self.warned = Some(Instant::now());
            if out_of_descriptors {
                tracing::warn!(
                    "out of file descriptors: new connections wait until some close ({error}); raise the limit (ulimit -n) or lower --max-listen-streams"
                );
            } else {
                tracing::warn!("accepting a connection failed: {error}");
            }
        } else {
            tracing::debug!("accepting a connection failed: {error}");
        }
    }
}

impl axum::serve::Listener for Acceptor {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    // Replies are small and written in pieces (headers, then events): without
                    // TCP_NODELAY, Nagle's algorithm holds each later piece for the client's
                    // delayed ACK, 40 ms a request.
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!("could not set TCP_NODELAY: {e}");
                    }
                    return (stream, peer);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    ) => {}
                Err(e) => {
                    self.failed(&e);
                    tokio::time::sleep(RETRY_ACCEPT).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_of_descriptors_is_kept_from_listen_streams() {
        assert_eq!(listen_stream_budget(1024, None), 1024);
        assert_eq!(listen_stream_budget(1024, Some(256)), 192);
        assert_eq!(listen_stream_budget(1024, Some(100)), 36);
        assert_eq!(listen_stream_budget(1024, Some(1 << 20)), 1024);
        assert_eq!(listen_stream_budget(1024, Some(10)), 0);
    }
}
