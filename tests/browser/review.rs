//! The learning review and the report in the browser: approving a proposal with a
//! reason as the owner does it, the store holding the CLI's record decided by `console`; the
//! report's charts drawn on the page under the console's Content-Security-Policy; both pages at
//! 1280 and 375 px (`target/console-screenshots/learning-*.png`, `report-*.png`).

use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::learning::{DecisionKind, ProposalStatus};
use serde_json::json;

use crate::driver::{Browser, PHONE};
use crate::helpers::console_login::{PASSWORD, hash};
use crate::helpers::*;

const TACTIC: &str = "Invented tactic: offer the evening class before the weekend one";

/// The console on, the tenant with `learning`, and one proposal waiting: its id.
async fn app_with_a_proposal() -> (TestApp, i64) {
    let model = Arc::new(ScriptedModel::replies(vec![reply_json("Hello!")]));
    let options = AppOptions::new(model)
        .env("CONSOLE_PASSWORD_HASH", hash())
        .edit(|dir| {
            edit_rules(dir, |rules| {
                rules["learning"] = json!({"convertedTag": "paid", "maxRunCostUsd": 5});
            });
        });
    let app = spawn_app_with(options).await;
    let id = pending_proposals(app.store.as_ref(), &[TACTIC], &[]).await[0];
    (app, id)
}

#[tokio::test]
async fn console_review_approve_in_the_browser_records_the_decision_by_console() {
    let (app, id) = app_with_a_proposal().await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.submit("#nav-learning").await;
    assert_eq!(browser.path().await, "/console/learning");
    let proposal = format!(r#"article[data-proposal="{id}"]"#);
    assert!(browser.text(&proposal).await.contains(TACTIC));
    browser.screenshots("learning").await;

    browser
        .type_into(
            &format!("#approve-reason-{id}"),
            "It matches our best sellers",
        )
        .await;
    browser
        .submit(&format!(r#"{proposal} button[data-action="approve"]"#))
        .await;
    assert_eq!(browser.path().await, "/console/learning");
    let done = browser.find("#done").await;
    assert!(done.is_displayed().await.unwrap());
    assert!(done.text().await.unwrap().starts_with("Approved"));
    assert!(!browser.has(&proposal).await, "no longer waiting");
    assert!(browser.has(r#"button[data-action="activate"]"#).await);

    let store = app.store.as_ref();
    let approved = store.proposals(ProposalStatus::Approved, 10).await.unwrap();
    assert!(approved.iter().any(|p| p.id == id));
    let decisions = store.learning_decisions(10).await.unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].kind, DecisionKind::Approved);
    assert_eq!(decisions[0].by, "console");
    assert_eq!(
        decisions[0].reason.as_deref(),
        Some("It matches our best sellers")
    );
    assert!(
        browser
            .text("#decisions")
            .await
            .contains("It matches our best sellers")
    );
}

#[tokio::test]
async fn console_report_charts_are_drawn_under_the_csp_and_fit_a_phone() {
    let (app, _) = app_with_a_proposal().await;
    app.send("5550003", "Hi").await;
    app.settle().await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.submit("#nav-report").await;
    assert_eq!(browser.path().await, "/console/report");
    // Each chart is laid out with a size and its text drawn (no style blocked by the CSP).
    let drawn = browser
        .script(
            "return [...document.querySelectorAll('#report svg')].map(s => { \
             const r = s.getBoundingClientRect(); \
             return [Math.round(r.width), s.querySelectorAll('text').length]; });",
        )
        .await;
    let drawn = drawn.as_array().unwrap();
    assert_eq!(drawn.len(), 5, "{drawn:?}");
    for chart in drawn {
        assert!(chart[0].as_u64().unwrap() > 300, "{drawn:?}");
        assert!(chart[1].as_u64().unwrap() > 0, "{drawn:?}");
    }
    browser.screenshots("report").await;
    browser.viewport(PHONE).await;
    let widest = browser
        .script(
            "return Math.max(...[...document.querySelectorAll('#report svg')] \
             .map(s => s.getBoundingClientRect().right));",
        )
        .await;
    assert!(widest.as_f64().unwrap() <= f64::from(PHONE.0), "{widest}");
}
