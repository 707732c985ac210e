//! SYSTEM 4 and 018: the scripted opening and the pre-model checks, in order, through the real
//! app; 005: a non-English tenant runs unchanged; 018: history reaches the next prompt.

use std::path::PathBuf;
use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use serde_json::Value;

use crate::helpers::*;

/// A copy of the demo tenant with `rules.json` edited.
fn tenant_with_rules(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    let path = dir.path().join("rules.json");
    let mut rules: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut rules);
    std::fs::write(&path, rules.to_string()).unwrap();
    let tenant = dir.path().to_path_buf();
    (dir, tenant)
}

fn replies(n: usize) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies(
        (0..n).map(|i| reply_json(&format!("Answer {i}."))),
    ))
}

/// The app on a copy of the demo tenant with `rules.json` edited, its model answering `n`
/// times; the copy's guard, the model and the app.
async fn gated_app(
    edit: impl FnOnce(&mut Value),
    n: usize,
) -> (tempfile::TempDir, Arc<ScriptedModel>, TestApp) {
    let (dir, tenant) = tenant_with_rules(edit);
    let model = replies(n);
    let app = spawn_app_with(AppOptions::new(model.clone()).with_tenant(tenant)).await;
    (dir, model, app)
}

/// The texts of the answer to `text` from `subscriber`.
async fn answer(app: &TestApp, subscriber: &str, text: &str) -> Vec<String> {
    let (_, body) = app.send(subscriber, text).await;
    block_texts(&body)
}

/// The answer to `text` from `subscriber` is the escalation copy: the contact is handed over.
async fn assert_handed_over(app: &TestApp, subscriber: &str, text: &str) {
    assert_eq!(
        answer(app, subscriber, text).await,
        vec![app.escalation_copy()]
    );
}

async fn last_outcome(app: &TestApp, subscriber: &str) -> String {
    app.turns(subscriber)
        .await
        .last()
        .and_then(|t| t.outcome.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn system_4_scripted_opening_is_answered_verbatim_without_the_model() {
    let model = replies(1);
    let app = spawn_app(model.clone()).await;
    let rules = app.rules();
    let keyword = rules["openingTrigger"]["keywords"][0].as_str().unwrap();
    let message = rules["openingTrigger"]["message"].as_str().unwrap();
    let (_, body) = app
        .send("6001", &format!("  {}  ", keyword.to_uppercase()))
        .await;
    assert_eq!(block_texts(&body), vec![message.to_owned()]);
    assert_eq!(model.calls(), 0);
    let turns = app.turns("6001").await;
    assert_eq!(turns[1].outcome.as_deref(), Some("answered_scripted"));
    assert_eq!(turns[1].input_tokens + turns[1].output_tokens, 0);
    // A message that merely contains the keyword goes to the model.
    app.send("6001", &format!("tell me about {keyword} please"))
        .await;
    assert_eq!(model.calls(), 1);
}

#[tokio::test]
async fn system_4_escalation_keyword_escalates_before_the_model_ignoring_case_and_accents() {
    let model = replies(1);
    let app = spawn_app(model.clone()).await;
    let keyword = app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_uppercase();
    let (_, body) = app
        .send("6002", &format!("I would like a {keyword} now"))
        .await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    assert_eq!(model.calls(), 0);
    assert_eq!(last_outcome(&app, "6002").await, "escalated_precheck");
    assert!(app.conversation("6002").await.escalated_at.is_some());
}

#[tokio::test]
async fn system_018_turn_cap_escalates_before_the_model() {
    let (_dir, model, app) = gated_app(|r| r["maxTurnsPerConversation"] = 2.into(), 3).await;
    app.send("6003", "first").await;
    app.send("6003", "second").await;
    assert_handed_over(&app, "6003", "third").await;
    assert_eq!(model.calls(), 2);
    assert_eq!(last_outcome(&app, "6003").await, "escalated_precheck");
}

#[tokio::test]
async fn system_4_per_contact_hourly_rate_is_counted_in_the_store() {
    let (_dir, model, app) = gated_app(
        |r| r["rateLimit"]["turnsPerSubscriberPerHour"] = 2.into(),
        3,
    )
    .await;
    app.send("6004", "one").await;
    app.send("6004", "two").await;
    assert_handed_over(&app, "6004", "three").await;
    assert_eq!(model.calls(), 2);
    // Another contact has its own budget.
    assert_eq!(answer(&app, "6005", "hello").await, vec!["Answer 2."]);
}

/// SYSTEM 4's order: a message the escalation keywords already stopped never reaches the rate
/// check, so it is not counted against the contact's hour.
#[tokio::test]
async fn system_4_a_message_stopped_before_the_rate_check_is_not_counted() {
    let (_dir, model, app) = gated_app(
        |r| r["rateLimit"]["turnsPerSubscriberPerHour"] = 2.into(),
        2,
    )
    .await;
    let keyword = app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_owned();
    app.send("6008", &format!("{keyword} please")).await;
    assert_eq!(last_outcome(&app, "6008").await, "escalated_precheck");
    let (_, one) = app.send("6008", "one").await;
    let (_, two) = app.send("6008", "two").await;
    assert_eq!(block_texts(&one), vec!["Answer 0."]);
    assert_eq!(
        block_texts(&two),
        vec!["Answer 1."],
        "the keyword message was not counted"
    );
    assert_handed_over(&app, "6008", "three").await;
    assert_eq!(model.calls(), 2);
}

#[tokio::test]
async fn system_4_daily_token_budget_escalates_before_the_model() {
    let (_dir, model, app) = gated_app(|r| r["budget"]["dailyTokenCap"] = 10.into(), 2).await;
    assert_eq!(answer(&app, "6006", "hello").await, vec!["Answer 0."]);
    assert_handed_over(&app, "6007", "hello again").await;
    assert_eq!(model.calls(), 1, "the budget is spent: no model call");
}

#[tokio::test]
async fn system_018_history_carries_earlier_turns_outside_the_current_fence() {
    let model = replies(2);
    let app = spawn_app(model.clone()).await;
    app.send("6008", "Do you have evening classes?").await;
    app.send("6008", "And on weekends?").await;
    let requests = model.requests();
    // The history's messages lead; the turn's own message (with the contact's) comes last.
    let history: String = requests[1].messages[..requests[1].cache.stable_messages]
        .iter()
        .filter_map(|m| match m {
            manychat_agent::model::Message::User { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(history.contains("Do you have evening classes?"));
    assert!(history.contains("Answer 0."));
    assert!(!history.contains("And on weekends?"));
}

#[tokio::test]
async fn system_005_a_non_english_tenant_runs_unchanged() {
    let model = Arc::new(ScriptedModel::replies([reply_json("Claro, hay plazas.")]));
    let app = spawn_app_with(
        AppOptions::new(model.clone()).with_tenant(repo_path("tests/fixtures/tenant-es")),
    )
    .await;
    let prompt = std::fs::read_to_string(repo_path("tests/fixtures/tenant-es/prompt.md")).unwrap();
    assert_eq!(
        answer(&app, "6009", "¿Quedan plazas?").await,
        vec!["Claro, hay plazas."]
    );
    let first_line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap();
    let first_line = first_line.split("{{").next().unwrap();
    assert!(model.requests()[0].system.contains(first_line.trim()));

    let keyword = app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, escalated) = app.send("6010", &keyword).await;
    assert_eq!(block_texts(&escalated), vec![app.escalation_copy()]);
}

/// A model whose calls all wait for the test to release them, so they are in flight at once.
#[derive(Default)]
struct HeldModel {
    arrived: std::sync::atomic::AtomicUsize,
    released: tokio::sync::Notify,
    open: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl manychat_agent::model::Model for HeldModel {
    fn id(&self) -> &str {
        ScriptedModel::DEFAULT_ID
    }

    async fn step(
        &self,
        request: &manychat_agent::model::ModelRequest,
    ) -> Result<manychat_agent::model::ModelResponse, manychat_agent::model::ModelError> {
        use std::sync::atomic::Ordering;
        let released = self.released.notified();
        self.arrived.fetch_add(1, Ordering::SeqCst);
        if !self.open.load(Ordering::SeqCst) {
            released.await;
        }
        let mut response = manychat_agent::model::mock::reply(reply_json("Answer."));
        response.usage = manychat_agent::model::mock::estimate_usage(request, &response);
        Ok(response)
    }
}

/// The day's budget is reserved per model call (its input and the output limit), not per turn
/// for four full steps: contacts writing at once, their calls all in flight together, are all
/// answered against a cap that holds each call's reservation once.
#[tokio::test]
async fn system_018_budget_many_contacts_at_once_are_all_served_when_their_real_use_fits() {
    use std::sync::atomic::Ordering;
    const CONTACTS: usize = 60;
    const TEXT: &str = "What does the weekend course cost?";
    let today = chrono::Utc::now().date_naive();
    // What one such turn really uses, and the most its one call may use (the prompt at three
    // bytes a token and the 400-token output limit), measured on its own.
    let probe_model = replies(1);
    let probe = spawn_app(probe_model.clone()).await;
    probe.send("6100", TEXT).await;
    let used = probe.store.budget(today).await.unwrap().tokens;
    let request = &probe_model.requests()[0];
    let prompt_bytes = request.system.len()
        + serde_json::to_string(
            &request
                .tools
                .iter()
                .map(|t| (&t.name, &t.description, &t.parameters))
                .collect::<Vec<_>>(),
        )
        .unwrap()
        .len()
        + format!("{:?}", request.messages).len();
    let per_call = (prompt_bytes as u64).div_ceil(3) as i64 + 400;
    // Room for every call in flight at once, with a tenth to spare; four steps a turn would not fit.
    let cap = per_call * CONTACTS as i64 * 11 / 10;
    assert!(used * (CONTACTS as i64) < cap && 4 * per_call * (CONTACTS as i64) > cap);

    let (_dir, tenant) = tenant_with_rules(|r| r["budget"]["dailyTokenCap"] = cap.into());
    let model = Arc::new(HeldModel::default());
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .env("MAX_TURNS_IN_FLIGHT", "1000")
            .with_tenant(tenant),
    )
    .await;
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sends: Vec<_> = (0..CONTACTS)
        .map(|i| {
            let send = send_in_background(&app, &format!("61{i:03}"), TEXT);
            let done = done.clone();
            tokio::spawn(async move {
                let answered = send.await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
                answered
            })
        })
        .collect();
    // Every contact is either at the model or already answered (a refusal answers at once).
    until(async || model.arrived.load(Ordering::SeqCst) + done.load(Ordering::SeqCst) == CONTACTS)
        .await;
    let in_flight_together = model.arrived.load(Ordering::SeqCst);
    model.open.store(true, Ordering::SeqCst);
    model.released.notify_waiters();
    let mut escalated = 0;
    for send in sends {
        let (status, body) = tokio::time::timeout(std::time::Duration::from_secs(60), send)
            .await
            .expect("answered in time")
            .unwrap();
        assert_eq!(status, 200);
        escalated += usize::from(block_texts(&body) == vec![app.escalation_copy()]);
    }
    assert_eq!(
        escalated, 0,
        "contacts refused although their calls fit the cap"
    );
    assert_eq!(
        in_flight_together, CONTACTS,
        "every call was in flight at once"
    );
    let spent = app.store.budget(today).await.unwrap().tokens;
    assert!(spent <= cap, "{spent} spent against a cap of {cap}");
}

/// The budget is checked before every model call: a turn whose first call spent the day's
/// budget makes no second call, and is handed to a person with reason `budget`.
#[tokio::test]
async fn system_018_budget_a_turn_refused_between_steps_escalates_with_reason_budget() {
    use manychat_agent::model::mock::{call, tool_calls};
    let (_dir, tenant) = tenant_with_rules(|r| r["budget"]["dailyTokenCap"] = 50.into());
    let model = Arc::new(ScriptedModel::new(vec![
        Ok(tool_calls([call(
            "c1",
            "get_contact",
            serde_json::json!({}),
        )])),
        Ok(manychat_agent::model::mock::reply(reply_json(
            "Never sent.",
        ))),
    ]));
    let app = spawn_app_with(AppOptions::new(model.clone()).with_tenant(tenant)).await;
    let (status, body) = app.send("6200", "What does the weekend course cost?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    assert_eq!(model.calls(), 1, "the second call is not made");
    let turns = app.turns("6200").await;
    let agent = turns.last().unwrap();
    assert_eq!(agent.escalation_reason.as_deref(), Some("budget"));
    assert_eq!(agent.outcome.as_deref(), Some("escalated_precheck"));
    assert!(
        app.metrics_text()
            .await
            .contains("escalations_total{reason=\"budget\"} 1"),
        "counted as a budget escalation"
    );
}

/// A contact over its share of the day is handed to a person (`budget_contact`); the tenant's
/// budget keeps serving the others.
#[tokio::test]
async fn budget_contact_a_contact_over_its_daily_share_is_handed_over_and_others_are_served() {
    let (_dir, model, app) =
        gated_app(|r| r["budget"]["perContactDailyTokenCap"] = 10.into(), 3).await;
    assert_eq!(answer(&app, "6020", "hello").await, vec!["Answer 0."]);
    assert_handed_over(&app, "6020", "hello again").await;
    assert_eq!(model.calls(), 1, "its share is spent: no model call");
    app.settle().await;
    let turns = app.turns("6020").await;
    assert_eq!(
        turns.last().unwrap().escalation_reason.as_deref(),
        Some("budget_contact")
    );
    let (_, other) = app.send("6021", "hello").await;
    assert_eq!(
        block_texts(&other),
        vec!["Answer 1."],
        "another contact is served"
    );
    assert_eq!(model.calls(), 2);
}
