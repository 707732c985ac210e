use super::erasure::*;
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

/// A store on a fresh in-memory database.
async fn in_memory() -> SqliteStore {
    SqliteStore::connect("sqlite::memory:")
        .await
        .expect("connect")
}

/// A store on the database file at `path`.
async fn on_file(path: &Path) -> SqliteStore {
    SqliteStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("the file opens")
}

/// A database file as an earlier build left it (`build` writes it): the folder's guard and the
/// file's path.
fn earlier_file(build: impl FnOnce(&Connection)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("agent.db");
    build(&Connection::open(&path).expect("open"));
    (dir, path)
}

/// The plan `explain` (`EXPLAIN`, `EXPLAIN QUERY PLAN`) gives each of `statements`, run with
/// no value bound (the plan does not depend on them): column `column` of each row.
async fn plans(
    store: &SqliteStore,
    explain: &'static str,
    column: usize,
    statements: &'static [&'static str],
) -> Vec<Vec<String>> {
    store
        .read(move |conn| {
            let mut plans = Vec::new();
            for sql in statements {
                let mut explained = conn.prepare(&format!("{explain} {sql}"))?;
                let mut rows = explained.raw_query();
                let mut plan = Vec::new();
                while let Some(row) = rows.next()? {
                    plan.push(row.get::<_, String>(column)?);
                }
                plans.push(plan);
            }
            Ok(plans)
        })
        .await
        .expect("every statement compiles")
}

/// The tokens the budget counts on [`instant`]'s day.
async fn tokens_today(store: &SqliteStore) -> i64 {
    let day = instant().date_naive();
    store.budget(day).await.expect("budget").tokens
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
    // Freed space is zeroed: erased text leaves no bytes behind.
    assert_eq!(pragma::<i64>(&store, "secure_delete").await, 1);
    // The database thread checkpoints only as a backstop; its own thread does the rest.
    assert_eq!(
        pragma::<i64>(&store, "wal_autocheckpoint").await,
        checkpoint::BACKSTOP_PAGES
    );
}

/// A forgotten contact's words are gone from the database file itself, not only from its
/// tables: a byte search of the file after a checkpoint finds nothing.
#[tokio::test]
async fn forgotten_text_leaves_no_bytes_in_the_database_file() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("agent.db");
    let store = on_file(&path).await;
    let subscriber = SubscriberId::parse("5559001").unwrap();
    let conversation = store
        .conversation_for(&subscriber, "whatsapp", instant())
        .await
        .unwrap();
    let marker = "zq-invented-erased-words-7c1f";
    for i in 0..20 {
        store
            .record_turn(&NewTurn::user(
                conversation.id,
                format!(
                    "{marker} number {i}, padded to fill a page {}",
                    "x".repeat(200)
                ),
                true,
                instant(),
            ))
            .await
            .unwrap();
    }
    store.forget_contact(&subscriber).await.unwrap();
    store
        .read(|conn| {
            Ok(conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })?)
        })
        .await
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let found = bytes.windows(marker.len()).any(|w| w == marker.as_bytes());
    assert!(!found, "the erased text is still in the file's free pages");
}

/// A mistyped path must not start the service on a new, empty database.
#[tokio::test]
async fn missing_database_directory_is_refused() {
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
    let store = in_memory().await;
    let opcodes = plans(&store, "EXPLAIN", 1, TURN_STATEMENTS).await;
    for (sql, opcodes) in TURN_STATEMENTS.iter().zip(opcodes) {
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
        .read(
            |conn| Ok(conn.query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))?),
        )
        .await
        .expect("bookkeeping");
    assert_eq!(versions, MIGRATIONS.len() as i64, "each migration once");
}

/// A file written by an earlier build, whose migrations were recorded in
/// `_sqlx_migrations`, opens with its data and is not migrated twice.
#[tokio::test]
async fn system_9_a_file_from_an_earlier_build_is_adopted() {
    let (_dir, path) = earlier_file(|conn| {
        conn.execute_batch(MIGRATIONS[0].2).expect("the schema");
        conn.execute_batch(
            "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT \
             NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success \
             BOOLEAN NOT NULL, checksum BLOB NOT NULL, execution_time BIGINT NOT NULL); \
             INSERT INTO _sqlx_migrations VALUES (1, 'init', CURRENT_TIMESTAMP, 1, x'00', 1); \
             INSERT INTO budget_counters (day, tokens, cost_usd) VALUES ('2026-01-10', 7, 0);",
        )
        .expect("an earlier build's file");
    });
    let store = on_file(&path).await;
    let day = NaiveDate::from_ymd_opt(2026, 1, 10).expect("a day");
    assert_eq!(store.budget(day).await.expect("budget").tokens, 7);
}

/// Migration 0003 rebuilds `turns`: a file with turns from before keeps them, in order,
/// and new turns get the next id (and `seq` equal to it).
#[tokio::test]
async fn system_9_turns_written_before_migration_3_are_kept_in_order() {
    let (_dir, path) = earlier_file(|conn| {
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
    });
    let store = on_file(&path).await;
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
    let store = in_memory().await;
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
    assert_eq!(tokens_today(&store).await, 5);
}

/// A job that panics fails alone: the thread keeps serving reads and writes.
#[tokio::test]
async fn system_8_a_panicking_job_does_not_stop_the_database_thread() {
    let store = in_memory().await;
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
        tokens_today(&store).await,
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
/// still have text by age, the settled outbox rows by due time, the vectors by their last use.
/// A scan of the whole table would hold the database thread longer as the history grows (and
/// a vector's row runs over several pages).
#[tokio::test]
async fn retention_reads_through_an_index() {
    let store = in_memory().await;
    let plans: Vec<String> = plans(
        &store,
        "EXPLAIN QUERY PLAN",
        3,
        &[
            CLEAR_OLD_TURN_TEXT,
            DELETE_OLD_SETTLED_OUTBOX,
            super::embeddings::PRUNE_EMBEDDINGS,
        ],
    )
    .await
    .iter()
    .map(|details| details.join("; "))
    .collect();
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
    assert!(
        plans[2].contains("USING COVERING INDEX embeddings_used_at (used_at<?)"),
        "{}",
        plans[2]
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

/// `forget_contact` deletes from every table that names a contact. A table
/// added later with a `conversation_id` or `subscriber_id` column fails this test until it is
/// listed in `CONTACT_TABLES`.
#[tokio::test]
async fn forget_covers_every_table_that_names_a_contact() {
    use crate::store::conformance::{
        contact_in_every_written_table, contact_tables_match_the_schema,
        forget_deletes_from_every_table,
    };
    let store = in_memory().await;
    let schema = contact_columns(&store).await;
    contact_tables_match_the_schema(&schema);

    // A contact with a row in every such table (a nudge has no store call yet: inserted here).
    let (subscriber, conversation) = contact_in_every_written_table(&store, instant()).await;
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
    forget_deletes_from_every_table(&store, &subscriber).await;
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

/// Migration 0014 keeps every nudge row (SALES 3: one pending row per conversation, the rest
/// the record): a file at migration 13 holding a pending and a cancelled nudge keeps both with
/// their ids and fields, and the conversation whose nudge was cancelled can then schedule the
/// next beside it, while a second pending row is still refused.
#[tokio::test]
async fn spec_025_migration_14_keeps_every_nudge_row_and_the_record_grows_beside_them() {
    let (replied, waiting) = (
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
    );
    let (_dir, path) = earlier_file(|conn| {
        conn.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL, \
             description TEXT NOT NULL, applied_at INTEGER NOT NULL);",
        )
        .expect("bookkeeping");
        for (version, description, sql) in &MIGRATIONS[..13] {
            conn.execute_batch(sql).expect("an earlier migration");
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, 0)",
                params![version, description],
            )
            .expect("recorded");
        }
        conn.execute_batch(&format!(
            "INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) VALUES \
             ('{replied}', '41', 'whatsapp', 0, 0), ('{waiting}', '42', 'whatsapp', 0, 0); \
             INSERT INTO nudges (id, conversation_id, delay_id, due_at, status, reason, \
             created_at, updated_at, scheduled_at, claimed_at) VALUES \
             (7, '{replied}', 'later_today', 5000, 'cancelled', 'contact_replied', 1000, 2000, 1000, NULL), \
             (9, '{waiting}', 'tomorrow', 90000, 'pending', NULL, 3000, 3000, 3000, NULL);"
        ))
        .expect("a file at migration 13 with two nudges");
    });
    let store = on_file(&path).await;
    let id = |raw: &str| ConversationId::from(uuid::Uuid::parse_str(raw).expect("a uuid"));
    let kept = |n: &Nudge| {
        (
            n.id,
            n.delay_id.clone(),
            n.status,
            n.reason.clone(),
            n.due_at.timestamp_millis(),
            n.scheduled_at.timestamp_millis(),
        )
    };
    let kept_rows = async |raw: &str| {
        let rows = store.nudges(id(raw)).await.expect("read");
        rows.iter().map(kept).collect::<Vec<_>>()
    };
    // (id, delay, status, reason, due, scheduled) as the file held them.
    let row = |id, delay: &str, status, reason: Option<&str>, due, scheduled| {
        let reason = reason.map(str::to_owned);
        (id, delay.to_owned(), status, reason, due, scheduled)
    };
    let expected = row(
        7,
        "later_today",
        NudgeStatus::Cancelled,
        Some("contact_replied"),
        5000,
        1000,
    );
    assert_eq!(kept_rows(replied).await, vec![expected]);
    let expected = row(9, "tomorrow", NudgeStatus::Pending, None, 90000, 3000);
    assert_eq!(kept_rows(waiting).await, vec![expected]);
    // The cancelled one stays as the record beside the next; a new id, never a reused one.
    let at = |ms: i64| DateTime::from_timestamp_millis(ms).expect("an instant");
    store
        .schedule_nudge(id(replied), "tomorrow", at(200_000), at(100_000))
        .await
        .expect("schedule the next");
    let replied_rows = store.nudges(id(replied)).await.expect("read");
    assert_eq!(replied_rows.len(), 2);
    assert_eq!(replied_rows[0].status, NudgeStatus::Cancelled);
    assert_eq!(replied_rows[1].status, NudgeStatus::Pending);
    assert!(replied_rows[1].id > 9, "ids are not reused");
    // The pending one is replaced in place, never doubled.
    store
        .schedule_nudge(id(waiting), "later_today", at(150_000), at(100_000))
        .await
        .expect("reschedule");
    let expected = row(
        9,
        "later_today",
        NudgeStatus::Pending,
        None,
        150_000,
        100_000,
    );
    assert_eq!(kept_rows(waiting).await, vec![expected]);
}

/// The console's pages read by keyset through an index, with no sort of their own: the cost of
/// a page does not grow with the store (or with how deep the page is).
#[tokio::test]
async fn console_pages_read_through_an_index_without_a_sort() {
    use super::browse::{CONVERSATION_TURNS, HELD_NOW, RECENT_CONVERSATIONS};
    let store = in_memory().await;
    let plans: Vec<String> = plans(
        &store,
        "EXPLAIN QUERY PLAN",
        3,
        &[RECENT_CONVERSATIONS, CONVERSATION_TURNS, HELD_NOW],
    )
    .await
    .iter()
    .map(|details| details.join("; "))
    .collect();
    for (plan, index) in plans.iter().zip([
        "conversations_recent",
        "turns_conversation_created",
        "conversations_escalated_at",
    ]) {
        assert!(plan.contains(&format!("USING INDEX {index}")), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

/// Migration 0029 gives each vector stored before it a last use: its creation. A file at
/// migration 28 holding a vector created at 1 s and one created at 5 s keeps both, and a prune
/// before 3 s takes the older one alone.
#[tokio::test]
async fn embeddings_stored_before_migration_29_count_as_used_when_created() {
    let (_dir, path) = earlier_file(|conn| {
        conn.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL, \
             description TEXT NOT NULL, applied_at INTEGER NOT NULL);",
        )
        .expect("bookkeeping");
        for (version, description, sql) in &MIGRATIONS[..28] {
            conn.execute_batch(sql).expect("an earlier migration");
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, 0)",
                params![version, description],
            )
            .expect("recorded");
        }
        conn.execute(
            "INSERT INTO embeddings (model, content_hash, vector, created_at) VALUES \
             ('openai:invented', 'old', X'0000803F', 1000), \
             ('openai:invented', 'new', X'0000803F', 5000)",
            [],
        )
        .expect("a file at migration 28 with two vectors");
    });
    let store = on_file(&path).await;
    let hashes = ["old".to_owned(), "new".to_owned()];
    let stored = store.embeddings("openai:invented", &hashes).await;
    assert_eq!(stored.expect("read").len(), 2, "both kept");
    let at = |ms| DateTime::from_timestamp_millis(ms).expect("an instant");
    let pruned = store.prune_embeddings(at(3000)).await.expect("prune");
    assert_eq!(pruned, 1);
    let left = store.embeddings("openai:invented", &hashes).await;
    assert_eq!(left.expect("read"), vec![("new".to_owned(), vec![1.0f32])]);
}
