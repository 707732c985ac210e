//! The report as one self-contained HTML page in the owner's language: the week at a glance
//! (each figure with its meaning under it), the charts (`charts`), the figures week by week in
//! tables whose every column carries its one-line meaning, the details of each week, the
//! playbook versions, and what is not measured yet. No script, no outside asset.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::figures::{answer_figures, empty_line, generated_line, pending, sales_figures, title};
use super::{Report, WeekMeasures, charts};
use crate::config::Language;
use crate::words::{self, Key, Measure};

/// Escapes text for HTML (every name printed is ours, but a page never trusts its input).
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1040px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin:8px 0}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:4px 8px;\
text-align:right;font-size:13px;vertical-align:top}th{background:#f3f3f3}\
th small{display:block;font-weight:normal;color:#555;max-width:220px;text-align:left}\
td:first-child,th:first-child{text-align:left}td:first-child{white-space:nowrap}.flag{color:#b00;font-weight:bold}\
.muted{color:#666}.cards{display:flex;flex-wrap:wrap;gap:12px}\
.card{border:1px solid #ccc;padding:10px;width:220px}.card b{display:block;font-size:24px}\
.card span{display:block;font-size:13px;color:#555}figure{margin:16px 0}\
figcaption{font-size:13px;color:#444;max-width:680px}svg{border:1px solid #ddd}";

/// One column of a week-by-week table: its name, its meaning (`None`: a breakdown of the
/// column before it) and each week's value.
struct Column {
    name: String,
    means: Option<&'static str>,
    flagged: Vec<bool>,
    values: Vec<String>,
}

fn columns_of(
    language: Language,
    weeks: &[WeekMeasures],
    figures: impl Fn(&WeekMeasures) -> Vec<(Measure, String)>,
) -> Vec<Column> {
    let mut columns: Vec<Column> = Vec::new();
    for week in weeks {
        for (i, (figure, value)) in figures(week).into_iter().enumerate() {
            if columns.len() <= i {
                columns.push(Column {
                    name: figure.name(language).to_owned(),
                    means: Some(figure.means(language)),
                    flagged: Vec::new(),
                    values: Vec::new(),
                });
            }
            columns[i]
                .flagged
                .push(figure == words::LATE && week.deferred_share_flagged);
            columns[i].values.push(value);
        }
    }
    columns
}

fn handoff_columns(language: Language, weeks: &[WeekMeasures]) -> Vec<Column> {
    let mut columns: Vec<Column> = Vec::new();
    for week in weeks {
        let figures = super::handoffs::figures(language, &week.handoffs);
        let last = figures.len() - 1;
        for (i, (name, value)) in figures.into_iter().enumerate() {
            if columns.len() <= i {
                let means = match i {
                    0 => Some(words::HANDOFFS.means(language)),
                    1 => Some(words::RELEASES.means(language)),
                    i if i == last - 1 => Some(words::HOURS_WITH_PERSON.means(language)),
                    i if i == last => Some(words::HELD.means(language)),
                    _ => None,
                };
                columns.push(Column {
                    name,
                    means,
                    flagged: Vec::new(),
                    values: Vec::new(),
                });
            }
            columns[i].flagged.push(false);
            columns[i].values.push(value);
        }
    }
    columns
}

/// A table: a row per week, a column per figure, each column's meaning under its name.
fn week_table(
    out: &mut String,
    language: Language,
    heading: Key,
    weeks: &[WeekMeasures],
    columns: &[Column],
) {
    let _ = write!(
        out,
        "<h2>{}</h2><table><tr><th>{}</th>",
        esc(words::text(language, heading)),
        esc(words::text(language, Key::Week))
    );
    for c in columns {
        let _ = write!(out, "<th>{}", esc(&c.name));
        if let Some(means) = c.means {
            let _ = write!(out, "<small>{}</small>", esc(means));
        }
        out.push_str("</th>");
    }
    out.push_str("</tr>");
    for (i, week) in weeks.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td>{}</td>",
            esc(&words::week(language, week.starts))
        );
        for c in columns {
            let class = if c.flagged[i] { " class=\"flag\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(&c.values[i]));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// The week the page opens with: the last week holding a turn, else the last week.
fn glance_week(report: &Report) -> Option<&WeekMeasures> {
    report
        .weeks
        .iter()
        .rev()
        .find(|w| w.recorded_turns > 0)
        .or(report.weeks.last())
}

/// The figures an owner reads first, each with its meaning under it.
fn glance(out: &mut String, language: Language, w: &WeekMeasures) {
    let figures = [
        (words::CONVERSATIONS, w.cost.conversations.to_string()),
        (words::CONTACTS, w.contacts_with_first_turn.to_string()),
        (words::SALES, super::figures::count(w.cost.sales)),
        (words::ANSWERS, w.model_written_turns.to_string()),
        (
            words::WAIT_TYPICAL,
            words::duration_ms(language, w.inline_answer_ms_p50),
        ),
        (words::HANDOFFS, w.handoffs.handoffs.to_string()),
        (words::COST, words::usd(language, Some(w.cost_usd))),
        (
            words::COST_PER_CONVERSATION,
            words::usd(language, w.cost.cost_per_conversation_usd),
        ),
    ];
    let when = words::week(language, w.starts);
    let _ = write!(
        out,
        "<h2>{}</h2><div class=\"cards\">",
        esc(&words::fill(language, Key::AtAGlance, &[&when]))
    );
    for (figure, value) in figures {
        let _ = write!(
            out,
            "<div class=\"card\">{}<b>{}</b><span>{}</span></div>",
            esc(figure.name(language)),
            esc(&value),
            esc(figure.means(language))
        );
    }
    out.push_str("</div>");
}

/// A row per name of `counts`: the name in words, and its count.
fn count_rows(
    out: &mut String,
    language: Language,
    counts: &BTreeMap<String, i64>,
    named: fn(Language, &str) -> String,
) {
    for (name, count) in counts {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{count}</td></tr>",
            esc(&named(language, name))
        );
    }
}

/// A week's details: how messages ended, why contacts were handed over, what was done.
fn details(out: &mut String, language: Language, w: &WeekMeasures) {
    let t = |key| esc(words::text(language, key));
    let when = words::week(language, w.starts);
    let _ = write!(
        out,
        "<h2>{}</h2><table><tr><th>{}</th><th>{}</th></tr>",
        esc(&words::fill(language, Key::WeekOf, &[&when])),
        t(Key::HowMessagesEnded),
        t(Key::MessagesColumn)
    );
    count_rows(out, language, &w.turns_by_outcome, words::outcome);
    let _ = write!(
        out,
        "</table><table><tr><th>{}</th><th>{}</th></tr>",
        t(Key::WhyHandedOver),
        t(Key::TimesColumn)
    );
    count_rows(out, language, &w.escalations_by_reason, words::reason);
    let _ = write!(
        out,
        "</table><table><tr><th>{}</th><th>{}</th><th>{}</th></tr>",
        t(Key::WhatItDid),
        t(Key::HowItWent),
        t(Key::TimesColumn)
    );
    for a in &w.actions {
        let class = if matches!(a.status.as_str(), "failed" | "dead_lettered") {
            " class=\"flag\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td{class}>{}</td><td>{}</td></tr>",
            esc(&words::tool(language, &a.tool)),
            esc(&words::status(language, &a.status)),
            a.count
        );
    }
    out.push_str("</table>");
}

pub fn page(report: &Report, language: Language) -> String {
    let mut out = String::new();
    let title = esc(&title(report, language));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"{}\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><style>{STYLE}</style></head><body>",
        language.code(),
    );
    out.push_str(&content(report, language));
    out.push_str("</body></html>\n");
    out
}

/// The page's content, without the document around it or its style (the console embeds it
/// under its own stylesheet): the title, then every section. Classes: `muted`, `cards`,
/// `card`, `flag`; charts are inline `<svg>` with presentation attributes only.
pub fn content(report: &Report, language: Language) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h1>{}</h1><p class=\"muted\">{}</p>",
        esc(&title(report, language)),
        esc(&generated_line(report, language)),
    );
    let empty = report.is_empty();
    if empty {
        let _ = write!(out, "<p>{}</p>", esc(&empty_line(report, language)));
    }
    if let Some(week) = glance_week(report).filter(|_| !empty) {
        glance(&mut out, language, week);
    }
    let _ = write!(
        out,
        "<h2>{}</h2>",
        esc(words::text(language, Key::SectionFunnel))
    );
    if let Some(week) = glance_week(report) {
        out.push_str(&charts::funnel(language, week).html());
    }
    for chart in [
        charts::conversations_and_sales(language, &report.weeks),
        charts::handoffs_by_reason(language, &report.weeks),
        charts::cost_per_conversation(language, &report.weeks),
    ] {
        out.push_str(&chart.html());
    }
    if empty {
        return out;
    }
    let weeks = &report.weeks;
    let answers = columns_of(language, weeks, |w| answer_figures(language, w));
    week_table(&mut out, language, Key::SectionWeeks, weeks, &answers);
    let sales = columns_of(language, weeks, |w| {
        let mut figures = vec![(words::CONTACTS, w.contacts_with_first_turn.to_string())];
        figures.extend(sales_figures(language, w));
        figures
    });
    week_table(&mut out, language, Key::SectionSales, weeks, &sales);
    let cost = columns_of(language, weeks, |w| {
        super::costs::figures(language, &w.cost)
    });
    week_table(&mut out, language, Key::SectionCost, weeks, &cost);
    let handoffs = handoff_columns(language, weeks);
    week_table(&mut out, language, Key::SectionHandoffs, weeks, &handoffs);
    for w in weeks.iter().filter(|w| w.recorded_turns > 0) {
        details(&mut out, language, w);
    }
    if let Some(playbooks) = &report.playbooks {
        out.push_str(&super::playbooks::html(language, playbooks, esc));
    }
    let _ = write!(
        out,
        "<h2>{}</h2><dl>",
        esc(words::text(language, Key::WhatEachMeans))
    );
    for m in words::ALL_MEASURES {
        let _ = write!(
            out,
            "<dt>{}</dt><dd>{}</dd>",
            esc(m.name(language)),
            esc(m.means(language))
        );
    }
    let _ = write!(
        out,
        "</dl><h2>{}</h2><ul>",
        esc(words::text(language, Key::NotMeasuredYet))
    );
    for p in &report.not_measured {
        let (what, why) = pending(language, p.measure, p.why);
        let _ = write!(out, "<li><b>{}</b>: {}</li>", esc(&what), esc(&why));
    }
    out.push_str("</ul>");
    out
}
