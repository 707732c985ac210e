//! SQLite: the conversation order (`OrderStore`, 037): one process, so the in-process queue is
//! the whole mechanism.

use super::*;

#[async_trait]
impl OrderStore for SqliteStore {
    async fn lock_conversation(&self, _id: ConversationId) -> Result<ConversationLock> {
        // One process owns a SQLite file: the in-process queue orders its turns.
        Ok(ConversationLock::local())
    }

    fn single_process(&self) -> bool {
        true
    }
}
