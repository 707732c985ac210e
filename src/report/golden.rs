//! The report of the demo data (the conformance seeds: a week of answers, handoffs and actions,
//! then a week of sales) in each owner's language, compared with its golden files under
//! `tests/fixtures/report/` (`UPDATE_GOLDEN=1` rewrites them; read the diff before committing).

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use super::render::{Format, render};
use super::{Report, build};
use crate::config::Language;

/// Wednesday 9 December 2026, 10:00 UTC: the report's four weeks run from 16 November; the
/// answers' week is the first (16–22 Nov), the sales' week the third (30 Nov – 6 Dec).
fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-09T10:00:00Z")
        .expect("a date")
        .with_timezone(&Utc)
}

/// The demo tenant's report of the seeded store, under a fixed version.
pub(crate) async fn demo_report() -> Report {
    let store = crate::store::connect("sqlite::memory:")
        .await
        .expect("an in-memory store");
    let monday = |weeks_back| {
        let (from, _) = super::iso_week(now(), weeks_back);
        from.and_hms_opt(0, 0, 0).expect("midnight").and_utc()
    };
    crate::store::conformance::seed_report_week(store.as_ref(), monday(3)).await;
    crate::store::conformance::seed_sales_week(store.as_ref(), monday(1)).await;
    let tenant = crate::config::examples::demo_tenant();
    let keys = crate::sales::sales_keys(&tenant);
    let mut report = build(store.as_ref(), 4, now(), Some(&keys))
        .await
        .expect("the report");
    report.business = Some(tenant.catalog.business_name);
    report.version = "0.0.0-golden";
    report
}

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

fn matches_golden(name: &str, printed: &str) {
    let path = golden(name);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("the folder");
        std::fs::write(&path, printed).expect("the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == printed,
        "{} differs from the report printed now (UPDATE_GOLDEN=1 cargo test --lib \
         report_golden rewrites it):\n{printed}",
        path.display()
    );
}

async fn report_golden_in(language: Language) {
    let report = demo_report().await;
    let code = language.code();
    matches_golden(
        &format!("demo.{code}.txt"),
        &render(&report, Format::Table, language),
    );
    matches_golden(
        &format!("demo.{code}.html"),
        &render(&report, Format::Html, language),
    );
}

#[tokio::test]
async fn report_golden_english() {
    report_golden_in(Language::En).await;
}

#[tokio::test]
async fn report_golden_spanish() {
    report_golden_in(Language::Es).await;
}

#[tokio::test]
async fn report_golden_portuguese() {
    report_golden_in(Language::Pt).await;
}

#[tokio::test]
async fn report_json_keeps_its_english_keys_and_stored_names_in_every_language() {
    let report = demo_report().await;
    let json = render(&report, Format::Json, Language::En);
    for language in [Language::Es, Language::Pt] {
        assert_eq!(render(&report, Format::Json, language), json);
    }
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    };
    assert_eq!(
        keys(&value),
        [
            "business",
            "generated_at",
            "not_measured",
            "playbooks",
            "version",
            "weeks"
        ]
    );
    let week = &value["weeks"][0];
    for key in [
        "week",
        "starts",
        "contacts_with_first_turn",
        "model_written_turns",
        "deferred_share",
        "inline_answer_ms_p50",
        "cost_usd",
        "sales",
        "handoffs",
        "cost",
    ] {
        assert!(week.get(key).is_some(), "{key} in {week}");
    }
    assert_eq!(week["week"], "2026-W47");
    assert_eq!(week["turns_by_outcome"]["answered_inline"], 2);
    assert_eq!(week["escalations_by_reason"]["low_confidence"], 1);
    assert_eq!(week["cost"]["currency"], "USD");
}

#[tokio::test]
async fn report_page_and_table_speak_the_owners_language() {
    let report = demo_report().await;
    let html = render(&report, Format::Html, Language::Pt);
    assert!(html.contains("<html lang=\"pt\">"));
    for expected in [
        "Semana de 16–22 nov 2026",
        "respondidas pelo assistente",
        "1,0 s",
        "US$ 0,25",
        "respondida na hora",
    ] {
        assert!(html.contains(expected), "{expected} in the page");
    }
    let table = render(&report, Format::Table, Language::Es);
    for expected in [
        "== Semana del 16–22 nov 2026 ==",
        "0,25 US$",
        "más de 20,0 %: demasiado lento",
        "      Personas que te escribieron por primera vez esa semana.",
    ] {
        assert!(table.contains(expected), "{expected} in\n{table}");
    }
    // No stored name reaches the owner's table or page.
    for printed in [&html, &table] {
        for stored in [
            "answered_inline",
            "escalated_model",
            "send_flow",
            "2026-W47",
            "USD",
        ] {
            assert!(!printed.contains(stored), "{stored} printed");
        }
    }
}
