//! The report printed as a table (text), JSON or one self-contained HTML page (`html`: inline
//! SVG charts, no script, no outside asset). The table and the page speak the owner's language
//! (`rules.json` `ownerLanguage`, `crate::words`): weeks as dates, waits in seconds or minutes,
//! the AI model's cost in US dollars named as such, every figure in plain words with its
//! one-line meaning under it. The JSON keeps its stable English keys and stored names, for
//! operators and scripts, whatever the language. Every string printed comes from the measures:
//! outcome, reason, tool and status names and numbers; never a subscriber, text or note.

use std::fmt::Write as _;

use super::figures::{answer_figures, empty_line, generated_line, pending, sales_figures, title};
use super::{Report, WeekMeasures};
use crate::config::Language;
use crate::words::{self, Key, Measure};

/// Printed after `--out` when the store holds no turn (an operator's line, English).
pub const NO_TURNS: &str = "no turns yet";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Html,
}

pub fn render(report: &Report, format: Format, language: Language) -> String {
    match format {
        Format::Table => table(report, language),
        Format::Json => json(report),
        Format::Html => super::html::page(report, language),
    }
}

/// The JSON's message for an empty store (stable, English).
fn empty_line_json(report: &Report) -> String {
    format!(
        "{NO_TURNS}: the store holds no turn in the last {} ISO week(s)",
        report.weeks.len()
    )
}

/// Name column of the table, in characters.
const NAME: usize = 50;

/// A figure's row and its meaning on the line under it.
fn figure_row(out: &mut String, language: Language, figure: Measure, value: &str) {
    let _ = writeln!(out, "  {:<NAME$} {value}", figure.name(language));
    let _ = writeln!(out, "      {}", figure.means(language));
}

/// A row without a meaning of its own (a breakdown of the figure above it).
fn plain_row(out: &mut String, name: &str, value: &str) {
    let _ = writeln!(out, "    {:<width$} {value}", name, width = NAME - 2);
}

pub fn table(report: &Report, language: Language) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}\n{}\n",
        title(report, language),
        generated_line(report, language)
    );
    if report.is_empty() {
        let _ = writeln!(out, "{}", empty_line(report, language));
        return out;
    }
    for week in &report.weeks {
        week_table(&mut out, language, week);
    }
    if let Some(playbooks) = &report.playbooks {
        super::playbooks::text_in(&mut out, language, playbooks);
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "{}:", words::text(language, Key::NotMeasuredYet));
    for p in &report.not_measured {
        let (what, why) = pending(language, p.measure, p.why);
        let _ = writeln!(out, "  {what}: {why}");
    }
    out
}

fn section(out: &mut String, language: Language, key: Key) {
    let _ = writeln!(
        out,
        "  -- {} --",
        words::capitalized(words::text(language, key))
    );
}

fn week_table(out: &mut String, language: Language, w: &WeekMeasures) {
    let when = words::week(language, w.starts);
    let _ = writeln!(
        out,
        "== {} ==",
        words::fill(language, Key::WeekOf, &[&when])
    );
    if w.recorded_turns == 0 {
        let _ = writeln!(out, "  {}\n", words::text(language, Key::NoTurnsThisWeek));
        return;
    }
    section(out, language, Key::SectionWeeks);
    for (figure, value) in answer_figures(language, w) {
        figure_row(out, language, figure, &value);
    }
    section(out, language, Key::SectionSales);
    for (figure, value) in sales_figures(language, w) {
        figure_row(out, language, figure, &value);
    }
    section(out, language, Key::SectionCost);
    for (figure, value) in super::costs::figures(language, &w.cost) {
        figure_row(out, language, figure, &value);
    }
    section(out, language, Key::SectionHandoffs);
    let handoffs = super::handoffs::figures(language, &w.handoffs);
    for (i, (name, value)) in handoffs.iter().enumerate() {
        match i {
            0 => figure_row(out, language, words::HANDOFFS, value),
            i if i == handoffs.len() - 2 => {
                figure_row(out, language, words::HOURS_WITH_PERSON, value)
            }
            i if i == handoffs.len() - 1 => figure_row(out, language, words::HELD, value),
            _ => plain_row(out, name, value),
        }
    }
    let none = words::text(language, Key::None_);
    section(out, language, Key::HowMessagesEnded);
    for (outcome, count) in &w.turns_by_outcome {
        plain_row(out, &words::outcome(language, outcome), &count.to_string());
    }
    section(out, language, Key::WhyHandedOver);
    if w.escalations_by_reason.is_empty() {
        let _ = writeln!(out, "    {none}");
    }
    for (reason, count) in &w.escalations_by_reason {
        plain_row(out, &words::reason(language, reason), &count.to_string());
    }
    section(out, language, Key::WhatItDid);
    if w.actions.is_empty() {
        let _ = writeln!(out, "    {none}");
    }
    for a in &w.actions {
        let name = format!(
            "{}: {}",
            words::tool(language, &a.tool),
            words::status(language, &a.status)
        );
        plain_row(out, &name, &a.count.to_string());
    }
    section(out, language, Key::SectionPerDay);
    for d in &w.days {
        let _ = writeln!(
            out,
            "    {}",
            words::fill(
                language,
                Key::PerDayLine,
                &[
                    &words::date(language, d.day),
                    &d.model_written_turns.to_string(),
                    &words::usd(language, Some(d.cost_usd)),
                ]
            )
        );
    }
    let _ = writeln!(out);
}

pub fn json(report: &Report) -> String {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    if report.is_empty() {
        value["message"] = serde_json::Value::String(empty_line_json(report));
    }
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}
