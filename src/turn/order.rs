//! One turn at a time per contact (037): a turn that enters history starts only after the
//! contact's previous such turn has settled, in arrival order.
//!
//! Within a process, a fair (FIFO) async mutex per conversation gives arrival order; the store's
//! `lock_conversation` then extends the exclusion across processes (a Postgres advisory lock).
//! The guard is held until the turn has settled: its reply recorded inline, or queued in the
//! outbox. Entries of idle conversations are pruned, so memory follows active conversations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

use crate::ids::ConversationId;
use crate::store::{ConversationLock, Store, StoreError};

/// Prune the map when it grows past this many conversations.
const PRUNE_AT: usize = 1024;

pub struct TurnOrder {
    queues: Mutex<HashMap<ConversationId, Arc<tokio::sync::Mutex<()>>>>,
    store: Arc<dyn Store>,
}

/// Proof that this turn may run; dropping it lets the conversation's next turn start.
#[derive(Debug)]
pub struct TurnGuard {
    _store: ConversationLock,
    _local: OwnedMutexGuard<()>,
}

impl TurnOrder {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            queues: Mutex::new(HashMap::new()),
            store,
        }
    }

    /// Waits for the conversation's earlier turns, in arrival order.
    pub async fn acquire(&self, conversation: ConversationId) -> Result<TurnGuard, StoreError> {
        let queue = {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            if queues.len() >= PRUNE_AT {
                queues.retain(|_, queue| Arc::strong_count(queue) > 1);
            }
            queues.entry(conversation).or_default().clone()
        };
        let local = queue.lock_owned().await;
        let store = self.store.lock_conversation(conversation).await?;
        Ok(TurnGuard {
            _store: store,
            _local: local,
        })
    }
}
