//! The conversation order (037): one turn of a conversation runs at a time (`OrderStore`).

use super::*;

/// Held while a turn of one conversation runs (037); dropping it lets the next turn start.
/// On Postgres it holds a session advisory lock, so the order holds across replicas; on SQLite
/// (one process) the in-process queue in `turn::order` is the whole mechanism.
pub struct ConversationLock {
    _held: Option<Box<dyn Send + Sync>>,
}

impl ConversationLock {
    /// A lock that holds nothing beyond the in-process queue.
    pub fn local() -> Self {
        Self { _held: None }
    }

    pub fn holding(guard: impl Send + Sync + 'static) -> Self {
        Self {
            _held: Some(Box::new(guard)),
        }
    }
}

impl std::fmt::Debug for ConversationLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConversationLock")
    }
}

/// 037: the order of one conversation's turns.
#[async_trait]
pub trait OrderStore: Send + Sync + 'static {
    /// 037: waits until no other turn of this conversation runs, in arrival order, across every
    /// process sharing the database (Postgres), and holds that until the lock is dropped.
    async fn lock_conversation(&self, id: ConversationId) -> Result<ConversationLock>;

    /// True when one process owns the database (SQLite), so `lock_conversation` adds nothing to
    /// the in-process turn order and a turn may take its place before it knows its conversation.
    fn single_process(&self) -> bool {
        false
    }

    /// Renews this process's lease as a live replica (PostgreSQL), which keeps the promises it
    /// wrote its own (`OutboxStore::orphaned_promises`). A store one process owns keeps none.
    async fn beat(&self) -> Result<()> {
        Ok(())
    }
}
