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
        include_str!("../../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "lean_write_path",
        include_str!("../../migrations/sqlite/0002_lean_write_path.sql"),
    ),
    (
        3,
        "turns_without_sequence",
        include_str!("../../migrations/sqlite/0003_turns_without_sequence.sql"),
    ),
    (
        4,
        "outbox_open_replies",
        include_str!("../../migrations/sqlite/0004_outbox_open_replies.sql"),
    ),
    (
        5,
        "durable_promises",
        include_str!("../../migrations/sqlite/0005_durable_promises.sql"),
    ),
    (
        6,
        "outbox_delivery_progress",
        include_str!("../../migrations/sqlite/0006_outbox_delivery_progress.sql"),
    ),
    (
        7,
        "turns_text_kept",
        include_str!("../../migrations/sqlite/0007_turns_text_kept.sql"),
    ),
    (
        8,
        "offering_at",
        include_str!("../../migrations/sqlite/0008_offering_at.sql"),
    ),
    (
        9,
        "manychat_flow_sends",
        include_str!("../../migrations/sqlite/0009_manychat_flow_sends.sql"),
    ),
    (
        10,
        "turns_media_kind",
        include_str!("../../migrations/sqlite/0010_turns_media_kind.sql"),
    ),
    (
        11,
        "turn_tickets",
        include_str!("../../migrations/sqlite/0011_turn_tickets.sql"),
    ),
    (
        12,
        "report_indexes",
        include_str!("../../migrations/sqlite/0012_report_indexes.sql"),
    ),
    (
        13,
        "nudge_worker",
        include_str!("../../migrations/sqlite/0013_nudge_worker.sql"),
    ),
];

// Column lists as macros, so every statement is one `concat!`ed literal: no SQL is formatted on
// the hot path, and the statement cache is keyed by the same `&'static str` every time.
macro_rules! conversation_columns {
    () => {
        "id, subscriber_id, channel, turn_count, escalated_at, last_message_at, token_hash, \
         previous_token_hash, token_issued_at, token_generation, offering, opening_sent_at, \
         created_at, updated_at"
    };
}

macro_rules! turn_columns {
    () => {
        "id, seq, conversation_id, role, text, outcome, model, bound, actions, reads, \
         input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at, \
         escalation_reason, media_kind"
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
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
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
    // `Display` is ISO 8601 (`YYYY-MM-DD`) for every year a budget can fall in, written without
    // parsing a format string on every call (the database thread reads and writes a day's
    // spend on every turn).
    day.to_string()
}

/// A TEXT column read without copying.
fn text<'r>(row: &'r Row<'_>, index: usize) -> Result<&'r str> {
    Ok(row
        .get_ref(index)?
        .as_str()
        .map_err(rusqlite::Error::from)?)
}

/// Columns in the order of `conversation_columns!`.
fn conversation_from(row: &Row<'_>) -> Result<Conversation> {
    Ok(Conversation {
        id: uuid(text(row, 0)?)?,
        subscriber_id: common::subscriber(text(row, 1)?)?,
        channel: row.get(2)?,
        turn_count: row.get(3)?,
        escalated_at: opt_time(row.get(4)?)?,
        last_message_at: opt_time(row.get(5)?)?,
        token_hash: row.get(6)?,
        previous_token_hash: row.get(7)?,
        token_issued_at: opt_time(row.get(8)?)?,
        token_generation: row.get(9)?,
        offering: row.get(10)?,
        opening_sent_at: opt_time(row.get(11)?)?,
        created_at: time(row.get(12)?)?,
        updated_at: time(row.get(13)?)?,
    })
}

/// Columns in the order of `turn_columns!`.
fn turn_from(row: &Row<'_>) -> Result<Turn> {
    let actions: Option<&str> = row
        .get_ref(8)?
        .as_str_or_null()
        .map_err(rusqlite::Error::from)?;
    Ok(Turn {
        id: row.get(0)?,
        seq: row.get(1)?,
        conversation_id: uuid(text(row, 2)?)?,
        role: common::role(text(row, 3)?)?,
        text: row.get(4)?,
        outcome: row.get(5)?,
        model: row.get(6)?,
        bound: row.get(7)?,
        actions: actions.map(json).transpose()?,
        reads: row.get(9)?,
        input_tokens: row.get(10)?,
        output_tokens: row.get(11)?,
        cached_tokens: row.get(12)?,
        cost_usd: row.get(13)?,
        latency_ms: row.get(14)?,
        created_at: time(row.get(15)?)?,
        escalation_reason: row.get(16)?,
        media_kind: row.get(17)?,
    })
}

/// Columns in the order of `outbox_columns!`.
fn outbox_from(row: &Row<'_>) -> Result<OutboxRow> {
    Ok(OutboxRow {
        id: row.get(0)?,
        conversation_id: uuid(text(row, 1)?)?,
        subscriber_id: common::subscriber(text(row, 2)?)?,
        kind: common::outbox_kind(text(row, 3)?)?,
        payload: json(text(row, 4)?)?,
        status: common::outbox_status(text(row, 5)?)?,
        attempts: row.get(6)?,
        next_attempt_at: time(row.get(7)?)?,
        last_error: row.get(8)?,
        lease_until: opt_time(row.get(9)?)?,
        created_at: time(row.get(10)?)?,
        delivered_at: opt_time(row.get(11)?)?,
        messages_delivered: row.get(12)?,
        trigger_timeouts: row.get(13)?,
    })
}

/// Runs a cached query and maps every row (a mapping error stops at the first bad row).
fn query_all<T>(
    conn: &Db<'_>,
    sql: &'static str,
    params: impl rusqlite::Params,
    map: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut statement = conn.prepare_cached(sql)?;
    let mut rows = statement.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(map(row)?);
    }
    Ok(out)
}

/// Runs a cached query and maps its first row, if any.
fn query_one<T>(
    conn: &Db<'_>,
    sql: &'static str,
    params: impl rusqlite::Params,
    map: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let mut statement = conn.prepare_cached(sql)?;
    let mut rows = statement.query(params)?;
    match rows.next()? {
        Some(row) => map(row).map(Some),
        None => Ok(None),
    }
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

fn conversation_by_subscriber(conn: &Db<'_>, subscriber: &str) -> Result<Option<Conversation>> {
    query_one(
        conn,
        CONVERSATION_BY_SUBSCRIBER,
        [subscriber],
        conversation_from,
    )
}

fn set_escalated_in(conn: &Db<'_>, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
    update_one(
        conn,
        SET_ESCALATED,
        params![ms(at), ms(at), IdText::of(id)],
        "conversation",
    )
}

// The statements every turn runs (its one read and its one write), named so that a test can
// hold them to the rule that keeps the database thread's work per turn small: none opens a
// temporary B-tree (no RETURNING, no INSERT … SELECT from the table written, no ORDER BY the
// index does not already give). Each such table is allocated, filled and torn down per call.

/// The id (and seq) of the next turn.
const NEXT_TURN_ID: &str = "SELECT COALESCE(MAX(id), 0) + 1 FROM turns";

/// A turn, its id chosen by `NEXT_TURN_ID`.
const INSERT_TURN: &str = "INSERT INTO turns \
    (id, seq, conversation_id, role, text, outcome, model, bound, actions, reads, \
    input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at, \
    escalation_reason, media_kind) \
    VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

/// A user turn moves its conversation's `last_message_at` and (bound) `turn_count`.
const TOUCH_CONVERSATION: &str = "UPDATE conversations SET \
    last_message_at = MAX(COALESCE(last_message_at, ?1), ?1), \
    turn_count = turn_count + ?2, \
    updated_at = ?1 \
    WHERE id = ?3";

/// A conversation's newest bound turns since a time, newest first (index order).
const HISTORY: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE conversation_id = ? AND bound = 1 AND created_at >= ? \
    ORDER BY created_at DESC, seq DESC LIMIT ?"
);

/// A contact's latest bound message times, newest first (from the index alone).
const CAP_TIMES: &str = "SELECT created_at FROM turns \
    WHERE conversation_id = ? AND bound = 1 AND role = 'user' \
    ORDER BY created_at DESC, seq DESC LIMIT ?";

/// One more message in a window already begun.
const COUNT_RATE: &str = "UPDATE rate_counters SET count = count + 1 \
    WHERE subscriber_id = ? AND window_start = ?";

/// A window's first message.
const BEGIN_RATE_WINDOW: &str =
    "INSERT INTO rate_counters (subscriber_id, window_start, count) VALUES (?, ?, 1)";

/// A contact's windows before the current one.
const DROP_OLD_RATE_WINDOWS: &str =
    "DELETE FROM rate_counters WHERE subscriber_id = ? AND window_start < ?";

/// A contact's messages counted in a window.
const RATE_COUNT: &str =
    "SELECT count FROM rate_counters WHERE subscriber_id = ? AND window_start = ?";

/// A day's spend.
const BUDGET: &str = "SELECT tokens, cost_usd FROM budget_counters WHERE day = ?";

/// A turn's charge against its day.
const ADD_BUDGET: &str = "INSERT INTO budget_counters (day, tokens, cost_usd) \
    VALUES (?, ?, ?) ON CONFLICT (day) DO UPDATE SET tokens = tokens + excluded.tokens, \
    cost_usd = cost_usd + excluded.cost_usd";

/// A contact's reply rows still to deliver (through `outbox_open_replies`).
const QUEUED_REPLIES: &str = "SELECT COUNT(*) FROM outbox \
    WHERE conversation_id = ? AND kind = 'reply' AND status IN ('pending', 'delivering')";

/// An escalating turn marks its conversation.
const SET_ESCALATED: &str =
    "UPDATE conversations SET escalated_at = ?, updated_at = ? WHERE id = ?";

/// A contact's conversation.
const CONVERSATION_BY_SUBSCRIBER: &str = concat!(
    "SELECT ",
    conversation_columns!(),
    " FROM conversations WHERE subscriber_id = ?"
);

/// Everything a returning contact's turn runs, for the test below.
#[cfg(test)]
const TURN_STATEMENTS: &[&str] = &[
    NEXT_TURN_ID,
    INSERT_TURN,
    TOUCH_CONVERSATION,
    HISTORY,
    CAP_TIMES,
    COUNT_RATE,
    BEGIN_RATE_WINDOW,
    DROP_OLD_RATE_WINDOWS,
    RATE_COUNT,
    BUDGET,
    ADD_BUDGET,
    QUEUED_REPLIES,
    SET_ESCALATED,
    CONVERSATION_BY_SUBSCRIBER,
    SALES_OFFERING,
    SALES_ACTIONS,
    CLAIM_OPENING,
];

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

/// A turn ready for the database thread: owned, its actions serialised on the caller's side
/// (off the serial thread).
struct TurnRow {
    turn: NewTurn,
    actions: Option<String>,
}

impl TurnRow {
    fn of(turn: &NewTurn) -> Result<Self> {
        Ok(Self {
            actions: turn.actions.as_ref().map(json_text).transpose()?,
            turn: turn.clone(),
        })
    }

    fn insert(&self, conn: &Db<'_>) -> Result<i64> {
        insert_turn(conn, &self.turn, self.actions.as_deref())
    }
}

/// An outbox row ready for the database thread (its payload serialised on the caller's side).
struct OutboxInsert {
    conversation_id: IdText,
    subscriber: String,
    kind: OutboxKind,
    payload: String,
    next_attempt_at: i64,
    created_at: i64,
}

impl OutboxInsert {
    fn of(row: &NewOutboxRow) -> Result<Self> {
        Ok(Self {
            conversation_id: IdText::of(row.conversation_id),
            subscriber: row.subscriber_id.as_str().to_owned(),
            kind: row.kind,
            payload: json_text(&row.payload)?,
            next_attempt_at: ms(row.next_attempt_at),
            created_at: ms(row.created_at),
        })
    }

    /// Inserts the row; a reply or handoff row without a `turnId` gets `turn` (see `Exchange`).
    fn insert(&self, conn: &Db<'_>, turn: Option<i64>) -> Result<i64> {
        // The new id from the connection rather than RETURNING, which buffers its row in a
        // temporary B-tree.
        conn.prepare_cached(
            "INSERT INTO outbox (conversation_id, subscriber_id, kind, payload, status, \
             next_attempt_at, created_at) VALUES (?1, ?2, ?3, \
             CASE WHEN ?3 <> 'contact_token' AND ?7 IS NOT NULL \
                  AND json_extract(?4, '$.turnId') IS NULL \
             THEN json_set(?4, '$.turnId', ?7) ELSE ?4 END, 'pending', ?5, ?6)",
        )?
        .execute(params![
            self.conversation_id,
            self.subscriber,
            self.kind.as_str(),
            self.payload,
            self.next_attempt_at,
            self.created_at,
            turn,
        ])?;
        Ok(conn.last_insert_rowid())
    }
}

/// A [`KeepPromise`] ready for the database thread.
struct KeptPromise {
    rows: PromiseRows,
    payload: Option<String>,
    due: i64,
    handoff: bool,
}

impl KeptPromise {
    fn of(keep: KeepPromise<'_>) -> Result<Self> {
        Ok(Self {
            rows: keep.rows,
            payload: keep.payload.map(json_text).transpose()?,
            due: ms(keep.due),
            handoff: keep.handoff,
        })
    }

    /// Keeps the promise; a new payload without a `turnId` gets `turn`.
    fn write(&self, conn: &Db<'_>, turn: i64) -> Result<()> {
        let kept = conn
            .prepare_cached(
                "UPDATE outbox SET payload = CASE \
                     WHEN ?1 IS NULL THEN payload \
                     WHEN ?4 IS NOT NULL AND json_extract(?1, '$.turnId') IS NULL \
                     THEN json_set(?1, '$.turnId', ?4) ELSE ?1 END, \
                 next_attempt_at = ?2 WHERE id = ?3 AND status = 'pending'",
            )?
            .execute(params![self.payload, self.due, self.rows.reply, turn])?;
        if kept == 0 {
            return Err(StoreError::PromiseLapsed);
        }
        if self.handoff {
            conn.prepare_cached(
                "UPDATE outbox SET next_attempt_at = ?1 WHERE id = ?2 AND status = 'pending'",
            )?
            .execute(params![self.due, self.rows.handoff])?;
        } else {
            conn.prepare_cached("DELETE FROM outbox WHERE id = ?1 AND status = 'pending'")?
                .execute(params![self.rows.handoff])?;
        }
        Ok(())
    }
}

/// Inserts a turn; a user turn also moves the conversation's `last_message_at` and (bound)
/// `turn_count`.
fn insert_turn(conn: &Db<'_>, turn: &NewTurn, actions: Option<&str>) -> Result<i64> {
    // `id` and `seq` are both the next integer after the largest id: the group's transaction
    // holds the write lock, and the largest rowid is one seek. It is read by a statement of its
    // own: an INSERT … SELECT that reads its own table buffers the selected row in a temporary
    // B-tree first (opened, filled and torn down on every insert), which cost more than the
    // insert itself.
    let id: i64 = conn
        .prepare_cached(NEXT_TURN_ID)?
        .query_row([], |row| row.get(0))?;
    conn.prepare_cached(INSERT_TURN)?.execute(params![
        id,
        IdText::of(turn.conversation_id),
        turn.role.as_str(),
        turn.text,
        turn.outcome,
        turn.model,
        turn.bound,
        actions,
        turn.reads,
        turn.input_tokens,
        turn.output_tokens,
        turn.cached_tokens,
        turn.cost_usd,
        turn.latency_ms,
        ms(turn.created_at),
        turn.escalation_reason,
        turn.media_kind,
    ])?;
    if turn.role == Role::User {
        conn.prepare_cached(TOUCH_CONVERSATION)?.execute(params![
            ms(turn.created_at),
            i64::from(turn.bound),
            IdText::of(turn.conversation_id)
        ])?;
    }
    Ok(id)
}

fn history_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
    since: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Turn>> {
    // Newest first in index order (no sort), turned round here rather than by a second ORDER BY
    // in SQL, which would sort them again in a temporary table.
    let mut turns = query_all(
        conn,
        HISTORY,
        params![IdText::of(conversation_id), ms(since), limit.max(0)],
        turn_from,
    )?;
    turns.reverse();
    Ok(turns)
}

fn recent_user_turn_times_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
    limit: i64,
) -> Result<Vec<DateTime<Utc>>> {
    query_all(
        conn,
        CAP_TIMES,
        params![IdText::of(conversation_id), limit.max(0)],
        |row| time(row.get(0)?),
    )
}

/// Counts one message in the contact's hourly window. No RETURNING: SQLite buffers a RETURNING
/// statement's rows in a temporary B-tree, opened and torn down on every call; the caller that
/// needs the count reads it with `rate_count_in`.
fn bump_rate_in(conn: &Db<'_>, subscriber: &str, window_start: DateTime<Utc>) -> Result<()> {
    let counted = conn
        .prepare_cached(COUNT_RATE)?
        .execute(params![subscriber, ms(window_start)])?;
    if counted == 0 {
        conn.prepare_cached(BEGIN_RATE_WINDOW)?
            .execute(params![subscriber, ms(window_start)])?;
        // A new window began: the contact's older windows will never be read again, and a
        // subscriber id is personal data, so they go (once per window, not per turn).
        conn.prepare_cached(DROP_OLD_RATE_WINDOWS)?
            .execute(params![subscriber, ms(window_start)])?;
    }
    Ok(())
}

fn rate_count_in(conn: &Db<'_>, subscriber: &str, window_start: DateTime<Utc>) -> Result<i64> {
    Ok(query_one(
        conn,
        RATE_COUNT,
        params![subscriber, ms(window_start)],
        |row| Ok(row.get(0)?),
    )?
    .unwrap_or(0))
}

fn turn_context_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
    subscriber: &SubscriberId,
    query: TurnContextQuery,
) -> Result<TurnContext> {
    Ok(TurnContext {
        earlier_user_turns: match query.cap_limit {
            Some(limit) => recent_user_turn_times_in(conn, conversation_id, limit)?,
            None => Vec::new(),
        },
        history: match query.history {
            Some((since, limit)) => history_in(conn, conversation_id, since, limit)?,
            None => Vec::new(),
        },
        spent: budget_in(conn, query.day)?,
        queued_replies: pending_replies_in(conn, conversation_id)?,
        rate_count: match query.rate_window {
            Some(window) => rate_count_in(conn, subscriber.as_str(), window)?,
            None => 0,
        },
        sales: match query.sales {
            true => Some(sales_record_in(conn, conversation_id)?),
            false => None,
        },
    })
}

/// The stored offering and its time (issue 14).
const SALES_OFFERING: &str = "SELECT offering, offering_at FROM conversations WHERE id = ?";

/// The action records of a conversation's agent turns. Ordered by `created_at` only, which the
/// `(conversation_id, created_at)` index gives; turns of one millisecond are put in `seq` order
/// after the read, so the statement opens no temporary B-tree.
const SALES_ACTIONS: &str = "SELECT created_at, seq, actions FROM turns \
    WHERE conversation_id = ? AND role = 'agent' AND actions IS NOT NULL AND actions <> '[]' \
    ORDER BY created_at";

/// 032 A: the opening's claim, one conditional update (see `Store::claim_opening`).
const CLAIM_OPENING: &str = "UPDATE conversations SET opening_sent_at = ?, updated_at = ? \
    WHERE id = ? AND opening_sent_at IS NULL";

fn sales_record_in(conn: &Db<'_>, conversation_id: ConversationId) -> Result<SalesRecord> {
    let id = IdText::of(conversation_id);
    let offering = query_one(conn, SALES_OFFERING, [&id], |row| {
        let value: Option<String> = row.get(0)?;
        let at: Option<i64> = row.get(1)?;
        Ok(match (value, opt_time(at)?) {
            (Some(value), Some(at)) => Some((value, at)),
            _ => None,
        })
    })?
    .flatten();
    let mut rows = query_all(conn, SALES_ACTIONS, [&id], |row| {
        let raw: String = row.get(2)?;
        Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, json(&raw)?))
    })?;
    rows.sort_by_key(|(at, seq, _)| (*at, *seq));
    let actions = rows
        .into_iter()
        .map(|(at, _, actions)| {
            Ok(ActionRecord {
                at: time(at)?,
                actions,
            })
        })
        .collect::<Result<_>>()?;
    Ok(SalesRecord { offering, actions })
}

fn budget_in(conn: &Db<'_>, day: NaiveDate) -> Result<BudgetUsage> {
    Ok(query_one(conn, BUDGET, [day_key(day)], |row| {
        Ok(BudgetUsage {
            tokens: row.get(0)?,
            cost_usd: row.get(1)?,
        })
    })?
    .unwrap_or_default())
}

fn add_budget_in(conn: &Db<'_>, charge: BudgetCharge) -> Result<()> {
    conn.prepare_cached(ADD_BUDGET)?.execute(params![
        day_key(charge.day),
        charge.tokens,
        charge.cost_usd
    ])?;
    Ok(())
}

fn pending_replies_in(conn: &Db<'_>, conversation_id: ConversationId) -> Result<i64> {
    Ok(conn
        .prepare_cached(QUEUED_REPLIES)?
        .query_row([IdText::of(conversation_id)], |row| row.get(0))?)
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

    fn reopened(&self) -> bool {
        self.reopened
    }

    async fn lock_conversation(&self, _id: ConversationId) -> Result<ConversationLock> {
        // One process owns a SQLite file: the in-process queue orders its turns.
        Ok(ConversationLock::local())
    }

    fn single_process(&self) -> bool {
        true
    }

    async fn conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.read(move |conn| conversation_by_subscriber(conn, &subscriber))
            .await
    }

    async fn conversation_for(
        &self,
        subscriber_id: &SubscriberId,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<Conversation> {
        // The common case, a returning contact, is one read; the insert only on first contact.
        let subscriber = subscriber_id.as_str().to_owned();
        let lookup = subscriber.clone();
        if let Some(found) = self
            .read(move |conn| conversation_by_subscriber(conn, &lookup))
            .await?
        {
            return Ok(found);
        }
        // Two first messages racing: the loser's insert does nothing and both read the winner.
        let channel = channel.to_owned();
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT (subscriber_id) DO NOTHING",
            )?
            .execute(params![
                super::new_conversation_id().to_string(),
                subscriber,
                channel,
                ms(now),
                ms(now)
            ])?;
            conversation_by_subscriber(conn, &subscriber)?.ok_or_else(|| {
                StoreError::Database("conversation vanished after insert".to_owned())
            })
        })
        .await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        self.read(move |conn| {
            query_one(
                conn,
                concat!(
                    "SELECT ",
                    conversation_columns!(),
                    " FROM conversations WHERE id = ?"
                ),
                [IdText::of(id)],
                conversation_from,
            )
        })
        .await
    }

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
        self.write(move |conn| set_escalated_in(conn, id, at)).await
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
            query_one(
                conn,
                "UPDATE conversations SET previous_token_hash = token_hash, token_hash = ?, \
                 token_issued_at = ?, token_generation = token_generation + 1, \
                 updated_at = ? WHERE id = ? RETURNING token_generation",
                params![token_hash, ms(issued_at), ms(issued_at), IdText::of(id)],
                |row| Ok(row.get::<_, i64>(0)?),
            )?
            .ok_or_else(|| not_found("conversation"))
        })
        .await
    }

    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>> {
        self.read(move |conn| {
            query_all(
                conn,
                concat!(
                    "SELECT ",
                    conversation_columns!(),
                    " FROM conversations \
                     WHERE token_hash IS NULL AND COALESCE(last_message_at, created_at) >= ? \
                     ORDER BY created_at, id"
                ),
                [ms(since)],
                conversation_from,
            )
        })
        .await
    }

    async fn record_turn(&self, turn: &NewTurn) -> Result<i64> {
        let row = TurnRow::of(turn)?;
        // One job: the insert and the conversation update commit together (one savepoint).
        self.write(move |conn| row.insert(conn)).await
    }

    async fn update_turn_actions(&self, turn_id: i64, actions: &Value) -> Result<()> {
        let actions = json_text(actions)?;
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE turns SET actions = ? WHERE id = ?",
                params![actions, turn_id],
                "turn",
            )
        })
        .await
    }

    async fn turn(&self, turn_id: i64) -> Result<Option<Turn>> {
        self.read(move |conn| {
            query_one(
                conn,
                concat!("SELECT ", turn_columns!(), " FROM turns WHERE id = ?"),
                [turn_id],
                turn_from,
            )
        })
        .await
    }

    async fn history(
        &self,
        conversation_id: ConversationId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Turn>> {
        self.read(move |conn| history_in(conn, conversation_id, since, limit))
            .await
    }

    async fn recent_user_turn_times(
        &self,
        conversation_id: ConversationId,
        limit: i64,
    ) -> Result<Vec<DateTime<Utc>>> {
        self.read(move |conn| recent_user_turn_times_in(conn, conversation_id, limit))
            .await
    }

    async fn turns(&self, conversation_id: ConversationId) -> Result<Vec<Turn>> {
        self.read(move |conn| {
            query_all(
                conn,
                concat!(
                    "SELECT ",
                    turn_columns!(),
                    " FROM turns WHERE conversation_id = ? \
                     ORDER BY created_at, seq"
                ),
                [IdText::of(conversation_id)],
                turn_from,
            )
        })
        .await
    }

    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.write(move |conn| {
            bump_rate_in(conn, &subscriber, window_start)?;
            rate_count_in(conn, &subscriber, window_start)
        })
        .await
    }

    async fn rate_count(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.read(move |conn| rate_count_in(conn, &subscriber, window_start))
            .await
    }

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage> {
        self.read(move |conn| budget_in(conn, day)).await
    }

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()> {
        let charge = BudgetCharge {
            day,
            tokens,
            cost_usd,
        };
        self.write(move |conn| add_budget_in(conn, charge)).await
    }

    async fn enqueue(&self, row: &NewOutboxRow) -> Result<i64> {
        let row = OutboxInsert::of(row)?;
        self.write(move |conn| row.insert(conn, None)).await
    }

    async fn claim_outbox(&self, rules: ClaimRules) -> Result<Vec<OutboxRow>> {
        // A write: the group transaction began IMMEDIATE, so SQLite's write lock is held before
        // this reads, and a second worker on the same file waits (busy_timeout) and then sees
        // these rows as `delivering`. The `IN (SELECT …)` is evaluated once, before any row
        // changes.
        let mut claimed = self
            .write(move |conn| {
                query_all(
                    conn,
                    concat!(
                        "UPDATE outbox SET status = 'delivering', lease_until = ?1, \
                         attempts = attempts + 1 \
                         WHERE id IN (\
                             SELECT o.id FROM outbox o \
                             WHERE ((o.status = 'pending' AND o.next_attempt_at <= ?2) \
                                    OR (o.status = 'delivering' AND o.lease_until <= ?2)) \
                               AND (o.kind = 'contact_token' OR \
                                    NOT EXISTS (SELECT 1 FROM outbox p \
                                        WHERE p.conversation_id = o.conversation_id \
                                          AND p.kind = 'reply' AND p.id < o.id \
                                          AND p.status IN ('pending', 'delivering'))) \
                               AND (o.kind <> 'reply' OR \
                                    NOT EXISTS (SELECT 1 FROM outbox d \
                                        WHERE d.conversation_id = o.conversation_id \
                                          AND d.kind = 'reply' AND d.status = 'delivered' \
                                          AND d.delivered_at > ?3)) \
                             ORDER BY (o.kind = 'contact_token'), o.id LIMIT ?4) \
                         RETURNING ",
                        outbox_columns!()
                    ),
                    params![
                        ms(after(rules.now, rules.lease)),
                        ms(rules.now),
                        ms(before(rules.now, rules.reply_gap)),
                        rules.limit.max(0)
                    ],
                    outbox_from,
                )
            })
            .await?;
        // RETURNING has no defined order.
        claimed.sort_by_key(|row| (row.kind == OutboxKind::ContactToken, row.id));
        Ok(claimed)
    }

    async fn claim_outbox_row(
        &self,
        id: i64,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<OutboxRow>> {
        self.write(move |conn| {
            query_one(
                conn,
                concat!(
                    "UPDATE outbox SET status = 'delivering', lease_until = ?1, \
                     attempts = attempts + 1 WHERE id = ?2 AND status = 'pending' RETURNING ",
                    outbox_columns!()
                ),
                params![ms(after(now, lease)), id],
                outbox_from,
            )
        })
        .await
    }

    async fn pending_outbox(&self, kind: OutboxKind) -> Result<Vec<OutboxRow>> {
        self.read(move |conn| {
            query_all(
                conn,
                concat!(
                    "SELECT ",
                    outbox_columns!(),
                    " FROM outbox WHERE status = 'pending' AND kind = ? ORDER BY id"
                ),
                [kind.as_str()],
                outbox_from,
            )
        })
        .await
    }

    async fn renew_outbox_leases(&self, ids: &[i64], lease_until: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // One statement for every row the worker holds, the ids as a JSON array.
        let ids = Value::from(ids.to_vec()).to_string();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE outbox SET lease_until = ? WHERE status = 'delivering' \
                 AND id IN (SELECT value FROM json_each(?))",
            )?
            .execute(params![ms(lease_until), ids])?;
            Ok(())
        })
        .await
    }

    async fn record_outbox_progress(
        &self,
        id: i64,
        messages_delivered: i32,
        trigger_timeouts: i32,
    ) -> Result<()> {
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET messages_delivered = ?, trigger_timeouts = ? WHERE id = ?",
                params![messages_delivered, trigger_timeouts, id],
                "outbox row",
            )
        })
        .await
    }

    async fn record_outbox_actions(
        &self,
        id: i64,
        actions: &Value,
        trigger_timeouts: i32,
    ) -> Result<()> {
        let actions = actions.to_string();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET payload = json_set(payload, '$.actions', json(?)), \
                 trigger_timeouts = ? WHERE id = ?",
                params![actions, trigger_timeouts, id],
                "outbox row",
            )
        })
        .await
    }

    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()> {
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET status = 'delivered', delivered_at = ?, lease_until = NULL, \
                 payload = CASE WHEN kind = 'contact_token' THEN json_remove(payload, '$.token') \
                 ELSE payload END WHERE id = ?",
                params![ms(at), id],
                "outbox row",
            )
        })
        .await
    }

    async fn mark_retry(&self, id: i64, next_attempt_at: DateTime<Utc>, error: &str) -> Result<()> {
        let error = bounded_error(error).to_owned();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET status = 'pending', next_attempt_at = ?, last_error = ?, \
                 lease_until = NULL WHERE id = ?",
                params![ms(next_attempt_at), error, id],
                "outbox row",
            )
        })
        .await
    }

    async fn mark_failed(&self, id: i64, error: &str, at: DateTime<Utc>) -> Result<()> {
        let error = bounded_error(error).to_owned();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET status = 'failed', last_error = ?, failed_at = ?, \
                 lease_until = NULL, \
                 payload = CASE WHEN kind = 'contact_token' THEN json_remove(payload, '$.token') \
                 ELSE payload END WHERE id = ?",
                params![error, ms(at), id],
                "outbox row",
            )
        })
        .await
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>> {
        self.read(move |conn| {
            query_one(
                conn,
                concat!("SELECT ", outbox_columns!(), " FROM outbox WHERE id = ?"),
                [id],
                outbox_from,
            )
        })
        .await
    }

    async fn outbox_backlog(
        &self,
        now: DateTime<Utc>,
        count_cap: i64,
    ) -> Result<super::OutboxBacklog> {
        self.read(move |conn| {
            let rows = conn
                .prepare_cached(OUTBOX_BACKLOG_ROWS)?
                .query_row([count_cap], |r| r.get::<_, i64>(0))?;
            let oldest = conn
                .prepare_cached(OUTBOX_OLDEST_OPEN)?
                .query_row([], |r| r.get::<_, Option<i64>>(0))?;
            let oldest_due_at = match oldest {
                Some(raw) if raw <= ms(now) => Some(time(raw)?),
                _ => None,
            };
            Ok(super::OutboxBacklog {
                rows,
                oldest_due_at,
            })
        })
        .await
    }

    async fn pending_replies(&self, conversation_id: ConversationId) -> Result<i64> {
        self.read(move |conn| pending_replies_in(conn, conversation_id))
            .await
    }

    async fn turn_context(
        &self,
        conversation: &Conversation,
        query: TurnContextQuery,
    ) -> Result<TurnContext> {
        let (id, subscriber) = (conversation.id, conversation.subscriber_id.clone());
        // One job: the reads run back to back on the database thread.
        self.read(move |conn| turn_context_in(conn, id, &subscriber, query))
            .await
    }

    async fn returning_contact(
        &self,
        subscriber_id: &SubscriberId,
        query: TurnContextQuery,
    ) -> Result<Option<(Conversation, TurnContext)>> {
        let subscriber = subscriber_id.clone();
        // One job: the conversation and everything its turn reads.
        self.read(move |conn| {
            let Some(conversation) = conversation_by_subscriber(conn, subscriber.as_str())? else {
                return Ok(None);
            };
            let context = turn_context_in(conn, conversation.id, &subscriber, query)?;
            Ok(Some((conversation, context)))
        })
        .await
    }

    async fn record_exchange(&self, exchange: Exchange<'_>) -> Result<ExchangeIds> {
        let message = TurnRow::of(exchange.message)?;
        let recorded = exchange.recorded;
        let reply = exchange.reply.map(TurnRow::of).transpose()?;
        let rate = exchange
            .rate
            .map(|(subscriber, window)| (subscriber.as_str().to_owned(), window));
        let (charge, escalated_at) = (exchange.charge, exchange.escalated_at);
        let outbox = exchange
            .outbox
            .iter()
            .map(OutboxInsert::of)
            .collect::<Result<Vec<_>>>()?;
        let keep = exchange.keep.map(KeptPromise::of).transpose()?;
        // One job, one savepoint: the whole exchange commits or none of it does.
        self.write(move |conn| {
            let message_id = match recorded {
                Some(id) => {
                    if let Some(reason) = &message.turn.escalation_reason {
                        update_one(
                            conn,
                            "UPDATE turns SET escalation_reason = ? WHERE id = ?",
                            params![reason, id],
                            "turn",
                        )?;
                    }
                    if message.turn.media_kind.is_some() {
                        update_one(
                            conn,
                            "UPDATE turns SET text = ?, media_kind = ?, cost_usd = ? WHERE id = ?",
                            params![
                                message.turn.text,
                                message.turn.media_kind,
                                message.turn.cost_usd,
                                id
                            ],
                            "turn",
                        )?;
                    }
                    id
                }
                None => message.insert(conn)?,
            };
            if let Some((subscriber, window)) = &rate {
                bump_rate_in(conn, subscriber, *window)?;
            }
            let reply_id = match &reply {
                Some(reply) => Some(reply.insert(conn)?),
                None => None,
            };
            if let Some(charge) = charge {
                add_budget_in(conn, charge)?;
            }
            if let Some(at) = escalated_at {
                set_escalated_in(conn, message.turn.conversation_id, at)?;
            }
            let outbox = outbox
                .iter()
                .map(|row| row.insert(conn, Some(reply_id.unwrap_or(message_id))))
                .collect::<Result<Vec<_>>>()?;
            if let Some(keep) = &keep {
                keep.write(conn, reply_id.unwrap_or(message_id))?;
            }
            Ok(ExchangeIds {
                message: message_id,
                reply: reply_id,
                outbox,
            })
        })
        .await
    }

    async fn outbox_rows(&self) -> Result<Vec<OutboxRow>> {
        self.read(|conn| {
            query_all(
                conn,
                concat!("SELECT ", outbox_columns!(), " FROM outbox ORDER BY id"),
                [],
                outbox_from,
            )
        })
        .await
    }

    async fn forget_contact(&self, subscriber_id: &SubscriberId) -> Result<Forgotten> {
        let subscriber = subscriber_id.as_str().to_owned();
        // One job, one savepoint: the contact is erased whole or not at all. The newest turns'
        // ids may be given again (`NEXT_TURN_ID`): what referred to them (the contact's outbox
        // rows) goes with them.
        self.write(move |conn| {
            let conversation_id = conversation_by_subscriber(conn, &subscriber)?.map(|c| c.id);
            let mut deleted = Vec::with_capacity(CONTACT_TABLES.len());
            for &(table, column) in CONTACT_TABLES {
                // Both names come from the constant list, never from input.
                let sql = format!("DELETE FROM {table} WHERE {column} = ?");
                let rows = match (column, conversation_id) {
                    ("conversation_id", Some(id)) => conn.execute(&sql, [IdText::of(id)])?,
                    ("conversation_id", None) => 0,
                    _ => conn.execute(&sql, [subscriber.as_str()])?,
                };
                deleted.push((table, rows as u64));
            }
            Ok(Forgotten {
                conversation_id,
                deleted,
            })
        })
        .await
    }

    async fn clear_turn_text_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        let (before, limit) = (ms(before), limit.max(0));
        self.write(move |conn| {
            let cleared = conn
                .prepare_cached(CLEAR_OLD_TURN_TEXT)?
                .execute(params![before, limit])?;
            Ok(cleared as u64)
        })
        .await
    }

    async fn delete_settled_outbox_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        let (before, limit) = (ms(before), limit.max(0));
        self.write(move |conn| {
            let deleted = conn
                .prepare_cached(DELETE_OLD_SETTLED_OUTBOX)?
                .execute(params![before, limit])?;
            Ok(deleted as u64)
        })
        .await
    }

    async fn count_flow_send(
        &self,
        subscriber_id: &SubscriberId,
        now: DateTime<Utc>,
        per_hour: u32,
    ) -> Result<bool> {
        let subscriber = subscriber_id.as_str().to_owned();
        // One writer thread: the count and the insert cannot interleave with another's.
        self.write(move |conn| {
            let hour_ago = ms(now - chrono::Duration::hours(1));
            // Every contact's counts older than an hour go: a subscriber id is personal data.
            conn.execute(
                "DELETE FROM manychat_flow_sends WHERE sent_at <= ?",
                params![hour_ago],
            )?;
            let sent: i64 = conn.query_row(
                "SELECT COUNT(*) FROM manychat_flow_sends WHERE subscriber_id = ?",
                params![subscriber],
                |r| r.get(0),
            )?;
            if sent >= i64::from(per_hour) {
                return Ok(false);
            }
            conn.execute(
                "INSERT INTO manychat_flow_sends (subscriber_id, sent_at) VALUES (?, ?)",
                params![subscriber, ms(now)],
            )?;
            Ok(true)
        })
        .await
    }

    async fn sales_record(&self, conversation_id: ConversationId) -> Result<SalesRecord> {
        self.read(move |conn| sales_record_in(conn, conversation_id))
            .await
    }

    async fn set_offering(
        &self,
        id: ConversationId,
        offering: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let offering = offering.to_owned();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE conversations SET offering = ?, offering_at = ?, updated_at = ? \
                 WHERE id = ?",
                params![offering, ms(at), ms(at), IdText::of(id)],
                "conversation",
            )
        })
        .await
    }
    async fn claim_opening(&self, id: ConversationId, at: DateTime<Utc>) -> Result<bool> {
        self.write(move |conn| {
            let claimed = conn.prepare_cached(CLAIM_OPENING)?.execute(params![
                ms(at),
                ms(at),
                IdText::of(id)
            ])?;
            Ok(claimed == 1)
        })
        .await
    }

    async fn sales_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &super::SalesKeys,
    ) -> Result<super::SalesCounts> {
        let (from, until, keys) = (ms(from), ms(until), keys.clone());
        self.read(move |conn| sales_aggregates_in(conn, from, until, &keys))
            .await
    }

    async fn report_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<super::ReportAggregates> {
        let (from, until) = (ms(from), ms(until));
        self.read(move |conn| report_aggregates_in(conn, from, until))
            .await
    }

    async fn report_week(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &super::SalesKeys,
    ) -> Result<(super::ReportAggregates, super::SalesCounts)> {
        let (from, until, keys) = (ms(from), ms(until), keys.clone());
        self.read(move |conn| report_week_in(conn, from, until, &keys))
            .await
    }

    async fn schedule_nudge(
        &self,
        conversation_id: ConversationId,
        delay_id: &str,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let delay_id = delay_id.to_owned();
        self.write(move |conn| {
            conn.prepare_cached(SCHEDULE_NUDGE)?.execute(params![
                IdText::of(conversation_id),
                delay_id,
                ms(due_at),
                ms(now)
            ])?;
            Ok(())
        })
        .await
    }

    async fn cancel_nudge(
        &self,
        conversation_id: ConversationId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let reason = reason.to_owned();
        self.write(move |conn| {
            let changed = conn.prepare_cached(CANCEL_NUDGE)?.execute(params![
                reason,
                ms(now),
                IdText::of(conversation_id)
            ])?;
            Ok(changed > 0)
        })
        .await
    }

    async fn claim_due_nudges(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<Nudge>> {
        // The one writer makes the select-then-update atomic (and `BEGIN IMMEDIATE` across
        // processes on one file); the update re-checks `pending` all the same.
        self.write(move |conn| {
            let due = query_all(conn, DUE_NUDGES, params![ms(now), limit], nudge_from)?;
            let mut claimed = Vec::with_capacity(due.len());
            for mut nudge in due {
                let changed = conn
                    .prepare_cached(CLAIM_NUDGE)?
                    .execute(params![ms(now), nudge.id])?;
                if changed == 1 {
                    nudge.status = NudgeStatus::Running;
                    nudge.claimed_at = Some(now);
                    claimed.push(nudge);
                }
            }
            Ok(claimed)
        })
        .await
    }

    async fn settle_nudge(
        &self,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let (id, claimed_at) = (nudge.id, nudge.claimed_at.map(ms));
        let reason = reason.map(str::to_owned);
        self.write(move |conn| {
            let changed = conn.prepare_cached(SETTLE_NUDGE)?.execute(params![
                status.as_str(),
                reason,
                ms(now),
                id,
                claimed_at
            ])?;
            Ok(changed > 0)
        })
        .await
    }

    async fn mark_lost_nudges(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        // The one writer makes the select-then-update atomic, as for the claim.
        self.write(move |conn| {
            let lost = query_all(conn, LOST_NUDGES, [ms(claimed_before)], |row| {
                uuid(text(row, 0)?)
            })?;
            conn.prepare_cached(LOSE_NUDGES)?
                .execute(params![ms(now), ms(claimed_before)])?;
            Ok(lost)
        })
        .await
    }

    async fn nudge(&self, conversation_id: ConversationId) -> Result<Option<Nudge>> {
        self.read(move |conn| query_one(conn, NUDGE_OF, [IdText::of(conversation_id)], nudge_from))
            .await
    }

    async fn record_nudge_turn(&self, exchange: NudgeExchange<'_>) -> Result<Option<i64>> {
        let (id, claimed_at) = (exchange.nudge.id, exchange.nudge.claimed_at.map(ms));
        let (status, reason) = (exchange.status, exchange.reason.map(str::to_owned));
        let now = ms(exchange.now);
        let turn = TurnRow::of(exchange.turn)?;
        let rate = exchange
            .rate
            .map(|(subscriber, window)| (subscriber.as_str().to_owned(), window));
        let charge = exchange.charge;
        let outbox = exchange
            .outbox
            .iter()
            .map(OutboxInsert::of)
            .collect::<Result<Vec<_>>>()?;
        // One job, one savepoint: the claim is checked by the settle itself, so a cancel
        // committed before it leaves nothing written, and one after it finds the row settled.
        self.write(move |conn| {
            let settled = conn.prepare_cached(SETTLE_NUDGE)?.execute(params![
                status.as_str(),
                reason,
                now,
                id,
                claimed_at
            ])?;
            if settled == 0 {
                return Ok(None);
            }
            let turn_id = turn.insert(conn)?;
            if let Some((subscriber, window)) = &rate {
                bump_rate_in(conn, subscriber, *window)?;
            }
            if let Some(charge) = charge {
                add_budget_in(conn, charge)?;
            }
            for row in &outbox {
                row.insert(conn, Some(turn_id))?;
            }
            Ok(Some(turn_id))
        })
        .await
    }
}

/// Issue 18 (`/metrics`): open outbox rows, at most ?1 of them read (`outbox_status_due`).
const OUTBOX_BACKLOG_ROWS: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM outbox \
     WHERE status IN ('pending', 'delivering') LIMIT ?1)";
/// Issue 18 (`/metrics`): the earliest due time of an open row, one index seek per status.
const OUTBOX_OLDEST_OPEN: &str = "SELECT MIN(due) FROM ( \
     SELECT MIN(next_attempt_at) AS due FROM outbox WHERE status = 'pending' \
     UNION ALL SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'delivering')";

/// Issue 18: contacts whose first turn is in `[?1, ?2)`: the period's contacts (through
/// `turns_created`) without an earlier turn (through `turns_conversation_created`).
const REPORT_NEW_CONTACTS: &str = "SELECT COUNT(*) FROM \
     (SELECT DISTINCT conversation_id FROM turns WHERE created_at >= ?1 AND created_at < ?2) w \
     WHERE NOT EXISTS (SELECT 1 FROM turns e \
                       WHERE e.conversation_id = w.conversation_id AND e.created_at < ?1)";

/// Issue 18: the period's turns by day, role, outcome, escalation reason and authorship.
const REPORT_TURN_GROUPS: &str = "SELECT created_at / 86400000 AS day, role, outcome, \
     escalation_reason, model IS NOT NULL AS model_written, COUNT(*), SUM(reads), \
     SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) \
     FROM turns WHERE created_at >= ?1 AND created_at < ?2 \
     GROUP BY day, role, outcome, escalation_reason, model_written ORDER BY day";

/// Issue 18: inline answer times, each distinct value with its count.
const REPORT_INLINE_LATENCIES: &str = "SELECT latency_ms, COUNT(*) FROM turns \
     WHERE created_at >= ?1 AND created_at < ?2 AND outcome = 'answered_inline' \
     GROUP BY latency_ms ORDER BY latency_ms";

/// Issue 18: the period's action records that hold an entry (through `turns_created`; an empty
/// record, a turn offered tools that chose none, is skipped unparsed), parsed and tallied in
/// the process (`ActionTally`): one parse per record serves both the actions table and the
/// sales counts. SQLite's JSON functions cost more than the whole row read: `json_each` then
/// `json_extract` per key parsed each entry again, and the two measures each made that pass.
/// A partial index on the turns holding a record was measured and saved nothing (reading the
/// week's rows is cheap next to parsing), so no write pays for one.
const REPORT_ACTION_RECORDS: &str = "SELECT conversation_id, actions FROM turns \
     WHERE created_at >= ?1 AND created_at < ?2 AND actions IS NOT NULL AND actions <> '[]'";

fn action_tally_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    keys: Option<&super::SalesKeys>,
) -> Result<super::report::ActionTally> {
    let mut tally = super::report::ActionTally::new(keys);
    let mut statement = conn.prepare_cached(REPORT_ACTION_RECORDS)?;
    let mut rows = statement.query(params![from, until])?;
    while let Some(row) = rows.next()? {
        // Both columns are TEXT; a value of another type holds no record to count.
        if let (Ok(conversation), Ok(record)) = (row.get_ref(0)?.as_str(), row.get_ref(1)?.as_str())
        {
            tally.add(conversation, record);
        }
    }
    Ok(tally)
}

fn report_aggregates_in(conn: &Db<'_>, from: i64, until: i64) -> Result<super::ReportAggregates> {
    let actions = action_tally_in(conn, from, until, None)?.actions();
    grouped_turns_in(conn, from, until, actions)
}

/// The period's grouped turn statements; `actions` from the period's [`action_tally_in`].
fn grouped_turns_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    actions: Vec<super::ActionCount>,
) -> Result<super::ReportAggregates> {
    let new_contacts = query_all(conn, REPORT_NEW_CONTACTS, params![from, until], |r| {
        Ok(r.get::<_, i64>(0)?)
    })?
    .into_iter()
    .next()
    .unwrap_or(0);
    let turn_groups = query_all(conn, REPORT_TURN_GROUPS, params![from, until], |r| {
        Ok(super::TurnGroup {
            day: super::report::day_of_epoch_days(r.get(0)?),
            role: super::report::role_of(&r.get::<_, String>(1)?),
            outcome: r.get(2)?,
            escalation_reason: r.get(3)?,
            model_written: r.get(4)?,
            turns: r.get(5)?,
            reads: r.get(6)?,
            input_tokens: r.get(7)?,
            output_tokens: r.get(8)?,
            cost_usd: r.get(9)?,
        })
    })?;
    let inline_latencies = query_all(conn, REPORT_INLINE_LATENCIES, params![from, until], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    Ok(super::ReportAggregates {
        new_contacts,
        turn_groups,
        inline_latencies,
        actions,
    })
}

/// Issue 18 (025's measure): the period's `nudge_sent` turns, and those the contact answered
/// within 24 h (a user turn of the conversation after it, through `turns_conversation_created`).
const REPORT_NUDGES: &str = "SELECT COUNT(*), COALESCE(SUM(EXISTS (SELECT 1 FROM turns r \
     WHERE r.conversation_id = n.conversation_id AND r.role = 'user' \
       AND r.created_at > n.created_at AND r.created_at <= n.created_at + 86400000)), 0) \
     FROM turns n WHERE n.created_at >= ?1 AND n.created_at < ?2 AND n.outcome = 'nudge_sent'";

fn sales_aggregates_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    keys: &super::SalesKeys,
) -> Result<super::SalesCounts> {
    let sales_ids =
        keys.intent_field.is_some() || keys.funnel_field.is_some() || keys.payment_flow.is_some();
    let counts = if sales_ids {
        action_tally_in(conn, from, until, Some(keys))?.sales()
    } else {
        super::SalesCounts::default()
    };
    with_nudges_in(conn, from, until, counts)
}

/// `counts` with the period's nudge counts.
fn with_nudges_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    mut counts: super::SalesCounts,
) -> Result<super::SalesCounts> {
    (counts.nudges_sent, counts.nudges_replied) = conn
        .prepare_cached(REPORT_NUDGES)?
        .query_row(params![from, until], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(counts)
}

/// Issue 18: a report week, its action records read once for both measures.
fn report_week_in(
    conn: &Db<'_>,
    from: i64,
    until: i64,
    keys: &super::SalesKeys,
) -> Result<(super::ReportAggregates, super::SalesCounts)> {
    let tally = action_tally_in(conn, from, until, Some(keys))?;
    let aggregates = grouped_turns_in(conn, from, until, tally.actions())?;
    let counts = with_nudges_in(conn, from, until, tally.sales())?;
    Ok((aggregates, counts))
}

macro_rules! nudge_columns {
    () => {
        "id, conversation_id, delay_id, due_at, scheduled_at, status, reason, claimed_at"
    };
}

/// 025: the conversation's one nudge row, replaced whole (its UNIQUE key is the conversation).
const SCHEDULE_NUDGE: &str = "INSERT INTO nudges (conversation_id, delay_id, due_at, status, \
     reason, scheduled_at, claimed_at, created_at, updated_at) \
     VALUES (?1, ?2, ?3, 'pending', NULL, ?4, NULL, ?4, ?4) \
     ON CONFLICT (conversation_id) DO UPDATE SET delay_id = excluded.delay_id, \
     due_at = excluded.due_at, status = 'pending', reason = NULL, \
     scheduled_at = excluded.scheduled_at, claimed_at = NULL, updated_at = excluded.updated_at";
const CANCEL_NUDGE: &str = "UPDATE nudges SET status = 'cancelled', reason = ?1, updated_at = ?2 \
     WHERE conversation_id = ?3 AND status IN ('pending', 'running')";
/// Through `nudges_pending_due`: costs the due rows, not the table.
const DUE_NUDGES: &str = concat!(
    "SELECT ",
    nudge_columns!(),
    " FROM nudges WHERE status = 'pending' AND due_at <= ?1 ORDER BY due_at LIMIT ?2"
);
const CLAIM_NUDGE: &str = "UPDATE nudges SET status = 'running', claimed_at = ?1, updated_at = ?1 \
     WHERE id = ?2 AND status = 'pending'";
const SETTLE_NUDGE: &str = "UPDATE nudges SET status = ?1, reason = ?2, updated_at = ?3 \
     WHERE id = ?4 AND status = 'running' AND claimed_at = ?5";
/// The conversations of the nudges [`LOSE_NUDGES`] marks.
const LOST_NUDGES: &str =
    "SELECT conversation_id FROM nudges WHERE status = 'running' AND claimed_at < ?1";
const LOSE_NUDGES: &str = "UPDATE nudges SET status = 'lost', reason = 'process_died', \
     updated_at = ?1 WHERE status = 'running' AND claimed_at < ?2";
const NUDGE_OF: &str = concat!(
    "SELECT ",
    nudge_columns!(),
    " FROM nudges WHERE conversation_id = ?1"
);

fn nudge_from(row: &Row<'_>) -> Result<Nudge> {
    let due_at = time(row.get(3)?)?;
    Ok(Nudge {
        id: row.get(0)?,
        conversation_id: uuid(text(row, 1)?)?,
        delay_id: row.get(2)?,
        due_at,
        scheduled_at: opt_time(row.get(4)?)?.unwrap_or(due_at),
        status: NudgeStatus::parse(text(row, 5)?)?,
        reason: row.get(6)?,
        claimed_at: opt_time(row.get(7)?)?,
    })
}

/// Retention: the oldest turns that still have text, emptied (`turns_text_kept` finds them).
const CLEAR_OLD_TURN_TEXT: &str = "UPDATE turns SET text = '' WHERE id IN \
     (SELECT id FROM turns WHERE text <> '' AND created_at < ?1 LIMIT ?2)";

/// Retention: settled outbox rows created before the period. A settled row's `next_attempt_at`
/// is never before its creation, so it bounds the scan through `outbox_status_due`.
const DELETE_OLD_SETTLED_OUTBOX: &str = "DELETE FROM outbox WHERE id IN \
     (SELECT id FROM outbox WHERE status IN ('delivered', 'failed') \
      AND next_attempt_at < ?1 AND created_at < ?1 LIMIT ?2)";

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a pragma on the store's own connection.
    async fn pragma<T: rusqlite::types::FromSql + Send + 'static>(
        store: &SqliteStore,
        name: &'static str,
    ) -> T {
        store
            .read(move |conn| Ok(conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))?))
            .await
            .expect("a pragma")
    }

    #[tokio::test]
    async fn system_8_sqlite_file_created_on_first_run_with_wal() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("agent.db");
        let url = format!("sqlite://{}", path.display());
        let store = SqliteStore::connect(&url).await.expect("connect");
        assert!(path.is_file(), "the file exists");

        assert_eq!(pragma::<String>(&store, "journal_mode").await, "wal");
        assert_eq!(pragma::<i64>(&store, "foreign_keys").await, 1);
        assert_eq!(pragma::<i64>(&store, "busy_timeout").await, 5000);
        // 2 = FULL: an acknowledged write is on disk.
        assert_eq!(pragma::<i64>(&store, "synchronous").await, 2);
        // 2 = MEMORY: savepoint journals never touch a temporary file.
        assert_eq!(pragma::<i64>(&store, "temp_store").await, 2);
        // The database thread checkpoints only as a backstop; its own thread does the rest.
        assert_eq!(
            pragma::<i64>(&store, "wal_autocheckpoint").await,
            checkpoint::BACKSTOP_PAGES
        );
    }

    /// A mistyped path must not start the service on a new, empty database.
    #[tokio::test]
    async fn issue_19_item_2_missing_database_directory_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let folder = dir.path().join("no-such-folder");
        let url = format!("sqlite://{}/agent.db", folder.display());
        let error = crate::store::connect(&url)
            .await
            .err()
            .expect("a missing folder is refused");
        let text = error.to_string();
        assert!(text.contains(&folder.display().to_string()), "{text}");
        assert!(text.contains("does not exist"), "{text}");
        assert!(!folder.exists(), "nothing was created");
    }

    #[tokio::test]
    async fn system_8_a_turns_statements_open_no_temporary_btree() {
        let store = SqliteStore::connect("sqlite::memory:")
            .await
            .expect("connect");
        let plans = store
            .read(|conn| {
                let mut plans = Vec::new();
                for sql in TURN_STATEMENTS {
                    let mut explain = conn.prepare(&format!("EXPLAIN {sql}"))?;
                    // The plan does not depend on the values: run it with none bound.
                    let mut rows = explain.raw_query();
                    let mut opcodes = Vec::new();
                    while let Some(row) = rows.next()? {
                        opcodes.push(row.get::<_, String>(1)?);
                    }
                    plans.push((*sql, opcodes));
                }
                Ok(plans)
            })
            .await
            .expect("every statement compiles");
        for (sql, opcodes) in plans {
            for temporary in ["OpenEphemeral", "OpenAutoindex", "SorterOpen"] {
                assert!(
                    !opcodes.iter().any(|op| op == temporary),
                    "{temporary} in the plan of: {sql}"
                );
            }
        }
    }

    #[test]
    fn system_8_budget_days_are_stored_as_iso_dates() {
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).expect("a date");
        assert_eq!(day_key(day(2026, 1, 5)), "2026-01-05");
        assert_eq!(day_key(day(2026, 11, 30)), "2026-11-30");
    }

    #[test]
    fn system_5_2_sqlite_urls_name_a_file_or_memory() {
        assert_eq!(
            location("sqlite://data/agent.db").expect("relative"),
            Location::File(PathBuf::from("data/agent.db"))
        );
        assert_eq!(
            location("sqlite:///var/lib/agent.db").expect("absolute"),
            Location::File(PathBuf::from("/var/lib/agent.db"))
        );
        assert_eq!(
            location("sqlite:agent.db").expect("short form"),
            Location::File(PathBuf::from("agent.db"))
        );
        assert_eq!(
            location("sqlite::memory:").expect("memory"),
            Location::Memory
        );
        for bad in ["sqlite://", "sqlite://data/agent.db?mode=ro"] {
            let error = location(bad).expect_err(bad).to_string();
            assert!(error.contains("DATABASE_URL"), "{error}");
        }
    }

    #[test]
    fn system_8_every_migration_file_is_listed() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
        let mut files: Vec<String> = std::fs::read_dir(folder)
            .expect("the migrations folder")
            .map(|entry| {
                entry
                    .expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<String> = MIGRATIONS
            .iter()
            .map(|(version, description, _)| format!("{version:04}_{description}.sql"))
            .collect();
        assert_eq!(files, listed);
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
        drop(first);

        let reopened = SqliteStore::connect(&url).await.expect("reconnect");
        assert_eq!(
            reopened.conversation(created.id).await.expect("read"),
            Some(created)
        );
        let versions: i64 = reopened
            .read(|conn| {
                Ok(conn.query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))?)
            })
            .await
            .expect("bookkeeping");
        assert_eq!(versions, MIGRATIONS.len() as i64, "each migration once");
    }

    /// A file written by an earlier build, whose migrations were recorded in
    /// `_sqlx_migrations`, opens with its data and is not migrated twice.
    #[tokio::test]
    async fn system_9_a_file_from_an_earlier_build_is_adopted() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("agent.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(MIGRATIONS[0].2).expect("the schema");
            conn.execute_batch(
                "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT \
                 NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success \
                 BOOLEAN NOT NULL, checksum BLOB NOT NULL, execution_time BIGINT NOT NULL); \
                 INSERT INTO _sqlx_migrations VALUES (1, 'init', CURRENT_TIMESTAMP, 1, x'00', 1); \
                 INSERT INTO budget_counters (day, tokens, cost_usd) VALUES ('2026-01-10', 7, 0);",
            )
            .expect("an earlier build's file");
        }
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("the earlier file opens");
        let day = NaiveDate::from_ymd_opt(2026, 1, 10).expect("a day");
        assert_eq!(store.budget(day).await.expect("budget").tokens, 7);
    }

    /// Migration 0003 rebuilds `turns`: a file with turns from before keeps them, in order,
    /// and new turns get the next id (and `seq` equal to it).
    #[tokio::test]
    async fn system_9_turns_written_before_migration_3_are_kept_in_order() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("agent.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(MIGRATIONS[0].2).expect("migration 1");
            conn.execute_batch(MIGRATIONS[1].2).expect("migration 2");
            conn.execute_batch(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL, \
                 description TEXT NOT NULL, applied_at INTEGER NOT NULL); \
                 INSERT INTO schema_migrations VALUES (1, 'init', 0), (2, 'lean_write_path', 0); \
                 INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) \
                 VALUES ('00000000-0000-4000-8000-000000000001', '42', 'whatsapp', 0, 0); \
                 INSERT INTO turns (seq, conversation_id, role, text, bound, created_at) VALUES \
                 (1, '00000000-0000-4000-8000-000000000001', 'user', 'first', 1, 1000), \
                 (2, '00000000-0000-4000-8000-000000000001', 'agent', 'second', 1, 1000);",
            )
            .expect("a file at migration 2 with two turns");
        }
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("the file migrates");
        let conversation = store
            .conversation_for(
                &SubscriberId::parse("42").expect("an id"),
                "whatsapp",
                instant(),
            )
            .await
            .expect("the conversation is kept");
        let id = store
            .record_turn(&NewTurn::user(conversation.id, "third", true, instant()))
            .await
            .expect("a new turn");
        let turns = store.turns(conversation.id).await.expect("turns");
        let kept: Vec<(i64, i64, &str)> = turns
            .iter()
            .map(|t| (t.id, t.seq, t.text.as_str()))
            .collect();
        assert_eq!(
            kept,
            vec![(1, 1, "first"), (2, 2, "second"), (3, 3, "third")]
        );
        assert_eq!(id, 3);
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
        // The thread still serves writes after a failure.
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

    /// A job that panics fails alone: the thread keeps serving reads and writes.
    #[tokio::test]
    async fn system_8_a_panicking_job_does_not_stop_the_database_thread() {
        let store = SqliteStore::connect("sqlite::memory:")
            .await
            .expect("connect");
        let read = store
            .read(|_| -> Result<()> { panic!("a bug in a read") })
            .await;
        assert!(read.is_err());
        let write = store
            .write(|conn| -> Result<()> {
                add_budget_in(
                    conn,
                    BudgetCharge {
                        day: instant().date_naive(),
                        tokens: 9,
                        cost_usd: 0.0,
                    },
                )?;
                panic!("a bug after a statement")
            })
            .await;
        assert!(write.is_err());
        assert_eq!(
            store
                .budget(instant().date_naive())
                .await
                .expect("budget")
                .tokens,
            0,
            "the panicking write was rolled back"
        );
        store.ping().await.expect("the thread still answers");
    }

    /// A write is acknowledged only after its group committed: another process on the same
    /// file (a separate store, its own connection) reads it as soon as the call returns.
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

    /// Whether the database file alone (as after losing its WAL) holds `subscriber`'s
    /// conversation: read from a copy, so the store's own files are not touched. A copy torn by
    /// a checkpoint in progress counts as not yet.
    fn database_file_holds(path: &Path, subscriber: &str) -> bool {
        let copy = tempfile::tempdir().expect("a temporary folder");
        let copied = copy.path().join("copy.db");
        if std::fs::copy(path, &copied).is_err() {
            return false;
        }
        Connection::open(&copied)
            .and_then(|conn| {
                conn.query_row(
                    "SELECT COUNT(*) FROM conversations WHERE subscriber_id = ?",
                    [subscriber],
                    |row| row.get::<_, i64>(0),
                )
            })
            .is_ok_and(|count| count == 1)
    }

    /// Polls `done` every 10 ms for up to 5 s (real time: the checkpoint thread is an OS
    /// thread; this waits for its effect, it proves no timeout).
    fn eventually(mut done: impl FnMut() -> bool) -> bool {
        for _ in 0..500 {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// The checkpoint thread copies commits into the database file while the store is open:
    /// one small write is far below the database thread's own backstop, so only the
    /// checkpoint thread can have copied it.
    #[tokio::test]
    async fn system_8_commits_reach_the_database_file_while_the_store_runs() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("agent.db");
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect");
        assert!(!database_file_holds(&path, "5550004"), "not written yet");
        let subscriber = SubscriberId::parse("5550004").expect("digits");
        store
            .conversation_for(&subscriber, "whatsapp", instant())
            .await
            .expect("conversation_for");
        assert!(
            eventually(|| database_file_holds(&path, "5550004")),
            "the acknowledged write was checkpointed into the database file"
        );
    }

    /// Dropping the last handle ends both threads: their connections close, and the last one
    /// to close checkpoints the rest and removes the WAL file.
    #[tokio::test]
    async fn system_8_the_store_closes_its_connections_when_dropped() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("agent.db");
        let wal = dir.path().join("agent.db-wal");
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect");
        let subscriber = SubscriberId::parse("5550005").expect("digits");
        store
            .conversation_for(&subscriber, "whatsapp", instant())
            .await
            .expect("conversation_for");
        assert!(wal.exists(), "the WAL exists while the store is open");
        drop(store);
        assert!(eventually(|| !wal.exists()), "the WAL was removed on close");
        assert!(database_file_holds(&path, "5550005"));
    }

    /// Retention reads only the rows it is about to change, through an index: the turns that
    /// still have text by age, the settled outbox rows by due time. A scan of the whole table
    /// would hold the database thread longer as the history grows.
    #[tokio::test]
    async fn issue_13_item_10_retention_reads_through_an_index() {
        let store = SqliteStore::connect("sqlite::memory:")
            .await
            .expect("connect");
        let plans = store
            .read(|conn| {
                let mut plans = Vec::new();
                for sql in [CLEAR_OLD_TURN_TEXT, DELETE_OLD_SETTLED_OUTBOX] {
                    let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    let mut rows = explain.raw_query();
                    let mut details = Vec::new();
                    while let Some(row) = rows.next()? {
                        details.push(row.get::<_, String>(3)?);
                    }
                    plans.push(details.join("; "));
                }
                Ok(plans)
            })
            .await
            .expect("every statement compiles");
        assert!(
            plans[0].contains("USING INDEX turns_text_kept (created_at<?)"),
            "{}",
            plans[0]
        );
        assert!(
            plans[1].contains("USING INDEX outbox_status_due (status=? AND next_attempt_at<?)"),
            "{}",
            plans[1]
        );
    }

    /// The tables of the schema with a column that names a contact, as (table, column).
    async fn contact_columns(store: &SqliteStore) -> Vec<(String, String)> {
        store
            .read(|conn| {
                let mut statement = conn.prepare(
                    "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p \
                     WHERE m.type = 'table' AND p.name IN ('conversation_id', 'subscriber_id') \
                     ORDER BY 1, 2",
                )?;
                let rows = statement
                    .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect::<rusqlite::Result<Vec<(String, String)>>>()?;
                Ok(rows)
            })
            .await
            .expect("the schema")
    }

    /// Issue 13 item 10: `forget_contact` deletes from every table that names a contact. A table
    /// added later with a `conversation_id` or `subscriber_id` column fails this test until it is
    /// listed in `CONTACT_TABLES`.
    #[tokio::test]
    async fn issue_13_item_10_forget_covers_every_table_that_names_a_contact() {
        let store = SqliteStore::connect("sqlite::memory:")
            .await
            .expect("a store");
        let schema = contact_columns(&store).await;
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
        let subscriber = SubscriberId::parse("5550010").expect("digits");
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", instant())
            .await
            .expect("conversation_for");
        let message = NewTurn::user(conversation.id, "Invented question", true, instant());
        store
            .record_exchange(Exchange {
                message: &message,
                rate: Some((&subscriber, instant())),
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
                next_attempt_at: instant(),
                created_at: instant(),
            })
            .await
            .expect("enqueue");
        let id = conversation.id.to_string();
        store
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO nudges (conversation_id, delay_id, due_at, status, created_at, \
                     updated_at) VALUES (?, 'invented', 0, 'pending', 0, 0)",
                    [&id],
                )?;
                Ok(())
            })
            .await
            .expect("a nudge");

        assert!(
            store
                .count_flow_send(&subscriber, chrono::Utc::now(), 100)
                .await
                .expect("a flow send counted")
        );
        let ticket_for = conversation.id.to_string();
        store
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO turn_tickets (conversation_id, holder, lease_until) \
                     VALUES (?, 'invented', 0)",
                    [&ticket_for],
                )?;
                Ok(())
            })
            .await
            .expect("a ticket");
        let forgotten = store.forget_contact(&subscriber).await.expect("forget");
        assert!(
            forgotten.deleted.iter().all(|(_, rows)| *rows > 0),
            "a row deleted from every contact table: {forgotten:?}"
        );
        for (table, column) in schema {
            let value = if column == "conversation_id" {
                conversation.id.to_string()
            } else {
                subscriber.as_str().to_owned()
            };
            let left: i64 = store
                .read(move |conn| {
                    Ok(conn.query_row(
                        &format!("SELECT COUNT(*) FROM {table} WHERE {column} = ?"),
                        [&value],
                        |row| row.get(0),
                    )?)
                })
                .await
                .expect("a count");
            assert_eq!(left, 0, "rows of the contact left in a table");
        }
    }
}
