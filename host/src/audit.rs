//! The audit log (`--audit-log PATH`): the sessions' audit records as JSON lines, appended to
//! a file created readable by its owner only, by one writer task behind a bounded queue, so a
//! slow disk never holds a request up (a record that finds the queue full is dropped, counted
//! in `mcpbox_audit_records_dropped_total` and warned of). On SIGHUP the file is reopened by
//! its path, so logrotate can move it away.
//!
//! Uses: `metrics`, `server`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt as _;
use tokio::sync::mpsc;

use crate::server::{AuditRecord, AuditSink};

/// Records waiting for the writer; more are dropped.
const QUEUE: usize = 4096;
/// Bytes of records waiting for the writer; more are dropped.
const QUEUE_BYTES: usize = 4 * 1024 * 1024;

/// The audit log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log {}", path.display())]
pub struct AuditError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The file the sessions' audit records go to.
#[derive(Debug)]
pub struct AuditLog {
    queue: mpsc::Sender<String>,
    /// The bytes of the records in `queue`.
    queued: Arc<AtomicUsize>,
    dropped: AtomicU64,
}

impl AuditLog {
    /// Open (or create, mode 0600) `path` for appending and start its writer task.
    pub async fn start(path: PathBuf) -> Result<Arc<Self>, AuditError> {
        let file = open(&path).await.map_err(|source| AuditError {
            path: path.clone(),
            source,
        })?;
        let (queue, lines) = mpsc::channel(QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        tokio::spawn(write(path, file, lines, Arc::clone(&queued)));
        Ok(Arc::new(Self {
            queue,
            queued,
            dropped: AtomicU64::new(0),
        }))
    }
}

impl AuditSink for AuditLog {
    fn record(&self, record: AuditRecord) {
        let line = record.into_line();
        let bytes = line.len();
        let room = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued + bytes <= QUEUE_BYTES).then_some(queued + bytes)
            })
            .is_ok();
        let sent = room && self.queue.try_send(line).is_ok();
        if room && !sent {
            self.queued.fetch_sub(bytes, Ordering::AcqRel);
        }
        if !sent {
            crate::metrics::metrics().audit_dropped();
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    "the audit log writer fell behind (or stopped): audit records were dropped"
                );
            }
        }
    }
}

async fn open(path: &Path) -> std::io::Result<tokio::fs::File> {
    let mut options = tokio::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    options.mode(0o600);
    options.open(path).await
}

/// Resolves at each SIGHUP (never where there is none).
struct Hangups(#[cfg(unix)] Option<tokio::signal::unix::Signal>);

impl Hangups {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self(
                signal(SignalKind::hangup())
                    .inspect_err(|e| {
                        tracing::warn!("cannot watch SIGHUP to reopen the audit log: {e}")
                    })
                    .ok(),
            )
        }
        #[cfg(not(unix))]
        Self()
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.0
            && signal.recv().await.is_some()
        {
            return;
        }
        std::future::pending::<()>().await;
    }
}

/// Append each line to the file, flushing whenever the queue runs dry; reopen it on SIGHUP.
async fn write(
    path: PathBuf,
    mut file: tokio::fs::File,
    mut lines: mpsc::Receiver<String>,
    queued: Arc<AtomicUsize>,
) {
    let mut hangups = Hangups::new();
    loop {
        tokio::select! {
            line = lines.recv() => {
                let Some(line) = line else { break };
                let mut written = file.write_all(line.as_bytes()).await;
                queued.fetch_sub(line.len(), Ordering::AcqRel);
                if written.is_ok() && lines.is_empty() {
                    written = file.flush().await;
                }
                if let Err(e) = written {
                    tracing::error!(path = %path.display(), "cannot write the audit log: {e}");
                }
            }
            () = hangups.next() => {
                let _ = file.flush().await;
                match open(&path).await {
                    Ok(reopened) => {
                        file = reopened;
                        tracing::info!(path = %path.display(), "reopened the audit log");
                    }
                    Err(e) => tracing::error!(
                        path = %path.display(),
                        "cannot reopen the audit log (still writing the old file): {e}"
                    ),
                }
            }
        }
    }
    let _ = file.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(item: &str) -> AuditRecord {
        AuditRecord {
            time: "2026-11-23T18:00:00.000Z".to_owned(),
            principal: "local".to_owned(),
            client: None,
            method: "tools/call".to_owned(),
            plugin: Some("echo_tools".to_owned()),
            item: Some(item.to_owned()),
            outcome: "ok",
            code: None,
            duration_ms: 0.5,
            fuel: Some(10),
            request_id: serde_json::json!(1),
            trace_id: None,
            cut: std::collections::BTreeMap::new(),
        }
    }

    async fn lines(path: &Path, count: usize) -> Vec<serde_json::Value> {
        for _ in 0..200 {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.lines().count() >= count {
                return text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the audit log did not get {count} lines");
    }

    #[tokio::test]
    async fn records_are_appended_as_json_lines_to_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "").unwrap();
        std::fs::remove_file(&path).unwrap();
        let log = AuditLog::start(path.clone()).await.unwrap();
        log.record(record("one"));
        log.record(record("two"));
        let lines = lines(&path, 2).await;
        assert_eq!(lines[0]["item"], "one");
        assert_eq!(lines[1]["item"], "two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[tokio::test]
    async fn an_unopenable_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let error = AuditLog::start(dir.path().join("no/such/dir/audit.jsonl"))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("cannot open the audit log"));
    }
}
