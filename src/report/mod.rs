//! `manychat-agent report`: the numbers a business and an operator read, per ISO
//! week, from the store on either backend.
//!
//! Three steps, each its own module: the store groups a week's turns (`Store::report_aggregates`,
//! aggregates only), `measures` turns those groups into the week's measures (pure, tested by
//! hand-computed numbers), and `render` prints them as a table, JSON or a self-contained HTML
//! page (`html`) with SVG charts (`charts`); the table and the page speak the owner's language
//! (`crate::words`), the JSON keeps its English keys. No subscriber id, message text or note text is ever selected, so none
//! can reach the output.
//!
//! The sales steps are counted by `Store::sales_aggregates` from performed `turns.actions`
//! entries with the tenant's ids ([`sales_keys`]: the intent field, the funnel field, the
//! payment-link flow, read from the config the command loads) and from `nudge_sent` turns; the
//! command reads each week through `Store::report_week`, both together. A measure the tenant's
//! config cannot give is `None`, with the reason listed. The HTML page charts the week's funnel
//! (new contacts → interested → shown an offer → ready to pay → sent the payment link). What a conversation, a sale and a
//! handoff cost (`costs`) comes from the week's turns summed per conversation
//! (`Store::report_week`'s `ConversationCosts`). The sales per playbook version
//! (`crate::learning::measures`, over all weeks) follow the weeks, `playbooks` printing them.

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use serde::Serialize;

use crate::store::{SalesKeys, Store, StoreError};

pub mod charts;
pub mod costs;
pub mod figures;
pub mod handoffs;
pub mod html;
pub mod measures;
pub mod playbooks;
pub mod render;

pub use measures::{PendingMeasure, SalesMeasures, WeekMeasures};

/// The report's weeks, oldest first, and the measures it cannot compute yet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The build that computed it ([`crate::VERSION`]).
    pub version: &'static str,
    /// The tenant's `businessName` (`None`: its config did not load).
    pub business: Option<String>,
    pub generated_at: DateTime<Utc>,
    pub weeks: Vec<WeekMeasures>,
    /// The sales per playbook version (031), over the store's whole history; `None` when the
    /// tenant has no funnel field or payment-link flow (listed in `not_measured`).
    pub playbooks: Option<crate::learning::measures::PlaybookMeasures>,
    /// Documented measures whose data is not recorded yet, with why.
    pub not_measured: Vec<PendingMeasure>,
}

impl Report {
    /// No turn was recorded in any of the report's weeks.
    pub fn is_empty(&self) -> bool {
        self.weeks.iter().all(|w| w.recorded_turns == 0)
    }
}

/// The ISO week `[monday, next monday)` (UTC) `weeks_back` weeks before the one holding `now`.
pub fn iso_week(now: DateTime<Utc>, weeks_back: u32) -> (NaiveDate, NaiveDate) {
    let today = now.date_naive();
    let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
    let from = monday - Duration::weeks(i64::from(weeks_back));
    (from, from + Duration::weeks(1))
}

/// Reads the last `weeks` ISO weeks (the current one included) and computes their measures.
/// `sales`: the tenant's sales ids (`None`: its config did not load; the sales measures are
/// listed as not measured).
pub async fn build(
    store: &dyn Store,
    weeks: u32,
    now: DateTime<Utc>,
    sales: Option<&SalesKeys>,
) -> Result<Report, StoreError> {
    let keys = sales.cloned().unwrap_or_default();
    let mut out = Vec::new();
    for back in (0..weeks).rev() {
        let (from, until) = iso_week(now, back);
        let (from, until) = (midnight(from), midnight(until));
        let read = store.report_week(from, until, &keys).await?;
        let mut week = WeekMeasures::of(from.date_naive(), &read.aggregates, &read.sales, &keys);
        week.handoffs = handoffs::read(store, &read.aggregates, from, until).await?;
        week.cost = costs::CostMeasures::of(&read.costs, &keys);
        out.push(week);
    }
    let playbooks = match sales.and_then(crate::learning::measures::Keys::of) {
        Some(keys) => Some(crate::learning::measures::read(store, &keys, now).await?),
        None => None,
    };
    Ok(Report {
        version: crate::VERSION,
        business: None,
        generated_at: now,
        weeks: out,
        playbooks,
        not_measured: measures::pending(sales),
    })
}

fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}

/// For the measures' tests: `turns` turns of one group on 2026-11-30, written by no model and
/// with no usage.
#[cfg(test)]
pub(crate) fn turn_group(
    role: crate::store::Role,
    outcome: Option<&str>,
    reason: Option<&str>,
    turns: i64,
) -> crate::store::TurnGroup {
    crate::store::TurnGroup {
        day: chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
        role,
        outcome: outcome.map(str::to_owned),
        escalation_reason: reason.map(str::to_owned),
        model_written: false,
        turns,
        reads: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
    }
}

#[cfg(test)]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weeks_are_iso_weeks_starting_monday_utc() {
        // Tuesday 2026-12-01: its ISO week (2026-W49) starts Monday 2026-11-30.
        let now = DateTime::parse_from_rfc3339("2026-12-01T15:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        assert_eq!(iso_week(now, 0), (day("2026-11-30"), day("2026-12-07")));
        assert_eq!(iso_week(now, 3), (day("2026-11-09"), day("2026-11-16")));
    }
}
