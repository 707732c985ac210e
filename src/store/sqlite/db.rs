//! The database thread's connection with a statement cache of its own.
//!
//! rusqlite's `prepare_cached` keys its cache by the SQL text: every call hashes the text twice
//! (to take the statement out and to put it back) and copies it into a new key. On the database
//! thread — the turn's serial stage — that cost a tenth of all its instructions. The statements
//! this module runs are all `'static` text, so [`Db::prepare_cached`] keys them by address:
//! one lookup of two integers, no copy.
//!
//! Invariants:
//! - Only `'static` SQL is cached (the signature enforces it): a key's address and length
//!   always name the same text for the life of the process. The same text may sit at more
//!   than one address (a `const` can be placed once per use), which costs a spare statement,
//!   never a wrong one; the entries are bounded by the SQL text in the binary.
//! - The statements are finalized before the connection closes: a `Db` borrows the connection
//!   it caches for.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

use rusqlite::{Connection, PrepFlags, Statement};

/// A connection and the statements prepared on it. Derefs to the connection for everything
/// else.
pub(super) struct Db<'c> {
    conn: &'c Connection,
    statements: RefCell<HashMap<(usize, usize), Statement<'c>>>,
}

impl<'c> Db<'c> {
    pub(super) fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            statements: RefCell::new(HashMap::new()),
        }
    }

    /// The statement for `sql`, prepared once and kept (`SQLITE_PREPARE_PERSISTENT`, as
    /// rusqlite's own cache asks). It returns to the cache when the guard drops; a statement
    /// already out (the same SQL used while in use) is prepared again and the spare dropped.
    pub(super) fn prepare_cached(
        &self,
        sql: &'static str,
    ) -> rusqlite::Result<CachedStatement<'_, 'c>> {
        let key = (sql.as_ptr() as usize, sql.len());
        let cached = self.statements.borrow_mut().remove(&key);
        let statement = match cached {
            Some(statement) => statement,
            None => self
                .conn
                .prepare_with_flags(sql, PrepFlags::SQLITE_PREPARE_PERSISTENT)?,
        };
        Ok(CachedStatement {
            db: self,
            key,
            statement: Some(statement),
        })
    }
}

impl Deref for Db<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

/// A statement on loan from the cache.
pub(super) struct CachedStatement<'d, 'c> {
    db: &'d Db<'c>,
    key: (usize, usize),
    statement: Option<Statement<'c>>,
}

impl<'c> Deref for CachedStatement<'_, 'c> {
    type Target = Statement<'c>;

    fn deref(&self) -> &Statement<'c> {
        self.statement.as_ref().expect("present until dropped")
    }
}

impl DerefMut for CachedStatement<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.statement.as_mut().expect("present until dropped")
    }
}

impl Drop for CachedStatement<'_, '_> {
    fn drop(&mut self) {
        if let Some(mut statement) = self.statement.take() {
            // rusqlite resets a statement after each use; the bound values go too, so no text
            // a turn bound stays behind in the cache.
            statement.clear_bindings();
            self.db
                .statements
                .borrow_mut()
                .entry(self.key)
                .or_insert(statement);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A static, not a const: one address for every use.
    static COUNT: &str = "SELECT count(*) FROM t WHERE x = ?";

    #[test]
    fn a_statement_is_prepared_once_and_reused_with_fresh_bindings() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (1), (2);")
            .expect("schema");
        let db = Db::new(&conn);
        let count = |x: i64| -> i64 {
            db.prepare_cached(COUNT)
                .expect("prepare")
                .query_row([x], |row| row.get(0))
                .expect("count")
        };
        assert_eq!(count(1), 2);
        assert_eq!(count(2), 1);
        assert_eq!(db.statements.borrow().len(), 1, "one statement, kept");

        // The same SQL while its statement is out: a second one serves, one is kept after.
        let held = db.prepare_cached(COUNT).expect("prepare");
        assert_eq!(count(1), 2);
        drop(held);
        assert_eq!(db.statements.borrow().len(), 1);
    }
}
