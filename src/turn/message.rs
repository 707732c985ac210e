//! The contact's message as a turn carries it to its one write (`record`), and the promise
//! written for it when the turn answers before its reply exists.

use chrono::{DateTime, Utc};

use crate::store::{NewTurn, PromiseRows};

/// The contact's message, recorded together with the turn's outcome (one write, so a turn is
/// stored whole or not at all), or earlier by a promise.
#[derive(Debug, Clone)]
pub(super) struct Message {
    pub turn: NewTurn,
    /// The hourly window it counts against; `None` when a keyword or the cap stopped it first.
    pub rate_window: Option<DateTime<Utc>>,
    /// Set once a promise recorded the message.
    pub promise: Option<Promise>,
}

impl Message {
    pub fn new(turn: NewTurn) -> Self {
        Self {
            turn,
            rate_window: None,
            promise: None,
        }
    }
}

/// A promise written for this turn (see the module doc).
#[derive(Debug, Clone, Copy)]
pub(super) struct Promise {
    pub message_id: i64,
    pub rows: PromiseRows,
    /// Whether the promise counted the message against its hourly window already.
    pub counted: bool,
    /// 030: the response was silent while a flow played, instead of the holding line; a turn
    /// that then fails owes the contact that line before the escalation copy.
    pub holding_line_withheld: bool,
}
