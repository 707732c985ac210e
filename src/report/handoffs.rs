//! The handoff that holds, as the report counts it per week (`crate::handoff`): the handoffs
//! (turns recorded with an escalation reason), the releases by reason and the median hours a
//! person had the conversation (from the release history, `Store::hold_releases`, by release
//! time), and the messages held (`held` agent turns). A hold that runs out is recorded when the
//! contact next writes, dated when it ran out: until then it is not counted.
//!
//! Pure but for [`read`]; its own section of the table and the HTML page.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::words::Measure;
use crate::handoff::Release;
use crate::store::{HoldRelease, ReportAggregates, Role, Store, StoreError};

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

pub const HANDOFFS: Measure = Measure {
    name: "handed to a person",
    means: "Times the assistant handed a contact to your team (it then stays out of the \
            conversation while a person has it).",
};
pub const RELEASES: Measure = Measure {
    name: "handed back",
    means: "Times a conversation went back to the assistant: the hold ran out, your team removed \
            the handoff tag, or someone released the contact.",
};
pub const HOURS: Measure = Measure {
    name: "hours with a person",
    means: "How long a person typically had a conversation before it went back to the assistant \
            (the median, in hours).",
};
pub const HELD: Measure = Measure {
    name: "messages left to your team",
    means: "Messages the assistant did not answer because a person had the conversation.",
};

/// The measures this section shows, in the order the page explains them.
pub const WORDS: [&Measure; 4] = [&HANDOFFS, &RELEASES, &HOURS, &HELD];

/// Why a conversation went back to the assistant, in plain words.
pub fn release_words(reason: &str) -> String {
    match reason {
        "hold_expired" => "the hold ran out".into(),
        "tag_removed" => "your team removed the handoff tag".into(),
        "released" => "someone released the contact".into(),
        other => other.replace('_', " "),
    }
}

fn hours(value: Option<f64>) -> String {
    value.map_or("-".into(), |h| format!("{h:.1} h"))
}

/// The table's rows for one week.
pub fn table_rows(out: &mut String, m: &HandoffMeasures) {
    let row = |out: &mut String, name: &str, value: String| {
        let _ = writeln!(out, "  {name:<34} {value}");
    };
    let _ = writeln!(out, "  handoffs:");
    row(out, "  handoffs", m.handoffs.to_string());
    for (reason, count) in &m.releases_by_reason {
        row(out, &format!("  released: {reason}"), count.to_string());
    }
    row(
        out,
        "  median hours with a person",
        hours(m.median_hours_with_a_person),
    );
    row(out, "  messages held", m.messages_held.to_string());
}

/// The HTML page's table: one row per week.
pub fn html_table<'a>(
    weeks: impl Iterator<Item = (&'a str, &'a HandoffMeasures)>,
    esc: fn(&str) -> String,
) -> String {
    let mut out = String::from("<h2>When a person took over</h2><table><tr><th>week</th>");
    let _ = write!(out, "<th>{}</th>", esc(HANDOFFS.name));
    for reason in Release::ALL {
        let _ = write!(
            out,
            "<th>{}: {}</th>",
            esc(RELEASES.name),
            esc(&release_words(reason.as_str()))
        );
    }
    let _ = write!(
        out,
        "<th>{}</th><th>{}</th></tr>",
        esc(HOURS.name),
        esc(HELD.name)
    );
    for (week, m) in weeks {
        let _ = write!(out, "<tr><td>{}</td><td>{}</td>", esc(week), m.handoffs);
        for reason in Release::ALL {
            let count = m.releases_by_reason.get(reason.as_str()).copied();
            let _ = write!(out, "<td>{}</td>", count.unwrap_or(0));
        }
        let _ = write!(
            out,
            "<td>{}</td><td>{}</td></tr>",
            hours(m.median_hours_with_a_person),
            m.messages_held
        );
    }
    out.push_str("</table>");
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
        let mut out = String::new();
        table_rows(&mut out, &m);
        assert!(
            out.lines()
                .any(|l| l.trim().starts_with("median hours with a person")
                    && l.trim_end().ends_with(" -")),
            "{out}"
        );
        assert!(out.contains("released: tag_removed"), "{out}");
    }
}
