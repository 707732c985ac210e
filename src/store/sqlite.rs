//! The embedded backend: one SQLite file in WAL mode, the default `DATABASE_URL`.
//!
//! Owns the SQLite dialect of every `Store` operation. Timestamps are stored as unix
//! milliseconds (INTEGER), JSON as TEXT written by `serde_json`.
//!
//! Invariants: the file and its folder are created on first run; migrations run on connect;
//! `busy_timeout` makes a writer wait for another process's lock rather than fail.
//!
//! Writes and reads take different paths (see docs/PERFORMANCE.md for the measurements):
//! - every write goes to one in-process **writer task** that owns the only writing connection.
//!   Writers therefore queue in memory instead of meeting SQLite's busy handler (which sleeps
//!   in milliseconds), and the task **commits in groups**: the writes that queued while the
//!   previous commit was syncing run in one `BEGIN IMMEDIATE` transaction, each inside its own
//!   savepoint, and share one fsync. A caller is answered only after that COMMIT returned, so
//!   `synchronous = FULL` still means "acknowledged ⇒ on disk". A write that fails is rolled
//!   back to its savepoint alone; a COMMIT that fails fails every write of the group.
//! - reads use a separate small pool: WAL lets them run beside the writer, and each read sees
//!   every write already acknowledged (a read starts after the COMMIT it follows).
//! - each write method is one job, so its statements are atomic together (one savepoint); a
//!   job that must be atomic against another process on the same file (`claim_outbox`) is
//!   safe because `BEGIN IMMEDIATE` takes SQLite's write lock before the job reads.
//! - an in-memory database (tests) has no second file handle to share, so reads and the writer
//!   use one pool there.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Executor, Row};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::common::{self, after, before, bounded_error, describe, not_found};
use super::{
    BudgetUsage, ClaimRules, Conversation, ConversationLock, NewOutboxRow, NewTurn, OutboxRow,
    Result, Role, Store, StoreError, Turn,
};
use crate::ids::{ConversationId, SubscriberId};

/// Read connections. Writes never use them: they have their own connection in the writer task.
const READ_CONNECTIONS: u32 = 4;
/// At most this many queued writes share one transaction, so one group's latency stays bounded.
const MAX_GROUP: usize = 64;
/// Writes waiting for the writer task before `write` itself waits (back-pressure, not a limit).
const WRITE_QUEUE: usize = 1024;
/// How long a writer waits for another writer's lock before the statement fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const CONVERSATION_COLUMNS: &str = "id, subscriber_id, channel, turn_count, escalated_at, \
     last_message_at, token_hash, previous_token_hash, token_issued_at, token_generation, \
     offering, opening_sent_at, created_at, updated_at";

const TURN_COLUMNS: &str = "id, seq, conversation_id, role, text, outcome, model, bound, \
     actions, reads, input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at";

const OUTBOX_COLUMNS: &str = "id, conversation_id, subscriber_id, kind, payload, status, \
     attempts, next_attempt_at, last_error, lease_until, created_at, delivered_at";

/// The SQLite store. Cheap to clone: a handle on the read pool and the writer task's queue.
#[derive(Clone)]
pub struct SqliteStore {
    /// Reads only.
    pool: SqlitePool,
    writes: mpsc::Sender<Job>,
}

/// What a write job hands back: whether its statements succeeded, and its typed result boxed.
type JobOutput = (bool, Box<dyn Any + Send>);
type JobRun = Box<
    dyn for<'c> FnOnce(
            &'c mut SqliteConnection,
        ) -> Pin<Box<dyn Future<Output = JobOutput> + Send + 'c>>
        + Send,
>;
/// The answer the writer task sends once the group's fate is known: the job's own boxed
/// `Result<T>`, or the error that undid the whole group.
type JobReply = std::result::Result<Box<dyn Any + Send>, StoreError>;

/// One write method's statements, run by the writer task inside the group transaction.
struct Job {
    run: JobRun,
    reply: oneshot::Sender<JobReply>,
}

/// A write method's body: statements on the writer's connection, inside the group transaction.
type WriteFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

impl SqliteStore {
    /// Opens (creating on first run) the file `url` names, e.g. `sqlite://data/agent.db`, and
    /// runs the migrations. `sqlite::memory:` opens a private in-memory database.
    pub async fn connect(url: &str) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(BUSY_TIMEOUT)
            // FULL (SQLite's default, made explicit): a committed outbox row or turn survives a
            // power cut, which NORMAL does not promise in WAL mode.
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true);

        let file = options.get_filename();
        // In-memory databases are named `file:…` by sqlx and have no folder to create.
        let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|_| !file.to_string_lossy().starts_with("file:")) {
            tokio::fs::create_dir_all(parent).await.map_err(|e| {
                StoreError::Database(format!("cannot create the database folder: {}", e.kind()))
            })?;
        }

        let in_memory = file.to_string_lossy().starts_with("file:");
        let (writer, pool) = if in_memory {
            // One pool, so the writer and the readers see the same (shared-cache) database.
            let pool = SqlitePoolOptions::new()
                .max_connections(READ_CONNECTIONS)
                .connect_with(options)
                .await?;
            migrate(&pool).await?;
            (pool.clone(), pool)
        } else {
            // Two processes opening a fresh file together race to switch it to WAL, which
            // SQLite answers with "database is locked" without waiting: try again a few times.
            let mut attempt: u64 = 0;
            let writer = loop {
                attempt += 1;
                match SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(options.clone())
                    .await
                {
                    Ok(writer) => break writer,
                    Err(_) if attempt < 8 => {
                        tokio::time::sleep(std::time::Duration::from_millis(25 * attempt)).await;
                    }
                    Err(err) => return Err(err.into()),
                }
            };
            // Migrations run on the writer, before any reader opens.
            migrate(&writer).await?;
            let readers = SqlitePoolOptions::new()
                .max_connections(READ_CONNECTIONS)
                .connect_with(options)
                .await?;
            (writer, readers)
        };
        let (writes, queue) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(run_writer(writer, queue));
        Ok(Self { pool, writes })
    }

    /// Runs `job` on the writer task and answers once the group it ran in has committed.
    async fn write<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> WriteFuture<'c, T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let run: JobRun = Box::new(move |conn| {
            Box::pin(async move {
                let result = job(conn).await;
                (result.is_ok(), Box::new(result) as Box<dyn Any + Send>)
            })
        });
        self.writes
            .send(Job { run, reply })
            .await
            .map_err(|_| writer_gone())?;
        let output = answer.await.map_err(|_| writer_gone())??;
        match output.downcast::<Result<T>>() {
            Ok(result) => *result,
            Err(_) => Err(StoreError::Database(
                "the writer answered with an unexpected type".to_owned(),
            )),
        }
    }
}

fn writer_gone() -> StoreError {
    StoreError::Database("the database writer is not running".to_owned())
}

/// The writer task: takes every queued write (up to `MAX_GROUP`) and commits them together.
/// It ends when every store handle is dropped.
async fn run_writer(pool: SqlitePool, mut queue: mpsc::Receiver<Job>) {
    let mut group: VecDeque<Job> = VecDeque::new();
    loop {
        if group.is_empty() {
            match queue.recv().await {
                Some(job) => group.push_back(job),
                None => return,
            }
        }
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push_back(job),
                Err(_) => break,
            }
        }
        match pool.acquire().await {
            Ok(mut conn) => run_group(&mut conn, &mut group).await,
            Err(err) => {
                tracing::error!(error = %describe(&err), "the database writer has no connection");
                for job in group.drain(..) {
                    let _ = job.reply.send(Err(StoreError::from(&err)));
                }
            }
        }
    }
}

impl From<&sqlx::Error> for StoreError {
    fn from(err: &sqlx::Error) -> Self {
        StoreError::Database(describe(err))
    }
}

/// Runs the jobs of `group` in one transaction, one savepoint each, and answers them after the
/// COMMIT. Jobs left in `group` (the transaction broke before they ran) go in the next group.
async fn run_group(conn: &mut SqliteConnection, group: &mut VecDeque<Job>) {
    // The control statements ride together in one call (one round trip to the connection's
    // thread each): measured, those round trips, not the fsync, were most of a group's time.
    // IMMEDIATE: the write lock is taken before any job reads, so a job's read-then-write
    // (`claim_outbox`, `MAX(seq) + 1`) cannot interleave with another process's writer.
    if let Err(err) = conn.execute("BEGIN IMMEDIATE; SAVEPOINT job").await {
        // BEGIN may have succeeded before SAVEPOINT failed; nothing ran, so undo it all.
        let _ = conn.execute("ROLLBACK").await;
        for job in group.drain(..) {
            let _ = job.reply.send(Err(StoreError::from(&err)));
        }
        return;
    }
    let mut ran: Vec<(oneshot::Sender<JobReply>, bool, Box<dyn Any + Send>)> = Vec::new();
    let mut broken: Option<sqlx::Error> = None;
    while let Some(job) = group.pop_front() {
        // Every job starts inside a fresh savepoint named `job`.
        let fresh = if ran.is_empty() {
            Ok(())
        } else {
            conn.execute("RELEASE job; SAVEPOINT job").await.map(|_| ())
        };
        if let Err(err) = fresh {
            group.push_front(job);
            broken = Some(err);
            break;
        }
        let (ok, output) = (job.run)(&mut *conn).await;
        // Undo a failed job alone; the group's other writes stand.
        let undone = if ok {
            Ok(())
        } else {
            conn.execute("ROLLBACK TO job").await.map(|_| ())
        };
        ran.push((job.reply, ok, output));
        if let Err(err) = undone {
            broken = Some(err);
            break;
        }
    }
    let failure = match broken {
        Some(err) => Some(err),
        None => conn.execute("RELEASE job; COMMIT").await.err(),
    };
    match failure {
        None => {
            for (reply, _, output) in ran {
                let _ = reply.send(Ok(output));
            }
        }
        Some(err) => {
            // SQLite may already have rolled back; a second ROLLBACK failing changes nothing.
            let _ = conn.execute("ROLLBACK").await;
            tracing::warn!(
                error = %describe(&err),
                writes = ran.len(),
                "a group of database writes did not commit"
            );
            for (reply, ok, output) in ran {
                // A job that had failed already carries its own error.
                let answer = if ok {
                    Err(StoreError::from(&err))
                } else {
                    Ok(output)
                };
                let _ = reply.send(answer);
            }
        }
    }
}

/// Runs the embedded migrations. sqlx takes no lock on SQLite, so two processes opening a fresh
/// file together (`serve` beside `worker`) can both decide a migration is missing; the loser's
/// transaction fails once the winner's commits ("table already exists") and rolls back. Running
/// again then finds the migration applied, so a failure is retried a few times before it counts.
async fn migrate(pool: &SqlitePool) -> Result<()> {
    let migrator = sqlx::migrate!("migrations/sqlite");
    let mut attempt: u64 = 0;
    loop {
        attempt += 1;
        match migrator.run(pool).await {
            Ok(()) => return Ok(()),
            // The winner may still be creating `_sqlx_migrations` or committing: wait a little
            // longer each time before looking again.
            Err(_) if attempt < 8 => {
                tokio::time::sleep(std::time::Duration::from_millis(25 * attempt)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
}

fn ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn time(raw: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_millis(raw)
        .ok_or_else(|| StoreError::Corrupt("timestamp out of range".to_owned()))
}

fn opt_time(raw: Option<i64>) -> Result<Option<DateTime<Utc>>> {
    raw.map(time).transpose()
}

fn json_text(value: &Value) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|_| StoreError::Database("cannot serialise a JSON value".to_owned()))
}

fn json(raw: &str) -> Result<Value> {
    serde_json::from_str(raw).map_err(|_| StoreError::Corrupt("invalid stored JSON".to_owned()))
}

fn uuid(raw: &str) -> Result<Uuid> {
    Uuid::parse_str(raw).map_err(|_| StoreError::Corrupt("invalid conversation id".to_owned()))
}

fn day_key(day: NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

fn conversation_from(row: &SqliteRow) -> Result<Conversation> {
    Ok(Conversation {
        id: uuid(row.try_get::<&str, _>("id")?)?,
        subscriber_id: common::subscriber(row.try_get::<&str, _>("subscriber_id")?)?,
        channel: row.try_get("channel")?,
        turn_count: row.try_get("turn_count")?,
        escalated_at: opt_time(row.try_get("escalated_at")?)?,
        last_message_at: opt_time(row.try_get("last_message_at")?)?,
        token_hash: row.try_get("token_hash")?,
        previous_token_hash: row.try_get("previous_token_hash")?,
        token_issued_at: opt_time(row.try_get("token_issued_at")?)?,
        token_generation: row.try_get("token_generation")?,
        offering: row.try_get("offering")?,
        opening_sent_at: opt_time(row.try_get("opening_sent_at")?)?,
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
    })
}

fn turn_from(row: &SqliteRow) -> Result<Turn> {
    let actions: Option<&str> = row.try_get("actions")?;
    Ok(Turn {
        id: row.try_get("id")?,
        seq: row.try_get("seq")?,
        conversation_id: uuid(row.try_get::<&str, _>("conversation_id")?)?,
        role: common::role(row.try_get::<&str, _>("role")?)?,
        text: row.try_get("text")?,
        outcome: row.try_get("outcome")?,
        model: row.try_get("model")?,
        bound: row.try_get("bound")?,
        actions: actions.map(json).transpose()?,
        reads: row.try_get("reads")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        cached_tokens: row.try_get("cached_tokens")?,
        cost_usd: row.try_get("cost_usd")?,
        latency_ms: row.try_get("latency_ms")?,
        created_at: time(row.try_get("created_at")?)?,
    })
}

fn outbox_from(row: &SqliteRow) -> Result<OutboxRow> {
    Ok(OutboxRow {
        id: row.try_get("id")?,
        conversation_id: uuid(row.try_get::<&str, _>("conversation_id")?)?,
        subscriber_id: common::subscriber(row.try_get::<&str, _>("subscriber_id")?)?,
        kind: common::outbox_kind(row.try_get::<&str, _>("kind")?)?,
        payload: json(row.try_get::<&str, _>("payload")?)?,
        status: common::outbox_status(row.try_get::<&str, _>("status")?)?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: time(row.try_get("next_attempt_at")?)?,
        last_error: row.try_get("last_error")?,
        lease_until: opt_time(row.try_get("lease_until")?)?,
        created_at: time(row.try_get("created_at")?)?,
        delivered_at: opt_time(row.try_get("delivered_at")?)?,
    })
}

impl SqliteStore {
    async fn find_conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        let row = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE subscriber_id = ?"
        ))
        .bind(subscriber_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(conversation_from).transpose()
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn lock_conversation(&self, _id: ConversationId) -> Result<ConversationLock> {
        // One process owns a SQLite file: the in-process queue orders its turns.
        Ok(ConversationLock::local())
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
        let subscriber = subscriber_id.as_str().to_owned();
        let channel = channel.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO conversations (id, subscriber_id, channel, created_at, \
                     updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (subscriber_id) DO NOTHING",
                )
                .bind(super::new_conversation_id().to_string())
                .bind(&subscriber)
                .bind(&channel)
                .bind(ms(now))
                .bind(ms(now))
                .execute(&mut *conn)
                .await?;
                let row = sqlx::query(&format!(
                    "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE subscriber_id = ?"
                ))
                .bind(&subscriber)
                .fetch_optional(&mut *conn)
                .await?;
                row.as_ref()
                    .map(conversation_from)
                    .transpose()?
                    .ok_or_else(|| {
                        StoreError::Database("conversation vanished after insert".to_owned())
                    })
            })
        })
        .await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        let row = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(conversation_from).transpose()
    }

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE conversations SET escalated_at = ?, updated_at = ? WHERE id = ?",
                )
                .bind(ms(at))
                .bind(ms(at))
                .bind(id.to_string())
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(not_found("conversation"));
                }
                Ok(())
            })
        })
        .await
    }

    async fn set_token(
        &self,
        id: ConversationId,
        token_hash: &str,
        issued_at: DateTime<Utc>,
    ) -> Result<i64> {
        // One statement: the right-hand sides read the row as it was, so the old current hash
        // becomes the previous one.
        let token_hash = token_hash.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                let generation: Option<i64> = sqlx::query_scalar(
                    "UPDATE conversations SET previous_token_hash = token_hash, token_hash = ?, \
                     token_issued_at = ?, token_generation = token_generation + 1, \
                     updated_at = ? WHERE id = ? RETURNING token_generation",
                )
                .bind(&token_hash)
                .bind(ms(issued_at))
                .bind(ms(issued_at))
                .bind(id.to_string())
                .fetch_optional(&mut *conn)
                .await?;
                generation.ok_or_else(|| not_found("conversation"))
            })
        })
        .await
    }

    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>> {
        let rows = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations \
             WHERE token_hash IS NULL AND COALESCE(last_message_at, created_at) >= ? \
             ORDER BY created_at, id"
        ))
        .bind(ms(since))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(conversation_from).collect()
    }

    async fn record_turn(&self, turn: &NewTurn) -> Result<i64> {
        let actions = turn.actions.as_ref().map(json_text).transpose()?;
        let turn = turn.clone();
        // One job: the insert and the conversation update commit together (one savepoint).
        self.write(move |conn| {
            Box::pin(async move {
                // `seq` is the next integer after the largest: one writer runs at a time, and
                // the unique index makes the MAX a single lookup.
                let id = sqlx::query_scalar::<_, i64>(
                    "INSERT INTO turns (seq, conversation_id, role, text, outcome, model, bound, \
                     actions, reads, input_tokens, output_tokens, cached_tokens, cost_usd, \
                     latency_ms, created_at) \
                     VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM turns), \
                             ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                     RETURNING id",
                )
                .bind(turn.conversation_id.to_string())
                .bind(turn.role.as_str())
                .bind(&turn.text)
                .bind(&turn.outcome)
                .bind(&turn.model)
                .bind(turn.bound)
                .bind(actions)
                .bind(turn.reads)
                .bind(turn.input_tokens)
                .bind(turn.output_tokens)
                .bind(turn.cached_tokens)
                .bind(turn.cost_usd)
                .bind(turn.latency_ms)
                .bind(ms(turn.created_at))
                .fetch_one(&mut *conn)
                .await?;
                if turn.role == Role::User {
                    sqlx::query(
                        "UPDATE conversations SET \
                         last_message_at = MAX(COALESCE(last_message_at, ?1), ?1), \
                         turn_count = turn_count + ?2, \
                         updated_at = ?1 \
                         WHERE id = ?3",
                    )
                    .bind(ms(turn.created_at))
                    .bind(i64::from(turn.bound))
                    .bind(turn.conversation_id.to_string())
                    .execute(&mut *conn)
                    .await?;
                }
                Ok(id)
            })
        })
        .await
    }

    async fn update_turn_actions(&self, turn_id: i64, actions: &Value) -> Result<()> {
        let actions = json_text(actions)?;
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query("UPDATE turns SET actions = ? WHERE id = ?")
                    .bind(&actions)
                    .bind(turn_id)
                    .execute(&mut *conn)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(not_found("turn"));
                }
                Ok(())
            })
        })
        .await
    }

    async fn turn(&self, turn_id: i64) -> Result<Option<Turn>> {
        let row = sqlx::query(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ?"))
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
                 WHERE conversation_id = ? AND bound = 1 AND created_at >= ? \
                 ORDER BY created_at DESC, seq DESC LIMIT ?\
             ) ORDER BY created_at, seq"
        ))
        .bind(conversation_id.to_string())
        .bind(ms(since))
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
        let times: Vec<i64> = sqlx::query_scalar(
            "SELECT created_at FROM turns \
             WHERE conversation_id = ? AND bound = 1 AND role = 'user' \
             ORDER BY created_at DESC, seq DESC LIMIT ?",
        )
        .bind(conversation_id.to_string())
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        times.into_iter().map(time).collect()
    }

    async fn turns(&self, conversation_id: ConversationId) -> Result<Vec<Turn>> {
        let rows = sqlx::query(&format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE conversation_id = ? ORDER BY created_at, seq"
        ))
        .bind(conversation_id.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(turn_from).collect()
    }

    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                let count: i64 = sqlx::query_scalar(
                    "INSERT INTO rate_counters (subscriber_id, window_start, count) \
                     VALUES (?, ?, 1) ON CONFLICT (subscriber_id, window_start) \
                     DO UPDATE SET count = count + 1 RETURNING count",
                )
                .bind(&subscriber)
                .bind(ms(window_start))
                .fetch_one(&mut *conn)
                .await?;
                if count == 1 {
                    // A new window began: the contact's older windows will never be read
                    // again, and a subscriber id is personal data, so they go (once per
                    // window, not per turn).
                    sqlx::query(
                        "DELETE FROM rate_counters WHERE subscriber_id = ? AND window_start < ?",
                    )
                    .bind(&subscriber)
                    .bind(ms(window_start))
                    .execute(&mut *conn)
                    .await?;
                }
                Ok(count)
            })
        })
        .await
    }

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage> {
        let row: Option<(i64, f64)> =
            sqlx::query_as("SELECT tokens, cost_usd FROM budget_counters WHERE day = ?")
                .bind(day_key(day))
                .fetch_optional(&self.pool)
                .await?;
        Ok(row
            .map(|(tokens, cost_usd)| BudgetUsage { tokens, cost_usd })
            .unwrap_or_default())
    }

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()> {
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO budget_counters (day, tokens, cost_usd) VALUES (?, ?, ?) \
                     ON CONFLICT (day) DO UPDATE SET tokens = tokens + excluded.tokens, \
                     cost_usd = cost_usd + excluded.cost_usd",
                )
                .bind(day_key(day))
                .bind(tokens)
                .bind(cost_usd)
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn enqueue(&self, row: &NewOutboxRow) -> Result<i64> {
        let payload = json_text(&row.payload)?;
        let conversation_id = row.conversation_id.to_string();
        let subscriber = row.subscriber_id.as_str().to_owned();
        let kind = row.kind.as_str();
        let (next_attempt_at, created_at) = (ms(row.next_attempt_at), ms(row.created_at));
        self.write(move |conn| {
            Box::pin(async move {
                let id: i64 = sqlx::query_scalar(
                    "INSERT INTO outbox (conversation_id, subscriber_id, kind, payload, status, \
                     next_attempt_at, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?) \
                     RETURNING id",
                )
                .bind(&conversation_id)
                .bind(&subscriber)
                .bind(kind)
                .bind(&payload)
                .bind(next_attempt_at)
                .bind(created_at)
                .fetch_one(&mut *conn)
                .await?;
                Ok(id)
            })
        })
        .await
    }

    async fn claim_outbox(&self, rules: ClaimRules) -> Result<Vec<OutboxRow>> {
        // On the writer, whose group transaction began IMMEDIATE: SQLite's write lock is held
        // before this reads, so a second worker on the same file waits (busy_timeout) and then
        // sees these rows as `delivering`. The `IN (SELECT …)` is evaluated once, before any
        // row changes.
        let sql = format!(
            "UPDATE outbox SET status = 'delivering', lease_until = ?1, attempts = attempts + 1 \
             WHERE id IN (\
                 SELECT o.id FROM outbox o \
                 WHERE ((o.status = 'pending' AND o.next_attempt_at <= ?2) \
                        OR (o.status = 'delivering' AND o.lease_until <= ?2)) \
                   AND (o.kind <> 'reply' OR (\
                        NOT EXISTS (SELECT 1 FROM outbox p \
                                    WHERE p.conversation_id = o.conversation_id \
                                      AND p.kind = 'reply' AND p.id < o.id \
                                      AND p.status IN ('pending', 'delivering')) \
                        AND NOT EXISTS (SELECT 1 FROM outbox d \
                                    WHERE d.conversation_id = o.conversation_id \
                                      AND d.kind = 'reply' AND d.status = 'delivered' \
                                      AND d.delivered_at > ?3))) \
                 ORDER BY o.id LIMIT ?4) \
             RETURNING {OUTBOX_COLUMNS}"
        );
        let rows = self
            .write(move |conn| {
                Box::pin(async move {
                    Ok(sqlx::query(&sql)
                        .bind(ms(after(rules.now, rules.lease)))
                        .bind(ms(rules.now))
                        .bind(ms(before(rules.now, rules.reply_gap)))
                        .bind(rules.limit.max(0))
                        .fetch_all(&mut *conn)
                        .await?)
                })
            })
            .await?;
        let mut claimed = rows.iter().map(outbox_from).collect::<Result<Vec<_>>>()?;
        // RETURNING has no defined order.
        claimed.sort_by_key(|row| row.id);
        Ok(claimed)
    }

    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE outbox SET status = 'delivered', delivered_at = ?, lease_until = NULL \
                         WHERE id = ?",
                )
                .bind(ms(at))
                .bind(id)
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(not_found("outbox row"));
                }
                Ok(())
            })
        })
        .await
    }

    async fn mark_retry(&self, id: i64, next_attempt_at: DateTime<Utc>, error: &str) -> Result<()> {
        let error = bounded_error(error).to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE outbox SET status = 'pending', next_attempt_at = ?, last_error = ?, \
                         lease_until = NULL WHERE id = ?",
                )
                .bind(ms(next_attempt_at))
                .bind(&error)
                .bind(id)
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(not_found("outbox row"));
                }
                Ok(())
            })
        })
        .await
    }

    async fn mark_failed(&self, id: i64, error: &str, at: DateTime<Utc>) -> Result<()> {
        let error = bounded_error(error).to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE outbox SET status = 'failed', last_error = ?, failed_at = ?, \
                         lease_until = NULL WHERE id = ?",
                )
                .bind(&error)
                .bind(ms(at))
                .bind(id)
                .execute(&mut *conn)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(not_found("outbox row"));
                }
                Ok(())
            })
        })
        .await
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>> {
        let row = sqlx::query(&format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(outbox_from).transpose()
    }

    async fn pending_replies(&self, conversation_id: ConversationId) -> Result<i64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM outbox WHERE conversation_id = ? AND kind = 'reply' \
             AND status IN ('pending', 'delivering')",
        )
        .bind(conversation_id.to_string())
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn system_8_sqlite_file_and_folder_created_on_first_run_with_wal() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("nested").join("data").join("agent.db");
        let url = format!("sqlite://{}", path.display());
        let store = SqliteStore::connect(&url).await.expect("connect");
        assert!(path.is_file(), "the file and its folders exist");

        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&store.pool)
            .await
            .expect("journal_mode");
        assert_eq!(journal, "wal");
        let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(&store.pool)
            .await
            .expect("foreign_keys");
        assert_eq!(foreign_keys, 1);
        let busy_ms: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&store.pool)
            .await
            .expect("busy_timeout");
        assert_eq!(busy_ms, 5000);
    }

    #[tokio::test]
    async fn system_9_migrations_rerun_on_reopen_and_keep_data() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        let subscriber = SubscriberId::parse("5550001").expect("digits");
        let at = DateTime::from_timestamp_millis(1_770_000_000_000).expect("an instant");
        let first = SqliteStore::connect(&url).await.expect("connect");
        let created = first
            .conversation_for(&subscriber, "whatsapp", at)
            .await
            .expect("conversation_for");
        first.pool.close().await;

        let reopened = SqliteStore::connect(&url).await.expect("reconnect");
        assert_eq!(
            reopened.conversation(created.id).await.expect("read"),
            Some(created)
        );
    }

    /// `serve` and `worker` started together on one fresh file both come up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn system_5_4_two_processes_opening_a_fresh_file_both_start() {
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("a temporary folder");
            let url = format!("sqlite://{}/agent.db", dir.path().display());
            let (a, b) = tokio::join!(SqliteStore::connect(&url), SqliteStore::connect(&url));
            a.expect("the first opener starts");
            b.expect("the second opener starts");
        }
    }

    #[tokio::test]
    async fn system_8_in_memory_database_needs_no_folder() {
        let store = SqliteStore::connect("sqlite::memory:")
            .await
            .expect("connect");
        store.ping().await.expect("ping");
    }

    fn instant() -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_770_000_000_000).expect("an instant")
    }

    /// Writes that queue together commit together; one that fails (here a turn for a
    /// conversation that does not exist) is undone alone and the others stand.
    #[tokio::test]
    async fn system_8_a_failed_write_among_concurrent_writes_undoes_only_itself() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        let store = SqliteStore::connect(&url).await.expect("connect");
        let subscriber = SubscriberId::parse("5550002").expect("digits");
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", instant())
            .await
            .expect("conversation_for");
        let unknown = super::super::new_conversation_id();

        let mut writes = tokio::task::JoinSet::new();
        for n in 0..10 {
            let store = store.clone();
            let turn = NewTurn::user(conversation.id, format!("message {n}"), true, instant());
            writes.spawn(async move { store.record_turn(&turn).await.is_ok() });
        }
        {
            let store = store.clone();
            let orphan = NewTurn::user(unknown, "orphan", true, instant());
            writes.spawn(async move { store.record_turn(&orphan).await.is_ok() });
        }
        let mut succeeded = 0;
        while let Some(done) = writes.join_next().await {
            succeeded += usize::from(done.expect("the write task finished"));
        }

        assert_eq!(succeeded, 10, "only the orphan turn fails");
        assert_eq!(store.turns(conversation.id).await.expect("turns").len(), 10);
        assert!(store.turns(unknown).await.expect("turns").is_empty());
        let reread = store
            .conversation(conversation.id)
            .await
            .expect("read")
            .expect("the conversation exists");
        assert_eq!(
            reread.turn_count, 10,
            "each user turn's update committed with it"
        );
        // The writer still serves writes after a failure.
        store
            .add_budget(instant().date_naive(), 5, 0.01)
            .await
            .expect("a later write");
        assert_eq!(
            store
                .budget(instant().date_naive())
                .await
                .expect("budget")
                .tokens,
            5
        );
    }

    /// A write is acknowledged only after its group committed: another process on the same
    /// file (a separate store, its own connections) reads it as soon as the call returns.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn system_8_every_acknowledged_write_is_visible_to_another_process() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        let store = SqliteStore::connect(&url).await.expect("connect");
        let other = SqliteStore::connect(&url)
            .await
            .expect("connect a second time");
        let subscriber = SubscriberId::parse("5550003").expect("digits");
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", instant())
            .await
            .expect("conversation_for");

        let mut writes = tokio::task::JoinSet::new();
        for n in 0..24 {
            let (store, other) = (store.clone(), other.clone());
            let turn = NewTurn::user(conversation.id, format!("message {n}"), true, instant());
            writes.spawn(async move {
                let id = store.record_turn(&turn).await.expect("record_turn");
                let seen = other.turn(id).await.expect("read from the other store");
                seen.map(|t| t.text) == Some(turn.text)
            });
        }
        while let Some(done) = writes.join_next().await {
            assert!(
                done.expect("the write task finished"),
                "an acknowledged turn is readable elsewhere"
            );
        }
    }
}
