//! Spec 025 (in-window nudge) through the real app: the scripted model schedules a follow-up,
//! the store holds the conversation's one nudge row, the fake ManyChat records every request.

use std::path::Path;
use std::sync::Arc;

use manychat_agent::model::ModelResponse;
use manychat_agent::model::mock::{ScriptedModel, call, reply, tool_calls};
use manychat_agent::store::NudgeStatus;
use serde_json::{Value, json};

use crate::helpers::*;

fn steps(steps: Vec<ModelResponse>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(steps.into_iter().map(Ok).collect()))
}

fn answer(text: &str) -> ModelResponse {
    reply(reply_json(text))
}

fn prospect() -> manychat_agent::model::ToolCall {
    call(
        "intent",
        "set_field",
        json!({"field": "intent", "value": "prospect"}),
    )
}

fn schedule(delay: &str) -> manychat_agent::model::ToolCall {
    call(
        format!("nudge_{delay}"),
        "schedule_nudge",
        json!({"delay": delay}),
    )
}

/// The demo tenant with a `nudge` section (025's example).
pub fn with_nudge(dir: &Path) {
    let file = dir.join("tools.json");
    let mut tools: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    tools["nudge"] = json!({
        "delays": [{"id": "later_today", "minutes": 120}, {"id": "tomorrow", "minutes": 1200}],
        "humanActiveTag": "human-handling"
    });
    std::fs::write(&file, tools.to_string()).unwrap();
}

#[tokio::test]
async fn spec_025_verification_2_scheduling_twice_leaves_one_pending_row_and_no_request() {
    let model = steps(vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
        tool_calls([schedule("tomorrow")]),
        answer("Happy to help whenever you are ready."),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    app.send("6001", "How much is the wheel course?").await;
    app.settle().await;
    let conversation = app.conversation("6001").await;
    let first = app
        .store
        .nudge(conversation.id)
        .await
        .unwrap()
        .expect("scheduled by the first turn");
    assert_eq!(first.status, NudgeStatus::Pending);
    assert_eq!(first.delay_id, "later_today");
    assert_eq!(
        first.due_at - first.scheduled_at,
        chrono::Duration::minutes(120)
    );

    app.send("6001", "Let me think about it").await;
    app.settle().await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.delay_id.as_str(), nudge.id),
        (NudgeStatus::Pending, "tomorrow", first.id),
        "one row, the later schedule"
    );
    let paths: Vec<String> = app
        .manychat_requests()
        .await
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(
        paths,
        vec!["/fb/subscriber/setCustomFieldByName"],
        "the intent write only: scheduling a nudge makes no ManyChat request"
    );
    let turn = app
        .turns("6001")
        .await
        .into_iter()
        .rev()
        .find(|t| t.outcome.is_some())
        .unwrap();
    assert_eq!(
        turn.actions.unwrap(),
        json!([{"tool": "schedule_nudge", "id": "tomorrow", "status": "performed"}])
    );
}

#[tokio::test]
async fn spec_025_schedule_nudge_waits_for_a_prospect() {
    let model = steps(vec![
        tool_calls([schedule("later_today")]),
        answer("Hello! What would you like to make?"),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    app.send("6002", "Hi").await;
    app.settle().await;
    let conversation = app.conversation("6002").await;
    assert_eq!(app.store.nudge(conversation.id).await.unwrap(), None);
}

#[tokio::test]
async fn spec_025_an_inbound_message_cancels_the_pending_nudge() {
    let model = steps(vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
        answer("Sure, see you then."),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    app.send("6003", "How much is the wheel course?").await;
    app.settle().await;
    app.send("6003", "Thanks").await;
    app.settle().await;
    let conversation = app.conversation("6003").await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Cancelled);
    assert_eq!(nudge.reason.as_deref(), Some("contact_replied"));
}

// --- the worker (025 verification 3, 4; the crash case) ---------------------------------------

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use manychat_agent::clock::Clock;
use manychat_agent::config::{ConfigContext, ConfigHandle, TenantConfig};
use manychat_agent::ids::Secret;
use manychat_agent::manychat::{ManyChatClient, ManyChatLimiter};
use manychat_agent::metrics::Metrics;
use manychat_agent::nudge::{NudgeSettings, NudgeTurn, NudgeVerdict, NudgeWorker};
use manychat_agent::store::{Conversation, Nudge, TurnContext};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

/// Stands for the nudge turn's model call: counts how often the worker got that far.
#[derive(Default)]
struct CountingTurn {
    calls: AtomicUsize,
}

#[async_trait]
impl NudgeTurn for CountingTurn {
    async fn run(
        &self,
        _config: Arc<TenantConfig>,
        _conversation: &Conversation,
        _nudge: &Nudge,
        _context: TurnContext,
    ) -> NudgeVerdict {
        self.calls.fetch_add(1, Ordering::SeqCst);
        NudgeVerdict::Sent
    }
}

struct Rig {
    worker: NudgeWorker,
    turn: Arc<CountingTurn>,
    metrics: Arc<Metrics>,
}

/// A nudge worker on the app's store and fake ManyChat, its clock `offset` ahead of the app's.
fn rig(app: &TestApp, offset: chrono::Duration) -> Rig {
    let config = ConfigHandle::load(
        &app.config_dir,
        ConfigContext {
            allow_examples: true,
            ..ConfigContext::default()
        },
    )
    .expect("the tenant loads");
    let manychat = ManyChatClient::new(
        &app.manychat.uri(),
        &Secret::new("123:test-token"),
        ManyChatLimiter::new(),
    )
    .unwrap();
    let turn = Arc::new(CountingTurn::default());
    let metrics = Arc::new(Metrics::default());
    let worker = NudgeWorker::new(
        app.store.clone(),
        manychat,
        Arc::new(config),
        Clock::starting_at(chrono::Utc::now() + offset),
        metrics.clone(),
        NudgeSettings {
            poll: Duration::from_secs(15),
            model_abort: Duration::from_secs(30),
        },
        turn.clone(),
    );
    Rig {
        worker,
        turn,
        metrics,
    }
}

/// A contact who wrote once, with a nudge scheduled `due_in` after their message.
async fn quiet_contact(app: &TestApp, subscriber: &str, due_in: chrono::Duration) -> Conversation {
    app.send(subscriber, "How much is the wheel course?").await;
    app.settle().await;
    let conversation = app.conversation(subscriber).await;
    let at = conversation
        .last_message_at
        .expect("the message was recorded");
    app.store
        .schedule_nudge(conversation.id, "later_today", at + due_in, at)
        .await
        .unwrap();
    conversation
}

async fn get_info_answers(app: &TestApp, status: u16, tags: &[&str]) {
    let tags: Vec<Value> = tags
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": i, "name": t}))
        .collect();
    Mock::given(method("GET"))
        .and(path("/fb/subscriber/getInfo"))
        .respond_with(ResponseTemplate::new(status).set_body_json(json!({
            "status": "success",
            "data": {"id": "1", "tags": tags, "custom_fields": []}
        })))
        .mount(&app.manychat)
        .await;
}

async fn assert_cancelled(app: &TestApp, rig: &Rig, conversation: &Conversation, reason: &str) {
    let pass = rig.worker.run_once().await;
    assert_eq!(pass.claimed, 1, "{reason}: the due nudge was claimed");
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.reason.as_deref()),
        (NudgeStatus::Cancelled, Some(reason))
    );
    assert_eq!(
        rig.turn.calls.load(Ordering::SeqCst),
        0,
        "{reason}: no model call"
    );
    assert_eq!(rig.metrics.nudge_count("cancelled", reason), 1);
    assert!(rig.metrics.render().contains(&format!(
        "manychat_agent_nudges_total{{state=\"cancelled\",reason=\"{reason}\"}} 1"
    )));
}

fn quiet() -> Arc<ScriptedModel> {
    steps(
        (0..4)
            .map(|_| answer("The wheel course starts on Monday."))
            .collect(),
    )
}

#[tokio::test]
async fn spec_025_verification_3_each_cancellation_reason_ends_the_row_cancelled_without_a_model_call()
 {
    let hours = chrono::Duration::hours;
    // escalated: the conversation escalated after the nudge was scheduled.
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, 200, &[]).await;
    let conversation = quiet_contact(&app, "6101", hours(2)).await;
    let at = conversation.last_message_at.unwrap();
    app.store
        .set_escalated(conversation.id, at + chrono::Duration::minutes(1))
        .await
        .unwrap();
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "escalated").await;

    // window_closing: due after 1380 minutes since the last inbound message.
    let conversation = quiet_contact(&app, "6102", hours(23)).await;
    assert_cancelled(&app, &rig(&app, hours(24)), &conversation, "window_closing").await;

    // cap_reached: today's budget is spent.
    let conversation = quiet_contact(&app, "6103", hours(1)).await;
    let rig_budget = rig(&app, hours(1) + chrono::Duration::minutes(1));
    let today = (chrono::Utc::now() + hours(1) + chrono::Duration::minutes(1)).date_naive();
    app.store
        .add_budget(today, 1_000_000_000, 1_000_000.0)
        .await
        .unwrap();
    assert_cancelled(&app, &rig_budget, &conversation, "cap_reached").await;
}

#[tokio::test]
async fn spec_025_verification_3_human_active_and_contact_replied_cancel_without_a_model_call() {
    let hours = chrono::Duration::hours;
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, 200, &["vip", "human-handling"]).await;
    let conversation = quiet_contact(&app, "6201", hours(2)).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "human_active").await;

    // contact_replied: a message after the scheduling (its turn-start cancel missed: the row is
    // rescheduled behind it) is caught at due time.
    let conversation = quiet_contact(&app, "6202", hours(2)).await;
    app.send("6202", "Still thinking").await;
    app.settle().await;
    let before = conversation.last_message_at.unwrap() - chrono::Duration::minutes(1);
    app.store
        .schedule_nudge(conversation.id, "later_today", before + hours(2), before)
        .await
        .unwrap();
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "contact_replied").await;
}

#[tokio::test]
async fn spec_025_verification_4_a_failed_read_at_due_time_cancels_as_read_failed() {
    let hours = chrono::Duration::hours;
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, 500, &[]).await;
    let conversation = quiet_contact(&app, "6301", hours(2)).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "read_failed").await;
}

#[tokio::test]
async fn spec_025_a_nudge_that_passes_every_check_reaches_the_turn_once() {
    let hours = chrono::Duration::hours;
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, 200, &["vip"]).await;
    let conversation = quiet_contact(&app, "6401", hours(2)).await;
    let early = rig(&app, hours(1));
    assert_eq!(early.worker.run_once().await.claimed, 0, "not due yet");
    let rig = rig(&app, hours(3));
    assert_eq!(rig.worker.run_once().await.claimed, 1);
    assert_eq!(rig.worker.run_once().await.claimed, 0, "claimed once");
    assert_eq!(rig.turn.calls.load(Ordering::SeqCst), 1);
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent);
    assert_eq!(rig.metrics.nudge_count("sent", ""), 1);
}

#[tokio::test]
async fn spec_025_crash_a_row_left_running_is_never_sent_and_is_marked_lost() {
    let hours = chrono::Duration::hours;
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, 200, &[]).await;
    let conversation = quiet_contact(&app, "6501", hours(2)).await;
    // A process claims the row and dies before settling it.
    let claimed_at = conversation.last_message_at.unwrap() + hours(2);
    let dead = app.store.claim_due_nudges(claimed_at, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    // Inside MODEL_ABORT_MS plus the margin: still running, not claimed again, not lost.
    let soon = rig(&app, hours(2) + chrono::Duration::seconds(60));
    assert_eq!(soon.worker.run_once().await, Default::default());
    // After it: lost, counted, and never reaches a turn.
    let later = rig(&app, hours(2) + chrono::Duration::minutes(5));
    let pass = later.worker.run_once().await;
    assert_eq!((pass.claimed, pass.lost), (0, 1));
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.reason.as_deref()),
        (NudgeStatus::Lost, Some("process_died"))
    );
    assert_eq!(later.turn.calls.load(Ordering::SeqCst), 0);
    assert_eq!(later.metrics.nudge_count("lost", "process_died"), 1);
    assert!(
        !app.store
            .settle_nudge(&dead[0], NudgeStatus::Sent, None, claimed_at)
            .await
            .unwrap(),
        "the dead process's claim can no longer send it"
    );
}
