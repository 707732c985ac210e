//! What both backends share: turning sqlx (Postgres) errors into `StoreError` without data,
//! reading the stored enum names back, and the time arithmetic of claims. (SQLite's driver
//! errors are described in `sqlite.rs`.)
//!
//! Invariant (C5): no text built here contains a bound value or a stored value: Postgres errors
//! are reduced to their cause in plain words, their SQLSTATE, constraint and table.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::{OutboxKind, OutboxStatus, Role, StoreError};
use crate::ids::SubscriberId;

/// `last_error` is an operator's hint, not a log: it is bounded so a runaway upstream body
/// cannot grow a row without limit.
pub(super) const MAX_ERROR_CHARS: usize = 1000;

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        StoreError::Database(describe(&err))
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        use sqlx::migrate::MigrateError;
        let text = match &err {
            MigrateError::Execute(inner) | MigrateError::ExecuteMigration(inner, _) => {
                describe(inner)
            }
            // The remaining variants name versions and checksums only.
            other => other.to_string(),
        };
        StoreError::Migration(text)
    }
}

/// A description of a driver error that carries no bound or stored value.
pub(super) fn describe(err: &sqlx::Error) -> String {
    use sqlx::error::ErrorKind;
    match err {
        sqlx::Error::Database(db) => {
            let code = db.code();
            let kind = match db.kind() {
                ErrorKind::UniqueViolation => "unique violation",
                ErrorKind::ForeignKeyViolation => "foreign key violation",
                ErrorKind::NotNullViolation => "not-null violation",
                ErrorKind::CheckViolation => "check violation",
                _ => code
                    .as_deref()
                    .and_then(postgres_cause)
                    .unwrap_or("PostgreSQL refused the statement"),
            };
            let mut text = kind.to_owned();
            if let Some(code) = code {
                text.push_str(&format!(" (SQLSTATE {code})"));
            }
            if let Some(constraint) = db.constraint() {
                text.push_str(&format!(" on constraint {constraint}"));
            }
            if let Some(table) = db.table() {
                text.push_str(&format!(" on table {table}"));
            }
            text
        }
        sqlx::Error::Io(io) => format!(
            "the connection to the PostgreSQL server failed ({})",
            io.kind()
        ),
        sqlx::Error::PoolTimedOut => {
            "timed out waiting for a PostgreSQL connection (the server is down, or every \
             connection is busy)"
                .to_owned()
        }
        sqlx::Error::PoolClosed => "the connection pool is closed".to_owned(),
        sqlx::Error::RowNotFound => "row not found".to_owned(),
        sqlx::Error::ColumnNotFound(column) => format!("column not found: {column}"),
        sqlx::Error::ColumnDecode { index, .. } => format!("cannot decode column {index}"),
        sqlx::Error::Decode(_) => "cannot decode a value".to_owned(),
        sqlx::Error::Encode(_) => "cannot encode a value".to_owned(),
        sqlx::Error::Configuration(_) => "invalid database configuration".to_owned(),
        sqlx::Error::Tls(_) => "tls error".to_owned(),
        sqlx::Error::Protocol(_) => "protocol error".to_owned(),
        sqlx::Error::WorkerCrashed => "the database worker crashed".to_owned(),
        sqlx::Error::Migrate(_) => "migration error".to_owned(),
        _ => "database driver error".to_owned(),
    }
}

/// What a PostgreSQL error code means, in plain words, for the codes an outage or a
/// misconfigured server produces (the class when the exact code is not listed).
fn postgres_cause(code: &str) -> Option<&'static str> {
    let exact = match code {
        "57P01" => Some("the PostgreSQL server is shutting down (administrator command)"),
        "57P02" => Some("the PostgreSQL server crashed and is restarting"),
        "57P03" => Some(
            "the PostgreSQL server is starting up or shutting down: it accepts no connections yet",
        ),
        "57014" => Some("the statement was cancelled (a statement timeout or an operator)"),
        "55000" => Some(
            "the PostgreSQL server is not in a state to run the statement (recovery, or a standby)",
        ),
        "55006" => Some("the object is in use by another session"),
        "55P03" => Some("a lock could not be taken in time"),
        "25006" => Some("the database is read-only here (a standby or a read-only transaction)"),
        "53300" => Some("the PostgreSQL server has too many connections (max_connections)"),
        "53100" => Some("the PostgreSQL server's disk is full"),
        "53200" => Some("the PostgreSQL server is out of memory"),
        "28P01" | "28000" => Some("PostgreSQL refused the role's credentials"),
        "3D000" => Some("the database does not exist"),
        "42501" => Some("the role lacks a privilege the statement needs"),
        "42P01" => Some("a table is missing (were the migrations applied?)"),
        "40001" => Some("a concurrent write conflicted (serialization failure)"),
        "40P01" => Some("a deadlock with another session"),
        _ => None,
    };
    exact.or(match code.get(..2) {
        Some("08") => Some("the connection to the PostgreSQL server failed"),
        Some("53") => Some("the PostgreSQL server ran out of a resource"),
        Some("57") => Some("an operator or the server stopped the statement"),
        Some("58") => Some("the PostgreSQL server had a system error (its disk or files)"),
        Some("XX") => Some("the PostgreSQL server hit an internal error"),
        _ => None,
    })
}

/// The error for an update that matched no row: a caller holding an id the store never issued.
pub(super) fn not_found(what: &'static str) -> StoreError {
    StoreError::Database(format!("no {what} with this id"))
}

pub(super) fn role(raw: &str) -> Result<Role, StoreError> {
    match raw {
        "user" => Ok(Role::User),
        "agent" => Ok(Role::Agent),
        _ => Err(StoreError::Corrupt("unknown turn role".to_owned())),
    }
}

pub(super) fn outbox_kind(raw: &str) -> Result<OutboxKind, StoreError> {
    match raw {
        "reply" => Ok(OutboxKind::Reply),
        "contact_token" => Ok(OutboxKind::ContactToken),
        "handoff" => Ok(OutboxKind::Handoff),
        _ => Err(StoreError::Corrupt("unknown outbox kind".to_owned())),
    }
}

pub(super) fn outbox_status(raw: &str) -> Result<OutboxStatus, StoreError> {
    match raw {
        "pending" => Ok(OutboxStatus::Pending),
        "delivering" => Ok(OutboxStatus::Delivering),
        "delivered" => Ok(OutboxStatus::Delivered),
        "failed" => Ok(OutboxStatus::Failed),
        _ => Err(StoreError::Corrupt("unknown outbox status".to_owned())),
    }
}

pub(super) fn subscriber(raw: &str) -> Result<SubscriberId, StoreError> {
    SubscriberId::parse(raw).map_err(|_| StoreError::Corrupt("invalid subscriber id".to_owned()))
}

/// `at + d`, saturating: a lease too long to represent lasts forever rather than failing.
pub(super) fn after(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| at.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `at - d`, saturating.
pub(super) fn before(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| at.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Both backends keep time to the millisecond (SQLite stores unix milliseconds), so a value
/// written to either reads back the same and comparisons agree across backends.
pub(super) fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// `last_error` bounded to [`MAX_ERROR_CHARS`] characters.
pub(super) fn bounded_error(error: &str) -> &str {
    match error.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => &error[..cut],
        None => error,
    }
}

#[cfg(test)]
mod plain_words {
    use super::postgres_cause;

    #[test]
    fn a_postgres_outage_is_described_in_plain_words_by_its_sqlstate() {
        assert_eq!(
            postgres_cause("57P01"),
            Some("the PostgreSQL server is shutting down (administrator command)")
        );
        assert!(postgres_cause("55000").unwrap().contains("not in a state"));
        assert_eq!(
            postgres_cause("08006"),
            Some("the connection to the PostgreSQL server failed"),
            "an unlisted code gets its class"
        );
        assert_eq!(
            postgres_cause("22001"),
            None,
            "data errors keep the generic kind"
        );
    }
}
