//! The owner's console: the learning review (031 in the console), the report page
//! with its charts, and the console in the owner's language. What the store holds after each
//! button: the CLI's own records (`learning::review::apply`, `learning::gate::activate`),
//! decided by `console`.

use std::sync::Arc;

use manychat_agent::learning::gate::suite_hash;
use manychat_agent::learning::playbook::content_hash;
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::Store;
use manychat_agent::store::learning::{DecisionKind, EvalRecord, ProposalStatus, Review};
use reqwest::StatusCode;
use serde_json::json;

use crate::console_helpers::*;
use crate::helpers::*;

const TACTIC: &str = "Invented tactic: offer the evening class before the weekend one";
const OTHER: &str = "Invented tactic: name the teacher when the contact hesitates";
const REAL_MODEL: &str = "openai:gpt-4.1-mini";

/// The console on, the tenant with `learning` (or without) and `ownerLanguage` as given.
async fn review_app(learning: bool, language: Option<&'static str>) -> TestApp {
    let model = Arc::new(ScriptedModel::replies(vec![reply_json("Hello!")]));
    let options = AppOptions::new(model).edit(move |dir| {
        edit_rules(dir, |rules| {
            if learning {
                rules["learning"] = json!({"convertedTag": "paid", "maxRunCostUsd": 5});
            }
            if let Some(language) = language {
                rules["ownerLanguage"] = json!(language);
            }
        });
    });
    console_app_with(options).await
}

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

/// A version holding `insights`, made by a review as the CLI makes it: its hash.
async fn version(store: &dyn Store, insights: &[&str]) -> String {
    let insights: Vec<String> = insights.iter().map(|i| (*i).to_owned()).collect();
    let hash = content_hash(&insights);
    let review = Review {
        version: Some((hash.clone(), insights)),
        by: "cli".to_owned(),
        at: now(),
        ..Review::default()
    };
    store.record_review(&review).await.unwrap();
    hash
}

/// An eval record of `playbook` against the repo's golden suite, as `eval` writes it.
async fn eval_record(store: &dyn Store, playbook: &str, outcomes: serde_json::Value) {
    let suite = suite_hash(&repo_path("evals/golden")).unwrap();
    let record = EvalRecord {
        playbook_hash: playbook.to_owned(),
        suite_hash: suite,
        model: REAL_MODEL.to_owned(),
        outcomes,
        created_at: now(),
    };
    store.record_eval(&record).await.unwrap();
}

/// The owner logged in to an app's console, asking for its pages as the owner's browser does.
struct Owner<'a> {
    app: &'a TestApp,
    client: reqwest::Client,
    session: String,
}

impl<'a> Owner<'a> {
    async fn log_in(app: &'a TestApp) -> Self {
        let client = browser();
        let session = logged_in(app, &client).await;
        Self {
            app,
            client,
            session,
        }
    }

    /// A GET of `route`: its status and body.
    async fn get(&self, route: &str) -> (StatusCode, String) {
        get_page(self.app, &self.client, &self.session, route).await
    }

    /// A form POST to `route`.
    async fn post(&self, route: &str, form: &[(&str, &str)]) -> reqwest::Response {
        post_page(self.app, &self.client, &self.session, route, form).await
    }

    /// The learning page, answered 200.
    async fn learning_page(&self) -> String {
        let (status, page) = self.get("/console/learning").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page
    }
}

/// Whether proposal `id` still waits for a decision.
async fn still_pending(store: &dyn Store, id: i64) -> bool {
    let pending = store.proposals(ProposalStatus::Pending, 10).await.unwrap();
    pending.iter().any(|p| p.id == id)
}

#[tokio::test]
async fn console_review_approve_is_the_clis_decision_recorded_by_console_with_its_reason() {
    let app = review_app(true, None).await;
    let store = app.store.as_ref();
    let ids = pending_proposals(store, &[TACTIC], &[]).await;
    let owner = Owner::log_in(&app).await;
    let page = owner.learning_page().await;
    assert!(page.contains(TACTIC), "{page}");
    assert!(page.contains(r#"data-action="approve""#), "{page}");

    let id = ids[0].to_string();
    let form = [
        ("csrf", csrf_in(&page)),
        ("proposal", id.clone()),
        ("text", String::new()),
        ("reason", "It matches what the best sellers say".to_owned()),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = owner.post("/console/learning/approve", &form).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let hash = content_hash(&[TACTIC.to_owned()]);
    assert_eq!(
        location(&response),
        format!("/console/learning?done=approved&version={hash}")
    );

    // The store holds what `insights review --approve` writes, decided by the console.
    let approved = store.proposals(ProposalStatus::Approved, 10).await.unwrap();
    assert!(
        approved
            .iter()
            .any(|p| p.id == ids[0] && p.reviewed_at.is_some())
    );
    let versions = store.playbook_versions().await.unwrap();
    let made = versions.iter().find(|v| v.content_hash == hash).unwrap();
    assert_eq!(made.insights, vec![TACTIC.to_owned()]);
    assert!(!made.active, "approving never takes a version live");
    let decisions = store.learning_decisions(10).await.unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].kind, DecisionKind::Approved);
    assert_eq!(decisions[0].proposal_id, Some(ids[0]));
    assert_eq!(decisions[0].by, "console");
    assert_eq!(decisions[0].version_hash.as_deref(), Some(hash.as_str()));
    assert_eq!(
        decisions[0].reason.as_deref(),
        Some("It matches what the best sellers say")
    );

    // A double click finds it decided: refused, nothing recorded twice.
    let again = owner.post("/console/learning/approve", &form).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert!(again.text().await.unwrap().contains("no pending proposal"));
    assert_eq!(store.learning_decisions(10).await.unwrap().len(), 1);

    // The page lists the decision with who made it.
    let (_, shown) = owner.get("/console/learning?done=approved").await;
    assert!(
        shown.contains(r#"data-decision="approved" data-by="console""#),
        "{shown}"
    );
}

#[tokio::test]
async fn console_review_reject_needs_a_reason_and_records_it_cleaned() {
    let app = review_app(true, None).await;
    let store = app.store.as_ref();
    let ids = pending_proposals(store, &[TACTIC], &[]).await;
    let owner = Owner::log_in(&app).await;
    let page = owner.learning_page().await;
    let csrf = csrf_in(&page);
    let id = ids[0].to_string();

    let without = owner
        .post(
            "/console/learning/reject",
            &[("csrf", &csrf), ("proposal", &id), ("reason", "  ")],
        )
        .await;
    assert_eq!(without.status(), StatusCode::BAD_REQUEST);
    assert!(still_pending(store, ids[0]).await, "still pending");
    assert!(store.learning_decisions(10).await.unwrap().is_empty());

    let reason = "Too pushy; ask ana@example.com or call +1 415 555 0100 first";
    let response = owner
        .post(
            "/console/learning/reject",
            &[("csrf", &csrf), ("proposal", &id), ("reason", reason)],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/console/learning?done=rejected");
    let rejected = store.proposals(ProposalStatus::Rejected, 10).await.unwrap();
    assert!(rejected.iter().any(|p| p.id == ids[0]));
    assert!(
        store.playbook_versions().await.unwrap().is_empty(),
        "a rejection makes no version"
    );
    let decisions = store.learning_decisions(10).await.unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].kind, DecisionKind::Rejected);
    assert_eq!(decisions[0].by, "console");
    let kept = decisions[0].reason.as_deref().unwrap();
    assert!(kept.starts_with("Too pushy"), "{kept}");
    assert!(
        !kept.contains("ana@example.com") && !kept.contains("555 0100"),
        "cleaned as a note is: {kept}"
    );
}

#[tokio::test]
async fn console_review_activation_goes_through_the_clis_eval_gate() {
    let app = review_app(true, None).await;
    let store = app.store.as_ref();
    let hash = version(store, &[TACTIC]).await;
    let owner = Owner::log_in(&app).await;
    let page = owner.learning_page().await;
    assert!(page.contains(r#"data-action="activate""#), "{page}");
    let csrf = csrf_in(&page);
    let activate = async || {
        owner
            .post(
                "/console/learning/activate",
                &[("csrf", &csrf), ("version", &hash)],
            )
            .await
    };

    // No eval record: the gate refuses, naming the eval to run; nothing changes.
    let refused = activate().await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let text = refused.text().await.unwrap();
    assert!(text.contains("no eval record"), "{text}");
    assert!(store.active_playbook().await.unwrap().is_none());
    assert!(store.learning_decisions(10).await.unwrap().is_empty());

    // A record that fails a case the no-playbook baseline passes: refused.
    eval_record(store, "", json!({"a": true, "b": true})).await;
    eval_record(store, &hash, json!({"a": true, "b": false})).await;
    let regressed = activate().await;
    assert_eq!(regressed.status(), StatusCode::CONFLICT);
    assert!(regressed.text().await.unwrap().contains("fails 1 case(s)"));
    assert!(store.active_playbook().await.unwrap().is_none());

    // A record that fails nothing new: live, recorded as the console's activation.
    eval_record(store, &hash, json!({"a": true, "b": true})).await;
    let passed = activate().await;
    assert_eq!(passed.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&passed),
        format!("/console/learning?done=activated&version={hash}")
    );
    let active = store.active_playbook().await.unwrap().unwrap();
    assert_eq!(active.content_hash, hash);
    let decisions = store.learning_decisions(10).await.unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].kind, DecisionKind::Activated);
    assert_eq!(decisions[0].version_hash.as_deref(), Some(hash.as_str()));
    assert_eq!(decisions[0].by, "console");
}

#[tokio::test]
async fn console_review_rollback_takes_a_version_live_again_without_the_gate() {
    let app = review_app(true, None).await;
    let store = app.store.as_ref();
    let (first, second) = (
        version(store, &[TACTIC]).await,
        version(store, &[OTHER]).await,
    );
    for hash in [&first, &second] {
        let versions = store.playbook_versions().await.unwrap();
        let id = versions
            .iter()
            .find(|v| &v.content_hash == hash)
            .unwrap()
            .id;
        store.activate_playbook(id, "cli", now()).await.unwrap();
    }
    let owner = Owner::log_in(&app).await;
    let page = owner.learning_page().await;
    assert!(page.contains(r#"data-action="rollback""#), "{page}");
    // No eval record exists: a rollback needs none.
    let response = owner
        .post(
            "/console/learning/activate",
            &[("csrf", &csrf_in(&page)), ("version", &first)],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&response),
        format!("/console/learning?done=rolled_back&version={first}")
    );
    assert_eq!(
        store.active_playbook().await.unwrap().unwrap().content_hash,
        first
    );
    let decisions = store.learning_decisions(10).await.unwrap();
    let by: Vec<_> = decisions.iter().map(|d| (d.kind, d.by.as_str())).collect();
    assert_eq!(
        by,
        vec![
            (DecisionKind::RolledBack, "console"),
            (DecisionKind::Activated, "cli"),
            (DecisionKind::Activated, "cli"),
        ]
    );
}

#[tokio::test]
async fn console_review_shows_the_cli_evidence_and_quotes_cleaned_of_personal_data() {
    let app = review_app(true, None).await;
    let contact = "5550001";
    app.send(
        contact,
        "Hola, me llamo Ana. Call me at +1 415 555 0100 about the course",
    )
    .await;
    app.settle().await;
    let turn = app.turns(contact).await[0].id;
    let store = app.store.as_ref();
    pending_proposals(store, &[TACTIC], &[turn]).await;
    let owner = Owner::log_in(&app).await;
    let page = owner.learning_page().await;
    // The counts `insights review --list` prints, and the run's cohort (`pending_proposals`').
    assert!(
        page.contains("Seen in 7 conversations that paid and 2 that did not."),
        "{page}"
    );
    assert!(
        page.contains("compared 24 contacts who paid with 31 who did not"),
        "{page}"
    );
    assert!(page.contains("Invented rationale: the paying side heard it first"));
    // The cited turn, as the analyst read it.
    let quote = page
        .split(&format!(r#"data-turn="{turn}""#))
        .nth(1)
        .expect("the cited turn is quoted")
        .split("</blockquote>")
        .next()
        .unwrap();
    assert!(quote.contains("about the course"), "{quote}");
    assert!(
        !quote.contains("Ana") && !quote.contains("555 0100"),
        "{quote}"
    );
}

#[tokio::test]
async fn console_review_without_learning_says_how_to_turn_it_on_and_decides_nothing() {
    let app = review_app(false, None).await;
    let store = app.store.as_ref();
    let ids = pending_proposals(store, &[TACTIC], &[]).await;
    let owner = Owner::log_in(&app).await;
    let page = owner.learning_page().await;
    assert!(page.contains(r#"id="learning-off""#), "{page}");
    assert!(page.contains("rules.json") && page.contains("INSIGHT_MODEL"));
    assert!(!page.contains(TACTIC), "no review without learning");
    let id = ids[0].to_string();
    let response = owner
        .post(
            "/console/learning/approve",
            &[("csrf", &csrf_in(&page)), ("proposal", &id)],
        )
        .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert!(still_pending(store, ids[0]).await);
    assert!(store.learning_decisions(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn console_review_posts_need_a_session_and_the_forms_token() {
    let app = review_app(true, None).await;
    let ids = pending_proposals(app.store.as_ref(), &[TACTIC], &[]).await;
    let id = ids[0].to_string();
    let owner = Owner::log_in(&app).await;
    let stale = owner
        .post(
            "/console/learning/reject",
            &[("csrf", "forged"), ("proposal", &id), ("reason", "no")],
        )
        .await;
    assert_eq!(stale.status(), StatusCode::FORBIDDEN);
    let logged_out = post_page(
        &app,
        &owner.client,
        "",
        "/console/learning/approve",
        &[("proposal", &id)],
    )
    .await;
    assert_eq!(logged_out.status(), StatusCode::UNAUTHORIZED);
    assert!(still_pending(app.store.as_ref(), ids[0]).await);
}

#[tokio::test]
async fn console_report_page_shows_the_weeks_figures_and_charts_that_render_under_the_csp() {
    let app = review_app(false, None).await;
    app.send("5550002", "Hi").await;
    app.settle().await;
    let owner = Owner::log_in(&app).await;
    let response = owner
        .client
        .get(format!("{}/console/report", app.address))
        .header("cookie", &owner.session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("style-src 'self'") && !csp.contains("unsafe-inline"));
    let page = response.text().await.unwrap();
    assert!(page.contains(r#"id="nav-report" href="/console/report" aria-current="page""#));
    // The report command's own figures: its title, a meaning under a figure, the charts.
    assert!(page.contains(": how the sales assistant did"), "{page}");
    assert!(page.contains("People who wrote to you for the first time that week."));
    assert_eq!(
        page.matches("<svg ").count(),
        5,
        "funnel, weeks, handoffs, cost, playbook versions"
    );
    // Inline SVG renders under `style-src 'self'` only without style attributes or elements.
    assert!(!page.contains("style="), "no style attribute");
    assert!(!page.contains("<style"), "no style element");
    assert!(!page.contains("<script"), "no script");
}

#[tokio::test]
async fn console_report_page_of_an_empty_store_draws_empty_charts_with_a_sentence() {
    let app = review_app(false, None).await;
    let owner = Owner::log_in(&app).await;
    let (status, page) = owner.get("/console/report?weeks=2").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("No conversations yet"), "{page}");
    assert!(
        page.contains("Nothing to draw yet: the chart fills in as contacts write."),
        "{page}"
    );
    assert!(page.contains(r#"<option value="1">1</option>"#));
}

#[tokio::test]
async fn console_speaks_the_owners_language_and_a_reload_switches_it() {
    let app = review_app(true, Some("pt")).await;
    let owner = Owner::log_in(&app).await;
    let (_, running) = owner.get("/console").await;
    assert!(running.contains(r#"<html lang="pt">"#), "{running}");
    assert!(running.contains("O que está em execução"));
    assert!(running.contains(">Relatório</a>") && running.contains(">Aprendizado</a>"));
    let (_, report) = owner.get("/console/report").await;
    assert!(
        report.contains("como o assistente de vendas se saiu"),
        "{report}"
    );
    assert!(
        report.contains("Da primeira mensagem ao link de pagamento"),
        "{report}"
    );
    let (_, learning) = owner.get("/console/learning").await;
    assert!(learning.contains("Aprender com o que vendeu"), "{learning}");

    edit_rules(&app.config_dir, |rules| {
        rules["ownerLanguage"] = json!("es")
    });
    let reload = owner
        .post("/console/reload", &[("csrf", &csrf_in(&running))])
        .await;
    assert_eq!(reload.status(), StatusCode::OK);
    let (_, after) = owner.get("/console").await;
    assert!(after.contains(r#"<html lang="es">"#), "{after}");
    assert!(after.contains("Qué está en marcha"));
}

/// A refused post is a page in the owner's language with a way on: a stale form (403) leads
/// back to the console, an ended session (401) to the login.
#[tokio::test]
async fn console_refusals_are_pages_in_the_owners_language() {
    let app = review_app(false, Some("es")).await;
    let owner = Owner::log_in(&app).await;
    let stale = owner.post("/console/reload", &[("csrf", "forged")]).await;
    assert_eq!(stale.status(), StatusCode::FORBIDDEN);
    let page = stale.text().await.unwrap();
    assert!(page.contains(r#"<html lang="es">"#), "{page}");
    assert!(
        page.contains("Este formulario está desactualizado: no se hizo nada."),
        "{page}"
    );
    assert!(
        page.contains(r#"<a href="/console">Volver a la consola</a>"#),
        "{page}"
    );

    let logged_out = post_page(&app, &owner.client, "", "/console/reload", &[("csrf", "x")]).await;
    assert_eq!(logged_out.status(), StatusCode::UNAUTHORIZED);
    let page = logged_out.text().await.unwrap();
    assert!(page.contains("Tu sesión terminó"), "{page}");
    assert!(
        page.contains(r#"<a href="/console/login">Entrar</a>"#),
        "{page}"
    );
}

#[tokio::test]
async fn console_report_page_keeps_its_report_a_minute_and_reads_anew_for_other_weeks() {
    let app = review_app(false, None).await;
    let owner = Owner::log_in(&app).await;
    let (_, first) = owner.get("/console/report").await;
    assert!(first.contains("No conversations yet"), "{first}");
    app.send("5550004", "Hi").await;
    app.settle().await;
    let (_, kept) = owner.get("/console/report").await;
    assert!(
        kept.contains("No conversations yet"),
        "the same report, kept: {kept}"
    );
    let (_, other) = owner.get("/console/report?weeks=1").await;
    assert!(
        !other.contains("No conversations yet"),
        "read anew: {other}"
    );
}
