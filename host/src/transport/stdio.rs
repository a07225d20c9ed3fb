//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout.
//!
//! This is the only code that writes to stdout, and it writes nothing but protocol messages:
//! one writer owns the stream and sends each reply as one line, batching whatever is queued
//! into one write. When stdin and stdout are pipes or sockets (as an MCP client starts us),
//! both are driven by the async runtime directly ([`stdio_streams`]): no thread hand-off per
//! message in either direction. Otherwise (a terminal, a file) stdin is read by a thread of
//! its own and stdout written by one, where tokio's own stdin and stdout would hop through its
//! blocking pool for every read and write. Input is read line by
//! line with a size limit; a bad line (not JSON, not UTF-8, too long) gets its error reply and
//! the session goes on. Each decoded line goes to [`Session::accept`], which keeps arrival
//! order and hands back the work to run concurrently (so a slow tool never holds up anything
//! else). Both revisions share the process: each message is served in its own. At end of input
//! listen streams close, and the transport waits (boundedly) for calls in flight, writes their
//! replies and returns.

use std::io::{self, Read, Write};
use std::os::fd::AsFd as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, ReadBuf};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::principal::Principal;
use crate::protocol::error::INVALID_REQUEST;
use crate::protocol::jsonrpc::{decode, encode_error, sniff_id};
use crate::protocol::{ErrorObject, Reply};
use crate::server::{Backend, Session, forward_events};

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Settings of the stdio transport.
#[derive(Debug, Clone, Copy)]
pub struct StdioConfig {
    /// The longest input line accepted, in bytes; longer lines are refused with -32600.
    pub max_message_bytes: usize,
    /// How long to wait for calls in flight after stdin closes.
    pub drain_timeout: Duration,
}

impl StdioConfig {
    /// 4 MiB.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;
}

impl Default for StdioConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Lines this long or longer are decoded on a blocking thread.
const OFF_THE_WORKERS_BYTES: usize = 256 << 10;

/// How many replies may wait for the writer before request handlers wait for it.
const OUTPUT_QUEUE: usize = 1024;

/// Where replies are written.
pub enum Output {
    /// A blocking writer (a terminal, a file), owned by a thread of its own.
    Blocking(Box<dyn Write + Send>),
    /// A non-blocking pipe or socket, written by a task of the runtime.
    Async(Box<dyn tokio::io::AsyncWrite + Unpin + Send>),
}

/// Serve `session` over `input` and `output` until input ends, output closes, or `shutdown`
/// resolves (then like end of input: calls in flight are answered, boundedly).
pub async fn serve<B: Backend>(
    session: Arc<Session<B>>,
    input: impl AsyncBufRead + Unpin,
    output: Output,
    config: StdioConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let (replies, queue) = mpsc::channel::<Reply>(OUTPUT_QUEUE);
    let mut writer = match output {
        // A blocking thread for the whole session: writes need no hand-off per reply.
        Output::Blocking(output) => {
            tokio::task::spawn_blocking(move || write_replies(output, queue))
        }
        Output::Async(output) => tokio::spawn(write_replies_async(output, queue)),
    };
    let mut lines = LineReader::new(input, config.max_message_bytes);
    let mut in_flight = JoinSet::new();
    // List changes, resource updates and host messages, for as long as the session runs.
    let events = {
        let (session, replies) = (Arc::clone(&session), replies.clone());
        tokio::spawn(async move { forward_events(&session, &Principal::local(), replies).await })
    };
    let stop_events = AbortOnDrop(events);

    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down: no more input is read");
                break;
            }
            line = lines.next() => {
                let Some(line) = line? else { break };
                while in_flight.try_join_next().is_some() {}
                // Nothing else in flight and no more input read: the request is run here
                // first (see `handle_line`).
                let alone = in_flight.is_empty() && !lines.more_read();
                handle_line(&session, line, &replies, &mut in_flight, config.max_message_bytes, alone).await;
            }
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            finished = &mut writer => {
                tracing::info!("stdout closed; ending the session");
                return finished.unwrap_or(Ok(()));
            }
        }
    }

    tracing::debug!(in_flight = in_flight.len(), "stdin closed");
    // Listen streams end with their final result; then what is in flight is answered.
    session.close();
    let drained = tokio::time::timeout(config.drain_timeout, async {
        while in_flight.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            abandoned = in_flight.len(),
            "stdin closed; gave up waiting for calls in flight"
        );
        in_flight.abort_all();
    }
    // The event forwarder holds a sender too: stop it, so the writer sees the queue close.
    drop(stop_events);
    drop(replies);
    writer.await.unwrap_or(Ok(()))
}

async fn handle_line<B: Backend>(
    session: &Arc<Session<B>>,
    line: Line,
    replies: &mpsc::Sender<Reply>,
    in_flight: &mut JoinSet<()>,
    max_bytes: usize,
    alone: bool,
) {
    let bytes = match line {
        Line::TooLong(length, head) => {
            let error = ErrorObject::new(
                INVALID_REQUEST,
                format!(
                    "invalid request: a message of {length} bytes exceeds the maximum message size ({} bytes, --max-message-bytes)",
                    max_bytes
                ),
            );
            let id = sniff_id(&head);
            let _ = replies.send(encode_error(id.as_ref(), &error)).await;
            return;
        }
        Line::Complete(bytes) => bytes,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    // The line's bytes count against the global budget until its request is answered.
    let share = match session.limits().request_bytes.take(bytes.len()) {
        Ok(share) => share,
        Err(refused) => {
            let id = sniff_id(&bytes);
            let _ = replies
                .send(encode_error(id.as_ref(), &refused.error()))
                .await;
            return;
        }
    };
    let decoded = if bytes.len() >= OFF_THE_WORKERS_BYTES {
        // A large line is parsed on a blocking thread, not on a worker every request shares.
        match tokio::task::spawn_blocking(move || decode(&bytes)).await {
            Ok(decoded) => decoded,
            Err(e) => {
                tracing::error!("decoding a message failed: {e}");
                return;
            }
        }
    } else {
        decode(&bytes)
    };
    // The session decides what runs now (in arrival order) and what runs concurrently.
    // One user on stdio: the local principal.
    let Some(pending) = session
        .accept(decoded, None, replies, &Principal::local())
        .await
    else {
        return;
    };
    if pending.settled {
        // Answered in arrival order: out before anything read later.
        if let Some(answer) = pending.work.await {
            let _ = replies.send(answer.reply).await;
        }
        return;
    }
    let mut work = pending.work;
    // Alone (nothing else in flight, no more input read): the work is polled here once, so a
    // call that finishes at once (most do: a plugin call runs to its end unless it waits on
    // the host or its CPU time reaches an epoch tick) is answered without a hand-off to
    // another task, which on an idle machine is the wake-up of another thread. Work that does
    // not finish goes on in a task of its own, as it does when others are in flight.
    if alone && let Poll::Ready(answer) = futures::poll!(&mut work) {
        if let Some(answer) = answer {
            let _ = replies.send(answer.reply).await;
        }
        drop(share);
        return;
    }
    let replies = replies.clone();
    in_flight.spawn(async move {
        let _share = share;
        if let Some(answer) = work.await {
            let _ = replies.send(answer.reply).await;
        }
    });
}

/// Write each reply as one line, flushing whenever the queue runs dry (so replies that are
/// ready together leave in one write). Runs on a blocking thread.
fn write_replies(output: impl Write, mut queue: mpsc::Receiver<Reply>) -> io::Result<()> {
    let mut output = io::BufWriter::with_capacity(64 << 10, output);
    while let Some(reply) = queue.blocking_recv() {
        output.write_all(reply.0.as_bytes())?;
        output.write_all(b"\n")?;
        while let Ok(reply) = queue.try_recv() {
            output.write_all(reply.0.as_bytes())?;
            output.write_all(b"\n")?;
        }
        output.flush()?;
    }
    output.flush()
}

/// Write each reply as one line from a task, batching whatever is queued into one write.
async fn write_replies_async(
    mut output: impl tokio::io::AsyncWrite + Unpin,
    mut queue: mpsc::Receiver<Reply>,
) -> io::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let mut buffer = Vec::with_capacity(64 << 10);
    while let Some(reply) = queue.recv().await {
        buffer.clear();
        buffer.extend_from_slice(reply.0.as_bytes());
        buffer.push(b'\n');
        while buffer.len() < (64 << 10)
            && let Ok(reply) = queue.try_recv()
        {
            buffer.extend_from_slice(reply.0.as_bytes());
            buffer.push(b'\n');
        }
        output.write_all(&buffer).await?;
        output.flush().await?;
    }
    output.flush().await
}

/// The process's stdin and stdout as the runtime's own non-blocking streams, when both are
/// pipes or sockets; `None` otherwise (use [`stdin_reader`] and a blocking writer).
pub fn stdio_streams() -> Option<(
    Box<dyn AsyncBufRead + Unpin + Send>,
    Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
)> {
    let input = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    // Both kinds first: making one side the runtime's sets `O_NONBLOCK` on its open file
    // description, which outlives this function, so it must not happen unless both sides go.
    let (input_kind, output_kind) = (kind(&input)?, kind(&output)?);
    let reader: Box<dyn tokio::io::AsyncRead + Unpin + Send> = match input_kind {
        StreamKind::Fifo => Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(input).ok()?),
        StreamKind::Socket => {
            let stream = std::os::unix::net::UnixStream::from(input);
            stream.set_nonblocking(true).ok()?;
            Box::new(tokio::net::UnixStream::from_std(stream).ok()?)
        }
    };
    let writer: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match output_kind {
        StreamKind::Fifo => Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(output).ok()?),
        StreamKind::Socket => {
            let stream = std::os::unix::net::UnixStream::from(output);
            stream.set_nonblocking(true).ok()?;
            Box::new(tokio::net::UnixStream::from_std(stream).ok()?)
        }
    };
    Some((
        Box::new(tokio::io::BufReader::with_capacity(64 << 10, reader)),
        writer,
    ))
}

enum StreamKind {
    Fifo,
    Socket,
}

/// Whether `fd` is a pipe or a Unix socket (the streams the runtime can drive).
fn kind(fd: &std::os::fd::OwnedFd) -> Option<StreamKind> {
    let stat = rustix::fs::fstat(fd).ok()?;
    match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
        rustix::fs::FileType::Fifo => Some(StreamKind::Fifo),
        rustix::fs::FileType::Socket => {
            // Only Unix sockets: a TCP socket as stdio (inetd) stays on the blocking path.
            let family = rustix::net::getsockname(fd).ok()?.address_family();
            (family == rustix::net::AddressFamily::UNIX).then_some(StreamKind::Socket)
        }
        _ => None,
    }
}

/// Wait until `fd` is ready for `what`: for a descriptor a parent handed over non-blocking,
/// which the blocking paths read and write all the same.
fn wait_until_ready(
    fd: std::os::fd::BorrowedFd<'_>,
    what: rustix::event::PollFlags,
) -> io::Result<()> {
    let mut fds = [rustix::event::PollFd::new(&fd, what)];
    loop {
        match rustix::event::poll(&mut fds, None) {
            Err(rustix::io::Errno::INTR) => continue,
            done => return done.map(drop).map_err(io::Error::from),
        }
    }
}

/// The process's stdout for the blocking writer, written straight to the descriptor (the
/// writer buffers; std's line buffer would add a copy): a descriptor the parent made
/// non-blocking is waited on rather than failing the session with `EAGAIN`.
#[derive(Default)]
pub struct BlockingStdout;

impl Write for BlockingStdout {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let stdout = io::stdout();
        loop {
            match rustix::io::write(stdout.as_fd(), bytes) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => {
                    wait_until_ready(stdout.as_fd(), rustix::event::PollFlags::OUT)?;
                }
                done => return done.map_err(io::Error::from),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How many chunks of input may wait for the session before the reading thread waits.
const INPUT_QUEUE: usize = 16;

/// The process's stdin, read by a thread of its own and handed over chunk by chunk.
pub struct StdinReader {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    position: usize,
}

/// Start the thread that reads stdin. It ends at end of input, on a read error (delivered to
/// the reader), or when the reader is dropped and its next chunk has nowhere to go.
pub fn stdin_reader() -> io::Result<StdinReader> {
    let (sender, chunks) = mpsc::channel(INPUT_QUEUE);
    std::thread::Builder::new()
        .name("mcpbox-stdin".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            let mut buffer = vec![0u8; 64 << 10];
            loop {
                let chunk = match stdin.read(&mut buffer) {
                    Ok(0) => return,
                    Ok(n) => Ok(buffer[..n].to_vec()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        match wait_until_ready(io::stdin().as_fd(), rustix::event::PollFlags::IN) {
                            Ok(()) => continue,
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e),
                };
                let failed = chunk.is_err();
                if sender.blocking_send(chunk).is_err() || failed {
                    return;
                }
            }
        })?;
    Ok(StdinReader {
        chunks,
        chunk: Vec::new(),
        position: 0,
    })
}

impl AsyncBufRead for StdinReader {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        if this.position >= this.chunk.len() {
            match ready!(this.chunks.poll_recv(cx)) {
                Some(Ok(chunk)) => {
                    this.chunk = chunk;
                    this.position = 0;
                }
                Some(Err(e)) => return Poll::Ready(Err(e)),
                // End of input: an empty buffer from now on.
                None => {
                    this.chunk.clear();
                    this.position = 0;
                }
            }
        }
        Poll::Ready(Ok(&this.chunk[this.position..]))
    }

    fn consume(self: Pin<&mut Self>, amount: usize) {
        let this = self.get_mut();
        this.position = (this.position + amount).min(this.chunk.len());
    }
}

impl AsyncRead for StdinReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let available = ready!(self.as_mut().poll_fill_buf(cx))?;
        let n = available.len().min(buf.remaining());
        buf.put_slice(&available[..n]);
        self.consume(n);
        Poll::Ready(Ok(()))
    }
}

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// The line's bytes, without the newline (or a trailing `\r`).
    Complete(Vec<u8>),
    /// A line longer than the limit, skipped: its length in bytes, and its first bytes (enough
    /// to read the request's id, so the error can be matched to it).
    TooLong(usize, Vec<u8>),
}

/// How much of an over-long line is kept to read its id.
const HEAD_BYTES: usize = 4096;

/// Reads lines without ever holding more than the limit in memory. A line read in part is
/// kept in the reader, so `next` may be cancelled (as `select!` does) without losing input.
struct LineReader<R> {
    input: R,
    max_bytes: usize,
    /// The line so far (empty once it is over the limit).
    line: Vec<u8>,
    /// Its length so far, counting what was dropped.
    length: usize,
    /// Input past the last line was already read (a client sending requests back to back).
    more_read: bool,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    fn new(input: R, max_bytes: usize) -> Self {
        Self {
            input,
            max_bytes,
            line: Vec::new(),
            length: 0,
            more_read: false,
        }
    }

    /// Whether input past the last line returned was already read.
    fn more_read(&self) -> bool {
        self.more_read
    }

    /// The next line, or `None` at end of input.
    async fn next(&mut self) -> io::Result<Option<Line>> {
        loop {
            let available = self.input.fill_buf().await?;
            if available.is_empty() {
                if self.length == 0 {
                    return Ok(None);
                }
                break;
            }
            let (chunk, used, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], i + 1, true),
                None => (available, available.len(), false),
            };
            self.length += chunk.len();
            if self.length <= self.max_bytes {
                self.line.extend_from_slice(chunk);
            } else if self.line.len() > HEAD_BYTES {
                self.line.truncate(HEAD_BYTES);
                self.line.shrink_to_fit();
            } else if self.line.len() < HEAD_BYTES {
                let room = HEAD_BYTES - self.line.len();
                self.line.extend_from_slice(&chunk[..room.min(chunk.len())]);
            }
            let rest = available.len() - used;
            self.input.consume(used);
            if done {
                self.more_read = rest > 0;
                break;
            }
        }
        let length = std::mem::take(&mut self.length);
        let mut line = std::mem::take(&mut self.line);
        if length > self.max_bytes {
            return Ok(Some(Line::TooLong(length, line)));
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(Some(Line::Complete(line)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(4, input), max);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_strips_carriage_returns() {
        let got = lines(b"one\r\ntwo\nthree", 100).await;
        assert_eq!(
            got,
            vec![
                Line::Complete(b"one".to_vec()),
                Line::Complete(b"two".to_vec()),
                Line::Complete(b"three".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn long_lines_are_skipped_and_reading_goes_on() {
        let got = lines(b"short\nthis line is far too long\nok\n", 10).await;
        assert_eq!(
            got,
            vec![
                Line::Complete(b"short".to_vec()),
                Line::TooLong(25, b"this line is far too long".to_vec()),
                Line::Complete(b"ok".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn a_cancelled_read_keeps_the_part_of_the_line_already_read() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut reader = LineReader::new(tokio::io::BufReader::new(server), 100);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"{\"half\":")
            .await
            .unwrap();
        // The read takes the first half, then waits for more; give up on it then.
        let cancelled = tokio::time::timeout(Duration::from_millis(50), reader.next()).await;
        assert!(cancelled.is_err());
        tokio::io::AsyncWriteExt::write_all(&mut client, b"1}\n")
            .await
            .unwrap();
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Line::Complete(b"{\"half\":1}".to_vec()))
        );
    }

    /// A backend with one tool that panics, as a host defect some input reaches would.
    struct Panics;

    impl Backend for Panics {
        type Target = ();

        fn resolve(&self, _: &crate::protocol::request::ClientRequest) {}

        fn offers(&self) -> crate::server::Offers {
            crate::server::Offers::default()
        }

        fn events(&self) -> Option<tokio::sync::broadcast::Receiver<crate::server::ServerEvent>> {
            None
        }

        fn list(
            &self,
            _: crate::server::ListKind,
            _: Option<&str>,
            _: &Principal,
        ) -> crate::server::MethodResult {
            Err(ErrorObject::new(-32601, "nothing listed"))
        }

        #[allow(clippy::panic, reason = "the defect this test stands for")]
        async fn call_tool(
            &self,
            (): (),
            name: &str,
            _: &serde_json::value::RawValue,
            _: crate::server::RequestContext,
        ) -> crate::server::MethodResult {
            panic!("a host defect reached by tool {name}");
        }

        async fn get_prompt(
            &self,
            _: (),
            _: &str,
            _: std::collections::BTreeMap<String, String>,
            _: crate::server::RequestContext,
        ) -> crate::server::MethodResult {
            Err(ErrorObject::new(-32601, "no prompts"))
        }

        async fn read_resource(
            &self,
            _: (),
            _: &str,
            _: crate::server::RequestContext,
        ) -> crate::server::MethodResult {
            Err(ErrorObject::new(-32601, "no resources"))
        }

        async fn complete(
            &self,
            _: (),
            _: crate::protocol::mcp::CompleteParams,
            _: crate::server::RequestContext,
        ) -> crate::server::MethodResult {
            Err(ErrorObject::new(-32601, "no completions"))
        }
    }

    #[tokio::test]
    async fn a_request_whose_handling_panics_is_answered_and_the_session_goes_on() {
        let session = Arc::new(Session::new(
            Arc::new(Panics),
            crate::server::Mode::Dual,
            Arc::default(),
        ));
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"boom","arguments":{}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"boom","arguments":{}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            "\n",
        );
        let (output, mut read_back) = tokio::io::duplex(1 << 16);
        let served = tokio::time::timeout(
            Duration::from_secs(10),
            serve(
                session,
                tokio::io::BufReader::new(input.as_bytes()),
                Output::Async(Box::new(output)),
                StdioConfig::default(),
                std::future::pending(),
            ),
        )
        .await;
        assert!(matches!(served, Ok(Ok(()))), "{served:?}");
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut read_back, &mut written)
            .await
            .unwrap();
        let replies: Vec<serde_json::Value> = written
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        for id in [2, 3] {
            let reply = replies
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no reply to {id}: {written}"));
            assert_eq!(reply["error"]["code"], -32603, "{reply}");
            let message = reply["error"]["message"].as_str().unwrap();
            assert!(message.contains("internal error"), "{message}");
            assert!(
                !message.contains("boom"),
                "no details for the client: {message}"
            );
        }
        assert!(
            replies
                .iter()
                .any(|r| r["id"] == 4 && r["result"].is_object()),
            "{written}"
        );
    }

    #[tokio::test]
    async fn a_line_at_the_limit_is_accepted() {
        let got = lines(b"0123456789\n", 10).await;
        assert_eq!(got, vec![Line::Complete(b"0123456789".to_vec())]);
    }
}
