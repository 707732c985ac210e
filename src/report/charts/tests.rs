//! Each chart draws the report's own numbers: the labels its SVG prints are read back and
//! compared with the measures the table and the JSON hold.

use super::*;
use crate::report::golden::demo_report;

/// The text labels an SVG draws, in order.
fn labels(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| {
            let body = rest.split_once('>')?.1;
            let text = body.split_once("</text>")?.0;
            Some(
                text.trim()
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

/// The label printed right after `name` (a bar's value follows its name).
fn after(labels: &[String], name: &str) -> String {
    let at = labels
        .iter()
        .position(|l| l == name)
        .unwrap_or_else(|| panic!("{name} not in {labels:?}"));
    labels[at + 1].clone()
}

fn is_accessible(chart: &Chart) {
    assert!(
        chart.svg.starts_with("<svg role=\"img\" aria-label=\""),
        "{}",
        chart.svg
    );
    assert!(
        chart
            .svg
            .contains(&format!("<title>{}</title>", esc(&chart.alt)))
    );
    assert!(
        !chart.svg.contains("href") && !chart.svg.contains("<image"),
        "no outside asset"
    );
    assert!(
        chart
            .html()
            .contains(&format!("<figcaption>{}</figcaption>", esc(&chart.alt)))
    );
}

#[tokio::test]
async fn chart_funnel_draws_the_weeks_funnel_counts() {
    let report = demo_report().await;
    let week = &report.weeks[2];
    let chart = funnel(Language::En, week);
    is_accessible(&chart);
    let drawn = labels(&chart.svg);
    let s = &week.sales;
    for (name, value) in [
        ("new contacts", Some(week.contacts_with_first_turn)),
        ("interested in buying", s.prospects),
        ("shown an offer", s.offered),
        ("ready to pay", s.prepared),
        ("sent the payment link", s.link_sent),
    ] {
        assert_eq!(after(&drawn, name), value.unwrap().to_string(), "{name}");
        assert!(
            chart.alt.contains(&format!("{name} {}", value.unwrap())),
            "{}",
            chart.alt
        );
    }
    assert_eq!(
        after(&drawn, "sent the payment link"),
        "2",
        "the sales week: 2 got the link"
    );
}

#[tokio::test]
async fn chart_conversations_and_sales_draws_each_weeks_counts() {
    let report = demo_report().await;
    let chart = conversations_and_sales(Language::Es, &report.weeks);
    is_accessible(&chart);
    let drawn = labels(&chart.svg);
    for week in &report.weeks {
        let label = crate::words::week_short(Language::Es, week.starts);
        let at = drawn
            .iter()
            .position(|l| *l == label)
            .expect("the week's label");
        assert_eq!(
            drawn[at + 1],
            week.cost.conversations.to_string(),
            "{label}"
        );
        assert_eq!(
            drawn[at + 2],
            week.cost.sales.unwrap().to_string(),
            "{label}"
        );
    }
    assert!(
        drawn.contains(&"conversaciones".to_owned()),
        "the legend: {drawn:?}"
    );
}

#[tokio::test]
async fn chart_handoffs_by_reason_sums_the_weeks_reasons() {
    let report = demo_report().await;
    let chart = handoffs_by_reason(Language::En, &report.weeks);
    is_accessible(&chart);
    let drawn = labels(&chart.svg);
    let mut totals: std::collections::BTreeMap<&str, i64> = Default::default();
    for week in &report.weeks {
        for (reason, count) in &week.escalations_by_reason {
            *totals.entry(reason.as_str()).or_default() += count;
        }
    }
    assert!(!totals.is_empty());
    for (reason, count) in totals {
        let name = crate::words::reason(Language::En, reason);
        assert_eq!(after(&drawn, &name), count.to_string(), "{name}");
    }
}

#[tokio::test]
async fn chart_cost_per_conversation_draws_each_weeks_cost_in_us_dollars() {
    let report = demo_report().await;
    let chart = cost_per_conversation(Language::Pt, &report.weeks);
    is_accessible(&chart);
    let drawn = labels(&chart.svg);
    for week in &report.weeks {
        let label = crate::words::week_short(Language::Pt, week.starts);
        let expected = match week.cost.cost_per_conversation_usd {
            Some(v) => crate::words::usd(Language::Pt, Some(v)),
            None => "sem dados".to_owned(),
        };
        assert_eq!(after(&drawn, &label), expected, "{label}");
    }
    assert!(drawn.iter().any(|l| l.starts_with("US$ ")), "{drawn:?}");
}

#[tokio::test]
async fn chart_playbooks_draws_each_versions_link_share() {
    use crate::learning::measures::{PlaybookMeasures, VersionMeasures};
    let row = |version: Option<&str>, conversations, link_sent, active| VersionMeasures {
        version: version.map(str::to_owned),
        first_activated_at: None,
        active,
        conversations,
        link_sent,
        link_sent_rate: Some(link_sent as f64 / conversations as f64),
        settling: 0,
    };
    let m = PlaybookMeasures {
        versions: vec![
            row(None, 10, 2, false),
            row(Some("0123456789abcdef"), 8, 4, true),
        ],
        ..demo_report()
            .await
            .playbooks
            .expect("the demo sets up playbooks")
    };
    let chart = playbooks(Language::En, &m);
    is_accessible(&chart);
    let drawn = labels(&chart.svg);
    assert_eq!(after(&drawn, "no playbook"), "20.0 % (2/10)");
    assert_eq!(after(&drawn, "0123456789ab (active)"), "50.0 % (4/8)");
}

#[test]
fn chart_of_a_week_without_data_is_drawn_empty_with_a_sentence() {
    let week = crate::report::WeekMeasures::of(
        chrono::NaiveDate::from_ymd_opt(2026, 12, 7).unwrap(),
        &Default::default(),
        &Default::default(),
        &Default::default(),
    );
    let weeks = [week.clone()];
    for language in Language::ALL {
        let sentence = crate::words::text(language, Key::ChartEmpty);
        for chart in [
            funnel(language, &week),
            conversations_and_sales(language, &weeks),
            handoffs_by_reason(language, &weeks),
            cost_per_conversation(language, &weeks),
            playbooks(
                language,
                &PlaybookMeasures {
                    versions: vec![],
                    reading: "",
                    counted: "",
                    settle_days: 14,
                },
            ),
        ] {
            is_accessible(&chart);
            assert_eq!(chart.alt, sentence);
            assert!(
                labels(&chart.svg).contains(&sentence.to_owned()),
                "{}",
                chart.svg
            );
            assert!(chart.svg.ends_with("</svg>\n") || chart.svg.ends_with("</svg>"));
        }
    }
}
