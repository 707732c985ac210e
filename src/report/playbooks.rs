//! The sales per playbook version (`crate::learning::measures`) as `insights report` prints it
//! (English, for the operator: [`text`]) and as `report`'s section shows it in the owner's
//! language in the table ([`text_in`]) and on the HTML page ([`html`]); the JSON holds the
//! measures as they are. Each says the reading is before/after, not a controlled experiment.

use std::fmt::Write as _;

use crate::config::Language;
use crate::learning::measures::{PlaybookMeasures, VersionMeasures};
use crate::words::{self, Key};

/// The operator's section title (`insights report`).
pub const TITLE: &str = "Link sent per playbook version";

/// A version's name as printed: its hash's first 12 characters, or "no playbook".
pub fn name(language: Language, row: &VersionMeasures) -> String {
    super::figures::version_name(language, row)
}

/// When it first went live (as a date in `language`; `None`: the operator's ISO date), and
/// whether it is live now.
fn live(language: Option<Language>, row: &VersionMeasures) -> String {
    let date = row
        .first_activated_at
        .map_or("-".to_owned(), |at| match language {
            Some(language) => words::date(language, at.date_naive()),
            None => at.format("%Y-%m-%d").to_string(),
        });
    match row.active {
        true => words::fill(language.unwrap_or_default(), Key::PlaybookActive, &[&date]),
        false => date,
    }
}

fn rate(language: Language, row: &VersionMeasures) -> String {
    match row.link_sent_rate {
        None => "-".to_owned(),
        Some(r) => format!(
            "{} {}",
            words::percent(language, Some(r)),
            words::out_of(row.link_sent, row.conversations)
        ),
    }
}

/// The operator's text block: title, the two sentences, one line per version.
pub fn text(out: &mut String, m: &PlaybookMeasures) {
    let _ = writeln!(out, "{TITLE}:");
    let _ = writeln!(out, "  {}", m.reading);
    let _ = writeln!(out, "  {}", m.counted);
    let _ = writeln!(
        out,
        "  {:<14} {:<20} {:>13} {:>9}  {:<18} {:>8}",
        "version", "first live", "conversations", "link sent", "rate", "settling"
    );
    for row in &m.versions {
        let _ = writeln!(
            out,
            "  {:<14} {:<20} {:>13} {:>9}  {:<18} {:>8}",
            name(Language::En, row),
            live(None, row),
            row.conversations,
            row.link_sent,
            rate(Language::En, row),
            row.settling
        );
    }
}

/// The owner's text block in `language`: the title, what the rows count, one line per version.
pub fn text_in(out: &mut String, language: Language, m: &PlaybookMeasures) {
    let w = |key| words::text(language, key);
    let _ = writeln!(out, "{}:", w(Key::PlaybookTitle));
    let _ = writeln!(out, "  {}", w(Key::PlaybookReading));
    let _ = writeln!(out, "  {}", w(Key::PlaybookCounted));
    for row in &m.versions {
        let _ = writeln!(
            out,
            "  {} · {}: {} {}, {} {}, {} {}",
            name(language, row),
            live(Some(language), row),
            row.conversations,
            words::CONVERSATIONS.name(language),
            w(Key::PlaybookGotLink),
            rate(language, row),
            w(Key::PlaybookSettling),
            row.settling
        );
    }
}

/// The HTML page's section.
pub fn html(language: Language, m: &PlaybookMeasures, esc: fn(&str) -> String) -> String {
    let w = |key| esc(words::text(language, key));
    let mut out = format!(
        "<h2>{}</h2><p><b>{}</b></p><p>{}</p>{}<table><tr><th>{}</th><th>{}</th><th>{}</th>\
         <th>{}</th><th>{}</th><th>{}</th></tr>",
        w(Key::PlaybookTitle),
        w(Key::PlaybookReading),
        w(Key::PlaybookCounted),
        super::charts::playbooks(language, m).html(),
        w(Key::PlaybookVersion),
        w(Key::PlaybookFirstLive),
        esc(words::CONVERSATIONS.name(language)),
        w(Key::PlaybookGotLink),
        w(Key::PlaybookShare),
        w(Key::PlaybookSettling),
    );
    for row in &m.versions {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name(language, row)),
            esc(&live(Some(language), row)),
            row.conversations,
            row.link_sent,
            esc(&rate(language, row)),
            row.settling
        );
    }
    out.push_str("</table>");
    out
}
