//! PostgreSQL: the conversation order (`OrderStore`, 037): a ticket per conversation, held by a
//! session advisory lock, so the order holds across replicas.

use super::*;

#[async_trait]
impl OrderStore for PgStore {
    async fn lock_conversation(&self, id: ConversationId) -> Result<ConversationLock> {
        // The ticket is taken now (its id is the turn's place in arrival order across replicas)
        // and given back when the guard drops, also when this wait is abandoned.
        let ticket = self.tickets.take(&self.pool, id).await?;
        let mut pause = TICKET_POLL_FIRST;
        loop {
            // Only live tickets count: a dead replica's lapse with their lease.
            let first: bool = sqlx::query_scalar(
                "SELECT NOT EXISTS (SELECT 1 FROM turn_tickets WHERE conversation_id = $1 \
                 AND id < $2 AND lease_until > now())",
            )
            .bind(id)
            .bind(ticket.id)
            .fetch_one(&self.pool)
            .await?;
            if first {
                return Ok(ConversationLock::holding(ticket));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(TICKET_POLL_MAX);
        }
    }
}

/// How long a turn ticket lives without a renewal; its process renews it every third of that.
pub(super) const TICKET_LEASE_SECS: i32 = 10;
/// How soon a waiting turn asks again whether its ticket is first, doubling up to the maximum.
pub(super) const TICKET_POLL_FIRST: std::time::Duration = std::time::Duration::from_millis(20);
pub(super) const TICKET_POLL_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// This process's turn tickets: who holds them (`holder`), how many are out, and whether the
/// task renewing their leases runs (it runs while any is out, and stops when none is).
pub(super) struct Tickets {
    holder: uuid::Uuid,
    state: std::sync::Mutex<TicketState>,
}

#[derive(Default)]
pub(super) struct TicketState {
    out: usize,
    renewing: bool,
}

impl Tickets {
    pub(super) fn new() -> Self {
        Self {
            holder: uuid::Uuid::new_v4(),
            state: std::sync::Mutex::default(),
        }
    }

    async fn take(self: &Arc<Self>, pool: &PgPool, conversation: ConversationId) -> Result<Ticket> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO turn_tickets (conversation_id, holder, lease_until) \
             VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING id",
        )
        .bind(conversation)
        .bind(self.holder)
        .bind(TICKET_LEASE_SECS)
        .fetch_one(pool)
        .await?;
        let start = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.out += 1;
            !std::mem::replace(&mut state.renewing, true)
        };
        if start {
            tokio::spawn(self.clone().renew(pool.clone()));
        }
        Ok(Ticket {
            id,
            pool: pool.clone(),
            tickets: self.clone(),
        })
    }

    /// Renews this process's tickets every third of their lease while any is out, and clears
    /// tickets whose holders died long ago.
    async fn renew(self: Arc<Self>, pool: PgPool) {
        let every = std::time::Duration::from_secs(u64::from(TICKET_LEASE_SECS.unsigned_abs()) / 3);
        loop {
            tokio::time::sleep(every).await;
            {
                let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if state.out == 0 {
                    state.renewing = false;
                    return;
                }
            }
            let renewed = sqlx::query(
                "UPDATE turn_tickets SET lease_until = now() + make_interval(secs => $2) \
                 WHERE holder = $1",
            )
            .bind(self.holder)
            .bind(TICKET_LEASE_SECS)
            .execute(&pool)
            .await;
            if let Err(error) = renewed {
                // The next renewal tries again; a whole lease without one lets the tickets lapse.
                tracing::error!(error = %error, "could not renew turn tickets");
            }
            let _ = sqlx::query(
                "DELETE FROM turn_tickets WHERE lease_until < now() - interval '1 hour'",
            )
            .execute(&pool)
            .await;
        }
    }
}

/// A turn's place in its conversation's order; given back (deleted) when dropped. The delete
/// runs in a task (drop cannot await); if it fails, the ticket lapses with its lease.
pub(super) struct Ticket {
    id: i64,
    pool: PgPool,
    tickets: Arc<Tickets>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        {
            let mut state = self
                .tickets
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            state.out = state.out.saturating_sub(1);
        }
        let (id, pool) = (self.id, self.pool.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = sqlx::query("DELETE FROM turn_tickets WHERE id = $1")
                    .bind(id)
                    .execute(&pool)
                    .await;
            });
        }
    }
}
