//! The server backend, for several replicas: Postgres with native types (`uuid`, `timestamptz`,
//! `jsonb`, `date`).
//!
//! Owns the Postgres dialect of every `Store` operation and the test helper that gives each test
//! its own schema.
//!
//! Invariants: migrations run on connect; `claim_outbox` locks the rows it takes with
//! `FOR UPDATE SKIP LOCKED` inside one transaction, so concurrent workers on any replica never
//! take one row; timestamps are written truncated to the millisecond, so both backends read back
//! the same values.

use std::str::FromStr;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;

use super::common::{self, after, before, bounded_error, not_found, to_millis};
use super::{ActionRecord, Nudge, NudgeExchange, NudgeStatus, SalesRecord};
use super::{
    BudgetUsage, CONTACT_TABLES, ClaimRules, Conversation, ConversationLock, Exchange, ExchangeIds,
    Forgotten, KeepPromise, NewOutboxRow, NewTurn, OutboxKind, OutboxRow, Result, Store,
    StoreError, Turn,
};
use crate::ids::{ConversationId, SubscriberId};

/// `DATABASE_POOL_SIZE` when unset. A turn holds a connection only for its short queries (never
/// across its model call), so this serves `MAX_TURNS_IN_FLIGHT`'s default of 64 turns beside
/// the outbox worker.
pub const DEFAULT_POOL_SIZE: u32 = 16;
/// A caller waiting longer than this for a connection has lost its 10-second budget anyway
/// (C7): failing lets it escalate instead (C6). sqlx's default is 30 s.
const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

const CONVERSATION_COLUMNS: &str = "id, subscriber_id, channel, turn_count, escalated_at, \
     last_message_at, token_hash, previous_token_hash, token_issued_at, token_generation, \
     offering, opening_sent_at, created_at, updated_at";

const TURN_COLUMNS: &str = "id, seq, conversation_id, role, text, outcome, model, bound, \
     actions, reads, input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at, \
     escalation_reason, media_kind";

const OUTBOX_COLUMNS: &str = "id, conversation_id, subscriber_id, kind, payload, status, \
     attempts, next_attempt_at, last_error, lease_until, created_at, delivered_at, \
     messages_delivered, trigger_timeouts";

/// `OUTBOX_COLUMNS` but `id`, which `claim_outbox`'s `UPDATE … FROM due` must qualify.
const CLAIMED_COLUMNS: &str = "conversation_id, subscriber_id, kind, payload, status, \
     attempts, next_attempt_at, last_error, lease_until, created_at, delivered_at, \
     messages_delivered, trigger_timeouts";

/// The Postgres store. Cheap to clone: it is a handle on one connection pool.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// This process's turn tickets (037 across replicas).
    tickets: Arc<Tickets>,
}

impl PgStore {
    /// Connects to `url` (`postgres://…`) and runs the migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_sized(url, DEFAULT_POOL_SIZE).await
    }

    /// [`PgStore::connect`] with a pool of `pool_size` connections (`DATABASE_POOL_SIZE`).
    pub async fn connect_sized(url: &str, pool_size: u32) -> Result<Self> {
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            StoreError::Database("DATABASE_URL does not parse as a PostgreSQL URL".to_owned())
        })?;
        Self::connect_with(options, pool_size.max(1)).await
    }

    async fn connect_with(options: PgConnectOptions, max_connections: u32) -> Result<Self> {
        let pool = match PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options.clone())
            .await
        {
            Ok(pool) => pool,
            // The pool retries a refused or failed connection until its timeout and then
            // reports only the timeout: one direct attempt says why.
            Err(sqlx::Error::PoolTimedOut) => {
                use sqlx::Connection;
                let direct = tokio::time::timeout(
                    ACQUIRE_TIMEOUT,
                    sqlx::PgConnection::connect_with(&options),
                )
                .await;
                let why = match direct {
                    Ok(Err(error)) => connect_failure(&error),
                    _ => connect_failure(&sqlx::Error::PoolTimedOut),
                };
                return Err(StoreError::Database(why));
            }
            Err(error) => return Err(StoreError::Database(connect_failure(&error))),
        };
        sqlx::migrate!("migrations/postgres").run(&pool).await?;
        Ok(Self {
            pool,
            tickets: Arc::new(Tickets::new()),
        })
    }
}

/// Why a connection could not be made, in an operator's words, with the SQLSTATE or I/O kind
/// for a search. The common failures are named; the rest keep the driver's bounded description.
fn connect_failure(err: &sqlx::Error) -> String {
    use std::io::ErrorKind;
    match err {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            let plain = match code.as_str() {
                "28000" => {
                    "the server refused the role (it does not exist, or no pg_hba.conf entry \
                     allows this role, host and database)"
                }
                "28P01" => "the password was refused",
                "3D000" => "the database does not exist on that server",
                "42501" => "the role lacks a privilege it needs (the migrations create tables)",
                "53300" => "the server has no free connection slot (too many connections)",
                "57P03" => "the server is starting up or shutting down; try again shortly",
                _ => return common::describe(err),
            };
            format!("{plain} (SQLSTATE {code})")
        }
        sqlx::Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => {
                "nothing accepts connections at that host and port (connection refused)".to_owned()
            }
            ErrorKind::TimedOut => "the server did not answer in time".to_owned(),
            ErrorKind::NotFound => "the host or socket was not found".to_owned(),
            ErrorKind::PermissionDenied => "permission denied by the operating system".to_owned(),
            // A host name that does not resolve surfaces as an uncategorised error whose text
            // (from the resolver, never the URL) says so.
            _ if io.to_string().contains("lookup") => "the host name does not resolve".to_owned(),
            kind => format!("i/o error: {kind}"),
        },
        sqlx::Error::PoolTimedOut => {
            "no connection within 5 s (the server did not answer in time)".to_owned()
        }
        sqlx::Error::Tls(_) => {
            "the TLS handshake failed (check sslmode and the server's certificate)".to_owned()
        }
        other => common::describe(other),
    }
}

/// Tests only: a store in a fresh schema `test_<uuid>` of the database `url` names, so tests
/// running in parallel never share tables. The schema is left behind.
#[doc(hidden)]
pub async fn connect_isolated(url: &str) -> Result<PgStore> {
    let (options, schema) = fresh_schema(url).await?;
    PgStore::connect_with(options.options([("search_path", schema.as_str())]), 4).await
}

/// Tests only: two stores (two pools, as two replicas would have) on one fresh schema.
#[doc(hidden)]
pub async fn connect_isolated_pair(url: &str) -> Result<(PgStore, PgStore)> {
    let (options, schema) = fresh_schema(url).await?;
    let options = options.options([("search_path", schema.as_str())]);
    let first = PgStore::connect_with(options.clone(), 4).await?;
    let second = PgStore::connect_with(options, 4).await?;
    Ok((first, second))
}

async fn fresh_schema(url: &str) -> Result<(PgConnectOptions, String)> {
    let schema = create_test_schema(url).await?;
    Ok((PgConnectOptions::from_str(url)?, schema))
}

/// Tests only: creates a fresh, empty schema and returns its name. Its name carries its
/// creation time, and test schemas more than an hour old (left by earlier runs; tests do not
/// drop theirs) are dropped first, so a shared test database does not fill up run after run.
#[doc(hidden)]
pub async fn create_test_schema(url: &str) -> Result<String> {
    const STALE_SECS: u64 = 3600;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let schema = format!("test_{now}_{}", uuid::Uuid::new_v4().simple());
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(PgConnectOptions::from_str(url)?)
        .await?;
    // Earlier builds named them `test_<uuid>` / `order_<uuid>`, without a time: all stale.
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace \
         WHERE nspname ~ '^(test|order)_[0-9a-f]{32}$' OR nspname ~ '^test_[0-9]+_[0-9a-f]{32}$'",
    )
    .fetch_all(&pool)
    .await?;
    for name in names {
        let created = name
            .strip_prefix("test_")
            .and_then(|rest| rest.split_once('_'))
            .and_then(|(secs, _)| secs.parse::<u64>().ok());
        if created.is_some_and(|secs| secs + STALE_SECS > now) {
            continue;
        }
        // The name matched the patterns above (letters, digits, `_`): safe in DDL. Another
        // run may be dropping the same one: its failure changes nothing.
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
            .execute(&pool)
            .await;
    }
    // The name is generated above from digits and hex, so formatting it into DDL is safe.
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&pool)
        .await?;
    pool.close().await;
    Ok(schema)
}

fn conversation_from(row: &PgRow) -> Result<Conversation> {
    Ok(Conversation {
        id: row.try_get("id")?,
        subscriber_id: common::subscriber(row.try_get::<&str, _>("subscriber_id")?)?,
        channel: row.try_get("channel")?,
        turn_count: row.try_get("turn_count")?,
        escalated_at: row.try_get("escalated_at")?,
        last_message_at: row.try_get("last_message_at")?,
        token_hash: row.try_get("token_hash")?,
        previous_token_hash: row.try_get("previous_token_hash")?,
        token_issued_at: row.try_get("token_issued_at")?,
        token_generation: row.try_get("token_generation")?,
        offering: row.try_get("offering")?,
        opening_sent_at: row.try_get("opening_sent_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn turn_from(row: &PgRow) -> Result<Turn> {
    let actions: Option<Json<Value>> = row.try_get("actions")?;
    Ok(Turn {
        id: row.try_get("id")?,
        seq: row.try_get("seq")?,
        conversation_id: row.try_get("conversation_id")?,
        role: common::role(row.try_get::<&str, _>("role")?)?,
        text: row.try_get("text")?,
        outcome: row.try_get("outcome")?,
        model: row.try_get("model")?,
        bound: row.try_get("bound")?,
        actions: actions.map(|Json(value)| value),
        reads: row.try_get("reads")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        cached_tokens: row.try_get("cached_tokens")?,
        cost_usd: row.try_get("cost_usd")?,
        latency_ms: row.try_get("latency_ms")?,
        created_at: row.try_get("created_at")?,
        escalation_reason: row.try_get("escalation_reason")?,
        media_kind: row.try_get("media_kind")?,
    })
}

fn outbox_from(row: &PgRow) -> Result<OutboxRow> {
    let Json(payload): Json<Value> = row.try_get("payload")?;
    Ok(OutboxRow {
        id: row.try_get("id")?,
        conversation_id: row.try_get("conversation_id")?,
        subscriber_id: common::subscriber(row.try_get::<&str, _>("subscriber_id")?)?,
        kind: common::outbox_kind(row.try_get::<&str, _>("kind")?)?,
        payload,
        status: common::outbox_status(row.try_get::<&str, _>("status")?)?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        last_error: row.try_get("last_error")?,
        lease_until: row.try_get("lease_until")?,
        created_at: row.try_get("created_at")?,
        delivered_at: row.try_get("delivered_at")?,
        messages_delivered: row.try_get("messages_delivered")?,
        trigger_timeouts: row.try_get("trigger_timeouts")?,
    })
}

impl PgStore {
    async fn find_conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        let row = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE subscriber_id = $1"
        ))
        .bind(subscriber_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(conversation_from).transpose()
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

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

    async fn conversation_for(
        &self,
        subscriber_id: &SubscriberId,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<Conversation> {
        // The common case, a returning contact, is one read; the insert only on first contact.
        if let Some(found) = self.find_conversation_by_subscriber(subscriber_id).await? {
            return Ok(found);
        }
        // Two first messages racing: the loser's insert does nothing and both read the winner.
        sqlx::query(
            "INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4) ON CONFLICT (subscriber_id) DO NOTHING",
        )
        .bind(super::new_conversation_id())
        .bind(subscriber_id.as_str())
        .bind(channel)
        .bind(to_millis(now))
        .execute(&self.pool)
        .await?;
        self.find_conversation_by_subscriber(subscriber_id)
            .await?
            .ok_or_else(|| StoreError::Database("conversation vanished after insert".to_owned()))
    }

    async fn conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        self.find_conversation_by_subscriber(subscriber_id).await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        let row = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(conversation_from).transpose()
    }

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
        set_escalated_in(&self.pool, id, at).await
    }

    async fn set_token(
        &self,
        id: ConversationId,
        token_hash: &str,
        issued_at: DateTime<Utc>,
    ) -> Result<i64> {
        // One statement: the right-hand sides read the row as it was, so the old current hash
        // becomes the previous one.
        let generation: Option<i64> = sqlx::query_scalar(
            "UPDATE conversations SET previous_token_hash = token_hash, token_hash = $1, \
             token_issued_at = $2, token_generation = token_generation + 1, updated_at = $2 \
             WHERE id = $3 RETURNING token_generation",
        )
        .bind(token_hash)
        .bind(to_millis(issued_at))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        generation.ok_or_else(|| not_found("conversation"))
    }

    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>> {
        let rows = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations \
             WHERE token_hash IS NULL AND COALESCE(last_message_at, created_at) >= $1 \
             ORDER BY created_at, id"
        ))
        .bind(to_millis(since))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(conversation_from).collect()
    }

    async fn record_turn(&self, turn: &NewTurn) -> Result<i64> {
        insert_turn(&self.pool, turn).await
    }

    async fn update_turn_actions(&self, turn_id: i64, actions: &Value) -> Result<()> {
        let done = sqlx::query("UPDATE turns SET actions = $1 WHERE id = $2")
            .bind(Json(actions))
            .bind(turn_id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("turn"));
        }
        Ok(())
    }

    async fn turn(&self, turn_id: i64) -> Result<Option<Turn>> {
        let row = sqlx::query(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = $1"))
            .bind(turn_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(turn_from).transpose()
    }

    async fn history(
        &self,
        conversation_id: ConversationId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Turn>> {
        let rows = sqlx::query(&format!(
            "SELECT {TURN_COLUMNS} FROM (\
                 SELECT {TURN_COLUMNS} FROM turns \
                 WHERE conversation_id = $1 AND bound AND created_at >= $2 \
                 ORDER BY created_at DESC, seq DESC LIMIT $3\
             ) AS recent ORDER BY created_at, seq"
        ))
        .bind(conversation_id)
        .bind(to_millis(since))
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(turn_from).collect()
    }

    async fn recent_user_turn_times(
        &self,
        conversation_id: ConversationId,
        limit: i64,
    ) -> Result<Vec<DateTime<Utc>>> {
        let times: Vec<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT created_at FROM turns \
             WHERE conversation_id = $1 AND bound AND role = 'user' \
             ORDER BY created_at DESC, seq DESC LIMIT $2",
        )
        .bind(conversation_id)
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        Ok(times)
    }

    async fn turns(&self, conversation_id: ConversationId) -> Result<Vec<Turn>> {
        let rows = sqlx::query(&format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE conversation_id = $1 ORDER BY created_at, seq"
        ))
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(turn_from).collect()
    }

    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        // Two statements when a window begins: in one transaction.
        let mut tx = self.pool.begin().await?;
        let count = bump_rate_in(&mut tx, subscriber_id, window_start).await?;
        tx.commit().await?;
        Ok(count)
    }

    async fn rate_count(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let count: Option<i64> = sqlx::query_scalar(
            "SELECT count FROM rate_counters WHERE subscriber_id = $1 AND window_start = $2",
        )
        .bind(subscriber_id.as_str())
        .bind(to_millis(window_start))
        .fetch_optional(&self.pool)
        .await?;
        Ok(count.unwrap_or(0))
    }

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage> {
        let row: Option<(i64, f64)> =
            sqlx::query_as("SELECT tokens, cost_usd FROM budget_counters WHERE day = $1")
                .bind(day)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row
            .map(|(tokens, cost_usd)| BudgetUsage { tokens, cost_usd })
            .unwrap_or_default())
    }

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()> {
        add_budget_in(&self.pool, day, tokens, cost_usd).await
    }

    async fn enqueue(&self, row: &NewOutboxRow) -> Result<i64> {
        insert_outbox(&self.pool, row, None).await
    }

    async fn claim_outbox_row(
        &self,
        id: i64,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<OutboxRow>> {
        let row = sqlx::query(&format!(
            "UPDATE outbox SET status = 'delivering', lease_until = $1, \
             attempts = attempts + 1 WHERE id = $2 AND status = 'pending' \
             RETURNING {OUTBOX_COLUMNS}"
        ))
        .bind(to_millis(after(now, lease)))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(outbox_from).transpose()
    }

    async fn pending_outbox(&self, kind: OutboxKind) -> Result<Vec<OutboxRow>> {
        let rows = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE status = 'pending' AND kind = $1 \
             ORDER BY id"
        ))
        .bind(kind.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(outbox_from).collect()
    }

    async fn claim_outbox(&self, rules: ClaimRules) -> Result<Vec<OutboxRow>> {
        // SKIP LOCKED: a row another worker is claiming right now is passed over, not waited
        // for. A blocked newer reply stays blocked even when the older one is locked, because
        // the NOT EXISTS still sees the older row as pending or delivering.
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(&format!(
            "WITH due AS (\
                 SELECT o.id FROM outbox o \
                 WHERE ((o.status = 'pending' AND o.next_attempt_at <= $2) \
                        OR (o.status = 'delivering' AND o.lease_until <= $2)) \
                   AND (o.kind = 'contact_token' OR \
                        NOT EXISTS (SELECT 1 FROM outbox p \
                                    WHERE p.conversation_id = o.conversation_id \
                                      AND p.kind = 'reply' AND p.id < o.id \
                                      AND p.status IN ('pending', 'delivering'))) \
                   AND (o.kind <> 'reply' OR \
                        NOT EXISTS (SELECT 1 FROM outbox d \
                                    WHERE d.conversation_id = o.conversation_id \
                                      AND d.kind = 'reply' AND d.status = 'delivered' \
                                      AND d.delivered_at > $3)) \
                 ORDER BY (o.kind = 'contact_token'), o.id LIMIT $4 \
                 FOR UPDATE SKIP LOCKED) \
             UPDATE outbox SET status = 'delivering', lease_until = $1, \
                 attempts = outbox.attempts + 1 \
             FROM due WHERE outbox.id = due.id \
             RETURNING outbox.id, {CLAIMED_COLUMNS}"
        ))
        .bind(to_millis(after(rules.now, rules.lease)))
        .bind(to_millis(rules.now))
        .bind(to_millis(before(rules.now, rules.reply_gap)))
        .bind(rules.limit.max(0))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut claimed = rows.iter().map(outbox_from).collect::<Result<Vec<_>>>()?;
        // RETURNING has no defined order.
        claimed.sort_by_key(|row| (row.kind == OutboxKind::ContactToken, row.id));
        Ok(claimed)
    }

    async fn renew_outbox_leases(&self, ids: &[i64], lease_until: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE outbox SET lease_until = $1 WHERE status = 'delivering' AND id = ANY($2)",
        )
        .bind(to_millis(lease_until))
        .bind(ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn record_outbox_progress(
        &self,
        id: i64,
        messages_delivered: i32,
        trigger_timeouts: i32,
    ) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET messages_delivered = $1, trigger_timeouts = $2 WHERE id = $3",
        )
        .bind(messages_delivered)
        .bind(trigger_timeouts)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("outbox row"));
        }
        Ok(())
    }

    async fn record_outbox_actions(
        &self,
        id: i64,
        actions: &Value,
        trigger_timeouts: i32,
    ) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET payload = jsonb_set(payload, '{actions}', $1), \
             trigger_timeouts = $2 WHERE id = $3",
        )
        .bind(Json(actions))
        .bind(trigger_timeouts)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("outbox row"));
        }
        Ok(())
    }

    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'delivered', delivered_at = $1, lease_until = NULL, \
             payload = CASE WHEN kind = 'contact_token' THEN payload - 'token' ELSE payload END \
             WHERE id = $2",
        )
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("outbox row"));
        }
        Ok(())
    }

    async fn mark_retry(&self, id: i64, next_attempt_at: DateTime<Utc>, error: &str) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'pending', next_attempt_at = $1, last_error = $2, \
             lease_until = NULL WHERE id = $3",
        )
        .bind(to_millis(next_attempt_at))
        .bind(bounded_error(error))
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("outbox row"));
        }
        Ok(())
    }

    async fn mark_failed(&self, id: i64, error: &str, at: DateTime<Utc>) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'failed', last_error = $1, failed_at = $2, \
             lease_until = NULL, \
             payload = CASE WHEN kind = 'contact_token' THEN payload - 'token' ELSE payload END \
             WHERE id = $3",
        )
        .bind(bounded_error(error))
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("outbox row"));
        }
        Ok(())
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>> {
        let row = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(outbox_from).transpose()
    }

    async fn outbox_backlog(
        &self,
        now: DateTime<Utc>,
        count_cap: i64,
    ) -> Result<super::OutboxBacklog> {
        // Both through `outbox_status_due`: the count stops at the cap, the minimum is one
        // index seek per open status.
        let rows: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT 1 FROM outbox \
             WHERE status IN ('pending', 'delivering') LIMIT $1) open",
        )
        .bind(count_cap)
        .fetch_one(&self.pool)
        .await?;
        let oldest: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT LEAST( \
             (SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'pending'), \
             (SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'delivering'))",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(super::OutboxBacklog {
            rows,
            oldest_due_at: oldest.filter(|due| *due <= now),
        })
    }

    async fn pending_replies(&self, conversation_id: ConversationId) -> Result<i64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM outbox WHERE conversation_id = $1 AND kind = 'reply' \
             AND status IN ('pending', 'delivering')",
        )
        .bind(conversation_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(count)
    }

    async fn outbox_rows(&self) -> Result<Vec<OutboxRow>> {
        let rows = sqlx::query(&format!("SELECT {OUTBOX_COLUMNS} FROM outbox ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(outbox_from).collect()
    }

    async fn record_exchange(&self, exchange: Exchange<'_>) -> Result<ExchangeIds> {
        // One transaction: the turn is stored whole or not at all, as on SQLite.
        let mut tx = self.pool.begin().await?;
        let message = match exchange.recorded {
            Some(id) => {
                if let Some(reason) = &exchange.message.escalation_reason {
                    sqlx::query("UPDATE turns SET escalation_reason = $1 WHERE id = $2")
                        .bind(reason)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                if exchange.message.media_kind.is_some() {
                    sqlx::query(
                        "UPDATE turns SET text = $1, media_kind = $2, cost_usd = $3 WHERE id = $4",
                    )
                    .bind(&exchange.message.text)
                    .bind(&exchange.message.media_kind)
                    .bind(exchange.message.cost_usd)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                }
                id
            }
            None => insert_turn(&mut *tx, exchange.message).await?,
        };
        if let Some((subscriber, window)) = exchange.rate {
            bump_rate_in(&mut tx, subscriber, window).await?;
        }
        let reply = match exchange.reply {
            Some(reply) => Some(insert_turn(&mut *tx, reply).await?),
            None => None,
        };
        if let Some(charge) = exchange.charge {
            add_budget_in(&mut *tx, charge.day, charge.tokens, charge.cost_usd).await?;
        }
        if let Some(at) = exchange.escalated_at {
            set_escalated_in(&mut *tx, exchange.message.conversation_id, at).await?;
        }
        let mut outbox = Vec::with_capacity(exchange.outbox.len());
        for row in exchange.outbox {
            outbox.push(insert_outbox(&mut *tx, row, Some(reply.unwrap_or(message))).await?);
        }
        if let Some(keep) = exchange.keep {
            keep_promise_in(&mut tx, keep, reply.unwrap_or(message)).await?;
        }
        tx.commit().await?;
        Ok(ExchangeIds {
            message,
            reply,
            outbox,
        })
    }

    async fn forget_contact(&self, subscriber_id: &SubscriberId) -> Result<Forgotten> {
        // One transaction: the contact is erased whole or not at all. The conversation row is
        // locked first, so a first message racing the erasure waits for it.
        let mut tx = self.pool.begin().await?;
        let conversation_id: Option<ConversationId> =
            sqlx::query_scalar("SELECT id FROM conversations WHERE subscriber_id = $1 FOR UPDATE")
                .bind(subscriber_id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
        let mut deleted = Vec::with_capacity(CONTACT_TABLES.len());
        for &(table, column) in CONTACT_TABLES {
            // Both names come from the constant list, never from input.
            let sql = format!("DELETE FROM {table} WHERE {column} = $1");
            let done = match (column, conversation_id) {
                ("conversation_id", Some(id)) => {
                    Some(sqlx::query(&sql).bind(id).execute(&mut *tx).await?)
                }
                ("conversation_id", None) => None,
                _ => Some(
                    sqlx::query(&sql)
                        .bind(subscriber_id.as_str())
                        .execute(&mut *tx)
                        .await?,
                ),
            };
            deleted.push((table, done.map_or(0, |done| done.rows_affected())));
        }
        tx.commit().await?;
        Ok(Forgotten {
            conversation_id,
            deleted,
        })
    }

    async fn clear_turn_text_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE turns SET text = '' WHERE id IN \
             (SELECT id FROM turns WHERE text <> '' AND created_at < $1 LIMIT $2)",
        )
        .bind(to_millis(before))
        .bind(limit.max(0))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn delete_settled_outbox_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        // A settled row's `next_attempt_at` is never before its creation, so it bounds the scan
        // through `outbox_status_due`.
        let done = sqlx::query(
            "DELETE FROM outbox WHERE id IN \
             (SELECT id FROM outbox WHERE status IN ('delivered', 'failed') \
              AND next_attempt_at < $1 AND created_at < $1 LIMIT $2)",
        )
        .bind(to_millis(before))
        .bind(limit.max(0))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    fn shares_manychat_budget(&self) -> bool {
        true
    }

    async fn take_manychat_slot(&self, interval: Duration, burst: u32) -> Result<Option<Duration>> {
        let wait_seconds: f64 = sqlx::query_scalar("SELECT manychat_take_slot($1, $2)")
            .bind(interval)
            .bind(i32::try_from(burst).unwrap_or(i32::MAX))
            .fetch_one(&self.pool)
            .await?;
        Ok((wait_seconds > 0.0).then(|| Duration::from_secs_f64(wait_seconds)))
    }

    async fn count_flow_send(
        &self,
        subscriber_id: &SubscriberId,
        now: DateTime<Utc>,
        per_hour: u32,
    ) -> Result<bool> {
        // The contact's advisory lock makes count-then-insert atomic across replicas; it is
        // released with the transaction.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtextextended('manychat_flow_sends:' || $1, 0))",
        )
        .bind(subscriber_id.as_str())
        .execute(&mut *tx)
        .await?;
        let now = to_millis(now);
        // Every contact's counts older than an hour go: a subscriber id is personal data.
        sqlx::query("DELETE FROM manychat_flow_sends WHERE sent_at <= $1")
            .bind(now - chrono::Duration::hours(1))
            .execute(&mut *tx)
            .await?;
        let sent: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM manychat_flow_sends WHERE subscriber_id = $1")
                .bind(subscriber_id.as_str())
                .fetch_one(&mut *tx)
                .await?;
        if sent >= i64::from(per_hour) {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query("INSERT INTO manychat_flow_sends (subscriber_id, sent_at) VALUES ($1, $2)")
            .bind(subscriber_id.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn sales_record(&self, conversation_id: ConversationId) -> Result<SalesRecord> {
        let offering: Option<(Option<String>, Option<DateTime<Utc>>)> =
            sqlx::query_as("SELECT offering, offering_at FROM conversations WHERE id = $1")
                .bind(conversation_id)
                .fetch_optional(&self.pool)
                .await?;
        let rows: Vec<(DateTime<Utc>, Json<Value>)> = sqlx::query_as(
            "SELECT created_at, actions FROM turns WHERE conversation_id = $1 \
             AND role = 'agent' AND actions IS NOT NULL AND actions <> '[]'::jsonb \
             ORDER BY created_at, seq",
        )
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(SalesRecord {
            offering: match offering {
                Some((Some(value), Some(at))) => Some((value, at)),
                _ => None,
            },
            actions: rows
                .into_iter()
                .map(|(at, Json(actions))| ActionRecord { at, actions })
                .collect(),
        })
    }

    async fn set_offering(
        &self,
        id: ConversationId,
        offering: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let done = sqlx::query(
            "UPDATE conversations SET offering = $1, offering_at = $2, updated_at = $2 \
             WHERE id = $3",
        )
        .bind(offering)
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(not_found("conversation"));
        }
        Ok(())
    }
    async fn claim_opening(&self, id: ConversationId, at: DateTime<Utc>) -> Result<bool> {
        let claimed = sqlx::query(
            "UPDATE conversations SET opening_sent_at = $1, updated_at = $1 \
             WHERE id = $2 AND opening_sent_at IS NULL",
        )
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    async fn sales_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &super::SalesKeys,
    ) -> Result<super::SalesCounts> {
        let (from, until) = (to_millis(from), to_millis(until));
        let mut counts = super::SalesCounts::default();
        // The counts SQLite tallies in the store (`store::report::ActionTally`), grouped here by
        // PostgreSQL's jsonb functions; only each entry's tool, id, value, status and
        // contactAsked are read.
        if keys.intent_field.is_some() || keys.funnel_field.is_some() || keys.payment_flow.is_some()
        {
            let row: (i64, i64, i64, i64, i64, i64) = sqlx::query_as(
                "SELECT COUNT(*) FILTER (WHERE p), COUNT(*) FILTER (WHERE o), \
                 COUNT(*) FILTER (WHERE pr), COUNT(*) FILTER (WHERE l > 0), \
                 COALESCE(SUM(l), 0)::BIGINT, COALESCE(SUM(la), 0)::BIGINT \
                 FROM (SELECT c, \
                         bool_or(tool = 'set_field' AND id = $3 AND value = 'prospect') AS p, \
                         bool_or(tool = 'set_field' AND id = $4 AND value = ANY($5)) AS o, \
                         bool_or(tool = 'set_field' AND id = $4 AND value = ANY($6)) AS pr, \
                         COUNT(*) FILTER (WHERE tool = 'send_flow' AND id = $7) AS l, \
                         COUNT(*) FILTER (WHERE tool = 'send_flow' AND id = $7 AND asked) AS la \
                       FROM (SELECT t.conversation_id AS c, a->>'tool' AS tool, a->>'id' AS id, \
                                    a->>'value' AS value, \
                                    COALESCE(a->'contactAsked' = 'true'::jsonb, false) AS asked \
                             FROM turns t, jsonb_array_elements(CASE WHEN \
                                 jsonb_typeof(t.actions) = 'array' THEN t.actions \
                                 ELSE '[]'::jsonb END) a \
                             WHERE t.created_at >= $1 AND t.created_at < $2 \
                               AND t.actions IS NOT NULL AND a->>'status' = 'performed') e \
                       GROUP BY c) w",
            )
            .bind(from)
            .bind(until)
            .bind(keys.intent_field.as_deref())
            .bind(keys.funnel_field.as_deref())
            .bind(&keys.offered_or_later)
            .bind(&keys.prepared_or_later)
            .bind(keys.payment_flow.as_deref())
            .fetch_one(&self.pool)
            .await?;
            (
                counts.prospects,
                counts.offered,
                counts.prepared,
                counts.link_contacts,
                counts.links_sent,
                counts.links_contact_asked,
            ) = row;
        }
        (counts.nudges_sent, counts.nudges_replied) = sqlx::query_as(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE EXISTS (SELECT 1 FROM turns r \
             WHERE r.conversation_id = n.conversation_id AND r.role = 'user' \
               AND r.created_at > n.created_at \
               AND r.created_at <= n.created_at + interval '24 hours')) \
             FROM turns n WHERE n.created_at >= $1 AND n.created_at < $2 \
               AND n.outcome = 'nudge_sent'",
        )
        .bind(from)
        .bind(until)
        .fetch_one(&self.pool)
        .await?;
        Ok(counts)
    }

    async fn report_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<super::ReportAggregates> {
        let (from, until) = (to_millis(from), to_millis(until));
        // Contacts whose first turn is in the period (see the SQLite statement).
        let new_contacts: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM \
             (SELECT DISTINCT conversation_id FROM turns \
              WHERE created_at >= $1 AND created_at < $2) w \
             WHERE NOT EXISTS (SELECT 1 FROM turns e \
                               WHERE e.conversation_id = w.conversation_id \
                                 AND e.created_at < $1)",
        )
        .bind(from)
        .bind(until)
        .fetch_one(&self.pool)
        .await?;
        type GroupRow = (
            chrono::NaiveDate,
            String,
            Option<String>,
            Option<String>,
            bool,
            i64,
            i64,
            i64,
            i64,
            f64,
        );
        let groups: Vec<GroupRow> = sqlx::query_as(
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, role, outcome, \
             escalation_reason, model IS NOT NULL AS model_written, COUNT(*), \
             SUM(reads)::BIGINT, SUM(input_tokens)::BIGINT, SUM(output_tokens)::BIGINT, \
             SUM(cost_usd)::DOUBLE PRECISION \
             FROM turns WHERE created_at >= $1 AND created_at < $2 \
             GROUP BY day, role, outcome, escalation_reason, model_written ORDER BY day",
        )
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        let turn_groups = groups
            .into_iter()
            .map(|g| super::TurnGroup {
                day: g.0,
                role: super::report::role_of(&g.1),
                outcome: g.2,
                escalation_reason: g.3,
                model_written: g.4,
                turns: g.5,
                reads: g.6,
                input_tokens: g.7,
                output_tokens: g.8,
                cost_usd: g.9,
            })
            .collect();
        let inline_latencies: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT latency_ms, COUNT(*) FROM turns \
             WHERE created_at >= $1 AND created_at < $2 AND outcome = 'answered_inline' \
             GROUP BY latency_ms ORDER BY latency_ms",
        )
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        // Only each entry's tool and status are read.
        let actions: Vec<(Option<String>, Option<String>, i64)> = sqlx::query_as(
            "SELECT a->>'tool' AS tool, a->>'status' AS status, COUNT(*) \
             FROM turns t, jsonb_array_elements( \
                 CASE WHEN jsonb_typeof(t.actions) = 'array' THEN t.actions ELSE '[]'::jsonb END) a \
             WHERE t.created_at >= $1 AND t.created_at < $2 AND t.actions IS NOT NULL \
             GROUP BY tool, status ORDER BY tool, status",
        )
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        Ok(super::ReportAggregates {
            new_contacts,
            turn_groups,
            inline_latencies,
            actions: actions
                .into_iter()
                .map(|(tool, status, count)| super::ActionCount {
                    tool: tool.unwrap_or_default(),
                    status: status.unwrap_or_default(),
                    count,
                })
                .collect(),
        })
    }

    async fn schedule_nudge(
        &self,
        conversation_id: ConversationId,
        delay_id: &str,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        // One upsert against the conversation's UNIQUE key: concurrent schedulers cannot both
        // insert (025).
        sqlx::query(
            "INSERT INTO nudges (conversation_id, delay_id, due_at, status, reason, \
             scheduled_at, claimed_at, created_at, updated_at) \
             VALUES ($1, $2, $3, 'pending', NULL, $4, NULL, $4, $4) \
             ON CONFLICT (conversation_id) DO UPDATE SET delay_id = EXCLUDED.delay_id, \
             due_at = EXCLUDED.due_at, status = 'pending', reason = NULL, \
             scheduled_at = EXCLUDED.scheduled_at, claimed_at = NULL, \
             updated_at = EXCLUDED.updated_at",
        )
        .bind(conversation_id)
        .bind(delay_id)
        .bind(to_millis(due_at))
        .bind(to_millis(now))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn cancel_nudge(
        &self,
        conversation_id: ConversationId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE nudges SET status = 'cancelled', reason = $1, updated_at = $2 \
             WHERE conversation_id = $3 AND status IN ('pending', 'running')",
        )
        .bind(reason)
        .bind(to_millis(now))
        .bind(conversation_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn claim_due_nudges(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<Nudge>> {
        // SKIP LOCKED: a row another replica is claiming is passed over, never taken twice;
        // the scan goes through `nudges_pending_due`, so it costs the due rows.
        let rows = sqlx::query(
            "UPDATE nudges SET status = 'running', claimed_at = $1, updated_at = $1 \
             WHERE id IN (SELECT id FROM nudges WHERE status = 'pending' AND due_at <= $1 \
                          ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
             AND status = 'pending' \
             RETURNING id, conversation_id, delay_id, due_at, scheduled_at, status, reason, \
                       claimed_at",
        )
        .bind(to_millis(now))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut claimed = rows.iter().map(nudge_from).collect::<Result<Vec<_>>>()?;
        claimed.sort_by_key(|n| (n.due_at, n.id));
        Ok(claimed)
    }

    async fn settle_nudge(
        &self,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE nudges SET status = $1, reason = $2, updated_at = $3 \
             WHERE id = $4 AND status = 'running' AND claimed_at = $5",
        )
        .bind(status.as_str())
        .bind(reason)
        .bind(to_millis(now))
        .bind(nudge.id)
        .bind(nudge.claimed_at.map(to_millis))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn mark_lost_nudges(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        let lost = sqlx::query_scalar(
            "UPDATE nudges SET status = 'lost', reason = 'process_died', updated_at = $1 \
             WHERE status = 'running' AND claimed_at < $2 RETURNING conversation_id",
        )
        .bind(to_millis(now))
        .bind(to_millis(claimed_before))
        .fetch_all(&self.pool)
        .await?;
        Ok(lost)
    }

    async fn nudge(&self, conversation_id: ConversationId) -> Result<Option<Nudge>> {
        let row = sqlx::query(
            "SELECT id, conversation_id, delay_id, due_at, scheduled_at, status, reason, \
             claimed_at FROM nudges WHERE conversation_id = $1",
        )
        .bind(conversation_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(nudge_from).transpose()
    }

    async fn record_nudge_turn(&self, exchange: NudgeExchange<'_>) -> Result<Option<i64>> {
        // One transaction. The settle takes the row's lock: a cancel committed first leaves it
        // no longer running (nothing is written); a cancel arriving after waits and then finds
        // it settled.
        let mut tx = self.pool.begin().await?;
        let settled = sqlx::query(
            "UPDATE nudges SET status = $1, reason = $2, updated_at = $3 \
             WHERE id = $4 AND status = 'running' AND claimed_at = $5",
        )
        .bind(exchange.status.as_str())
        .bind(exchange.reason)
        .bind(to_millis(exchange.now))
        .bind(exchange.nudge.id)
        .bind(exchange.nudge.claimed_at.map(to_millis))
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let turn = insert_turn(&mut *tx, exchange.turn).await?;
        if let Some((subscriber, window)) = exchange.rate {
            bump_rate_in(&mut tx, subscriber, window).await?;
        }
        if let Some(charge) = exchange.charge {
            add_budget_in(&mut *tx, charge.day, charge.tokens, charge.cost_usd).await?;
        }
        for row in exchange.outbox {
            insert_outbox(&mut *tx, row, Some(turn)).await?;
        }
        tx.commit().await?;
        Ok(Some(turn))
    }
}

fn nudge_from(row: &PgRow) -> Result<Nudge> {
    let due_at: DateTime<Utc> = row.try_get("due_at")?;
    let scheduled_at: Option<DateTime<Utc>> = row.try_get("scheduled_at")?;
    Ok(Nudge {
        id: row.try_get("id")?,
        conversation_id: row.try_get("conversation_id")?,
        delay_id: row.try_get("delay_id")?,
        due_at,
        scheduled_at: scheduled_at.unwrap_or(due_at),
        status: NudgeStatus::parse(row.try_get::<&str, _>("status")?)?,
        reason: row.try_get("reason")?,
        claimed_at: row.try_get("claimed_at")?,
    })
}

/// Inserts an outbox row; a reply or handoff row without a `turnId` gets `turn` (see
/// `Exchange`).
async fn insert_outbox(
    db: impl sqlx::PgExecutor<'_>,
    row: &NewOutboxRow,
    turn: Option<i64>,
) -> Result<i64> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO outbox (conversation_id, subscriber_id, kind, payload, status, \
         next_attempt_at, created_at) VALUES ($1, $2, $3, \
         CASE WHEN $3 <> 'contact_token' AND $7::BIGINT IS NOT NULL \
              AND jsonb_typeof($4::JSONB -> 'turnId') IS DISTINCT FROM 'number' \
         THEN jsonb_set($4::JSONB, '{turnId}', to_jsonb($7::BIGINT)) ELSE $4::JSONB END, \
         'pending', $5, $6) \
         RETURNING id",
    )
    .bind(row.conversation_id)
    .bind(row.subscriber_id.as_str())
    .bind(row.kind.as_str())
    .bind(Json(&row.payload))
    .bind(to_millis(row.next_attempt_at))
    .bind(to_millis(row.created_at))
    .bind(turn)
    .fetch_one(db)
    .await?;
    Ok(id)
}

/// Keeps a promise inside the exchange's transaction (see [`KeepPromise`]); a new payload
/// without a `turnId` gets `turn`.
async fn keep_promise_in(
    tx: &mut sqlx::PgConnection,
    keep: KeepPromise<'_>,
    turn: i64,
) -> Result<()> {
    let kept = sqlx::query(
        "UPDATE outbox SET payload = CASE \
             WHEN $1::JSONB IS NULL THEN payload \
             WHEN $4::BIGINT IS NOT NULL \
                  AND jsonb_typeof($1::JSONB -> 'turnId') IS DISTINCT FROM 'number' \
             THEN jsonb_set($1::JSONB, '{turnId}', to_jsonb($4::BIGINT)) ELSE $1::JSONB END, \
         next_attempt_at = $2 WHERE id = $3 AND status = 'pending'",
    )
    .bind(keep.payload.map(Json))
    .bind(to_millis(keep.due))
    .bind(keep.rows.reply)
    .bind(turn)
    .execute(&mut *tx)
    .await?;
    if kept.rows_affected() == 0 {
        return Err(StoreError::PromiseLapsed);
    }
    if keep.handoff {
        sqlx::query("UPDATE outbox SET next_attempt_at = $1 WHERE id = $2 AND status = 'pending'")
            .bind(to_millis(keep.due))
            .bind(keep.rows.handoff)
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query("DELETE FROM outbox WHERE id = $1 AND status = 'pending'")
            .bind(keep.rows.handoff)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

// The writes a turn's exchange shares with the single calls, on a pool or in a transaction.

async fn insert_turn(db: impl sqlx::PgExecutor<'_>, turn: &NewTurn) -> Result<i64> {
    // One statement, so one round trip and atomic: the insert and, for a user turn, the
    // conversation's `last_message_at` (GREATEST ignores its NULL) and bound count.
    let id: i64 = sqlx::query_scalar(
        "WITH inserted AS (\
             INSERT INTO turns (conversation_id, role, text, outcome, model, bound, actions, \
             reads, input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, \
             created_at, escalation_reason, media_kind) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
             RETURNING id), \
         touched AS (\
             UPDATE conversations SET last_message_at = GREATEST(last_message_at, $14), \
             turn_count = turn_count + CASE WHEN $6 THEN 1 ELSE 0 END, updated_at = $14 \
             WHERE id = $1 AND $2 = 'user') \
         SELECT id FROM inserted",
    )
    .bind(turn.conversation_id)
    .bind(turn.role.as_str())
    .bind(&turn.text)
    .bind(&turn.outcome)
    .bind(&turn.model)
    .bind(turn.bound)
    .bind(turn.actions.as_ref().map(Json))
    .bind(turn.reads)
    .bind(turn.input_tokens)
    .bind(turn.output_tokens)
    .bind(turn.cached_tokens)
    .bind(turn.cost_usd)
    .bind(turn.latency_ms)
    .bind(to_millis(turn.created_at))
    .bind(&turn.escalation_reason)
    .bind(&turn.media_kind)
    .fetch_one(db)
    .await?;
    Ok(id)
}

async fn bump_rate_in(
    tx: &mut sqlx::PgConnection,
    subscriber_id: &SubscriberId,
    window_start: DateTime<Utc>,
) -> Result<i64> {
    let window_start = to_millis(window_start);
    let count: i64 = sqlx::query_scalar(
        "INSERT INTO rate_counters (subscriber_id, window_start, count) VALUES ($1, $2, 1) \
         ON CONFLICT (subscriber_id, window_start) \
         DO UPDATE SET count = rate_counters.count + 1 RETURNING count",
    )
    .bind(subscriber_id.as_str())
    .bind(window_start)
    .fetch_one(&mut *tx)
    .await?;
    if count == 1 {
        // A new window began: the contact's older windows will never be read again, and a
        // subscriber id is personal data, so they go (once per window, not per turn).
        sqlx::query("DELETE FROM rate_counters WHERE subscriber_id = $1 AND window_start < $2")
            .bind(subscriber_id.as_str())
            .bind(window_start)
            .execute(&mut *tx)
            .await?;
    }
    Ok(count)
}

async fn add_budget_in(
    db: impl sqlx::PgExecutor<'_>,
    day: NaiveDate,
    tokens: i64,
    cost_usd: f64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO budget_counters (day, tokens, cost_usd) VALUES ($1, $2, $3) \
         ON CONFLICT (day) DO UPDATE SET tokens = budget_counters.tokens + excluded.tokens, \
         cost_usd = budget_counters.cost_usd + excluded.cost_usd",
    )
    .bind(day)
    .bind(tokens)
    .bind(cost_usd)
    .execute(db)
    .await?;
    Ok(())
}

async fn set_escalated_in(
    db: impl sqlx::PgExecutor<'_>,
    id: ConversationId,
    at: DateTime<Utc>,
) -> Result<()> {
    let done =
        sqlx::query("UPDATE conversations SET escalated_at = $1, updated_at = $1 WHERE id = $2")
            .bind(to_millis(at))
            .bind(id)
            .execute(db)
            .await?;
    if done.rows_affected() == 0 {
        return Err(not_found("conversation"));
    }
    Ok(())
}

/// How long a turn ticket lives without a renewal; its process renews it every third of that.
const TICKET_LEASE_SECS: i32 = 10;
/// How soon a waiting turn asks again whether its ticket is first, doubling up to the maximum.
const TICKET_POLL_FIRST: std::time::Duration = std::time::Duration::from_millis(20);
const TICKET_POLL_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// This process's turn tickets: who holds them (`holder`), which are held by a turn still alive
/// (`live`), and whether the task renewing their leases runs (it runs while any is live, and
/// stops when none is). Only live tickets are renewed: a ticket whose turn ended is given back,
/// and one whose give-back failed (the database did not answer) lapses with its lease instead of
/// holding its contact's next turns behind it.
struct Tickets {
    holder: uuid::Uuid,
    state: std::sync::Mutex<TicketState>,
}

#[derive(Default)]
struct TicketState {
    live: std::collections::BTreeSet<i64>,
    renewing: bool,
}

/// How often a ticket's give-back is tried before it is left to lapse, and the first pause
/// between tries (doubling).
const TICKET_RETURN_TRIES: u32 = 4;
const TICKET_RETURN_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

impl Tickets {
    fn new() -> Self {
        Self {
            holder: uuid::Uuid::new_v4(),
            state: std::sync::Mutex::default(),
        }
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
struct Ticket {
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
    use super::*;

    /// Every file in `migrations/postgres` is embedded and applied on connect (a file added
    /// without a rebuild would otherwise be missing from the binary).
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn system_8_every_postgres_migration_file_is_applied() {
        let url = std::env::var("TEST_DATABASE_URL")
            .expect("TEST_DATABASE_URL is not set: this test needs PostgreSQL");
        let store = connect_isolated(&url).await.expect("connect to Postgres");
        let applied: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&store.pool)
                .await
                .expect("the migrations table");
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
        let files = std::fs::read_dir(folder)
            .expect("the migrations folder")
            .filter(|entry| {
                entry
                    .as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sql"))
            })
            .count();
        assert_eq!(applied, files as i64);
    }

    /// Issue 13 item 10: `forget_contact` deletes from every table that names a contact. A table
    /// added later with a `conversation_id` or `subscriber_id` column fails this test until it is
    /// listed in `CONTACT_TABLES`.
    #[tokio::test]
    async fn issue_13_item_10_forget_covers_every_table_that_names_a_contact() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            eprintln!("skipped: TEST_DATABASE_URL is not set, Postgres not tested");
            return;
        };
        let store = connect_isolated(&url).await.expect("connect to Postgres");
        let schema: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() \
             AND column_name IN ('conversation_id', 'subscriber_id') ORDER BY 1, 2",
        )
        .fetch_all(&store.pool)
        .await
        .expect("the schema");
        let listed: Vec<&str> = CONTACT_TABLES.iter().map(|(table, _)| *table).collect();
        for (table, column) in &schema {
            assert!(
                listed.contains(&table.as_str()),
                "{table}.{column} names a contact, but forget_contact leaves it: \
                 add {table} to store::CONTACT_TABLES"
            );
        }
        for (table, column) in CONTACT_TABLES {
            assert!(
                schema.contains(&((*table).to_owned(), (*column).to_owned())),
                "CONTACT_TABLES names {table}.{column}, which the schema lacks"
            );
        }

        // A contact with a row in every such table (a nudge has no store call yet: inserted here).
        let at = DateTime::from_timestamp_millis(1_770_000_000_000).expect("an instant");
        let subscriber = SubscriberId::parse("5550010").expect("digits");
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", at)
            .await
            .expect("conversation_for");
        let message = NewTurn::user(conversation.id, "Invented question", true, at);
        store
            .record_exchange(Exchange {
                message: &message,
                rate: Some((&subscriber, at)),
                reply: None,
                charge: None,
                escalated_at: None,
                ..Exchange::of(&message)
            })
            .await
            .expect("record_exchange");
        store
            .enqueue(&NewOutboxRow {
                conversation_id: conversation.id,
                subscriber_id: subscriber.clone(),
                kind: super::super::OutboxKind::Reply,
                payload: serde_json::json!({"messages": ["Invented reply"]}),
                next_attempt_at: at,
                created_at: at,
            })
            .await
            .expect("enqueue");
        sqlx::query(
            "INSERT INTO nudges (conversation_id, delay_id, due_at, status, created_at, \
             updated_at) VALUES ($1, 'invented', $2, 'pending', $2, $2)",
        )
        .bind(conversation.id)
        .bind(at)
        .execute(&store.pool)
        .await
        .expect("a nudge");

        assert!(
            store
                .count_flow_send(&subscriber, chrono::Utc::now(), 100)
                .await
                .expect("a flow send counted")
        );
        // A turn of the contact holding its place (a ticket).
        let _turn = store
            .lock_conversation(conversation.id)
            .await
            .expect("a ticket");
        let forgotten = store.forget_contact(&subscriber).await.expect("forget");
        assert!(
            forgotten.deleted.iter().all(|(_, rows)| *rows > 0),
            "a row deleted from every contact table: {forgotten:?}"
        );
        for (table, column) in schema {
            // Compared as text, so one query serves uuid and text columns.
            let left: i64 = sqlx::query_scalar(&format!(
                "SELECT COUNT(*) FROM {table} WHERE {column}::text = $1"
            ))
            .bind(if column == "conversation_id" {
                conversation.id.to_string()
            } else {
                subscriber.as_str().to_owned()
            })
            .fetch_one(&store.pool)
            .await
            .expect("a count");
            assert_eq!(left, 0, "rows of the contact left in {table}");
        }
    }

    /// 037: a ticket is renewed only while its turn is alive. A ticket this process could not
    /// give back (the database did not answer when its turn ended) is left out of every renewal,
    /// so it lapses and the contact's next turn runs instead of waiting behind it for ever; a
    /// ticket given back is deleted.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn system_037_only_a_live_turns_ticket_is_renewed_and_a_stranded_one_lapses() {
        let url = std::env::var("TEST_DATABASE_URL")
            .expect("TEST_DATABASE_URL is not set: this test needs PostgreSQL");
        let store = connect_isolated(&url).await.expect("connect to Postgres");
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
