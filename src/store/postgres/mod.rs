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
use super::{ActionRecord, Nudge, NudgeExchange, NudgeStatus, OrphanedPromise, SalesRecord};
use super::{
    BudgetUsage, CONTACT_TABLES, ClaimRules, Conversation, ConversationLock, Exchange, ExchangeIds,
    Forgotten, KeepPromise, NewOutboxRow, NewTurn, OutboxKind, OutboxRow, Result, Store,
    StoreError, Turn,
};
use super::{
    ConversationStore, CounterStore, EmbeddingStore, ErasureStore, NudgeStore, OrderStore,
    OutboxStore, ReportStore, SalesStore, TurnStore,
};
use super::{WindowClosing, WindowClosingClaim, WindowClosingStatus};
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
     offering, opening_sent_at, created_at, updated_at, hold_released_at, hold_release_reason, \
     hold_note_due, fence_nonce";

const TURN_COLUMNS: &str = "id, seq, conversation_id, role, text, outcome, model, bound, \
     actions, reads, input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at, \
     escalation_reason, media_kind, duplicate, playbook_version, cache_write_tokens";

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
        let options = PgConnectOptions::from_str(url)
            .map_err(|_| {
                StoreError::Database("DATABASE_URL does not parse as a PostgreSQL URL".to_owned())
            })?
            // The server's notices (a migration's "already exists, skipping" at every start)
            // are not the operator's news; warnings and errors still arrive.
            .options([("client_min_messages", "warning")]);
        Self::connect_with(options, Connections::OnDemand(pool_size.max(1))).await
    }

    async fn connect_with(options: PgConnectOptions, connections: Connections) -> Result<Self> {
        let pool = match connections
            .pool_options()
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

/// What a `SELECT` of one kind of record reads: its column list and how a row maps to it.
struct Record<T> {
    columns: &'static str,
    from: fn(&PgRow) -> Result<T>,
}

impl PgStore {
    /// The first `record` that `SELECT {columns} {rest}` answers with `key` bound as `$1`;
    /// `None` when it answers none.
    async fn one_by<K, T>(&self, record: Record<T>, rest: &str, key: K) -> Result<Option<T>>
    where
        K: Send + for<'e> sqlx::Encode<'e, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
    {
        let sql = format!("SELECT {} {rest}", record.columns);
        let row = sqlx::query(&sql)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record.from).transpose()
    }

    /// Every `record` that `SELECT {columns} {rest}` answers with `key` bound as `$1`, in its
    /// order.
    async fn all_by<K, T>(&self, record: Record<T>, rest: &str, key: K) -> Result<Vec<T>>
    where
        K: Send + for<'e> sqlx::Encode<'e, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
    {
        let sql = format!("SELECT {} {rest}", record.columns);
        let rows = sqlx::query(&sql).bind(key).fetch_all(&self.pool).await?;
        rows.iter().map(record.from).collect()
    }
}

/// A statement that must have changed a row: `not_found(what)` when it changed none.
fn changed(done: sqlx::postgres::PgQueryResult, what: &'static str) -> Result<()> {
    if done.rows_affected() == 0 {
        return Err(not_found(what));
    }
    Ok(())
}

/// How a pool opens and keeps its connections.
#[derive(Clone, Copy)]
enum Connections {
    /// Up to this many, opened when needed, checked before use, recycled when idle.
    OnDemand(u32),
    /// Tests only: exactly this many, all opened before the test starts and kept open, none
    /// checked before use. A test that pauses or drives tokio's clock then never waits for a
    /// connection in virtual time: a connection opened in virtual time can outlast the pool's
    /// acquire timeout on a busy machine, and fail a correct test.
    Preopened(u32),
}

impl Connections {
    fn pool_options(self) -> PgPoolOptions {
        match self {
            Self::OnDemand(max) => PgPoolOptions::new().max_connections(max),
            Self::Preopened(count) => PgPoolOptions::new()
                .max_connections(count)
                .min_connections(count)
                .test_before_acquire(false)
                .idle_timeout(None)
                .max_lifetime(None),
        }
    }
}

/// Tests only: `TEST_DATABASE_URL`, the PostgreSQL the `#[ignore]`d tests need.
#[cfg(test)]
fn test_database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .expect("TEST_DATABASE_URL is not set: this test needs PostgreSQL")
}

/// Tests only: a store on a fresh schema of `TEST_DATABASE_URL`.
#[cfg(test)]
async fn isolated_test_store() -> PgStore {
    connect_isolated(&test_database_url())
        .await
        .expect("connect to Postgres")
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
    PgStore::connect_with(
        options.options([("search_path", schema.as_str())]),
        Connections::Preopened(4),
    )
    .await
}

/// Tests only: two stores (two pools, as two replicas would have) on one fresh schema.
#[doc(hidden)]
pub async fn connect_isolated_pair(url: &str) -> Result<(PgStore, PgStore)> {
    let (options, schema) = fresh_schema(url).await?;
    let options = options.options([("search_path", schema.as_str())]);
    let first = PgStore::connect_with(options.clone(), Connections::Preopened(4)).await?;
    let second = PgStore::connect_with(options, Connections::Preopened(4)).await?;
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

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Migration 0013 keeps every nudge row (SALES 3: one pending row per conversation, the
    /// rest the record). The schema is taken back to migration 12 with two conversations' nudges
    /// in it (a cancelled one and a pending one), then migrated again: both rows are kept, the
    /// cancelled conversation schedules its next beside the record, and a second pending row is
    /// still one row.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn spec_025_migration_13_keeps_every_nudge_row_and_the_record_grows_beside_them() {
        let (options, schema) = fresh_schema(&test_database_url()).await.expect("a schema");
        let options = options.options([("search_path", schema.as_str())]);
        let store = PgStore::connect_with(options.clone(), Connections::Preopened(2))
            .await
            .expect("connect");
        let at = |s: i64| DateTime::from_timestamp(1_770_000_000 + s, 0).expect("an instant");
        let subscriber = |n: &str| SubscriberId::parse(n).expect("an id");
        let contact = async |n: &str| {
            let subscriber = subscriber(n);
            let conversation = store.conversation_for(&subscriber, "whatsapp", at(0));
            conversation.await.expect("conversation")
        };
        let (replied, waiting) = (contact("41").await, contact("42").await);
        let schedule = async |id, delay: &str, due, now| {
            let scheduled = store.schedule_nudge(id, delay, at(due), at(now));
            scheduled.await.expect("schedule")
        };
        schedule(replied.id, "later_today", 7200, 0).await;
        store
            .cancel_nudge(replied.id, "contact_replied", at(60))
            .await
            .expect("cancel");
        schedule(waiting.id, "tomorrow", 90_000, 30).await;
        // Back to migration 12: the conversation's UNIQUE key, not the pending-only index.
        sqlx::raw_sql(
            "DROP INDEX nudges_one_pending; DROP INDEX nudges_conversation;              ALTER TABLE nudges ADD CONSTRAINT nudges_conversation_id_key UNIQUE (conversation_id);              DELETE FROM _sqlx_migrations WHERE version = 13;",
        )
        .execute(&store.pool)
        .await
        .expect("the schema at migration 12");
        let before = store.nudges(replied.id).await.expect("read");
        drop(store);
        let store = PgStore::connect_with(options, Connections::Preopened(2))
            .await
            .expect("migration 13 applies to a schema holding rows");
        assert_eq!(store.nudges(replied.id).await.expect("read"), before);
        let waiting_rows = store.nudges(waiting.id).await.expect("read");
        assert_eq!(waiting_rows.len(), 1);
        assert_eq!(waiting_rows[0].status, NudgeStatus::Pending);
        store
            .schedule_nudge(replied.id, "tomorrow", at(200_000), at(100_000))
            .await
            .expect("schedule the next beside the record");
        let statuses: Vec<NudgeStatus> = store
            .nudges(replied.id)
            .await
            .expect("read")
            .iter()
            .map(|n| n.status)
            .collect();
        assert_eq!(statuses, [NudgeStatus::Cancelled, NudgeStatus::Pending]);
        store
            .schedule_nudge(waiting.id, "later_today", at(150_000), at(100_000))
            .await
            .expect("reschedule");
        let waiting_rows = store.nudges(waiting.id).await.expect("read");
        assert_eq!(waiting_rows.len(), 1, "one pending row, replaced");
        assert_eq!(waiting_rows[0].due_at, at(150_000));
    }

    /// Migration 0028 gives each vector stored before it a last use: its creation. The schema
    /// is taken back to migration 27 holding a vector created at 1 s and one created at 5 s,
    /// then migrated again: both are kept, and a prune before 3 s takes the older one alone.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn embeddings_stored_before_migration_28_count_as_used_when_created() {
        let (options, schema) = fresh_schema(&test_database_url()).await.expect("a schema");
        let options = options.options([("search_path", schema.as_str())]);
        let store = PgStore::connect_with(options.clone(), Connections::Preopened(2))
            .await
            .expect("connect");
        sqlx::raw_sql(
            "DROP INDEX embeddings_used_at; ALTER TABLE embeddings DROP COLUMN used_at; \
             DELETE FROM _sqlx_migrations WHERE version = 28; \
             INSERT INTO embeddings (model, content_hash, vector, created_at) VALUES \
             ('openai:invented', 'old', '\\x0000803f', to_timestamp(1)), \
             ('openai:invented', 'new', '\\x0000803f', to_timestamp(5));",
        )
        .execute(&store.pool)
        .await
        .expect("the schema at migration 27 with two vectors");
        drop(store);
        let store = PgStore::connect_with(options, Connections::Preopened(2))
            .await
            .expect("migration 28 applies to a table holding rows");
        let hashes = ["old".to_owned(), "new".to_owned()];
        let stored = store.embeddings("openai:invented", &hashes).await;
        assert_eq!(stored.expect("read").len(), 2, "both kept");
        let at = |ms| DateTime::from_timestamp_millis(ms).expect("an instant");
        let pruned = store.prune_embeddings(at(3000)).await.expect("prune");
        assert_eq!(pruned, 1);
        let left = store.embeddings("openai:invented", &hashes).await;
        assert_eq!(left.expect("read"), vec![("new".to_owned(), vec![1.0f32])]);
    }

    /// Every file in `migrations/postgres` is embedded and applied on connect (a file added
    /// without a rebuild would otherwise be missing from the binary).
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn system_8_every_postgres_migration_file_is_applied() {
        let store = isolated_test_store().await;
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

    /// `forget_contact` deletes from every table that names a contact. A table
    /// added later with a `conversation_id` or `subscriber_id` column fails this test until it is
    /// listed in `CONTACT_TABLES`.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn forget_covers_every_table_that_names_a_contact() {
        use crate::store::conformance::{
            contact_in_every_written_table, contact_tables_match_the_schema,
            forget_deletes_from_every_table,
        };
        let store = isolated_test_store().await;
        let schema: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() \
             AND column_name IN ('conversation_id', 'subscriber_id') ORDER BY 1, 2",
        )
        .fetch_all(&store.pool)
        .await
        .expect("the schema");
        contact_tables_match_the_schema(&schema);

        // A contact with a row in every such table (a nudge has no store call yet: inserted here).
        let at = DateTime::from_timestamp_millis(1_770_000_000_000).expect("an instant");
        let (subscriber, conversation) = contact_in_every_written_table(&store, at).await;
        sqlx::query(
            "INSERT INTO nudges (conversation_id, delay_id, due_at, status, created_at, \
             updated_at) VALUES ($1, 'invented', $2, 'pending', $2, $2)",
        )
        .bind(conversation.id)
        .bind(at)
        .execute(&store.pool)
        .await
        .expect("a nudge");
        // A turn of the contact holding its place (a ticket).
        let _turn = store
            .lock_conversation(conversation.id)
            .await
            .expect("a ticket");
        forget_deletes_from_every_table(&store, &subscriber).await;
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
}

mod browse;
mod conversations;
mod counters;
mod embeddings;
mod erasure;
mod learning;
mod nudges;
mod order;
mod outbox;
mod report;
mod sales;
mod turns;

use conversations::*;
use counters::*;
use order::*;
use outbox::*;
use turns::*;
