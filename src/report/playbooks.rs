//! The sales per playbook version (`crate::learning::measures`) as `insights report` prints it
//! and as `report`'s section shows it in the table and on the HTML page (the JSON holds the
//! measures as they are; the page says what they count in a business owner's words). Each
//! says the reading is before/after, not a controlled experiment.

use std::fmt::Write as _;

use crate::learning::gate::short;
use crate::learning::measures::{PlaybookMeasures, VersionMeasures};

/// The section's title.
pub const TITLE: &str = "Link sent per playbook version";

/// The page's words for a business owner: what the rows count, without stored names.
const PAGE_COUNTED: &str = "Each conversation counts under the playbook (the tactics you \
     approved) the assistant used when it first showed the contact an offer, once two weeks \
     have passed since the conversation's last message; until then it is still settling. \
     \"Got the link\" means the assistant sent your payment link: payments themselves are \
     confirmed in ManyChat and not counted here.";

/// A version's name as printed: its hash's first 12 characters, or "no playbook".
pub fn name(row: &VersionMeasures) -> String {
    row.version
        .as_deref()
        .map_or("no playbook".to_owned(), |v| short(v).to_owned())
}

/// When it first went live, and whether it is live now.
fn live(row: &VersionMeasures) -> String {
    let date = row
        .first_activated_at
        .map_or("-".to_owned(), |at| at.format("%Y-%m-%d").to_string());
    match row.active {
        true => format!("{date} (active)"),
        false => date,
    }
}

fn rate(row: &VersionMeasures) -> String {
    row.link_sent_rate.map_or("-".to_owned(), |r| {
        format!(
            "{:.1} % ({}/{})",
            r * 100.0,
            row.link_sent,
            row.conversations
        )
    })
}

/// The text block: title, the two sentences, one line per version.
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
            name(row),
            live(row),
            row.conversations,
            row.link_sent,
            rate(row),
            row.settling
        );
    }
}

/// The HTML page's section.
pub fn html(m: &PlaybookMeasures, esc: fn(&str) -> String) -> String {
    let mut out = format!(
        "<h2>{}</h2><p><b>{}</b></p><p>{}</p><table><tr><th>version</th><th>first live</th>\
         <th>conversations</th><th>got the link</th><th>share</th><th>still settling</th></tr>",
        esc(TITLE),
        esc(m.reading),
        esc(PAGE_COUNTED)
    );
    for row in &m.versions {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name(row)),
            esc(&live(row)),
            row.conversations,
            row.link_sent,
            esc(&rate(row)),
            row.settling
        );
    }
    out.push_str("</table>");
    out
}
