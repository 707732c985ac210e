//! The report printed as a table, JSON or one self-contained HTML page (inline SVG charts, no
//! script, no external asset). Every string printed comes from the measures: outcome, reason,
//! tool and status names and numbers; never a subscriber, text or note.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::measures::DEFERRED_SHARE_FLAG;
use super::{Report, WeekMeasures, words};

/// Printed instead of empty tables.
pub const NO_TURNS: &str = "no turns yet";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Html,
}

pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Table => table(report),
        Format::Json => json(report),
        Format::Html => html(report),
    }
}

fn empty_line(report: &Report) -> String {
    format!(
        "{NO_TURNS}: the store holds no turn in the last {} ISO week(s)",
        report.weeks.len()
    )
}

fn pct(share: Option<f64>) -> String {
    share.map_or("-".into(), |s| format!("{:.1} %", s * 100.0))
}

fn num(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

fn ms(value: Option<i64>) -> String {
    value.map_or("-".into(), |v| format!("{v} ms"))
}

/// The report's title: the business it is about.
fn title(report: &Report) -> String {
    match &report.business {
        Some(name) => format!("{name}: how the sales assistant did"),
        None => "How the sales assistant did".to_owned(),
    }
}

/// When, over how long, and by which build.
fn generated_line(report: &Report) -> String {
    format!(
        "generated {} · the last {} week(s), Monday to Sunday (UTC) · manychat-agent {}",
        report.generated_at.format("%Y-%m-%d %H:%M UTC"),
        report.weeks.len(),
        report.version
    )
}

pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n{}\n", title(report), generated_line(report));
    if report.is_empty() {
        let _ = writeln!(out, "{}", empty_line(report));
        return out;
    }
    for week in &report.weeks {
        week_table(&mut out, week);
    }
    if let Some(playbooks) = &report.playbooks {
        super::playbooks::text(&mut out, playbooks);
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "not measured yet:");
    for pending in &report.not_measured {
        let _ = writeln!(out, "  {:<42} {}", pending.measure, pending.why);
    }
    out
}

fn week_table(out: &mut String, w: &WeekMeasures) {
    let _ = writeln!(out, "== {} (from {}) ==", w.week, w.starts);
    if w.recorded_turns == 0 {
        let _ = writeln!(out, "  {NO_TURNS} this week\n");
        return;
    }
    let row = |out: &mut String, name: &str, value: String| {
        let _ = writeln!(out, "  {name:<34} {value}");
    };
    row(
        out,
        "contacts with a first turn",
        w.contacts_with_first_turn.to_string(),
    );
    row(
        out,
        "model-written turns",
        w.model_written_turns.to_string(),
    );
    let flag = if w.deferred_share_flagged {
        format!("  ABOVE {:.0} %", DEFERRED_SHARE_FLAG * 100.0)
    } else {
        String::new()
    };
    row(
        out,
        "deferred share",
        format!("{}{flag}", pct(w.deferred_share)),
    );
    row(out, "turns that merged pieces", pct(w.merged_share));
    row(out, "inline answer time p50", ms(w.inline_answer_ms_p50));
    row(out, "inline answer time p95", ms(w.inline_answer_ms_p95));
    row(out, "reads per turn", num(w.reads_per_turn, 2));
    row(out, "tokens per turn", num(w.tokens_per_turn, 0));
    row(out, "cost per turn (USD)", num(w.cost_usd_per_turn, 4));
    row(out, "cost (USD)", format!("{:.4}", w.cost_usd));
    super::costs::table_rows(out, &w.cost);
    sales_rows(out, w);
    super::handoffs::table_rows(out, &w.handoffs);
    let _ = writeln!(out, "  turns by outcome:");
    for (outcome, count) in &w.turns_by_outcome {
        let _ = writeln!(out, "    {outcome:<32} {count}");
    }
    let _ = writeln!(out, "  escalations by reason:");
    if w.escalations_by_reason.is_empty() {
        let _ = writeln!(out, "    (none)");
    }
    for (reason, count) in &w.escalations_by_reason {
        let _ = writeln!(out, "    {reason:<32} {count}");
    }
    let _ = writeln!(out, "  actions by tool and status:");
    if w.actions.is_empty() {
        let _ = writeln!(out, "    (none)");
    }
    for a in &w.actions {
        let _ = writeln!(out, "    {:<16} {:<15} {}", a.tool, a.status, a.count);
    }
    let _ = writeln!(
        out,
        "  per day:  day         turns   tokens    cost USD  tokens/turn  USD/turn"
    );
    for d in &w.days {
        let _ = writeln!(
            out,
            "            {}  {:>5}  {:>7}  {:>10.4}  {:>11}  {:>8}",
            d.day,
            d.model_written_turns,
            d.input_tokens + d.output_tokens,
            d.cost_usd,
            num(d.tokens_per_turn, 0),
            num(d.cost_usd_per_turn, 4)
        );
    }
    let _ = writeln!(out);
}

/// A count, or `-` when the tenant does not configure what it counts.
fn count(value: Option<i64>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// A rate with its fraction: `40.0 % (4/10)`.
fn rate(share: Option<f64>, part: Option<i64>, whole: Option<i64>) -> String {
    match (share, part, whole) {
        (Some(_), Some(p), Some(w)) => format!("{} ({p}/{w})", pct(share)),
        _ => pct(share),
    }
}

fn sales_rows(out: &mut String, w: &WeekMeasures) {
    let s = &w.sales;
    let contacts = Some(w.contacts_with_first_turn);
    let row = |out: &mut String, name: &str, value: String| {
        let _ = writeln!(out, "  {name:<34} {value}");
    };
    let _ = writeln!(out, "  sales:");
    let funnel = [
        w.contacts_with_first_turn.to_string(),
        count(s.prospects),
        count(s.offered),
        count(s.prepared),
        count(s.link_sent),
    ];
    row(
        out,
        "  funnel",
        format!(
            "{}  (contacts → prospects → offered → prepared → link sent)",
            funnel.join(" → ")
        ),
    );
    row(
        out,
        "  prospect share",
        rate(s.prospect_share, s.prospects, contacts),
    );
    row(
        out,
        "  link-sent rate (all contacts)",
        rate(s.link_sent_rate, s.link_sent, contacts),
    );
    row(
        out,
        "  link-sent rate (prospects)",
        rate(s.prospect_link_sent_rate, s.link_sent, s.prospects),
    );
    row(
        out,
        "  bypass rate (contactAsked links)",
        rate(s.bypass_rate, s.links_contact_asked, s.links_sent),
    );
    row(
        out,
        "  nudge reply rate (24 h)",
        rate(
            s.nudge_reply_rate,
            Some(s.nudges_replied),
            Some(s.nudges_sent),
        ),
    );
    row(
        out,
        "  last-word reply rate (24 h)",
        rate(
            s.window_closing_reply_rate,
            Some(s.window_closings_replied),
            Some(s.window_closings_sent),
        ),
    );
}

pub fn json(report: &Report) -> String {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    if report.is_empty() {
        value["message"] = serde_json::Value::String(empty_line(report));
    }
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

/// Escapes text for HTML (every name printed is ours, but a page never trusts its input).
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1000px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.flag{color:#b00;font-weight:bold}\
.muted{color:#888}svg{background:#fafafa;border:1px solid #ddd}";

pub fn html(report: &Report) -> String {
    let mut out = String::new();
    let title = esc(&title(report));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><style>{STYLE}</style></head><body>\
         <h1>{title}</h1><p class=\"muted\">{}</p>",
        esc(&generated_line(report)),
    );
    if report.is_empty() {
        let _ = writeln!(out, "<p>{}</p></body></html>", esc(&empty_line(report)));
        return out;
    }
    out.push_str("<h2>From first message to payment link, week by week</h2>");
    out.push_str(&funnel_chart(report));
    weekly_chart(
        &mut out,
        report,
        "Answered a moment later (%, flagged above 20 %)",
        &words::LATE,
        |w| w.deferred_share.map(|s| s * 100.0),
        "%",
        Some(DEFERRED_SHARE_FLAG * 100.0),
    );
    weekly_chart(
        &mut out,
        report,
        "Longest usual wait for an answer",
        &words::WAIT_SLOWEST,
        |w| w.inline_answer_ms_p95.map(|v| v as f64),
        "ms",
        None,
    );
    table_head(
        &mut out,
        "Weeks",
        &[
            &words::CONTACTS,
            &words::ANSWERS,
            &words::LATE,
            &words::MERGED,
            &words::WAIT_TYPICAL,
            &words::WAIT_SLOWEST,
            &words::LOOKUPS,
            &words::TOKENS,
            &words::COST_PER,
            &words::COST,
        ],
    );
    for w in &report.weeks {
        let flag = if w.deferred_share_flagged {
            " class=\"flag\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td{flag}>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td></tr>",
            esc(&w.week),
            w.contacts_with_first_turn,
            w.model_written_turns,
            pct(w.deferred_share),
            pct(w.merged_share),
            ms(w.inline_answer_ms_p50),
            ms(w.inline_answer_ms_p95),
            num(w.reads_per_turn, 2),
            num(w.tokens_per_turn, 0),
            num(w.cost_usd_per_turn, 4),
            w.cost_usd
        );
    }
    out.push_str("</table>");
    table_head(
        &mut out,
        "Sales",
        &[
            &words::CONTACTS,
            &words::INTERESTED,
            &words::OFFERED,
            &words::PREPARED,
            &words::LINK_SENT,
            &words::INTERESTED_SHARE,
            &words::LINK_RATE,
            &words::LINK_RATE_INTERESTED,
            &words::LINK_ON_REQUEST,
            &words::FOLLOW_UPS,
            &words::LAST_WORDS,
        ],
    );
    for w in &report.weeks {
        let s = &w.sales;
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.week),
            w.contacts_with_first_turn,
            count(s.prospects),
            count(s.offered),
            count(s.prepared),
            count(s.link_sent),
            pct(s.prospect_share),
            pct(s.link_sent_rate),
            pct(s.prospect_link_sent_rate),
            rate(s.bypass_rate, s.links_contact_asked, s.links_sent),
            rate(
                s.nudge_reply_rate,
                Some(s.nudges_replied),
                Some(s.nudges_sent)
            ),
            rate(
                s.window_closing_reply_rate,
                Some(s.window_closings_replied),
                Some(s.window_closings_sent)
            ),
        );
    }
    out.push_str("</table>");
    out.push_str(&super::costs::html_table(
        report.weeks.iter().map(|w| (w.week.as_str(), &w.cost)),
        esc,
    ));
    out.push_str(&super::handoffs::html_table(
        report.weeks.iter().map(|w| (w.week.as_str(), &w.handoffs)),
        esc,
    ));
    for w in report.weeks.iter().filter(|w| w.recorded_turns > 0) {
        let _ = write!(
            out,
            "<h2>{}</h2><table><tr><th>how messages ended</th><th>messages</th></tr>",
            esc(&w.week)
        );
        count_rows(&mut out, &w.turns_by_outcome, words::outcome);
        out.push_str(
            "</table><table><tr><th>why contacts were handed to a person</th><th>times</th></tr>",
        );
        count_rows(&mut out, &w.escalations_by_reason, words::reason);
        out.push_str(
            "</table><table><tr><th>what the assistant did in ManyChat</th><th>how it went</th>\
             <th>times</th></tr>",
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
                esc(&words::tool(&a.tool)),
                esc(&words::status(&a.status)),
                a.count
            );
        }
        out.push_str("</table>");
    }
    if let Some(playbooks) = &report.playbooks {
        out.push_str(&super::playbooks::html(playbooks, esc));
    }
    out.push_str("<h2>What each measure means</h2><dl>");
    for m in words::ALL
        .iter()
        .chain(super::costs::WORDS.iter())
        .chain(super::handoffs::WORDS.iter())
    {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", esc(m.name), esc(m.means));
    }
    out.push_str("</dl><h2>Not measured yet</h2><ul>");
    for p in &report.not_measured {
        let _ = write!(
            out,
            "<li><b>{}</b>: {}</li>",
            esc(&words::pending(p.measure)),
            esc(p.why)
        );
    }
    out.push_str("</ul></body></html>\n");
    out
}

const CHART_W: f64 = 640.0;
const CHART_H: f64 = 200.0;
const PAD: f64 = 40.0;

fn week_x(report: &Report, i: usize) -> f64 {
    let n = report.weeks.len().max(1) as f64;
    PAD + (CHART_W - 2.0 * PAD) * (i as f64 + 0.5) / n
}

/// The funnel's stages per week, as grouped bars: contacts with a first turn, prospects,
/// offered, prepared, link sent. A stage the tenant does not configure is drawn as a dashed
/// outline ("not configured").
fn funnel_chart(report: &Report) -> String {
    const STAGES: [(&str, &str); 5] = [
        (words::CONTACTS.name, "#3b7dd8"),
        (words::INTERESTED.name, "#5a9be6"),
        (words::OFFERED.name, "#e0a030"),
        (words::PREPARED.name, "#d07a20"),
        (words::LINK_SENT.name, "#3a9a5a"),
    ];
    let stages = |w: &WeekMeasures| -> [Option<i64>; 5] {
        [
            Some(w.contacts_with_first_turn),
            w.sales.prospects,
            w.sales.offered,
            w.sales.prepared,
            w.sales.link_sent,
        ]
    };
    let max = report
        .weeks
        .iter()
        .flat_map(|w| stages(w).into_iter().flatten())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{CHART_W}\" height=\"{}\" role=\"img\" \
         aria-label=\"weekly funnel\">",
        CHART_H + 60.0
    );
    let slot = (CHART_W - 2.0 * PAD) / report.weeks.len().max(1) as f64;
    let bar = (slot / 6.0).min(22.0);
    for (i, w) in report.weeks.iter().enumerate() {
        let x0 = week_x(report, i) - slot / 2.0 + bar / 2.0;
        for (s, value) in stages(w).into_iter().enumerate() {
            let x = x0 + bar * s as f64;
            match value {
                Some(v) => {
                    let h = (CHART_H - PAD) * v as f64 / max;
                    let _ = write!(
                        svg,
                        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" \
                         fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" \
                         text-anchor=\"middle\">{v}</text>",
                        CHART_H - h,
                        bar - 2.0,
                        STAGES[s].1,
                        x + (bar - 2.0) / 2.0,
                        CHART_H - h - 3.0
                    );
                }
                None => {
                    let _ = write!(
                        svg,
                        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"10\" \
                         fill=\"none\" stroke=\"#bbb\" stroke-dasharray=\"2,2\"/>",
                        CHART_H - 10.0,
                        bar - 2.0
                    );
                }
            }
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            week_x(report, i),
            CHART_H + 18.0,
            esc(&w.week)
        );
    }
    let mut x = PAD;
    for (name, colour) in STAGES {
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{name}</text>",
            CHART_H + 36.0,
            x + 16.0,
            CHART_H + 45.0
        );
        x += 24.0 + 7.0 * name.len() as f64;
    }
    let _ = write!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"none\" stroke=\"#bbb\" \
         stroke-dasharray=\"2,2\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"#888\">\
         not configured</text></svg>",
        CHART_H + 36.0,
        x + 16.0,
        CHART_H + 45.0
    );
    svg
}

/// A table's heading and its header row: the week, then each measure's name.
fn table_head(out: &mut String, heading: &str, measures: &[&words::Measure]) {
    let _ = write!(out, "<h2>{heading}</h2><table><tr><th>week</th>");
    for m in measures {
        let _ = write!(out, "<th>{}</th>", esc(m.name));
    }
    out.push_str("</tr>");
}

/// A row per name of `counts`: the name in words, and its count.
fn count_rows(out: &mut String, counts: &BTreeMap<String, i64>, words: fn(&str) -> String) {
    for (name, count) in counts {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{count}</td></tr>",
            esc(&words(name))
        );
    }
}

/// A section: its heading, what `measure` means, and the line chart of `value` by week.
fn weekly_chart(
    out: &mut String,
    report: &Report,
    heading: &str,
    measure: &words::Measure,
    value: impl Fn(&WeekMeasures) -> Option<f64>,
    unit: &str,
    flag: Option<f64>,
) {
    let _ = write!(out, "<h2>{heading}</h2><p>{}</p>", esc(measure.means));
    let values: Vec<Option<f64>> = report.weeks.iter().map(value).collect();
    out.push_str(&line_chart(report, &values, unit, flag));
}

/// A line over the weeks; a week without a value leaves a gap. `threshold` draws a dashed
/// red line (the deferred share's flag).
fn line_chart(
    report: &Report,
    values: &[Option<f64>],
    unit: &str,
    threshold: Option<f64>,
) -> String {
    let max = values
        .iter()
        .flatten()
        .copied()
        .chain(threshold)
        .fold(0.0_f64, f64::max)
        .max(1.0)
        * 1.15;
    let y = |v: f64| CHART_H - (CHART_H - PAD) * v / max;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{CHART_W}\" height=\"{}\" role=\"img\">\
         <line x1=\"{PAD}\" y1=\"{CHART_H}\" x2=\"{}\" y2=\"{CHART_H}\" stroke=\"#999\"/>",
        CHART_H + 30.0,
        CHART_W - PAD
    );
    if let Some(t) = threshold {
        let _ = write!(
            svg,
            "<line x1=\"{PAD}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#c00\" \
             stroke-dasharray=\"6,4\"/><text x=\"{1}\" y=\"{2:.1}\" font-size=\"11\" fill=\"#c00\" \
             text-anchor=\"end\">{t:.0} {unit}</text>",
            y(t),
            CHART_W - PAD,
            y(t) - 4.0
        );
    }
    let mut path = String::new();
    for (i, value) in values.iter().enumerate() {
        let x = week_x(report, i);
        let _ = write!(
            svg,
            "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            CHART_H + 18.0,
            esc(&report.weeks[i].week)
        );
        match value {
            Some(v) => {
                let command = if path.is_empty() || values[i - 1].is_none() {
                    'M'
                } else {
                    'L'
                };
                let _ = write!(path, "{command}{x:.1},{:.1} ", y(*v));
                let _ = write!(
                    svg,
                    "<circle cx=\"{x:.1}\" cy=\"{0:.1}\" r=\"3\" fill=\"#3b7dd8\"/>\
                     <text x=\"{x:.1}\" y=\"{1:.1}\" font-size=\"11\" text-anchor=\"middle\">\
                     {v:.1} {unit}</text>",
                    y(*v),
                    y(*v) - 8.0
                );
            }
            None => {
                let _ = write!(
                    svg,
                    "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#888\" \
                     text-anchor=\"middle\">no data</text>",
                    CHART_H - 6.0
                );
            }
        }
    }
    if !path.is_empty() {
        let _ = write!(
            svg,
            "<path d=\"{}\" fill=\"none\" stroke=\"#3b7dd8\" stroke-width=\"2\"/>",
            path.trim_end()
        );
    }
    svg.push_str("</svg>");
    svg
}
