//! Checkpoints on a thread and connection of their own.
//!
//! In WAL mode a commit appends its pages to the `-wal` file; a checkpoint copies the newest
//! version of each page back into the database file and syncs that file. SQLite's default runs
//! the checkpoint on the connection that commits, whenever the WAL passes 1000 pages. Here that
//! connection belongs to the database thread, the serial stage every turn waits on: every few
//! hundred turns all of them stopped for the copy (it set the benchmark's p99), and a page that
//! many turns changed was copied again every 1000 pages.
//!
//! This thread opens its own connection to the same file and, while writes happen, runs a
//! PASSIVE checkpoint (it never blocks the writer or readers) at most once per [`PASS_GAP`]:
//! each pass copies the pages written since the last one, each page once. The database thread
//! keeps SQLite's automatic checkpoint, raised to [`BACKSTOP_PAGES`], for the one job this
//! thread cannot do while writes continue: the WAL starts again from its beginning only after a
//! checkpoint that caught up with no commit in between, which only the committing thread can
//! guarantee. When it runs, this thread has already copied all but its last gap's pages, so
//! the database thread's pause stays short, and the WAL file stays near `BACKSTOP_PAGES`
//! pages (64 MiB at SQLite's 4 KiB pages) at most.
//!
//! Invariants: durability does not depend on this thread (every commit is synced to the WAL
//! before it is acknowledged; a checkpoint only copies synced pages, and syncs the database
//! file before the WAL may be reused). The thread ends when the database thread drops its
//! [`Checkpoints`]; whichever connection closes last checkpoints the rest and removes the WAL
//! file, as SQLite does on a clean close. Nothing it logs names data.

use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::time::Duration;

use rusqlite::Connection;

use super::super::{Result, StoreError};

/// The database thread's own automatic checkpoint, in WAL pages: the WAL's usual ceiling.
pub(super) const BACKSTOP_PAGES: i64 = 16_000;

/// The least time between two passes: a page that several commits change within it is copied
/// once.
const PASS_GAP: Duration = Duration::from_millis(200);

/// The database thread's handle on the checkpoint thread. Dropping it ends the thread.
pub(super) struct Checkpoints {
    wrote: SyncSender<()>,
}

impl Checkpoints {
    /// Opens a second connection to the database at `path` (already in WAL mode) and starts
    /// the checkpoint thread on it.
    pub(super) fn start(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        // FULL, like the database thread's connection: a checkpoint syncs the WAL before it
        // copies and the database file before the WAL may be reused.
        // `secure_delete` like every connection of the store (it writes no row, but no
        // connection of the store is left without it).
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA secure_delete = ON")?;
        let (wrote, writes) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("sqlite-ckpt".to_owned())
            .spawn(move || run(&conn, &writes))
            .map_err(|e| {
                StoreError::Database(format!("cannot start the checkpoint thread: {}", e.kind()))
            })?;
        Ok(Self { wrote })
    }

    /// Tells the thread that writes committed. Never blocks: one pending signal stands for any
    /// number of commits, and a thread that is gone is not waited for.
    pub(super) fn wrote(&self) {
        let _ = self.wrote.try_send(());
    }
}

/// Waits for commits, then checkpoints, at most once per gap, until the database thread is gone.
fn run(conn: &Connection, writes: &Receiver<()>) {
    while writes.recv().is_ok() {
        let pass = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(0)
        });
        if let Err(error) = pass {
            tracing::warn!(error = %super::describe(&error), "a WAL checkpoint failed");
        }
        std::thread::sleep(PASS_GAP);
    }
}
