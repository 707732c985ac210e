//! The embedded backend: one SQLite file in WAL mode, the default `DATABASE_URL`.
//!
//! Owns the SQLite dialect of every `Store` operation. Timestamps are stored as unix
//! milliseconds (INTEGER), JSON as TEXT written by `serde_json`.
//!
//! # One thread owns the connection
//!
//! Every call is a job run on one dedicated OS thread that owns the process's only SQLite
//! connection that reads or writes rows (see docs/PERFORMANCE.md for the measurements that led
//! here; a file's second connection, in `checkpoint`, only copies the WAL into the file).
//! SQLite is a synchronous library: run on its own thread, a job's statements execute back to
//! back from a warm page cache and a cache of prepared statements, with one hand-over to the
//! thread and one answer per call, rather than one cross-thread round trip per statement.
//!
//! - **Writes commit in groups.** The thread takes every job that queued while it was busy
//!   (up to `MAX_GROUP` writes), runs the writes in one `BEGIN IMMEDIATE` transaction, and
//!   answers each only after COMMIT returned. So `synchronous = FULL` still means
//!   "acknowledged ⇒ on disk", and one fsync serves the whole group. A write that fails is
//!   undone alone: the group is rolled back and run again with a savepoint per job (so a job
//!   may run twice; jobs are `Fn` and touch nothing but the database). A COMMIT that fails fails
//!   every write of the group.
//! - **Reads run before the group**, together in one read transaction outside the group's,
//!   and are answered at once: they see every write already acknowledged, never one that might
//!   still roll back.
//! - Each write method is one job, so its statements are atomic together. A job
//!   that must be atomic against another process on the same file (`claim_outbox`) is safe
//!   because `BEGIN IMMEDIATE` takes SQLite's write lock before the job reads; `busy_timeout`
//!   makes the thread wait for another process's lock rather than fail.
//!
//! Invariants: the file and its folder are created on first run; migrations run on connect,
//! once, even when two processes open a fresh file together; the thread ends when the last
//! handle on the store is dropped.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, Row, ToSql, params};
use serde_json::Value;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::common::{self, after, before, bounded_error, not_found};
use super::{ActionRecord, Nudge, NudgeExchange, NudgeStatus, SalesRecord};
use super::{
    BudgetCharge, BudgetUsage, CONTACT_TABLES, ClaimRules, Conversation, ConversationLock,
    Exchange, ExchangeIds, Forgotten, KeepPromise, NewOutboxRow, NewTurn, OutboxKind, OutboxRow,
    PromiseRows, Result, Role, Store, StoreError, Turn, TurnContext, TurnContextQuery,
};
use super::{
    ConversationStore, CounterStore, EmbeddingStore, ErasureStore, NudgeStore, OrderStore,
    OutboxStore, ReportStore, SalesStore, TurnStore,
};
use super::{WindowClosing, WindowClosingClaim, WindowClosingStatus};
use crate::ids::{ConversationId, SubscriberId};

mod checkpoint;
mod db;
use checkpoint::Checkpoints;
use db::Db;

/// At most this many queued writes share one transaction, so one group's latency stays bounded.
const MAX_GROUP: usize = 64;
/// How long a writer waits for another process's lock before the statement fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema, in order. `every_migration_file_is_listed` keeps this list and
/// `migrations/sqlite/` in step.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "lean_write_path",
        include_str!("../../../migrations/sqlite/0002_lean_write_path.sql"),
    ),
    (
        3,
        "turns_without_sequence",
        include_str!("../../../migrations/sqlite/0003_turns_without_sequence.sql"),
    ),
    (
        4,
        "outbox_open_replies",
        include_str!("../../../migrations/sqlite/0004_outbox_open_replies.sql"),
    ),
    (
        5,
        "durable_promises",
        include_str!("../../../migrations/sqlite/0005_durable_promises.sql"),
    ),
    (
        6,
        "outbox_delivery_progress",
        include_str!("../../../migrations/sqlite/0006_outbox_delivery_progress.sql"),
    ),
    (
        7,
        "turns_text_kept",
        include_str!("../../../migrations/sqlite/0007_turns_text_kept.sql"),
    ),
    (
        8,
        "offering_at",
        include_str!("../../../migrations/sqlite/0008_offering_at.sql"),
    ),
    (
        9,
        "manychat_flow_sends",
        include_str!("../../../migrations/sqlite/0009_manychat_flow_sends.sql"),
    ),
    (
        10,
        "turns_media_kind",
        include_str!("../../../migrations/sqlite/0010_turns_media_kind.sql"),
    ),
    (
        11,
        "turn_tickets",
        include_str!("../../../migrations/sqlite/0011_turn_tickets.sql"),
    ),
    (
        12,
        "report_indexes",
        include_str!("../../../migrations/sqlite/0012_report_indexes.sql"),
    ),
    (
        13,
        "nudge_worker",
        include_str!("../../../migrations/sqlite/0013_nudge_worker.sql"),
    ),
    (
        14,
        "nudge_record",
        include_str!("../../../migrations/sqlite/0014_nudge_record.sql"),
    ),
    (
        15,
        "turns_plugin_reads",
        include_str!("../../../migrations/sqlite/0015_turns_plugin_reads.sql"),
    ),
    (
        16,
        "handoff_hold",
        include_str!("../../../migrations/sqlite/0016_handoff_hold.sql"),
    ),
    (
        17,
        "conversation_craft",
        include_str!("../../../migrations/sqlite/0017_conversation_craft.sql"),
    ),
    (
        18,
        "hold_releases",
        include_str!("../../../migrations/sqlite/0018_hold_releases.sql"),
    ),
    (
        19,
        "promise_owners",
        include_str!("../../../migrations/sqlite/0019_promise_owners.sql"),
    ),
    (
        20,
        "learning",
        include_str!("../../../migrations/sqlite/0020_learning.sql"),
    ),
    (
        21,
        "window_closings_lost",
        include_str!("../../../migrations/sqlite/0021_window_closings_lost.sql"),
    ),
    (
        22,
        "conversation_fence",
        include_str!("../../../migrations/sqlite/0022_conversation_fence.sql"),
    ),
    (
        23,
        "turns_cache_writes",
        include_str!("../../../migrations/sqlite/0023_turns_cache_writes.sql"),
    ),
    (
        24,
        "turns_knowledge",
        include_str!("../../../migrations/sqlite/0024_turns_knowledge.sql"),
    ),
    (
        25,
        "console_pages",
        include_str!("../../../migrations/sqlite/0025_console_pages.sql"),
    ),
    (
        26,
        "turns_steps",
        include_str!("../../../migrations/sqlite/0026_turns_steps.sql"),
    ),
    (
        27,
        "learning_decisions",
        include_str!("../../../migrations/sqlite/0027_learning_decisions.sql"),
    ),
    (
        28,
        "embeddings",
        include_str!("../../../migrations/sqlite/0028_embeddings.sql"),
    ),
    (
        29,
        "embeddings_used_at",
        include_str!("../../../migrations/sqlite/0029_embeddings_used_at.sql"),
    ),
];

// Column lists as macros, so every statement is one `concat!`ed literal: no SQL is formatted on
// the hot path, and the statement cache is keyed by the same `&'static str` every time.
macro_rules! conversation_columns {
    () => {
        "id, subscriber_id, channel, turn_count, escalated_at, last_message_at, token_hash, \
         previous_token_hash, token_issued_at, token_generation, offering, opening_sent_at, \
         created_at, updated_at, hold_released_at, hold_release_reason, hold_note_due, \
         fence_nonce"
    };
}

macro_rules! turn_columns {
    () => {
        "id, seq, conversation_id, role, text, outcome, model, bound, actions, reads, \
         input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at, \
         escalation_reason, media_kind, duplicate, playbook_version, cache_write_tokens"
    };
}

macro_rules! outbox_columns {
    () => {
        "id, conversation_id, subscriber_id, kind, payload, status, attempts, next_attempt_at, \
         last_error, lease_until, created_at, delivered_at, messages_delivered, trigger_timeouts"
    };
}

/// The SQLite store. Cheap to clone: a handle on the database thread's queue.
#[derive(Clone)]
pub struct SqliteStore {
    jobs: mpsc::Sender<Job>,
    /// The database file existed before this process opened it.
    reopened: bool,
}

/// A write waiting for the database thread.
trait WriteJob: Send {
    /// Runs the job's statements inside the group transaction and keeps the result (replacing
    /// the one of an earlier attempt that was rolled back): whether they succeeded.
    fn attempt(&mut self, conn: &Db<'_>) -> bool;
    /// Answers the caller once the group's fate is known (`Err`: the group did not commit).
    fn settle(self: Box<Self>, group: std::result::Result<(), StoreError>);
}

struct PendingWrite<T, F> {
    job: F,
    result: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> WriteJob for PendingWrite<T, F>
where
    T: Send + 'static,
    F: Fn(&Db<'_>) -> Result<T> + Send + 'static,
{
    fn attempt(&mut self, conn: &Db<'_>) -> bool {
        let result = contained(|| (self.job)(conn));
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn settle(self: Box<Self>, group: std::result::Result<(), StoreError>) {
        let answer = match (group, self.result) {
            (Ok(()), Some(result)) => result,
            // A job that failed carries its own error, whatever became of the group.
            (_, Some(Err(own))) => Err(own),
            (Err(error), _) => Err(error),
            (Ok(()), None) => Err(StoreError::Database("the write did not run".to_owned())),
        };
        let _ = self.reply.send(answer);
    }
}

/// A read waiting for the database thread; it answers its caller itself.
type ReadJob = Box<dyn FnOnce(&Db<'_>) + Send>;

enum Job {
    /// Runs outside the group's transaction and answers its caller itself.
    Read(ReadJob),
    /// Runs inside the group transaction; answered after COMMIT.
    Write(Box<dyn WriteJob>),
}

/// The folder of the default `DATABASE_URL` (`sqlite://data/agent.db`): the only one created.
const DEFAULT_FOLDER: &str = "data";

/// An I/O error's kind in plain words, for opening errors.
fn plain_io(kind: std::io::ErrorKind) -> String {
    use std::io::ErrorKind;
    match kind {
        ErrorKind::PermissionDenied => "permission denied (check the owner and mode)".to_owned(),
        ErrorKind::NotFound => "not found".to_owned(),
        ErrorKind::ReadOnlyFilesystem => "the file system is read-only".to_owned(),
        ErrorKind::StorageFull => "the disk is full".to_owned(),
        other => other.to_string(),
    }
}

/// Where the database lives, from `DATABASE_URL`.
#[derive(Debug, Clone, PartialEq)]
enum Location {
    File(PathBuf),
    Memory,
}

fn location(url: &str) -> Result<Location> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .ok_or(StoreError::UnsupportedUrl)?;
    if rest.contains('?') {
        return Err(StoreError::Database(
            "DATABASE_URL: options after `?` are not supported for SQLite".to_owned(),
        ));
    }
    match rest {
        ":memory:" => Ok(Location::Memory),
        "" => Err(StoreError::Database(
            "DATABASE_URL: the SQLite URL names no file".to_owned(),
        )),
        path => Ok(Location::File(PathBuf::from(path))),
    }
}

impl SqliteStore {
    /// Opens (creating on first run) the file `url` names, e.g. `sqlite://data/agent.db`, and
    /// runs the migrations. `sqlite::memory:` opens a private in-memory database.
    ///
    /// The file's folder must exist: a mistyped path would otherwise start the service on a new,
    /// empty database while the real one sits elsewhere. Only the default folder, `data/`, is
    /// created on first run.
    pub async fn connect(url: &str) -> Result<Self> {
        let location = location(url)?;
        if let Location::File(path) = &location
            && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        {
            if parent == Path::new(DEFAULT_FOLDER) {
                tokio::fs::create_dir_all(parent).await.map_err(|e| {
                    StoreError::Database(format!(
                        "cannot create the folder {DEFAULT_FOLDER}/: {}",
                        plain_io(e.kind())
                    ))
                })?;
            } else if !tokio::fs::metadata(parent).await.is_ok_and(|m| m.is_dir()) {
                return Err(StoreError::Database(format!(
                    "the folder {} does not exist (create it, or correct DATABASE_URL; only the \
                     default {DEFAULT_FOLDER}/ is created)",
                    parent.display()
                )));
            }
        }
        if let Location::File(path) = &location
            && tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir())
        {
            return Err(StoreError::Database(
                "the path names a folder, not a file".to_owned(),
            ));
        }
        let reopened = match &location {
            Location::File(path) => tokio::fs::metadata(path).await.is_ok(),
            Location::Memory => false,
        };
        // Opening may wait on another process (the WAL switch, migrations): off the runtime.
        let (conn, checkpoints) = tokio::task::spawn_blocking(move || {
            let conn = open(&location)?;
            let checkpoints = match &location {
                // The database thread's own checkpoints become a backstop (see `checkpoint`).
                Location::File(path) => {
                    conn.pragma_update(None, "wal_autocheckpoint", checkpoint::BACKSTOP_PAGES)?;
                    Some(Checkpoints::start(path)?)
                }
                Location::Memory => None,
            };
            Ok::<_, StoreError>((conn, checkpoints))
        })
        .await
        .map_err(|_| StoreError::Database("the database opener panicked".to_owned()))??;
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("sqlite".to_owned())
            .spawn(move || run(conn, queue, checkpoints))
            .map_err(|e| {
                StoreError::Database(format!("cannot start the database thread: {}", e.kind()))
            })?;
        Ok(Self { jobs, reopened })
    }

    /// Runs `job` on the database thread, outside any transaction.
    async fn read<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Db<'_>) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Job::Read(Box::new(move |conn| {
            let _ = reply.send(contained(|| job(conn)));
        }));
        self.jobs.send(job).map_err(|_| thread_gone())?;
        answer.await.map_err(|_| thread_gone())?
    }

    /// Runs `job` inside the next group transaction and answers once that group committed.
    /// `job` may run twice: a group in which a write failed is rolled back and run again, each
    /// write in its own savepoint.
    async fn write<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Db<'_>) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Job::Write(Box::new(PendingWrite {
            job,
            result: None,
            reply,
        }));
        self.jobs.send(job).map_err(|_| thread_gone())?;
        answer.await.map_err(|_| thread_gone())?
    }

    /// `query` ([`query_one`], [`query_all`]) on the database thread, outside any transaction.
    async fn read_query<T, R, P, M>(
        &self,
        query: fn(&Db<'_>, &'static str, P, M) -> Result<R>,
        sql: &'static str,
        params: P,
        map: M,
    ) -> Result<R>
    where
        R: Send + 'static,
        P: rusqlite::Params + Send + 'static,
        M: Fn(&Row<'_>) -> Result<T> + Send + 'static,
    {
        self.read(move |conn| query(conn, sql, params, map)).await
    }
}

/// Runs a job so that a panic inside it becomes that job's error instead of ending the database
/// thread (which would fail every later call). A write that panicked is rolled back to its
/// savepoint like any failed write.
fn contained<T>(job: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| {
        tracing::error!("a database job panicked");
        Err(StoreError::Database("a database job panicked".to_owned()))
    })
}

fn thread_gone() -> StoreError {
    StoreError::Database("the database thread is not running".to_owned())
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        StoreError::Database(describe(&err))
    }
}

/// A description of a driver error that carries no bound or stored value (C5): SQLite's own
/// messages name schema objects (tables, columns, constraints), never values; everything else
/// is reduced to its kind.
fn describe(err: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode;
    match err {
        rusqlite::Error::SqliteFailure(failure, message) => {
            let kind = match failure.code {
                ErrorCode::ConstraintViolation => "constraint violation",
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => "database is locked",
                ErrorCode::DiskFull => "disk full",
                ErrorCode::SystemIoFailure => "i/o error",
                ErrorCode::ReadOnly => "database is read-only",
                ErrorCode::CannotOpen => "cannot open the database file",
                ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => "database file is corrupt",
                _ => "database error",
            };
            let mut text = format!("{kind} (code {})", failure.extended_code);
            if let Some(message) = message {
                text.push_str(": ");
                text.push_str(message);
            }
            text
        }
        rusqlite::Error::QueryReturnedNoRows => "row not found".to_owned(),
        rusqlite::Error::InvalidColumnType(index, ..) => format!("cannot decode column {index}"),
        rusqlite::Error::FromSqlConversionFailure(index, ..) => {
            format!("cannot decode column {index}")
        }
        rusqlite::Error::IntegralValueOutOfRange(index, _) => {
            format!("column {index} is out of range")
        }
        rusqlite::Error::InvalidColumnIndex(index) => format!("no column {index}"),
        rusqlite::Error::InvalidColumnName(name) => format!("no column {name}"),
        rusqlite::Error::InvalidParameterCount(..) => "wrong number of parameters".to_owned(),
        rusqlite::Error::ToSqlConversionFailure(_) => "cannot encode a value".to_owned(),
        rusqlite::Error::InvalidPath(_) => "invalid database path".to_owned(),
        _ => "database driver error".to_owned(),
    }
}

/// Opens the connection, sets it up and runs the migrations.
fn open(location: &Location) -> Result<Connection> {
    let conn = match location {
        Location::Memory => Connection::open_in_memory()?,
        Location::File(path) => open_file(path)?,
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // FULL (SQLite's default, made explicit): a committed outbox row or turn survives a power
    // cut, which NORMAL does not promise in WAL mode.
    // Savepoint journals (a group in which a write failed runs again, one savepoint per job)
    // stay in memory rather than in temporary files. A file's checkpoints are set up by
    // `connect` (the `checkpoint` module); an in-memory database has none.
    // `secure_delete`: what a delete or an update frees (a forgotten contact's messages, text
    // past the retention period) is overwritten with zeros, not left in the file's free space.
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY; \
         PRAGMA secure_delete = ON;",
    )?;
    migrate(&conn)?;
    Ok(conn)
}

/// Opens a file in WAL mode. Two processes opening a fresh file together race to switch it to
/// WAL, which SQLite answers with "database is locked" without waiting: try again a few times.
fn open_file(path: &Path) -> Result<Connection> {
    let mut attempt: u64 = 0;
    loop {
        attempt += 1;
        let opened = Connection::open(path).and_then(|conn| {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            Ok((conn, mode))
        });
        match opened {
            Ok((conn, mode)) if mode.eq_ignore_ascii_case("wal") => return Ok(conn),
            Ok(_) => {
                return Err(StoreError::Database(
                    "the database file cannot use WAL mode".to_owned(),
                ));
            }
            Err(_) if attempt < 8 => std::thread::sleep(Duration::from_millis(25 * attempt)),
            Err(err) => return Err(err.into()),
        }
    }
}

/// Applies the migrations not yet applied, in one `BEGIN IMMEDIATE` transaction: a second
/// process opening the file at the same time waits for the first and then finds them applied.
/// A file created by an earlier build (which kept its bookkeeping in `_sqlx_migrations`) is
/// adopted as it is.
fn migrate(conn: &Connection) -> Result<()> {
    let failed = |err: rusqlite::Error| StoreError::Migration(describe(&err));
    conn.execute_batch("BEGIN IMMEDIATE").map_err(failed)?;
    let applied = (|| -> rusqlite::Result<()> {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (\
                 version INTEGER PRIMARY KEY NOT NULL, \
                 description TEXT NOT NULL, \
                 applied_at INTEGER NOT NULL)",
        )?;
        let earlier_build: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master \
             WHERE type = 'table' AND name = '_sqlx_migrations')",
            [],
            |r| r.get(0),
        )?;
        if earlier_build {
            conn.execute(
                "INSERT OR IGNORE INTO schema_migrations (version, description, applied_at) \
                 SELECT version, description, 0 FROM _sqlx_migrations WHERE success = 1",
                [],
            )?;
        }
        for (version, description, sql) in MIGRATIONS {
            let done: bool = conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)",
                [version],
                |r| r.get(0),
            )?;
            if done {
                continue;
            }
            conn.execute_batch(sql)?;
            conn.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) \
                 VALUES (?, ?, ?)",
                params![version, description, Utc::now().timestamp_millis()],
            )?;
        }
        Ok(())
    })();
    match applied {
        Ok(()) => conn.execute_batch("COMMIT").map_err(failed),
        Err(err) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(failed(err))
        }
    }
}

/// The database thread: takes every queued job, answers the reads, commits the writes as one
/// group, and tells the checkpoint thread (a file's) that the WAL grew. Ends when every store
/// handle is dropped, and ends the checkpoint thread with it.
fn run(conn: Connection, queue: mpsc::Receiver<Job>, checkpoints: Option<Checkpoints>) {
    let db = Db::new(&conn);
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    loop {
        let Ok(first) = queue.recv() else { return };
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Read(read) => reads.push(read),
                Job::Write(write) => writes.push(write),
            }
            if writes.len() < MAX_GROUP {
                next = queue.try_recv().ok();
            }
        }
        if !reads.is_empty() {
            run_reads(&db, &mut reads);
        }
        if !writes.is_empty() {
            run_group(&db, &mut writes);
            if let Some(checkpoints) = &checkpoints {
                checkpoints.wrote();
            }
        }
    }
}

/// Runs `reads` in one read transaction: one snapshot of what is committed, and one WAL read
/// lock for all of them instead of one per statement.
fn run_reads(conn: &Db<'_>, reads: &mut Vec<ReadJob>) {
    let began = execute(conn, "BEGIN").is_ok();
    for read in reads.drain(..) {
        read(conn);
    }
    if began && !conn.is_autocommit() {
        let _ = execute(conn, "COMMIT");
    }
}

/// Runs `writes` in one transaction and answers them after the COMMIT. They run straight in the
/// transaction first (a savepoint per job would copy every page each job touches into a
/// sub-journal); if one fails, that attempt is rolled back and the group runs again with a
/// savepoint per job, so the failed job is undone alone.
fn run_group(conn: &Db<'_>, writes: &mut Vec<Box<dyn WriteJob>>) {
    // IMMEDIATE: the write lock is taken before any job reads, so a job's read-then-write
    // (`claim_outbox`, `MAX(id) + 1`) cannot interleave with another process's writer.
    if let Err(err) = begin_group(conn) {
        for write in writes.drain(..) {
            write.settle(Err(clone_error(&err)));
        }
        return;
    }
    if writes.iter_mut().all(|write| write.attempt(conn)) {
        let committed = execute(conn, "COMMIT").map_err(StoreError::from);
        if committed.is_err() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        if let Err(error) = &committed {
            tracing::warn!(error = %error, writes = writes.len(), "a group of database writes did not commit");
        }
        for write in writes.drain(..) {
            write.settle(committed.as_ref().map(|_| ()).map_err(clone_error));
        }
        return;
    }
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    if writes.len() == 1 {
        // The failed job was the whole group: it answers with its own error.
        for write in writes.drain(..) {
            write.settle(Err(StoreError::Database("the write failed".to_owned())));
        }
        return;
    }
    run_group_isolated(conn, writes);
}

fn begin_group(conn: &Db<'_>) -> std::result::Result<(), StoreError> {
    execute(conn, "BEGIN IMMEDIATE").map_err(|err| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        StoreError::from(err)
    })
}

/// `run_group` once a job failed: one savepoint per job, a failed job undone alone. Writes left
/// in `writes` (the transaction broke before they ran) go in a group of their own.
fn run_group_isolated(conn: &Db<'_>, writes: &mut Vec<Box<dyn WriteJob>>) {
    if let Err(err) = begin_group(conn) {
        for write in writes.drain(..) {
            write.settle(Err(clone_error(&err)));
        }
        return;
    }
    let mut ran: Vec<Box<dyn WriteJob>> = Vec::with_capacity(writes.len());
    let mut broken: Option<StoreError> = None;
    let mut queue = std::mem::take(writes).into_iter();
    for mut write in queue.by_ref() {
        if let Err(err) = execute(conn, "SAVEPOINT job") {
            let error = StoreError::from(err);
            // The first job of a group that cannot even start is failed rather than retried,
            // so every group makes progress; later ones get a fresh group.
            if ran.is_empty() {
                write.settle(Err(clone_error(&error)));
            } else {
                writes.push(write);
            }
            broken = Some(error);
            break;
        }
        let ok = write.attempt(conn);
        // Undo a failed job alone; the group's other writes stand. A failure that ended the
        // whole transaction (SQLite rolls back by itself on some errors) breaks the group.
        let undone = if ok {
            execute(conn, "RELEASE job")
        } else if conn.is_autocommit() {
            Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some("the transaction was rolled back".to_owned()),
            ))
        } else {
            execute(conn, "ROLLBACK TO job").and_then(|()| execute(conn, "RELEASE job"))
        };
        ran.push(write);
        if let Err(err) = undone {
            broken = Some(err.into());
            break;
        }
    }
    writes.extend(queue);
    let failure = match broken {
        Some(error) => Some(error),
        None => execute(conn, "COMMIT").err().map(StoreError::from),
    };
    match failure {
        None => {
            for write in ran {
                write.settle(Ok(()));
            }
        }
        Some(error) => {
            // SQLite may already have rolled back; a second ROLLBACK failing changes nothing.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            tracing::warn!(
                error = %error,
                writes = ran.len(),
                "a group of database writes did not commit"
            );
            for write in ran {
                write.settle(Err(clone_error(&error)));
            }
        }
    }
    // Writes the broken transaction never reached run in a group of their own.
    if !writes.is_empty() {
        run_group_isolated(conn, writes);
    }
}

/// A cached control statement (`BEGIN`, `SAVEPOINT`, …): no parsing on the hot path.
fn execute(conn: &Db<'_>, sql: &'static str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

fn clone_error(error: &StoreError) -> StoreError {
    match error {
        StoreError::Database(text) => StoreError::Database(text.clone()),
        StoreError::Migration(text) => StoreError::Migration(text.clone()),
        StoreError::UnsupportedUrl => StoreError::UnsupportedUrl,
        StoreError::Corrupt(text) => StoreError::Corrupt(text.clone()),
        StoreError::PromiseLapsed => StoreError::PromiseLapsed,
        StoreError::During { operation, error } => StoreError::During {
            operation,
            error: Box::new(clone_error(error)),
        },
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

/// A TEXT column read without copying.
fn text<'r>(row: &'r Row<'_>, index: usize) -> Result<&'r str> {
    Ok(row
        .get_ref(index)?
        .as_str()
        .map_err(rusqlite::Error::from)?)
}

/// Runs a cached query and maps every row (a mapping error stops at the first bad row).
fn query_all<T>(
    conn: &Db<'_>,
    sql: &'static str,
    params: impl rusqlite::Params,
    map: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    with_rows(conn, sql, params, |rows| {
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(map(row)?);
        }
        Ok(out)
    })
}

/// Runs a cached query and maps its first row, if any.
fn query_one<T>(
    conn: &Db<'_>,
    sql: &'static str,
    params: impl rusqlite::Params,
    map: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    with_rows(conn, sql, params, |rows| rows.next()?.map(map).transpose())
}

/// Runs a cached query and hands its rows to `read`.
fn with_rows<T>(
    conn: &Db<'_>,
    sql: &'static str,
    params: impl rusqlite::Params,
    read: impl FnOnce(&mut rusqlite::Rows<'_>) -> Result<T>,
) -> Result<T> {
    let mut statement = conn.prepare_cached(sql)?;
    read(&mut statement.query(params)?)
}

/// Runs a cached statement that must change a row; `what` names the row for the error.
fn update_one(
    conn: &Db<'_>,
    sql: &'static str,
    params: impl rusqlite::Params,
    what: &'static str,
) -> Result<()> {
    match conn.prepare_cached(sql)?.execute(params)? {
        0 => Err(not_found(what)),
        _ => Ok(()),
    }
}

/// A conversation id as the TEXT it is stored under (hyphenated, lowercase: its `Display`),
/// formatted on the stack: ids are bound by every turn's reads and writes.
struct IdText([u8; uuid::fmt::Hyphenated::LENGTH]);

impl IdText {
    fn of(id: ConversationId) -> Self {
        let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
        id.as_hyphenated().encode_lower(&mut text);
        Self(text)
    }
}

impl ToSql for IdText {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(&self.0)))
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<()> {
        self.read(|conn| {
            conn.prepare_cached("SELECT 1")?
                .query_row([], |r| r.get::<_, i64>(0))?;
            Ok(())
        })
        .await
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
use outbox::*;
use sales::*;
use turns::*;

#[cfg(test)]
mod tests;
