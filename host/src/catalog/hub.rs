//! The event hub: how plugins and the live plugin set reach sessions (list changes, resource
//! updates, host messages) and the reloader (a plugin asking for its lists to be read again).
//! Built once where the parts are wired together, and handed to each.
//!
//! A resource update is announced to an [`Audience`]: the caller it was raised for, when the
//! plugin keeps each caller's state apart, else everyone (the bridge decides which).
//!
//! Everything a plugin can trigger is bounded here: resource updates are rate-limited per
//! plugin and audience, and relist requests are coalesced by the reloader, so a plugin calling
//! `notify-resource-updated` or `notify-list-changed` in a loop costs the host (and its
//! clients) a bounded amount. (Per audience, so that one caller's updates never use up
//! another's allowance: that caller would see its own dropped, and so learn when the first
//! was busy.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{broadcast, mpsc};

use crate::policy::PluginName;
use crate::server::{Admission, Audience, RateLimit, ServerEvent};

/// How many events a slow session may fall behind before it is told that everything changed.
const EVENT_BACKLOG: usize = 256;
/// Resource updates one plugin may announce per second, sustained.
const UPDATES_PER_SECOND: f64 = 20.0;
/// Resource updates one plugin may announce in a burst.
const UPDATE_BURST: f64 = 50.0;
/// Rate buckets of resource updates kept before the full ones (as good as new) are let go.
const UPDATE_BUCKETS_KEPT: usize = 1024;

/// The sending side of every event; cheap to clone.
#[derive(Clone)]
pub struct EventHub {
    events: broadcast::Sender<ServerEvent>,
    relist: mpsc::UnboundedSender<PluginName>,
    updates: Arc<Mutex<HashMap<(PluginName, Audience), RateLimit>>>,
    relists_pending: Arc<Mutex<std::collections::HashSet<PluginName>>>,
}

/// Where relist requests arrive (the reloader holds it; dropping it means nobody relists).
pub type RelistRequests = mpsc::UnboundedReceiver<PluginName>;

impl EventHub {
    /// A hub, and the receiving end of relist requests for the reloader.
    pub fn new() -> (Self, RelistRequests) {
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        let (relist, requests) = mpsc::unbounded_channel();
        (
            Self {
                events,
                relist,
                updates: Arc::default(),
                relists_pending: Arc::default(),
            },
            requests,
        )
    }

    /// Tell every session.
    pub fn announce(&self, event: ServerEvent) {
        // No receivers just means no session is connected.
        let _ = self.events.send(event);
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ServerEvent> {
        self.events.subscribe()
    }

    /// Ask the reloader to read `plugin`'s lists again.
    pub fn relist(&self, plugin: &PluginName) {
        // One request per plugin waits at a time: a plugin asking in a loop queues nothing more.
        if !self
            .relists_pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(plugin.clone())
        {
            return;
        }
        if self.relist.send(plugin.clone()).is_err() {
            tracing::debug!(
                plugin = &**plugin,
                "ignored notify-list-changed: the plugin directory is not watched"
            );
        }
    }

    /// The reloader took `plugin`'s relist request: a later request queues a new one.
    pub fn relist_taken(&self, plugin: &PluginName) {
        self.relists_pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(plugin);
    }

    /// Announce to `audience` that `plugin`'s resource at `uri` changed, within the rate of
    /// the plugin's updates to that audience.
    pub fn resource_updated(&self, plugin: &PluginName, uri: String, audience: Audience) {
        let admission = {
            let mut updates = self.updates.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (plugin.clone(), audience.clone());
            if updates.len() >= UPDATE_BUCKETS_KEPT && !updates.contains_key(&key) {
                updates.retain(|_, bucket| !bucket.is_full());
            }
            updates
                .entry(key)
                .or_insert_with(|| RateLimit::new(UPDATES_PER_SECOND, UPDATE_BURST))
                .admit()
        };
        match admission {
            Admission::Passed { .. } => {
                self.announce(ServerEvent::ResourceUpdated { uri, audience });
            }
            Admission::FirstDropped => tracing::warn!(
                plugin = &**plugin,
                rate = UPDATES_PER_SECOND,
                "resource updates over the rate limit are dropped until the plugin slows down"
            ),
            Admission::Dropped => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relist_requests_queue_once_per_plugin() {
        let (hub, mut requests) = EventHub::new();
        let plugin: PluginName = "p".into();
        for _ in 0..10_000 {
            hub.relist(&plugin);
        }
        assert!(requests.try_recv().is_ok());
        assert!(requests.try_recv().is_err());
        hub.relist_taken(&plugin);
        hub.relist(&plugin);
        assert!(requests.try_recv().is_ok());
    }

    #[test]
    fn resource_updates_are_rate_limited_per_plugin() {
        let (hub, _requests) = EventHub::new();
        let mut events = hub.subscribe();
        let noisy: PluginName = "noisy".into();
        for i in 0..10_000 {
            hub.resource_updated(&noisy, format!("x://{i}"), Audience::Everyone);
        }
        hub.resource_updated(&"quiet".into(), "q://1".to_owned(), Audience::Everyone);
        let mut received = 0;
        while events.try_recv().is_ok() {
            received += 1;
        }
        assert!((51..=60).contains(&received), "{received}");
    }

    #[test]
    fn one_callers_updates_leave_anothers_rate_alone() {
        use crate::principal::{Principal, Scopes};
        let (hub, _requests) = EventHub::new();
        let mut events = hub.subscribe();
        let plugin: PluginName = "memory".into();
        let alice = Audience::caller(&Principal::token("alice", Scopes::All));
        let bob = Audience::caller(&Principal::token("bob", Scopes::All));
        for _ in 0..10_000 {
            hub.resource_updated(&plugin, "memory://graph".to_owned(), alice.clone());
        }
        while events.try_recv().is_ok() {}
        hub.resource_updated(&plugin, "memory://graph".to_owned(), bob.clone());
        assert_eq!(
            events.try_recv().ok(),
            Some(ServerEvent::ResourceUpdated {
                uri: "memory://graph".to_owned(),
                audience: bob,
            })
        );
    }
}
