//! Learning from what sold (031): once a week an analyst model compares conversations that
//! ended in a payment with those that did not and proposes tactics; a person approves them;
//! approved tactics form a versioned playbook the prompt carries once a version passed the
//! eval gate.
//!
//! - [`cohort`]: which contacts a run compares, and their labels (the converted tag, read
//!   through ManyChat at one read a second).
//! - [`transcript`]: a contact's turns cleaned and fenced as untrusted text, and their price.
//! - [`proposals`]: the analyst's answer: its schema, parsing and each proposal's refusals.
//! - [`run`]: one run: the week's claim, the cohort, the worst-case price and trimming, the
//!   analyst call, the run's end; [`schedule`]: the weekly run `serve` and `worker` check hourly.
//! - [`playbook`]: versions (content hash, bounds), the prompt's section, the 60-second refresh.
//! - [`review`]: the review's verbs, with or without a terminal; [`gate`]: activation.
//! - [`measures`]: sales per playbook version (`insights report`, a section of `report`).
//!
//! Invariants: the agent never writes the playbook (no tool reaches this module); nothing here
//! stores or logs transcript text, a subscriber id or a name: runs and proposals hold counts,
//! the analyst's proposals and cited turn ids only; a run's cost is recorded on the run and never
//! charged to the daily budget. Every number below was chosen, not measured.

use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};

pub mod cohort;
pub mod gate;
pub mod measures;
pub mod names;
pub mod playbook;
pub mod proposals;
pub mod review;
pub mod run;
pub mod schedule;
pub mod transcript;

#[cfg(test)]
mod tests;

/// A contact is in the cohort when its funnel reached `offered` within this many days…
pub const COHORT_DAYS: i64 = 90;
/// …and its latest bound turn is at least this old (the outcome had time to settle).
pub const SETTLE_DAYS: i64 = 14;
/// Fewer contacts than this on either side: `insufficient` (or `skipped_budget` after
/// trimming), no model call.
pub const MIN_PER_SIDE: usize = 20;
/// At most this many contacts per side are sent, the most recent first.
pub const MAX_PER_SIDE: usize = 50;
/// The contact reads that label the cohort are paced at one a second.
pub const READ_PACE: Duration = Duration::from_secs(1);
/// The analyst sees this many of the most recent rejected proposals.
pub const REJECTED_SHOWN: i64 = 20;
/// The analyst's output limit, in tokens (also the worst case's output).
pub const ANALYST_OUTPUT_TOKENS: u32 = 4000;

/// The ISO week `at` falls in, as the weekly claim keys it: `2026-W49`.
pub fn iso_week(at: DateTime<Utc>) -> String {
    let week = at.iso_week();
    format!("{}-W{:02}", week.year(), week.week())
}

#[cfg(test)]
mod week_tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn spec_031_the_claim_is_keyed_on_the_iso_week() {
        let at = |y, m, d| Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap();
        assert_eq!(iso_week(at(2026, 12, 2)), "2026-W49");
        // 1 January 2027 is a Friday: ISO week 53 of 2026.
        assert_eq!(iso_week(at(2027, 1, 1)), "2026-W53");
        assert_eq!(iso_week(at(2027, 1, 4)), "2027-W01");
    }
}
