//! The handoff that holds, as the report counts it per week (`crate::handoff`): the handoffs
//! (turns recorded with an escalation reason), the releases by reason and the median hours a
//! person had the conversation (from the release history, `Store::hold_releases`, by release
//! time), and the messages held (`held` agent turns). A hold that runs out is recorded when the
//! contact next writes, dated when it ran out: until then it is not counted.
//!
//! Pure but for [`read`]; its own section of the table and the HTML page ([`figures`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Language;
use crate::handoff::Release;
use crate::store::{HoldRelease, ReportAggregates, Role, Store, StoreError};
use crate::words::{self, Measure};

/// A week's handoff measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HandoffMeasures {
    /// Contacts handed to a person (turns recorded with an escalation reason).
    pub handoffs: i64,
    /// Holds released, by reason (`hold_expired`, `tag_removed`, `released`), each listed.
    pub releases_by_reason: BTreeMap<String, i64>,
    /// The median of the released holds' lengths (handoff to release), in hours; `None`
    /// without a release.
    pub median_hours_with_a_person: Option<f64>,
    /// Contacts' messages the assistant left unanswered because a person had the conversation.
    pub messages_held: i64,
}

impl HandoffMeasures {
    /// The measures of a week's turn aggregates and the releases recorded in it.
    pub fn of(aggregates: &ReportAggregates, releases: &[HoldRelease]) -> Self {
        let mut measures = HandoffMeasures {
            releases_by_reason: Release::ALL
                .iter()
                .map(|r| (r.as_str().to_owned(), 0))
                .collect(),
            ..HandoffMeasures::default()
        };
        for group in &aggregates.turn_groups {
            if group.escalation_reason.is_some() {
                measures.handoffs += group.turns;
            }
            if group.role == Role::Agent
                && group.outcome.as_deref() == Some(crate::handoff::HELD_OUTCOME)
            {
                measures.messages_held += group.turns;
            }
        }
        for release in releases {
            *measures
                .releases_by_reason
                .entry(release.reason.clone())
                .or_default() += 1;
        }
        let hours: Vec<f64> = releases
            .iter()
            .map(|r| (r.released_at - r.held_since).num_milliseconds() as f64 / 3_600_000.0)
            .collect();
        measures.median_hours_with_a_person = median(hours);
        measures
    }
}

/// The week `[from, until)`'s measures: its aggregates and the releases the store recorded in it.
pub async fn read(
    store: &dyn Store,
    aggregates: &ReportAggregates,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<HandoffMeasures, StoreError> {
    let releases = store.hold_releases(from, until).await?;
    Ok(HandoffMeasures::of(aggregates, &releases))
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// The figures this section shows, in the order the page explains them.
pub const WORDS: [Measure; 4] = [
    words::HANDOFFS,
    words::RELEASES,
    words::HOURS_WITH_PERSON,
    words::HELD,
];

/// The section's figures for one week, as printed: each figure (the releases once per
/// reason, named by it) and its value.
pub fn figures(language: Language, m: &HandoffMeasures) -> Vec<(String, String)> {
    let mut out = vec![(
        words::HANDOFFS.name(language).to_owned(),
        m.handoffs.to_string(),
    )];
    for reason in Release::ALL {
        let count = m.releases_by_reason.get(reason.as_str()).copied();
        out.push((
            format!(
                "{}: {}",
                words::RELEASES.name(language),
                words::release(language, reason.as_str())
            ),
            count.unwrap_or(0).to_string(),
        ));
    }
    out.push((
        words::HOURS_WITH_PERSON.name(language).to_owned(),
        words::hours(language, m.median_hours_with_a_person),
    ));
    out.push((
        words::HELD.name(language).to_owned(),
        m.messages_held.to_string(),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TurnGroup;
    use chrono::{Duration, TimeZone};

    fn group(role: Role, outcome: &str, reason: Option<&str>, turns: i64) -> TurnGroup {
        crate::report::turn_group(role, Some(outcome), reason, turns)
    }

    fn release(hours: i64, reason: &str) -> HoldRelease {
        let since = Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, 0).unwrap();
        HoldRelease {
            held_since: since,
            released_at: since + Duration::hours(hours),
            reason: reason.into(),
        }
    }

    #[test]
    fn handoff_report_counts_handoffs_releases_by_reason_the_median_hours_and_held_messages() {
        let aggregates = ReportAggregates {
            turn_groups: vec![
                group(
                    Role::Agent,
                    "escalated_precheck",
                    Some("escalation_keyword"),
                    2,
                ),
                group(Role::Agent, "escalated_model", Some("complaint"), 1),
                // An abort is recorded on the contact's message.
                group(Role::User, "", Some("abort"), 1),
                group(Role::Agent, "held", None, 5),
                group(Role::Agent, "answered_inline", None, 9),
            ],
            ..ReportAggregates::default()
        };
        let releases = [
            release(2, "released"),
            release(24, "hold_expired"),
            release(3, "tag_removed"),
            release(5, "released"),
        ];
        let m = HandoffMeasures::of(&aggregates, &releases);
        assert_eq!(m.handoffs, 4);
        assert_eq!(m.messages_held, 5);
        assert_eq!(
            m.releases_by_reason,
            BTreeMap::from([
                ("hold_expired".to_owned(), 1),
                ("released".to_owned(), 2),
                ("tag_removed".to_owned(), 1),
            ])
        );
        // 2, 3, 5, 24 hours: the median is (3 + 5) / 2.
        assert_eq!(m.median_hours_with_a_person, Some(4.0));
        let odd = HandoffMeasures::of(&aggregates, &releases[..3]);
        assert_eq!(odd.median_hours_with_a_person, Some(3.0));
    }

    #[test]
    fn handoff_report_a_week_without_releases_lists_every_reason_at_zero_and_no_median() {
        let m = HandoffMeasures::of(&ReportAggregates::default(), &[]);
        assert_eq!(m.releases_by_reason.len(), 3);
        assert!(m.releases_by_reason.values().all(|c| *c == 0));
        assert_eq!(m.median_hours_with_a_person, None);
        let printed = figures(Language::En, &m);
        assert_eq!(
            printed[4],
            ("hours with a person".to_owned(), "-".to_owned()),
            "{printed:?}"
        );
        assert_eq!(
            printed[3],
            (
                "handed back: someone released the contact".to_owned(),
                "0".to_owned()
            )
        );
    }
}
