//! Who gives way at the connection cap: the open connection that has gone longest without a
//! complete request.
//!
//! Slow clients that trickle a head, or open connections and send nothing, hold a place under
//! `HTTP_MAX_CONNECTIONS` until the header timeout closes them. If the loop stopped accepting at
//! the cap, such a flood would keep ManyChat's own connections waiting in the listen backlog. So
//! when a connection arrives at the cap, the server closes the one that has waited longest
//! without a complete request (a head still arriving, or a kept-alive connection between
//! requests), measured from its last complete request or, without one, from its accept. A
//! connection serving a request is never chosen; when every open connection is serving one,
//! the newcomer waits for a place as before.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use super::connections::Activity;

/// The open connections and how to close each.
#[derive(Debug, Default)]
pub struct Registry {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Entry>>,
}

#[derive(Debug)]
struct Entry {
    activity: Activity,
    close: CancellationToken,
}

impl Registry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Registers an accepted connection; it leaves the registry when the returned value drops.
    pub fn register(self: &Arc<Self>, activity: Activity) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = CancellationToken::new();
        self.lock().insert(
            id,
            Entry {
                activity,
                close: close.clone(),
            },
        );
        Registered {
            registry: self.clone(),
            id,
            close,
        }
    }

    /// Closes the connection that has gone longest without a complete request (the earlier
    /// accepted first when two tie); `false` when every open connection is serving a request.
    pub fn evict_longest_waiting(&self) -> bool {
        let open = self.lock();
        let chosen = open
            .iter()
            .filter(|(_, entry)| !entry.close.is_cancelled())
            .filter_map(|(id, entry)| entry.activity.waiting_since().map(|since| (since, *id)))
            .min();
        match chosen.and_then(|(_, id)| open.get(&id)) {
            Some(entry) => {
                entry.close.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connection's entry: `close` fires when it is chosen to give way.
#[derive(Debug)]
pub struct Registered {
    registry: Arc<Registry>,
    id: u64,
    pub close: CancellationToken,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn connection_cap_the_longest_without_a_complete_request_gives_way_never_a_busy_one() {
        let registry = Registry::new();
        let limits = (Duration::from_secs(10), Duration::from_secs(75));
        let (trickling, _w1) = Activity::new(limits.0, limits.1);
        let first = registry.register(trickling.clone());
        tokio::time::advance(Duration::from_secs(1)).await;
        let (busy, _w2) = Activity::new(limits.0, limits.1);
        let second = registry.register(busy.clone());
        tokio::time::advance(Duration::from_secs(1)).await;
        let (kept, _w3) = Activity::new(limits.0, limits.1);
        let third = registry.register(kept.clone());
        // The second serves a request; the third finished one just now.
        busy.request_started();
        kept.request_started();
        kept.response_finished();

        assert!(registry.evict_longest_waiting());
        assert!(first.close.is_cancelled(), "the oldest without a request");
        assert!(registry.evict_longest_waiting());
        assert!(third.close.is_cancelled());
        assert!(!registry.evict_longest_waiting(), "a busy connection never");
        assert!(!second.close.is_cancelled());
        drop((first, third));
        assert_eq!(registry.lock().len(), 1);
    }
}
