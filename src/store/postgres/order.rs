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

    async fn beat(&self) -> Result<()> {
        sqlx::query(
            "INSERT INTO replicas (holder, lease_until) \
             VALUES ($1, now() + make_interval(secs => $2)) \
             ON CONFLICT (holder) DO UPDATE SET lease_until = EXCLUDED.lease_until",
        )
        .bind(self.tickets.holder())
        .bind(REPLICA_LEASE_SECS)
        .execute(&self.pool)
        .await?;
        // Replicas gone for a day: their promises are long settled.
        sqlx::query("DELETE FROM replicas WHERE lease_until < now() - interval '1 day'")
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// How long a replica counts as alive after its last beat (`OrderStore::beat`, about every
/// second while `serve` runs): a replica silent that long is taken for dead and its promises
/// are run again by the survivors.
pub(super) const REPLICA_LEASE_SECS: i32 = 5;

/// How long a turn ticket lives without a renewal; its process renews it every third of that.
pub(super) const TICKET_LEASE_SECS: i32 = 10;
/// How soon a waiting turn asks again whether its ticket is first, doubling up to the maximum.
pub(super) const TICKET_POLL_FIRST: std::time::Duration = std::time::Duration::from_millis(20);
pub(super) const TICKET_POLL_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// This process's turn tickets: who holds them (`holder`), which are held by a turn still alive
/// (`live`), and whether the task renewing their leases runs (it runs while any is live, and
/// stops when none is). Only live tickets are renewed: a ticket whose turn ended is given back,
/// and one whose give-back failed (the database did not answer) lapses with its lease instead of
/// holding its contact's next turns behind it.
pub(super) struct Tickets {
    holder: uuid::Uuid,
    state: std::sync::Mutex<TicketState>,
}

#[derive(Default)]
pub(super) struct TicketState {
    live: std::collections::BTreeSet<i64>,
    renewing: bool,
}

/// How often a ticket's give-back is tried before it is left to lapse, and the first pause
/// between tries (doubling).
const TICKET_RETURN_TRIES: u32 = 4;
const TICKET_RETURN_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

impl Tickets {
    pub(super) fn new() -> Self {
        Self {
            holder: uuid::Uuid::new_v4(),
            state: std::sync::Mutex::default(),
        }
    }

    /// This process's id: the holder of its tickets and the owner of the promises it writes.
    pub(super) fn holder(&self) -> uuid::Uuid {
        self.holder
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TicketState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
            let mut state = self.state();
            state.live.insert(id);
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

    /// Renews the live tickets every third of their lease while any is, and clears tickets
    /// whose holders died long ago.
    async fn renew(self: Arc<Self>, pool: PgPool) {
        let every = std::time::Duration::from_secs(u64::from(TICKET_LEASE_SECS.unsigned_abs()) / 3);
        loop {
            tokio::time::sleep(every).await;
            {
                let mut state = self.state();
                if state.live.is_empty() {
                    state.renewing = false;
                    return;
                }
            }
            if let Err(error) = self.renew_live(&pool).await {
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

    /// One renewal: the lease of every ticket a live turn holds, and of no other.
    async fn renew_live(&self, pool: &PgPool) -> Result<()> {
        let live: Vec<i64> = self.state().live.iter().copied().collect();
        if live.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE turn_tickets SET lease_until = now() + make_interval(secs => $3) \
             WHERE holder = $1 AND id = ANY($2)",
        )
        .bind(self.holder)
        .bind(&live)
        .bind(TICKET_LEASE_SECS)
        .execute(pool)
        .await?;
        Ok(())
    }
}

/// A turn's place in its conversation's order; given back (deleted) when dropped, however the
/// turn ended. It stops being renewed at once; the delete runs in a task (drop cannot await) and
/// is tried again a few times while the database does not answer; if it never does, the ticket
/// lapses with its lease.
pub(super) struct Ticket {
    id: i64,
    pool: PgPool,
    tickets: Arc<Tickets>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.tickets.state().live.remove(&self.id);
        let (id, pool) = (self.id, self.pool.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let mut pause = TICKET_RETURN_PAUSE;
                for _ in 0..TICKET_RETURN_TRIES {
                    let deleted = sqlx::query("DELETE FROM turn_tickets WHERE id = $1")
                        .bind(id)
                        .execute(&pool)
                        .await;
                    if deleted.is_ok() {
                        return;
                    }
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                tracing::warn!(
                    ticket = id,
                    "turn ticket not given back; it lapses with its lease"
                );
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::ids::SubscriberId;

    /// 037: a ticket is renewed only while its turn is alive. A ticket this process could not
    /// give back (the database did not answer when its turn ended) is left out of every renewal,
    /// so it lapses and the contact's next turn runs instead of waiting behind it for ever; a
    /// ticket given back is deleted.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn system_037_only_a_live_turns_ticket_is_renewed_and_a_stranded_one_lapses() {
        let store = isolated_test_store().await;
        let at = DateTime::from_timestamp_millis(1_770_000_000_000).expect("an instant");
        let live_contact = store
            .conversation_for(&SubscriberId::parse("5550021").unwrap(), "whatsapp", at)
            .await
            .unwrap();
        let stranded_contact = store
            .conversation_for(&SubscriberId::parse("5550022").unwrap(), "whatsapp", at)
            .await
            .unwrap();
        let live = store.lock_conversation(live_contact.id).await.unwrap();
        // What a turn that ended while the database was down leaves: its row, this holder's.
        let stranded: i64 = sqlx::query_scalar(
            "INSERT INTO turn_tickets (conversation_id, holder, lease_until) \
             VALUES ($1, $2, now() + interval '2 seconds') RETURNING id",
        )
        .bind(stranded_contact.id)
        .bind(store.tickets.holder)
        .fetch_one(&store.pool)
        .await
        .unwrap();
        let lease = |id: i64| {
            sqlx::query_scalar::<_, f64>(
                "SELECT EXTRACT(EPOCH FROM lease_until - now())::float8 FROM turn_tickets \
                 WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(&store.pool)
        };
        store.tickets.renew_live(&store.pool).await.unwrap();
        assert!(
            lease(stranded).await.unwrap().unwrap() <= 2.0,
            "not renewed"
        );
        let live_id = *store.tickets.state().live.iter().next().expect("one live");
        assert!(lease(live_id).await.unwrap().unwrap() > 5.0, "renewed");

        // Its lease passes (set here, not waited for): the next turn of that contact is first.
        sqlx::query(
            "UPDATE turn_tickets SET lease_until = now() - interval '1 second' WHERE id = $1",
        )
        .bind(stranded)
        .execute(&store.pool)
        .await
        .unwrap();
        let next = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            store.lock_conversation(stranded_contact.id),
        )
        .await
        .expect("the contact is not wedged behind the stranded ticket")
        .unwrap();
        drop(next);

        drop(live);
        assert!(store.tickets.state().live.is_empty(), "no longer renewed");
        let mut gone = false;
        for _ in 0..200 {
            if lease(live_id).await.unwrap().is_none() {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(gone, "a ticket whose turn ended is given back");
    }
}
