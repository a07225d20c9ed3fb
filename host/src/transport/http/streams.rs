//! Replayable SSE streams: every message a session sends over HTTP goes into a numbered stream
//! (one per POST that answers with SSE, and the session's standalone stream for GET and the
//! SSE transport). Each event has the id `<stream>-<seq>`; the last events of each stream
//! are kept, bounded, so a client whose connection dropped can resume with `Last-Event-ID`.

use std::collections::{BTreeMap, VecDeque};

use axum::response::sse::Event;
use tokio::sync::mpsc;

/// Events kept per stream for replay.
const REPLAY_EVENTS: usize = 512;
/// Finished streams kept per session for replay.
const FINISHED_STREAMS: usize = 16;
/// Events queued for one live connection before it counts as too slow (it can resume).
pub const LIVE_QUEUE: usize = 256;

/// The stream every session has for messages not tied to a request.
pub const STANDALONE: u64 = 0;

/// One SSE stream.
#[derive(Default)]
struct Stream {
    events: VecDeque<(u64, String)>,
    next_seq: u64,
    /// The highest sequence number handed to a live connection.
    delivered: u64,
    live: Option<mpsc::Sender<Event>>,
    done: bool,
}

/// All streams of one session.
#[derive(Default)]
pub struct Streams {
    next_id: u64,
    by_id: BTreeMap<u64, Stream>,
}

fn event(stream: u64, seq: u64, data: &str) -> Event {
    Event::default().id(format!("{stream}-{seq}")).data(data)
}

impl Streams {
    /// A session's streams, with its standalone stream open.
    pub fn new() -> Self {
        let mut streams = Self {
            next_id: STANDALONE + 1,
            by_id: BTreeMap::new(),
        };
        streams.by_id.insert(STANDALONE, Stream::default());
        streams
    }

    /// Open a new stream with a live connection.
    pub fn open(&mut self, live: mpsc::Sender<Event>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.by_id.insert(
            id,
            Stream {
                live: Some(live),
                ..Stream::default()
            },
        );
        id
    }

    /// Append a message to a stream and pass it to its live connection, if any.
    pub fn push(&mut self, stream: u64, data: String) {
        let Some(s) = self.by_id.get_mut(&stream) else {
            return;
        };
        s.next_seq += 1;
        let seq = s.next_seq;
        if let Some(live) = &s.live {
            if live.try_send(event(stream, seq, &data)).is_ok() {
                s.delivered = seq;
            } else {
                // Gone or too slow: keep buffering; the client may resume.
                if !live.is_closed() {
                    tracing::debug!(
                        stream,
                        "dropped the connection of a stream whose client is not reading it (it may resume)"
                    );
                }
                s.live = None;
            }
        }
        s.events.push_back((seq, data));
        if s.events.len() > REPLAY_EVENTS {
            s.events.pop_front();
        }
    }

    /// A stream is complete: close its live connection.
    pub fn finish(&mut self, stream: u64) {
        if let Some(s) = self.by_id.get_mut(&stream) {
            s.done = true;
            s.live = None;
        }
        let finished: Vec<u64> = self
            .by_id
            .iter()
            .filter(|(id, s)| **id != STANDALONE && s.done)
            .map(|(id, _)| *id)
            .collect();
        for id in finished
            .iter()
            .take(finished.len().saturating_sub(FINISHED_STREAMS))
        {
            self.by_id.remove(id);
        }
    }

    /// Attach a connection to the standalone stream, replacing any other, and send it what
    /// no connection has received yet.
    pub fn attach_standalone(&mut self, live: mpsc::Sender<Event>) {
        let Some(s) = self.by_id.get_mut(&STANDALONE) else {
            return;
        };
        let from = s.delivered;
        for (seq, data) in s.events.iter().filter(|(seq, _)| *seq > from) {
            if live.try_send(event(STANDALONE, *seq, data)).is_err() {
                return;
            }
            s.delivered = *seq;
        }
        s.live = Some(live);
    }

    /// Resume after `last_event_id` (`<stream>-<seq>`): send the stream's later events, and
    /// attach the connection if the stream is still open. `false` if the id is unknown.
    pub fn resume(&mut self, last_event_id: &str, live: mpsc::Sender<Event>) -> bool {
        let Some((stream, seq)) = last_event_id.split_once('-') else {
            return false;
        };
        let (Ok(stream), Ok(seq)) = (stream.parse::<u64>(), seq.parse::<u64>()) else {
            return false;
        };
        let Some(s) = self.by_id.get_mut(&stream) else {
            return false;
        };
        for (later, data) in s.events.iter().filter(|(n, _)| *n > seq) {
            if live.try_send(event(stream, *later, data)).is_err() {
                return true;
            }
            s.delivered = s.delivered.max(*later);
        }
        if !s.done {
            s.live = Some(live);
        }
        true
    }

    /// Close the standalone stream's connection (shutdown): streams of requests in flight stay
    /// open until their responses are sent.
    pub fn close_standalone(&mut self) {
        if let Some(s) = self.by_id.get_mut(&STANDALONE) {
            s.live = None;
        }
    }

    /// Close every live connection (the session ended).
    pub fn close_all(&mut self) {
        for s in self.by_id.values_mut() {
            s.live = None;
        }
    }

    /// Whether any connection is attached.
    pub fn has_live(&self) -> bool {
        self.by_id
            .values()
            .any(|s| s.live.as_ref().is_some_and(|l| !l.is_closed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(rx: &mut mpsc::Receiver<Event>) -> usize {
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        n
    }

    #[test]
    fn a_dropped_stream_can_be_resumed_from_the_last_event_id() {
        let mut streams = Streams::new();
        let (tx, mut rx) = mpsc::channel(LIVE_QUEUE);
        let id = streams.open(tx);
        streams.push(id, "one".into());
        assert_eq!(drain(&mut rx), 1);
        drop(rx);
        streams.push(id, "two".into());
        streams.push(id, "three".into());
        let (tx, mut rx) = mpsc::channel(LIVE_QUEUE);
        assert!(streams.resume(&format!("{id}-1"), tx));
        assert_eq!(drain(&mut rx), 2);
        streams.push(id, "four".into());
        assert_eq!(drain(&mut rx), 1, "still attached while the stream is open");
        assert!(!streams.resume("99-1", mpsc::channel(1).0));
        assert!(!streams.resume("garbage", mpsc::channel(1).0));
    }

    #[test]
    fn the_standalone_stream_holds_events_until_a_connection_attaches() {
        let mut streams = Streams::new();
        streams.push(STANDALONE, "early".into());
        let (tx, mut rx) = mpsc::channel(LIVE_QUEUE);
        streams.attach_standalone(tx);
        assert_eq!(drain(&mut rx), 1);
        let (tx, mut rx) = mpsc::channel(LIVE_QUEUE);
        streams.attach_standalone(tx);
        assert_eq!(drain(&mut rx), 0, "already delivered");
    }

    /// SECURITY.md, "Slow consumers": a connection whose client falls a whole queue behind is
    /// dropped, not backlogged; the stream keeps its events, so a 2025-11-25 client can resume
    /// with `Last-Event-ID`.
    #[test]
    fn a_connection_a_whole_queue_behind_is_dropped_and_can_resume() {
        let mut streams = Streams::new();
        let (tx, mut rx) = mpsc::channel(LIVE_QUEUE);
        let id = streams.open(tx);
        for i in 0..LIVE_QUEUE {
            streams.push(id, i.to_string());
        }
        assert!(streams.has_live(), "a full queue is not yet behind");
        streams.push(id, "one too many".into());
        assert!(!streams.has_live(), "the connection was kept");
        assert!(rx.is_closed(), "the host still holds the connection");
        streams.push(id, "after".into());
        assert_eq!(
            drain(&mut rx),
            LIVE_QUEUE,
            "only what was queued reached it"
        );
        let (tx, mut rx) = mpsc::channel(LIVE_QUEUE);
        assert!(streams.resume(&format!("{id}-{LIVE_QUEUE}"), tx));
        assert_eq!(drain(&mut rx), 2, "the two events it missed");
        assert!(streams.has_live());
    }

    #[test]
    fn replay_is_bounded() {
        let mut streams = Streams::new();
        for i in 0..(REPLAY_EVENTS + 10) {
            streams.push(STANDALONE, i.to_string());
        }
        let (tx, mut rx) = mpsc::channel(REPLAY_EVENTS + 10);
        assert!(streams.resume("0-0", tx));
        assert_eq!(drain(&mut rx), REPLAY_EVENTS);
    }
}
