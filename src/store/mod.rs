//! Everything the service remembers: conversations, turns, the outbox, counters.
//!
//! One `Store` trait, one implementation per backend (`sqlite`, `postgres`), chosen by
//! `DATABASE_URL`. Both pass the same conformance suite (`conformance`). Time is always passed in
//! by the caller (from `crate::clock::Clock`), never read here, so tests control it; the one
//! exception is Postgres's shared ManyChat bucket (`take_manychat_slot`), timed by the
//! database's clock so replicas whose clocks disagree still share one rate.
//!
//! Invariants: turns are deleted only with their contact (`forget_contact`, an erasure), and
//! their text is emptied after the retention period (`clear_turn_text_before`); note text is
//! never stored (024); an outbox row moves
//! `pending → delivering → delivered | failed` and is claimed by one worker at a time (a lease).
//! Both backends keep timestamps to the millisecond (what SQLite stores), and no error they
//! return quotes a stored or bound value (C5).
//!
//! # Layout: one module per concern, the same names everywhere
//!
//! `Store` is the union of one trait per concern, so `Arc<dyn Store>` (and a generic
//! `S: Store`) reaches every method without importing the concern's trait:
//!
//! | concern | trait (and its shared types) | what it holds |
//! | --- | --- | --- |
//! | `conversations` | `ConversationStore` | a contact's conversation, escalation, contact tokens |
//! | `turns` | `TurnStore` | turns, the history, a turn's one read and one write |
//! | `outbox` | `OutboxStore` | rows owed to ManyChat: claims, leases, settling, backlog |
//! | `nudges` | `NudgeStore` | the nudge rows (025) and the nudge turn |
//! | `order` | `OrderStore` | one turn per conversation at a time (037) |
//! | `counters` | `CounterStore` | rate windows, the day's budget, flow sends, ManyChat bucket |
//! | `sales` | `SalesStore` | the sales record (offering, action records), the opening's claim |
//! | `report` | `ReportStore` | the report's aggregates |
//! | `erasure` | `ErasureStore` | forgetting a contact, retention |
//! | `learning` | `LearningStore` | analyst runs, proposals, playbook versions, eval records |
//! | `browse` | `BrowseStore` | the owner's console: recent conversations, a conversation's turns, held contacts, paged |
//! | `embeddings` | `EmbeddingStore` | the knowledge's vectors, one per embedding model and content hash |
//!
//! Each concern has a file here (`src/store/<concern>.rs`: the trait and the types its callers
//! pass, re-exported from `store`), one per backend (`sqlite/<concern>.rs`,
//! `postgres/<concern>.rs`: that backend's statements and its `impl`), and one in the
//! conformance suite (`conformance/<concern>.rs`: the cases both backends pass). Each backend's
//! `mod.rs` keeps only the connection (SQLite's database thread, Postgres's pool), the
//! migrations, the column lists and helpers several concerns share, and `impl Store`.
//!
//! A new table's statements go in the concern that owns the question it answers, on both
//! backends at once (a migration numbered next on each of `migrations/sqlite` and
//! `migrations/postgres`), with its conformance case beside them. A new concern gets its own
//! trait here, a file of that name on each backend and in the conformance suite, and a place
//! among `Store`'s supertraits. A table with a `conversation_id` or `subscriber_id` column is
//! added to [`CONTACT_TABLES`], or erasure would leave its rows behind.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::ids::{ConversationId, SubscriberId};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(String),
    /// A promise's reply row was taken by the outbox (its fallback) before the turn kept it.
    #[error("the promise lapsed: its fallback was already taken")]
    PromiseLapsed,
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("unsupported DATABASE_URL scheme (expected sqlite:// or postgres://)")]
    UnsupportedUrl,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// `error` met while the service was doing `operation` ("recording the contact's turn"),
    /// labelled where the call is made ([`StoreError::during`]) so the line that logs it says
    /// what failed, beside the backend and the cause.
    #[error("{operation}: {error}")]
    During {
        operation: &'static str,
        error: Box<StoreError>,
    },
}

impl StoreError {
    /// Labels the error with the operation that met it, for the line that logs it. The first
    /// label is kept (it is the most exact); a lapsed promise is a turn's condition that
    /// callers match, not a failure, and is never labelled.
    pub fn during(self, operation: &'static str) -> Self {
        match self {
            StoreError::During { .. } | StoreError::PromiseLapsed => self,
            error => StoreError::During {
                operation,
                error: Box::new(error),
            },
        }
    }

    /// The operation the error was labelled with, if any.
    pub fn operation(&self) -> Option<&'static str> {
        match self {
            StoreError::During { operation, .. } => Some(operation),
            _ => None,
        }
    }

    /// The error without its label: the cause in plain words.
    pub fn cause(&self) -> &StoreError {
        match self {
            StoreError::During { error, .. } => error.cause(),
            error => error,
        }
    }
}

/// Logs a store failure at error level with the same three fields everywhere: `operation` (the
/// label [`StoreError::during`] put on it), `backend` (`sqlite` or `postgres`) and `error` (the
/// cause in plain words), then the call site's own fields and message:
/// `store_failure!(store, error, row = id, "outbox: could not settle the row")`.
#[macro_export]
macro_rules! store_failure {
    ($store:expr, $error:expr, $($rest:tt)+) => {{
        let error: &$crate::store::StoreError = &$error;
        tracing::error!(
            operation = error.operation(),
            backend = $store.backend(),
            error = %error.cause(),
            $($rest)+
        )
    }};
}

/// `.during("…")` on a store call's result: [`StoreError::during`] on its error.
pub trait During<T> {
    fn during(self, operation: &'static str) -> Result<T>;
}

impl<T> During<T> for Result<T> {
    fn during(self, operation: &'static str) -> Result<T> {
        self.map_err(|error| error.during(operation))
    }
}

#[async_trait]
pub trait Store:
    ConversationStore
    + TurnStore
    + OutboxStore
    + NudgeStore
    + OrderStore
    + CounterStore
    + SalesStore
    + ReportStore
    + ErasureStore
    + LearningStore
    + BrowseStore
    + EmbeddingStore
    + Send
    + Sync
    + 'static
{
    /// `sqlite` or `postgres`, for logs and metrics.
    fn backend(&self) -> &'static str;

    /// Answers when the database does (`GET /ready`).
    async fn ping(&self) -> Result<()>;
}

/// Opens the store `DATABASE_URL` names and runs its migrations. `sqlite://path` creates the
/// file on first run and uses WAL (its folder must exist, except the default `data/`, which is
/// created); `postgres://…` connects to a server with a pool of
/// [`postgres::DEFAULT_POOL_SIZE`] connections. An error names the database (never the
/// password) and says what failed.
pub async fn connect(database_url: &str) -> Result<std::sync::Arc<dyn Store>> {
    connect_sized(database_url, postgres::DEFAULT_POOL_SIZE).await
}

/// [`connect`] with `DATABASE_POOL_SIZE` connections for PostgreSQL (SQLite has one writer).
pub async fn connect_sized(
    database_url: &str,
    pool_size: u32,
) -> Result<std::sync::Arc<dyn Store>> {
    let opened: Result<std::sync::Arc<dyn Store>> = if database_url.starts_with("sqlite:") {
        sqlite::SqliteStore::connect(database_url)
            .await
            .map(|store| std::sync::Arc::new(store) as _)
    } else if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        postgres::PgStore::connect_sized(database_url, pool_size)
            .await
            .map(|store| std::sync::Arc::new(store) as _)
    } else {
        return Err(StoreError::UnsupportedUrl);
    };
    opened.map_err(|error| {
        let database = describe_database(database_url);
        match error {
            StoreError::Database(reason) => {
                StoreError::Database(format!("cannot open {database}: {reason}"))
            }
            StoreError::Migration(reason) => StoreError::Migration(format!("{database}: {reason}")),
            other => other,
        }
    })
}

/// Whether `DATABASE_URL` names a backend this build has (`sqlite:`, `postgres://`,
/// `postgresql://`).
pub fn is_supported_url(url: &str) -> bool {
    url.starts_with("sqlite:") || url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// For a SQLite `url` whose folder does not exist (and is not the default `data/`, which is
/// created), that folder: `connect` would refuse it. Lets the start-up checks report it with
/// every other problem.
pub fn missing_sqlite_folder(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    if rest.is_empty() || rest == ":memory:" || rest.contains('?') {
        return None;
    }
    let parent = std::path::Path::new(rest)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())?;
    (parent != std::path::Path::new("data") && !parent.is_dir()).then(|| parent.to_path_buf())
}

/// Which database `url` names, for an error: the SQLite file, or the Postgres database, server
/// and role. Never the password or the options (which may carry one).
pub fn describe_database(url: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let path = rest.split('?').next().unwrap_or_default();
        return format!("the SQLite database {path}");
    }
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let server = match parsed.host_str() {
                Some(host) if !host.is_empty() => {
                    format!("{host}:{}", parsed.port().unwrap_or(5432))
                }
                _ => "the local socket".to_owned(),
            };
            let name = parsed.path().trim_start_matches('/');
            let name = if name.is_empty() { "(default)" } else { name };
            let role = match parsed.username() {
                "" => String::new(),
                user => format!(" as role {user}"),
            };
            format!("the PostgreSQL database {name} on {server}{role}")
        }
        Err(_) => "the PostgreSQL database (DATABASE_URL does not parse as a URL)".to_owned(),
    }
}

/// SQL, the same on both backends: whether a conversation row is a test contact's (the owner's
/// console's try-outs, `SubscriberId::is_test_contact`: 19-digit ids from 9000000000000000000,
/// compared as text, which sorts equal-length digit strings as their numbers). The report's
/// statements leave these conversations out; `conversations_subscriber_id`'s unique index finds
/// them by range.
macro_rules! test_contact {
    () => {
        "(subscriber_id >= '9000000000000000000' AND length(subscriber_id) = 19)"
    };
}

/// SQL: the ids of the test contacts' conversations ([`test_contact`]).
macro_rules! test_conversations {
    () => {
        concat!("SELECT id FROM conversations WHERE ", test_contact!())
    };
}

mod browse;
mod common;
mod conversations;
mod counters;
pub mod embeddings;
mod erasure;
pub mod learning;
mod nudges;
mod order;
mod outbox;
pub mod postgres;
mod report;
mod sales;
mod turns;
pub use browse::{BrowseStore, BrowsedTurn, ConversationsPage, HeldContact, MAX_PAGE, TurnsPage};
pub use conversations::{Conversation, ConversationStore, HoldRelease};
pub use counters::{BudgetCharge, BudgetUsage, CounterStore};
pub use embeddings::EmbeddingStore;
pub use erasure::{CONTACT_TABLES, ErasureStore, Forgotten};
pub use learning::LearningStore;
pub use nudges::{
    CancelReason, NUDGE_SENT, Nudge, NudgeExchange, NudgeStatus, NudgeStore, WINDOW_CLOSING_SENT,
    WindowClosing, WindowClosingClaim, WindowClosingStatus,
};
pub use order::{ConversationLock, OrderStore};
pub use outbox::{
    ClaimRules, NewOutboxRow, OrphanedPromise, OutboxBacklog, OutboxKind, OutboxRow, OutboxStatus,
    OutboxStore,
};
pub use report::{
    ActionCount, ConversationCosts, CostTotals, ReportAggregates, ReportStore, ReportWeek,
    SOLD_STAGE, SalesCounts, SalesKeys, TurnGroup,
};
pub use sales::{ActionRecord, SalesRecord, SalesStore};
pub use turns::{
    Exchange, ExchangeIds, KeepPromise, NewTurn, PromiseRows, Role, Turn, TurnContext,
    TurnContextQuery, TurnJson, TurnStore,
};
pub mod sqlite;

#[doc(hidden)]
pub mod conformance;

/// Fresh UUID for a new conversation.
pub fn new_conversation_id() -> Uuid {
    Uuid::new_v4()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_named_without_its_password() {
        assert_eq!(
            describe_database(
                "postgres://agent:pw-fixture@db.example.test:6543/sales?sslmode=require"
            ),
            "the PostgreSQL database sales on db.example.test:6543 as role agent"
        );
        assert_eq!(
            describe_database("sqlite://data/agent.db"),
            "the SQLite database data/agent.db"
        );
    }

    /// A role the server refuses (SQLSTATE 28000) is said in plain words, naming the database
    /// and the role, never the password.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn a_refused_role_is_named_in_plain_words() {
        let base = std::env::var("TEST_DATABASE_URL")
            .expect("TEST_DATABASE_URL is not set: this test needs PostgreSQL");
        let mut url = reqwest::Url::parse(&base).expect("TEST_DATABASE_URL parses");
        url.set_username("refused_role_probe").expect("a user");
        url.set_password(Some("pw-fixture-hidden"))
            .expect("a password");
        let error = connect(url.as_str())
            .await
            .err()
            .expect("an unknown role is refused");
        let text = error.to_string();
        assert!(text.contains("refused the role"), "{text}");
        assert!(text.contains("28000"), "{text}");
        assert!(text.contains("refused_role_probe"), "{text}");
        assert!(!text.contains("pw-fixture-hidden"), "{text}");
    }

    #[tokio::test]
    async fn system_5_2_database_url_picks_the_backend() {
        assert!(matches!(
            connect("mysql://localhost/agent").await,
            Err(StoreError::UnsupportedUrl)
        ));

        let dir = tempfile::tempdir().expect("a temporary folder");
        let sqlite = connect(&format!("sqlite://{}/agent.db", dir.path().display()))
            .await
            .expect("connect to SQLite");
        assert_eq!(sqlite.backend(), "sqlite");

        // An option only the Postgres driver parses (and refuses) proves the Postgres backend
        // was chosen, without a network round trip.
        for url in [
            "postgres://agent@127.0.0.1/agent?sslmode=bogus",
            "postgresql://agent@127.0.0.1/agent?sslmode=bogus",
        ] {
            assert!(matches!(connect(url).await, Err(StoreError::Database(_))));
        }
    }
}
