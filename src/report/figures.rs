//! What the table and the page print, in the owner's language: the title and its line, each
//! figure with its value (a week's answers and sales), a version's name, and why a measure is
//! not measured yet. Pure; `render` (the table) and `html` (the page) both read from here.

use super::Report;
use super::WeekMeasures;
use super::measures::DEFERRED_SHARE_FLAG;
use crate::config::Language;
use crate::learning::measures::VersionMeasures;
use crate::words::{self, Key, Measure};

/// The owner's sentence for an empty store.
pub fn empty_line(report: &Report, language: Language) -> String {
    words::fill(language, Key::NoTurns, &[&report.weeks.len().to_string()])
}

/// The report's title: the business it is about.
pub fn title(report: &Report, language: Language) -> String {
    match &report.business {
        Some(name) => words::fill(language, Key::TitleOf, &[name]),
        None => words::text(language, Key::Title).to_owned(),
    }
}

/// When, over how long, and by which build.
pub fn generated_line(report: &Report, language: Language) -> String {
    let made = format!(
        "{} {}",
        words::date(language, report.generated_at.date_naive()),
        report.generated_at.format("%H:%M UTC")
    );
    words::fill(
        language,
        Key::Generated,
        &[&made, &report.weeks.len().to_string(), report.version],
    )
}

/// A count, or `-` when the tenant does not set up what it counts.
pub fn count(value: Option<i64>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// A share with what it is out of: `40.0 % (4/10)`.
pub fn rate(
    language: Language,
    share: Option<f64>,
    part: Option<i64>,
    whole: Option<i64>,
) -> String {
    match (share, part, whole) {
        (Some(_), Some(p), Some(w)) => {
            format!(
                "{} {}",
                words::percent(language, share),
                words::out_of(p, w)
            )
        }
        _ => words::percent(language, share),
    }
}

/// The deferred share, flagged when above [`DEFERRED_SHARE_FLAG`].
pub fn late(language: Language, w: &WeekMeasures) -> String {
    let share = words::percent(language, w.deferred_share);
    match w.deferred_share_flagged {
        true => format!(
            "{share}  {}",
            words::fill(
                language,
                Key::AboveFlag,
                &[&words::percent(language, Some(DEFERRED_SHARE_FLAG))]
            )
        ),
        false => share,
    }
}

/// How the assistant answered in a week: each figure and its value.
pub fn answer_figures(language: Language, w: &WeekMeasures) -> Vec<(Measure, String)> {
    vec![
        (words::CONTACTS, w.contacts_with_first_turn.to_string()),
        (words::ANSWERS, w.model_written_turns.to_string()),
        (words::LATE, late(language, w)),
        (words::MERGED, words::percent(language, w.merged_share)),
        (
            words::WAIT_TYPICAL,
            words::duration_ms(language, w.inline_answer_ms_p50),
        ),
        (
            words::WAIT_SLOWEST,
            words::duration_ms(language, w.inline_answer_ms_p95),
        ),
        (
            words::LOOKUPS,
            w.reads_per_turn
                .map_or("-".into(), |v| words::decimal(language, v, 2)),
        ),
        (
            words::TOKENS,
            w.tokens_per_turn
                .map_or("-".into(), |v| words::decimal(language, v, 0)),
        ),
        (
            words::COST_PER_ANSWER,
            words::usd(language, w.cost_usd_per_turn),
        ),
        (words::COST, words::usd(language, Some(w.cost_usd))),
    ]
}

/// A week's sales: each figure and its value.
pub fn sales_figures(language: Language, w: &WeekMeasures) -> Vec<(Measure, String)> {
    let s = &w.sales;
    let contacts = Some(w.contacts_with_first_turn);
    vec![
        (words::INTERESTED, count(s.prospects)),
        (
            words::INTERESTED_SHARE,
            rate(language, s.prospect_share, s.prospects, contacts),
        ),
        (words::OFFERED, count(s.offered)),
        (words::PREPARED, count(s.prepared)),
        (words::LINK_SENT, count(s.link_sent)),
        (
            words::LINK_RATE,
            rate(language, s.link_sent_rate, s.link_sent, contacts),
        ),
        (
            words::LINK_RATE_INTERESTED,
            rate(
                language,
                s.prospect_link_sent_rate,
                s.link_sent,
                s.prospects,
            ),
        ),
        (
            words::LINK_ON_REQUEST,
            rate(language, s.bypass_rate, s.links_contact_asked, s.links_sent),
        ),
        (
            words::FOLLOW_UPS,
            rate(
                language,
                s.nudge_reply_rate,
                Some(s.nudges_replied),
                Some(s.nudges_sent),
            ),
        ),
        (
            words::LAST_WORDS,
            rate(
                language,
                s.window_closing_reply_rate,
                Some(s.window_closings_replied),
                Some(s.window_closings_sent),
            ),
        ),
    ]
}

/// A measure not computed yet, by the owner's names, and why.
pub fn pending(language: Language, measure: &str, why: &str) -> (String, String) {
    let names = |ms: &[Measure]| {
        ms.iter()
            .map(|m| m.name(language))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let w = |key| words::text(language, key).to_owned();
    match measure {
        "prospect share, prospect link-sent rate" => (
            names(&[words::INTERESTED_SHARE, words::LINK_RATE_INTERESTED]),
            w(Key::PendingIntentWhy),
        ),
        "funnel stages offered and prepared" => (
            names(&[words::OFFERED, words::PREPARED]),
            w(Key::PendingFunnelWhy),
        ),
        "cost per sale" => (
            names(&[words::COST_PER_SALE, words::SPEND_PER_SALE]),
            w(Key::PendingCostPerSaleWhy),
        ),
        "link-sent rate, bypass rate" => (
            names(&[
                words::LINK_RATE,
                words::LINK_RATE_INTERESTED,
                words::LINK_ON_REQUEST,
            ]),
            w(Key::PendingLinkWhy),
        ),
        "link sent per playbook version" => (w(Key::PlaybookTitle), w(Key::PendingPlaybooksWhy)),
        "model steps per turn" => (w(Key::PendingSteps), w(Key::PendingStepsWhy)),
        "sales measures" => (w(Key::PendingSales), w(Key::PendingSalesWhy)),
        other => (other.replace('_', " "), why.to_owned()),
    }
}

/// A playbook version's name as printed: its hash's first 12 characters, or "no playbook".
pub fn version_name(language: Language, row: &VersionMeasures) -> String {
    row.version.as_deref().map_or_else(
        || words::text(language, Key::PlaybookNone).to_owned(),
        |v| crate::learning::gate::short(v).to_owned(),
    )
}
