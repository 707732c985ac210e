//! What `manychat-agent report` reads from the store (issue 18): one period's aggregates,
//! grouped by the database so a week of a busy store never leaves it row by row. Aggregates
//! only: no subscriber id, message text or note text is ever selected here.

use chrono::NaiveDate;

use super::Role;

/// A period's aggregates (`Store::report_aggregates`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportAggregates {
    /// Contacts whose first turn (of either role) falls in the period.
    pub new_contacts: i64,
    /// Turns grouped by UTC day, role, outcome, escalation reason and whether the model wrote
    /// them; ordered by day.
    pub turn_groups: Vec<TurnGroup>,
    /// `latency_ms` of `answered_inline` agent turns: each distinct value with its count,
    /// ascending (exact percentiles without reading every row).
    pub inline_latencies: Vec<(i64, i64)>,
    /// Entries of `turns.actions` by tool and status.
    pub actions: Vec<ActionCount>,
}

/// Turns sharing a day, role, outcome, escalation reason and authorship.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnGroup {
    pub day: NaiveDate,
    pub role: Role,
    pub outcome: Option<String>,
    pub escalation_reason: Option<String>,
    /// The turn carries a model id: the model wrote it (an answer or a model's escalation).
    pub model_written: bool,
    pub turns: i64,
    pub reads: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
}

/// How many recorded actions had this tool and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCount {
    pub tool: String,
    pub status: String,
    pub count: i64,
}

/// The tenant's sales ids the report counts by (from `tools.json`); `None` where the tenant has
/// no such field or flow, whose counts are then zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalesKeys {
    /// The intent field's id (034).
    pub intent_field: Option<String>,
    /// The funnel field's id (023).
    pub funnel_field: Option<String>,
    /// The funnel's values at or past `offered`, and at or past `prepared` (list order).
    pub offered_or_later: Vec<String>,
    pub prepared_or_later: Vec<String>,
    /// The payment-link flow's id (`role: "payment_link"`).
    pub payment_flow: Option<String>,
}

/// A period's sales counts (`Store::sales_aggregates`), from `performed` entries of
/// `turns.actions` and from `nudge_sent` turns. Counts only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SalesCounts {
    /// Contacts with a performed `prospect` intent write in the period (034's definition;
    /// `prospect` is final, so a contact normally has one).
    pub prospects: i64,
    /// Contacts with a performed funnel write at or past `offered` in the period.
    pub offered: i64,
    /// Contacts with a performed funnel write at or past `prepared` in the period.
    pub prepared: i64,
    /// Contacts whose payment-link flow was performed in the period.
    pub link_contacts: i64,
    /// Payment-link flows performed in the period, and those recorded `contactAsked` (the
    /// model's claim opened the payment gate before `prepared`, 032).
    pub links_sent: i64,
    pub links_contact_asked: i64,
    /// `nudge_sent` turns in the period, and those the contact answered within 24 h.
    pub nudges_sent: i64,
    pub nudges_replied: i64,
}

/// SQLite stores days as whole days since the Unix epoch.
pub(super) fn day_of_epoch_days(days: i64) -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|epoch| epoch.checked_add_signed(chrono::Duration::days(days)))
        .unwrap_or_default()
}

pub(super) fn role_of(raw: &str) -> Role {
    if raw == "user" {
        Role::User
    } else {
        Role::Agent
    }
}
