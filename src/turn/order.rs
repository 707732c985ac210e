//! One turn at a time per contact (037): a turn that enters history starts only after the
//! contact's previous such turn has settled, in arrival order.
//!
//! When one process owns the database (SQLite), a fair (FIFO) async mutex per contact gives
//! arrival order and is the whole mechanism; a turn that finds its contact's mutex free takes it
//! at once, before it has read its conversation. When several processes share it (Postgres),
//! the store's `lock_conversation` is the whole mechanism: a ticket taken at arrival, in one
//! order for every replica, waited for without holding a connection. The two are
//! never combined: a turn holding the local mutex while its ticket waits behind a ticket of a
//! turn queued on that same mutex would wait forever.
//! The guard is held until the turn has settled: its reply recorded inline, or queued in the
//! outbox. Entries of idle conversations are pruned, so memory follows active conversations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

use crate::ids::{ConversationId, SubscriberId};
use crate::store::{ConversationLock, Store, StoreError};

/// Prune the map when it grows past this many conversations.
const PRUNE_AT: usize = 1024;

pub struct TurnOrder {
    /// Keyed by contact: a contact has one conversation, and the key is known before it is read.
    queues: Mutex<HashMap<SubscriberId, Arc<tokio::sync::Mutex<()>>>>,
    store: Arc<dyn Store>,
}

/// Proof that this turn may run; dropping it lets the conversation's next turn start.
#[derive(Debug)]
pub struct TurnGuard {
    _store: ConversationLock,
    _local: Option<OwnedMutexGuard<()>>,
}

impl TurnOrder {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            queues: Mutex::new(HashMap::new()),
            store,
        }
    }

    /// Waits for the conversation's earlier turns, in arrival order.
    pub async fn acquire(
        &self,
        subscriber: &SubscriberId,
        conversation: ConversationId,
    ) -> Result<TurnGuard, StoreError> {
        if !self.store.single_process() {
            let store = self.store.lock_conversation(conversation).await?;
            return Ok(TurnGuard {
                _store: store,
                _local: None,
            });
        }
        let local = self.queue(subscriber).lock_owned().await;
        Ok(TurnGuard {
            _store: ConversationLock::local(),
            _local: Some(local),
        })
    }

    /// The contact's place at once, if no earlier turn of theirs is running or waiting and one
    /// process owns the database; `None` otherwise (the caller waits with `acquire`). The
    /// mutex is fair: it is free only when nobody is queued for it.
    pub fn try_acquire(&self, subscriber: &SubscriberId) -> Option<TurnGuard> {
        if !self.store.single_process() {
            return None;
        }
        let local = self.queue(subscriber).try_lock_owned().ok()?;
        Some(TurnGuard {
            _store: ConversationLock::local(),
            _local: Some(local),
        })
    }

    fn queue(&self, subscriber: &SubscriberId) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if queues.len() >= PRUNE_AT {
            queues.retain(|_, queue| Arc::strong_count(queue) > 1);
        }
        if let Some(queue) = queues.get(subscriber) {
            return queue.clone();
        }
        queues.entry(subscriber.clone()).or_default().clone()
    }
}
