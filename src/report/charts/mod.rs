//! The report's pictures, drawn server-side as SVG by `plotters` (its SVG backend only) and
//! embedded in the page: the week's funnel, conversations and sales per week, handoffs by
//! reason, the AI model's cost per conversation over the weeks, and the sales per playbook
//! version (before/after). Each is readable without colour: every bar and point carries its
//! value as text, the two weekly series differ by shape (a filled bar, an outlined one), and a
//! stage the tenant does not set up is drawn dashed and labelled. Each has a title and a text
//! alternative in the owner's language (the SVG's `<title>` and the figure's caption). A chart
//! with nothing to draw says so in a sentence, on the chart and in its text alternative.
//!
//! Each function is pure and public, so the console can embed the same pictures.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::WeekMeasures;
use crate::config::Language;
use crate::learning::measures::PlaybookMeasures;
use crate::words::{self, Key};

/// One chart: its title, its text alternative and the SVG that draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    /// What the chart shows, in a sentence with its numbers: for a reader who cannot see it.
    pub alt: String,
    /// A whole `<svg>` element, with `role="img"`, its `<title>` and no outside asset.
    pub svg: String,
}

impl Chart {
    /// The chart as an HTML figure: the title, the picture, the text alternative under it.
    pub fn html(&self) -> String {
        format!(
            "<figure><h3>{}</h3>{}<figcaption>{}</figcaption></figure>",
            esc(&self.title),
            self.svg,
            esc(&self.alt)
        )
    }
}

/// One bar or point: its label, its value (`None`: not known or not set up) and the value as
/// printed on the chart.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    label: String,
    value: Option<f64>,
    printed: String,
}

const WIDTH: u32 = 680;
const HEIGHT: u32 = 300;
const INK: RGBColor = RGBColor(34, 34, 34);
const BAR: RGBColor = RGBColor(59, 110, 190);
const MUTED: RGBColor = RGBColor(120, 120, 120);
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;
/// A chart's plot with value axes across and up.
type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn font(size: f64) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&INK)
}

fn anchored(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    font(size).pos(Pos::new(h, v))
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws with `paint` on a white canvas and returns the `<svg>` with its role and title.
fn svg(alt: &str, paint: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        // A drawing error leaves the picture incomplete; the caption still says everything.
        let _ = root.fill(&WHITE).and_then(|_| paint(&root));
        let _ = root.present();
    }
    let alt = esc(alt);
    out.replacen(
        "<svg ",
        &format!("<svg role=\"img\" aria-label=\"{alt}\" "),
        1,
    )
    .replacen('>', &format!("><title>{alt}</title>"), 1)
}

/// The empty chart: its frame and `sentence` in the middle.
fn empty(area: &Area<'_>, sentence: &str) -> Drawn {
    area.draw(&Rectangle::new(
        [(10, 10), (WIDTH as i32 - 10, HEIGHT as i32 - 10)],
        ShapeStyle::from(&MUTED).stroke_width(1),
    ))?;
    area.draw(&Text::new(
        sentence.to_owned(),
        (WIDTH as i32 / 2, HEIGHT as i32 / 2),
        anchored(14.0, HPos::Center, VPos::Center),
    ))
}

/// The largest of the items' values; 0 when none has one.
fn largest(items: &[Item]) -> f64 {
    items.iter().filter_map(|i| i.value).fold(0.0, f64::max)
}

/// A weekly chart's plot: one slot a week along x (at least one), 0 to `max` up, `top` pixels
/// above it, room under it for the weeks' labels, and its baseline drawn.
fn weekly_plot<'a, 'b>(
    area: &'a Area<'b>,
    weeks: usize,
    max: f64,
    top: u32,
) -> Result<Plot<'a, 'b>, DrawingAreaErrorKind<std::io::Error>> {
    let n = weeks.max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_top(top)
        .x_label_area_size(30)
        .build_cartesian_2d(0.0..n, 0.0..max)?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 0.0), (n, 0.0)],
        ShapeStyle::from(&INK).stroke_width(1),
    )))?;
    Ok(chart)
}

/// A week's label under the baseline of a [`weekly_plot`], centred on `x`.
fn week_label(chart: &mut Plot<'_, '_>, x: f64, label: &str) -> Drawn {
    chart.draw_series(std::iter::once(
        EmptyElement::at((x, 0.0))
            + Text::new(
                label.to_owned(),
                (0, 6),
                anchored(12.0, HPos::Center, VPos::Top),
            ),
    ))?;
    Ok(())
}

/// Horizontal bars, one per item, each labelled on its left and valued on its right; an item
/// without a value is a dashed outline labelled `missing`.
fn horizontal(area: &Area<'_>, items: &[Item], missing: &str) -> Drawn {
    let max = largest(items).max(1.0);
    let n = items.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_left(330)
        .margin_right(110)
        .build_cartesian_2d(0.0..max, n..0.0)?;
    for (i, item) in items.iter().enumerate() {
        let top = i as f64 + 0.15;
        let bottom = i as f64 + 0.85;
        let middle = i as f64 + 0.5;
        chart.draw_series(std::iter::once(
            EmptyElement::at((0.0, middle))
                + Text::new(
                    item.label.clone(),
                    (-8, 0),
                    anchored(13.0, HPos::Right, VPos::Center),
                ),
        ))?;
        match item.value {
            Some(v) => {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(0.0, top), (v, bottom)],
                    BAR.filled(),
                )))?;
                chart.draw_series(std::iter::once(
                    EmptyElement::at((v, middle))
                        + Text::new(
                            item.printed.clone(),
                            (6, 0),
                            anchored(13.0, HPos::Left, VPos::Center),
                        ),
                ))?;
            }
            None => {
                chart.draw_series(dashed_box((0.0, top), (max * 0.25, bottom)))?;
                chart.draw_series(std::iter::once(
                    EmptyElement::at((max * 0.25, middle))
                        + Text::new(
                            missing.to_owned(),
                            (6, 0),
                            anchored(13.0, HPos::Left, VPos::Center).color(&MUTED),
                        ),
                ))?;
            }
        }
    }
    Ok(())
}

/// A dashed outline from `a` to `b`, as path segments (the SVG backend draws no dash style).
fn dashed_box(a: (f64, f64), b: (f64, f64)) -> Vec<PathElement<(f64, f64)>> {
    let style = ShapeStyle::from(&MUTED).stroke_width(1);
    let mut out = Vec::new();
    let steps = 12;
    for s in (0..steps).step_by(2) {
        let x0 = a.0 + (b.0 - a.0) * s as f64 / steps as f64;
        let x1 = a.0 + (b.0 - a.0) * (s + 1) as f64 / steps as f64;
        out.push(PathElement::new(vec![(x0, a.1), (x1, a.1)], style));
        out.push(PathElement::new(vec![(x0, b.1), (x1, b.1)], style));
    }
    out.push(PathElement::new(vec![(a.0, a.1), (a.0, b.1)], style));
    out.push(PathElement::new(vec![(b.0, a.1), (b.0, b.1)], style));
    out
}

/// Vertical bars per week, two series side by side: the first filled, the second outlined,
/// each with its value above it; a legend names both by their shape.
fn weekly_pairs(
    area: &Area<'_>,
    weeks: &[String],
    series: [(&str, &[Option<i64>]); 2],
    missing: &str,
) -> Drawn {
    let max = series
        .iter()
        .flat_map(|(_, values)| values.iter().flatten())
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.2;
    // Room above the bars for the legend.
    let mut chart = weekly_plot(area, weeks.len(), max, 36)?;
    for (w, label) in weeks.iter().enumerate() {
        let left = w as f64;
        week_label(&mut chart, left + 0.5, label)?;
        for (s, (_, values)) in series.iter().enumerate() {
            let x0 = left + 0.2 + 0.3 * s as f64;
            let x1 = x0 + 0.28;
            let printed = match values.get(w).copied().flatten() {
                Some(v) => {
                    let style = match s {
                        0 => BAR.filled(),
                        _ => ShapeStyle::from(&INK).stroke_width(2),
                    };
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, v as f64)],
                        style,
                    )))?;
                    (v.to_string(), v as f64)
                }
                None => (missing.to_owned(), 0.0),
            };
            chart.draw_series(std::iter::once(
                EmptyElement::at(((x0 + x1) / 2.0, printed.1))
                    + Text::new(
                        printed.0,
                        (0, -4),
                        anchored(12.0, HPos::Center, VPos::Bottom),
                    ),
            ))?;
        }
    }
    // The legend, by shape: a filled square, an outlined one.
    let (first, second) = (series[0].0, series[1].0);
    area.draw(&Rectangle::new([(20, 10), (32, 22)], BAR.filled()))?;
    area.draw(&Text::new(
        first.to_owned(),
        (38, 16),
        anchored(13.0, HPos::Left, VPos::Center),
    ))?;
    let x = 60 + 8 * first.chars().count() as i32;
    area.draw(&Rectangle::new(
        [(x, 10), (x + 12, 22)],
        ShapeStyle::from(&INK).stroke_width(2),
    ))?;
    area.draw(&Text::new(
        second.to_owned(),
        (x + 18, 16),
        anchored(13.0, HPos::Left, VPos::Center),
    ))
}

/// A line over the weeks with each point's value above it; a week without a value leaves a
/// gap and says `no_data`.
fn weekly_line(area: &Area<'_>, items: &[Item], no_data: &str) -> Drawn {
    let max = largest(items).max(f64::MIN_POSITIVE) * 1.25;
    let mut chart = weekly_plot(area, items.len(), max, 24)?;
    let mut run: Vec<(f64, f64)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let x = i as f64 + 0.5;
        week_label(&mut chart, x, &item.label)?;
        match item.value {
            Some(v) => {
                run.push((x, v));
                chart.draw_series(std::iter::once(
                    EmptyElement::at((x, v))
                        + Circle::new((0, 0), 4, BAR.filled())
                        + Text::new(
                            item.printed.clone(),
                            (0, -8),
                            anchored(12.0, HPos::Center, VPos::Bottom),
                        ),
                ))?;
            }
            None => {
                if run.len() > 1 {
                    chart.draw_series(std::iter::once(PathElement::new(
                        std::mem::take(&mut run),
                        BAR.stroke_width(2),
                    )))?;
                }
                run.clear();
                chart.draw_series(std::iter::once(
                    EmptyElement::at((x, 0.0))
                        + Text::new(
                            no_data.to_owned(),
                            (0, -6),
                            anchored(12.0, HPos::Center, VPos::Bottom).color(&MUTED),
                        ),
                ))?;
            }
        }
    }
    if run.len() > 1 {
        chart.draw_series(std::iter::once(PathElement::new(run, BAR.stroke_width(2))))?;
    }
    Ok(())
}

/// `label value` pairs joined for a text alternative.
fn listed(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join("; ")
}

/// Each item's label and printed value, `between` them, [`listed`].
fn listed_items(items: &[Item], between: &str) -> String {
    listed(
        items
            .iter()
            .map(|i| format!("{}{between}{}", i.label, i.printed)),
    )
}

/// The week's funnel: new contacts, interested, shown an offer, ready to pay, sent the payment
/// link; a stage the tenant does not set up is dashed and says so.
pub fn funnel(language: Language, week: &WeekMeasures) -> Chart {
    let w = |key| words::text(language, key);
    let stages = [
        (words::CONTACTS, Some(week.contacts_with_first_turn)),
        (words::INTERESTED, week.sales.prospects),
        (words::OFFERED, week.sales.offered),
        (words::PREPARED, week.sales.prepared),
        (words::LINK_SENT, week.sales.link_sent),
    ];
    let items: Vec<Item> = stages
        .iter()
        .map(|(m, v)| Item {
            label: m.name(language).to_owned(),
            value: v.map(|v| v as f64),
            printed: v.map_or(w(Key::NotSetUp).to_owned(), |v| v.to_string()),
        })
        .collect();
    let when = words::week(language, week.starts);
    let title = words::fill(language, Key::ChartFunnelTitle, &[&when]);
    if week.recorded_turns == 0 {
        return empty_chart(language, title);
    }
    let alt = words::fill(
        language,
        Key::ChartFunnelAlt,
        &[&when, &listed_items(&items, " ")],
    );
    let svg = svg(&alt, |area| horizontal(area, &items, w(Key::NotSetUp)));
    Chart { title, alt, svg }
}

fn empty_chart(language: Language, title: String) -> Chart {
    let sentence = words::text(language, Key::ChartEmpty);
    Chart {
        title,
        alt: sentence.to_owned(),
        svg: svg(sentence, |area| empty(area, sentence)),
    }
}

/// Whether the weeks hold any turn.
fn any_turn(weeks: &[WeekMeasures]) -> bool {
    weeks.iter().any(|w| w.recorded_turns > 0)
}

/// Conversations and sales (conversations that reached the payment link) per week.
pub fn conversations_and_sales(language: Language, weeks: &[WeekMeasures]) -> Chart {
    let title = words::text(language, Key::ChartWeeklyTitle).to_owned();
    if !any_turn(weeks) {
        return empty_chart(language, title);
    }
    let labels: Vec<String> = weeks
        .iter()
        .map(|w| words::week_short(language, w.starts))
        .collect();
    let conversations: Vec<Option<i64>> =
        weeks.iter().map(|w| Some(w.cost.conversations)).collect();
    let sales: Vec<Option<i64>> = weeks.iter().map(|w| w.cost.sales).collect();
    let (c, s) = (
        words::CONVERSATIONS.name(language),
        words::SALES.name(language),
    );
    let missing = words::text(language, Key::NotSetUp);
    let count = |v: Option<i64>| v.map_or(missing.to_owned(), |v| v.to_string());
    let alt = words::fill(
        language,
        Key::ChartWeeklyAlt,
        &[&listed(weeks.iter().enumerate().map(|(i, _)| {
            format!(
                "{}: {c} {}, {s} {}",
                labels[i],
                count(conversations[i]),
                count(sales[i])
            )
        }))],
    );
    let svg = svg(&alt, |area| {
        weekly_pairs(area, &labels, [(c, &conversations), (s, &sales)], missing)
    });
    Chart { title, alt, svg }
}

/// The handoffs of all the report's weeks by reason, most frequent first.
pub fn handoffs_by_reason(language: Language, weeks: &[WeekMeasures]) -> Chart {
    let title = words::text(language, Key::ChartHandoffsTitle).to_owned();
    let mut totals: std::collections::BTreeMap<String, i64> = Default::default();
    for week in weeks {
        for (reason, count) in &week.escalations_by_reason {
            *totals.entry(words::reason(language, reason)).or_default() += count;
        }
    }
    if totals.is_empty() {
        return empty_chart(language, title);
    }
    let mut items: Vec<Item> = totals
        .into_iter()
        .map(|(label, count)| Item {
            label,
            value: Some(count as f64),
            printed: count.to_string(),
        })
        .collect();
    items.sort_by(|a, b| {
        b.value
            .partial_cmp(&a.value)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let alt = words::fill(
        language,
        Key::ChartHandoffsAlt,
        &[&listed_items(&items, " ")],
    );
    let svg = svg(&alt, |area| horizontal(area, &items, ""));
    Chart { title, alt, svg }
}

/// The AI model's cost per conversation, week by week, in US dollars.
pub fn cost_per_conversation(language: Language, weeks: &[WeekMeasures]) -> Chart {
    let title = words::text(language, Key::ChartCostTitle).to_owned();
    if !weeks
        .iter()
        .any(|w| w.cost.cost_per_conversation_usd.is_some())
    {
        return empty_chart(language, title);
    }
    let no_data = words::text(language, Key::ChartNoData);
    let items: Vec<Item> = weeks
        .iter()
        .map(|w| Item {
            label: words::week_short(language, w.starts),
            value: w.cost.cost_per_conversation_usd,
            printed: w
                .cost
                .cost_per_conversation_usd
                .map_or(no_data.to_owned(), |v| words::usd(language, Some(v))),
        })
        .collect();
    let alt = words::fill(language, Key::ChartCostAlt, &[&listed_items(&items, ": ")]);
    let svg = svg(&alt, |area| weekly_line(area, &items, no_data));
    Chart { title, alt, svg }
}

/// The share of conversations that got the payment link, per playbook version, oldest first
/// (before, then after each change).
pub fn playbooks(language: Language, m: &PlaybookMeasures) -> Chart {
    let title = words::text(language, Key::ChartPlaybooksTitle).to_owned();
    let counted: Vec<_> = m.versions.iter().filter(|v| v.conversations > 0).collect();
    if counted.is_empty() {
        return empty_chart(language, title);
    }
    let items: Vec<Item> = counted
        .iter()
        .map(|row| {
            let name = super::figures::version_name(language, row);
            let label = match row.active {
                true => words::fill(language, Key::PlaybookActive, &[&name]),
                false => name,
            };
            Item {
                label,
                value: row.link_sent_rate.map(|r| r * 100.0),
                printed: format!(
                    "{} {}",
                    words::percent(language, row.link_sent_rate),
                    words::out_of(row.link_sent, row.conversations)
                ),
            }
        })
        .collect();
    let alt = words::fill(
        language,
        Key::ChartPlaybooksAlt,
        &[&listed_items(&items, " ")],
    );
    let svg = svg(&alt, |area| horizontal(area, &items, "-"));
    Chart { title, alt, svg }
}

#[cfg(test)]
mod tests;
