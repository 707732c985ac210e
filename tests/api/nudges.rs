//! Spec 025 (in-window nudge) through the real app: the scripted model schedules a follow-up,
//! the store holds the conversation's one nudge row, the fake ManyChat records every request.

use std::path::Path;
use std::sync::Arc;

use manychat_agent::model::ModelResponse;
use manychat_agent::model::mock::{ScriptedModel, call, reply, tool_calls};
use manychat_agent::store::NudgeStatus;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::selling::*;

fn schedule(delay: &str) -> manychat_agent::model::ToolCall {
    call(
        format!("nudge_{delay}"),
        "schedule_nudge",
        json!({"delay": delay}),
    )
}

#[tokio::test]
async fn spec_025_verification_2_scheduling_twice_leaves_one_pending_row_and_no_request() {
    let model = script(vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
        tool_calls([schedule("tomorrow")]),
        answer("Happy to help whenever you are ready."),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    let conversation = answered(&app, "6001", "How much is the wheel course?").await;
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
    // The reply cancelled the first (`contact_replied`), which stays as the record (SALES 3);
    // the same turn's schedule is the one pending row.
    let rows: Vec<(NudgeStatus, String, Option<String>)> = app
        .store
        .nudges(conversation.id)
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.status, n.delay_id, n.reason))
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                NudgeStatus::Cancelled,
                "later_today".to_owned(),
                Some("contact_replied".to_owned())
            ),
            (NudgeStatus::Pending, "tomorrow".to_owned(), None),
        ],
        "one pending row, the later schedule, beside the cancelled one"
    );
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_ne!(nudge.id, first.id);
    let paths = app.manychat_paths().await;
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
    let model = script(vec![
        tool_calls([schedule("later_today")]),
        answer("Hello! What would you like to make?"),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    let conversation = answered(&app, "6002", "Hi").await;
    assert_eq!(app.store.nudge(conversation.id).await.unwrap(), None);
}

#[tokio::test]
async fn spec_025_an_inbound_message_cancels_the_pending_nudge() {
    let model = script(vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
        answer("Sure, see you then."),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    app.send("6003", "How much is the wheel course?").await;
    app.settle().await;
    let conversation = answered(&app, "6003", "Thanks").await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Cancelled);
    assert_eq!(nudge.reason.as_deref(), Some("contact_replied"));
}

// --- the worker (025 verification 3, 4; the crash case) ---------------------------------------

use std::time::Duration;

use manychat_agent::channel::Channel;
use manychat_agent::clock::Clock;
use manychat_agent::config::{ConfigContext, ConfigHandle};
use manychat_agent::ids::Secret;
use manychat_agent::manychat::{ManyChatClient, ManyChatLimiter};
use manychat_agent::metrics::Metrics;
use manychat_agent::model::ModelError;
use manychat_agent::model::mock::ScriptStep;
use manychat_agent::nudge::worker::Pass;
use manychat_agent::nudge::{AgentNudgeTurn, NudgeSettings, NudgeTurnSettings, NudgeWorker};
use manychat_agent::store::{Conversation, OutboxKind, Turn};
use manychat_agent::turn::TurnsShared;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

/// A nudge worker on the app's store, tenant and fake ManyChat, its own model and metrics, its
/// clock reading `at` now.
pub struct Rig {
    pub worker: NudgeWorker,
    /// The nudge turn's model: its calls are the nudge's model calls.
    pub model: Arc<ScriptedModel>,
    pub metrics: Arc<Metrics>,
}

pub fn rig_at(app: &TestApp, at: chrono::DateTime<chrono::Utc>, model: Arc<ScriptedModel>) -> Rig {
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
    let metrics = Arc::new(Metrics::default());
    let clock = Clock::starting_at(at);
    let model_abort = Duration::from_secs(30);
    let turn = AgentNudgeTurn {
        store: app.store.clone(),
        model: model.clone(),
        manychat: manychat.clone(),
        clock,
        settings: NudgeTurnSettings {
            model_abort,
            max_output_tokens: 400,
            temperature: 0.3,
            channel: Channel::Whatsapp,
        },
        // A worker process of its own (`manychat-agent worker`).
        shared: TurnsShared::default(),
        metrics: metrics.clone(),
    };
    let worker = NudgeWorker::new(
        app.store.clone(),
        manychat,
        Arc::new(config),
        clock,
        metrics.clone(),
        NudgeSettings {
            poll: Duration::from_secs(15),
            model_abort,
        },
        Arc::new(turn),
    );
    Rig {
        worker,
        model,
        metrics,
    }
}

/// Starts a pass of a worker clocked 3 h ahead whose nudge turn's model answers `text` after
/// `delay`; returns once that model call has begun, with the pass still running.
async fn nudge_call_running(app: &TestApp, text: &str, delay: Duration) -> (Rig, Background<Pass>) {
    let model = Arc::new(ScriptedModel::from_steps(vec![
        ScriptStep::ok(answer(text)).after(delay),
    ]));
    let rig = rig_at(app, chrono::Utc::now() + hours(3), model.clone());
    let worker = rig.worker.clone();
    let pass = in_background(async move { worker.run_once().await });
    until(async || model.calls() == 1).await;
    (rig, pass)
}

/// A rig `offset` ahead of now whose model has no script: any model call is counted (and
/// fails).
fn rig(app: &TestApp, offset: chrono::Duration) -> Rig {
    rig_at(app, chrono::Utc::now() + offset, script(Vec::new()))
}

/// The app nudges run on: a quiet model, `later_today` configured, and ManyChat's getInfo
/// answering `status` with `tags`.
async fn nudge_app(status: u16, tags: &[&str]) -> TestApp {
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, status, tags).await;
    app
}

/// `subscriber` sent `text` and was answered: its conversation.
async fn answered(app: &TestApp, subscriber: &str, text: &str) -> Conversation {
    app.send(subscriber, text).await;
    app.settle().await;
    app.conversation(subscriber).await
}

/// The conversation as the store holds it now.
async fn stored(app: &TestApp, conversation: &Conversation) -> Conversation {
    let read = app.store.conversation(conversation.id).await;
    read.unwrap().expect("the conversation is stored")
}

/// The replies queued in the outbox for `conversation`.
async fn replies_queued_for(app: &TestApp, conversation: &Conversation) -> usize {
    app.outbox()
        .await
        .into_iter()
        .filter(|r| r.conversation_id == conversation.id && r.kind == OutboxKind::Reply)
        .count()
}

/// The status and reason of `conversation`'s nudge.
async fn nudge_state(app: &TestApp, conversation: &Conversation) -> (NudgeStatus, Option<String>) {
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    (nudge.status, nudge.reason)
}

/// A contact who wrote once, with a nudge scheduled `due_in` after their message.
async fn quiet_contact(app: &TestApp, subscriber: &str, due_in: chrono::Duration) -> Conversation {
    app.send(subscriber, "How much is the wheel course?").await;
    app.settle().await;
    schedule_after_last_message(app, subscriber, due_in).await
}

/// Schedules the conversation's `later_today` nudge at `at`, due `due_in` later.
async fn schedule_later_today(
    app: &TestApp,
    conversation: &Conversation,
    at: chrono::DateTime<chrono::Utc>,
    due_in: chrono::Duration,
) {
    app.store
        .schedule_nudge(conversation.id, "later_today", at + due_in, at)
        .await
        .unwrap();
}

/// Schedules the contact's nudge at their last message, due `due_in` later.
async fn schedule_after_last_message(
    app: &TestApp,
    subscriber: &str,
    due_in: chrono::Duration,
) -> Conversation {
    let conversation = app.conversation(subscriber).await;
    let at = conversation
        .last_message_at
        .expect("the message was recorded");
    schedule_later_today(app, &conversation, at, due_in).await;
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
    let turns_before = app.store.turns(conversation.id).await.unwrap().len();
    let pass = rig.worker.run_once().await;
    assert_eq!(pass.claimed, 1, "{reason}: the due nudge was claimed");
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.reason.as_deref()),
        (NudgeStatus::Cancelled, Some(reason))
    );
    assert_eq!(rig.model.calls(), 0, "{reason}: no model call");
    assert_eq!(rig.metrics.nudge_count("cancelled", reason), 1);
    assert!(rig.metrics.render().contains(&format!(
        "manychat_agent_nudges_total{{state=\"cancelled\",reason=\"{reason}\"}} 1"
    )));
    assert_eq!(
        app.store.turns(conversation.id).await.unwrap().len(),
        turns_before,
        "{reason}: a cancelled nudge is not a turn"
    );
}

fn quiet() -> Arc<ScriptedModel> {
    script(
        (0..4)
            .map(|_| answer("The wheel course starts on Monday."))
            .collect(),
    )
}

/// The funnel reached link_sent: agent turn `turn_id` records a performed prospect write and
/// a performed `funnel_stage: link_sent` write.
pub async fn mark_link_sent(app: &TestApp, turn_id: i64) {
    app.store
        .update_turn_actions(
            turn_id,
            &json!([
                {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
                {"tool": "set_field", "id": "funnel_stage", "value": "link_sent", "status": "performed"}
            ]),
        )
        .await
        .unwrap();
}

pub fn hours(n: i64) -> chrono::Duration {
    chrono::Duration::hours(n)
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_3_each_cancellation_reason_ends_the_row_cancelled_without_a_model_call()
 {
    let _frozen = FrozenClock::freeze();
    // escalated: the conversation escalated after the nudge was scheduled.
    let app = nudge_app(200, &[]).await;
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

#[tokio::test(start_paused = true)]
async fn spec_025_verification_3_link_sent_cancels_without_a_model_call() {
    let _frozen = FrozenClock::freeze();
    let app = nudge_app(200, &[]).await;
    let conversation = quiet_contact(&app, "6104", hours(2)).await;
    // The funnel reached link_sent: a performed write in the agent turn's record.
    let turn = app
        .store
        .turns(conversation.id)
        .await
        .unwrap()
        .into_iter()
        .rfind(|t| t.outcome.is_some())
        .unwrap();
    mark_link_sent(&app, turn.id).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "link_sent").await;
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_3_human_active_and_contact_replied_cancel_without_a_model_call() {
    let _frozen = FrozenClock::freeze();
    let app = nudge_app(200, &["vip", "human-handling"]).await;
    let conversation = quiet_contact(&app, "6201", hours(2)).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "human_active").await;

    // contact_replied: a message after the scheduling (its turn-start cancel missed: the row is
    // rescheduled behind it) is caught at due time.
    let conversation = quiet_contact(&app, "6202", hours(2)).await;
    app.send("6202", "Still thinking").await;
    app.settle().await;
    let before = conversation.last_message_at.unwrap() - chrono::Duration::minutes(1);
    schedule_later_today(&app, &conversation, before, hours(2)).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "contact_replied").await;
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_3_the_rate_limit_cancels_last_as_cap_reached() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge_and_one_turn_an_hour)).await;
    get_info_answers(&app, 200, &[]).await;
    let conversation = quiet_contact(&app, "6203", hours(2)).await;
    // The contact's one turn of the hour the nudge falls due in is used.
    let due = conversation.last_message_at.unwrap() + hours(3);
    app.store
        .bump_rate(&conversation.subscriber_id, hour_start(due))
        .await
        .unwrap();
    let rig = rig_at(&app, due, script(Vec::new()));
    assert_cancelled(&app, &rig, &conversation, "cap_reached").await;
    assert_eq!(
        app.manychat_requests()
            .await
            .iter()
            .filter(|r| r.path == "/fb/subscriber/getInfo")
            .count(),
        1,
        "the rate limit is checked after the human_active read"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_3_the_turn_cap_cancels_as_cap_reached() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(|dir| {
        with_nudge(dir);
        edit_rules(dir, |rules| rules["maxTurnsPerConversation"] = json!(1));
    }))
    .await;
    get_info_answers(&app, 200, &[]).await;
    app.send("6204", "How much is the wheel course?").await;
    app.send("6204", "And the glaze lab?").await;
    app.settle().await;
    // Scheduled after the second message (whose cap escalation is then older than the nudge).
    let conversation = app.conversation("6204").await;
    let at = conversation.last_message_at.unwrap() + chrono::Duration::milliseconds(1);
    schedule_later_today(&app, &conversation, at, hours(2)).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "cap_reached").await;
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_4_a_failed_read_at_due_time_cancels_as_read_failed() {
    let _frozen = FrozenClock::freeze();
    let app = nudge_app(500, &[]).await;
    let conversation = quiet_contact(&app, "6301", hours(2)).await;
    assert_cancelled(&app, &rig(&app, hours(3)), &conversation, "read_failed").await;
}

#[tokio::test(start_paused = true)]
async fn spec_025_a_nudge_that_passes_every_check_is_claimed_and_sent_once() {
    let _frozen = FrozenClock::freeze();
    let app = nudge_app(200, &["vip"]).await;
    let conversation = quiet_contact(&app, "6401", hours(2)).await;
    let early = rig(&app, hours(1));
    assert_eq!(early.worker.run_once().await.claimed, 0, "not due yet");
    let due = chrono::Utc::now() + hours(3);
    let rig = rig_at(
        &app,
        due,
        script(vec![answer("Any questions about Monday?")]),
    );
    assert_eq!(rig.worker.run_once().await.claimed, 1);
    assert_eq!(rig.worker.run_once().await.claimed, 0, "claimed once");
    assert_eq!(rig.model.calls(), 1);
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent);
    assert_eq!(rig.metrics.nudge_count("sent", ""), 1);
    assert!(
        rig.metrics
            .render()
            .contains("manychat_agent_nudges_total{state=\"sent\",reason=\"\"} 1")
    );
}

#[tokio::test(start_paused = true)]
async fn spec_025_crash_a_row_left_running_is_never_sent_and_is_marked_lost() {
    let _frozen = FrozenClock::freeze();
    let logs = manychat_agent::observability::capture_global();
    let app = nudge_app(200, &[]).await;
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
    assert_eq!(
        nudge_state(&app, &conversation).await,
        (NudgeStatus::Lost, Some("process_died".to_owned()))
    );
    assert_eq!(later.model.calls(), 0);
    assert_eq!(later.metrics.nudge_count("lost", "process_died"), 1);
    let id = conversation.id.to_string();
    assert!(
        logs.text()
            .lines()
            .any(|l| l.contains("marked lost") && l.contains(&id) && l.contains("process_died")),
        "one log line names the conversation and the reason"
    );
    assert!(
        !app.store
            .settle_nudge(&dead[0], NudgeStatus::Sent, None, claimed_at)
            .await
            .unwrap(),
        "the dead process's claim can no longer send it"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_025_crash_a_live_turn_whose_row_was_marked_lost_writes_nothing() {
    let _frozen = FrozenClock::freeze();
    let app = nudge_app(200, &[]).await;
    let conversation = quiet_contact(&app, "6502", hours(2)).await;
    // The model call outlives MODEL_ABORT_MS plus the margin as another worker sees it (a
    // clock that jumped, a process paused): the other worker marks the row lost meanwhile.
    let (slow, pass) =
        nudge_call_running(&app, "Any questions about Monday?", Duration::from_secs(20)).await;
    let other = rig(&app, hours(4));
    assert_eq!(other.worker.run_once().await.lost, 1);
    tokio::time::advance(Duration::from_secs(20)).await;
    pass.await.unwrap();
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Lost);
    assert_no_nudge_turn_or_reply(&app, &conversation).await;
    assert_eq!(slow.metrics.nudge_count("sent", ""), 0);
}

// --- the nudge turn (025 verification 2, 5, 6; the cancel during the model call) -------------

/// The tenant's hourly rate limit per contact.
fn rate_limit(dir: &Path, per_hour: u32) {
    edit_rules(dir, |rules| {
        rules["rateLimit"]["turnsPerSubscriberPerHour"] = json!(per_hour);
    });
}

fn hour_start(at: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    use chrono::{DurationRound, TimeDelta};
    at.duration_trunc(TimeDelta::hours(1)).unwrap()
}

/// A contact who became a prospect for the handbuilding weekend, with a nudge due in 2 h.
fn prospect_steps() -> Vec<ModelResponse> {
    vec![
        tool_calls([prospect(), set_field("course", "handbuilding")]),
        answer("The handbuilding weekend is 180 USD."),
    ]
}

async fn assert_no_nudge_turn_or_reply(app: &TestApp, conversation: &Conversation) {
    let turns = app.store.turns(conversation.id).await.unwrap();
    assert!(
        !turns.iter().any(|t| t
            .outcome
            .as_deref()
            .is_some_and(|o| o.starts_with("nudge_"))),
        "no nudge turn was recorded"
    );
    let replies = replies_queued_for(app, conversation).await;
    assert_eq!(replies, 0, "nothing was queued for the contact");
    let before = app.manychat_requests().await.len();
    app.worker.run_once().await.expect("the outbox worker runs");
    let after = app.manychat_requests().await;
    assert_eq!(after.len(), before, "ManyChat received nothing more");
}

/// C4 with a stable prefix: a nudge turn fences the history with the conversation's nonce, so
/// its history messages are the ones the contact's own next turn sends.
#[tokio::test(start_paused = true)]
async fn system_4_a_nudge_turn_fences_its_history_with_the_conversations_nonce() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(script(prospect_steps())).edit(with_nudge)).await;
    app.send("6602", "How much is the handbuilding weekend?")
        .await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "6602", hours(2)).await;
    let stored = app.conversation("6602").await.fence_nonce.expect("stored");
    let model = script(vec![answer("Would a weekend in May suit you?")]);
    let rig = rig_at(&app, chrono::Utc::now() + hours(3), model.clone());
    rig.worker.run_once().await;
    let request = &model.requests()[0];
    assert_eq!(
        request.cache.stable_messages, 2,
        "the contact's message and the reply"
    );
    let manychat_agent::model::Message::User { text } = &request.messages[0] else {
        panic!("the history leads");
    };
    assert!(
        text.contains(&format!(
            "contact: <<<CONTACT nonce={stored}>>> How much is the handbuilding weekend? <<<END CONTACT nonce={stored}>>>"
        )),
        "{text}"
    );
    assert_eq!(
        app.store
            .conversation(conversation.id)
            .await
            .unwrap()
            .unwrap()
            .fence_nonce,
        Some(stored),
        "kept"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_2_a_nudge_turn_is_not_offered_schedule_nudge_or_get_contact() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(script(prospect_steps())).edit(with_nudge)).await;
    app.send("6601", "How much is the handbuilding weekend?")
        .await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "6601", hours(2)).await;
    // A model that calls schedule_nudge anyway stages nothing.
    let model = script(vec![
        tool_calls([schedule("tomorrow")]),
        answer("Would a weekend in May suit you?"),
    ]);
    let rig = rig_at(&app, chrono::Utc::now() + hours(3), model.clone());
    rig.worker.run_once().await;
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(offered.contains(&"send_flow".to_owned()), "{offered:?}");
    assert!(
        !offered.contains(&"schedule_nudge".to_owned()),
        "{offered:?}"
    );
    assert!(!offered.contains(&"get_contact".to_owned()), "{offered:?}");
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent, "the nudge did not chain");
    let turn = nudge_sent_turn(&app, &conversation).await;
    assert_eq!(
        turn.actions,
        Some(json!([
            {"tool": "schedule_nudge", "status": "refused", "reason": "not_offered"}
        ])),
        "nothing was staged; the record says the call was refused"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_5_a_nudge_turn_whose_model_escalates_sends_nothing_and_is_not_history()
 {
    let _frozen = FrozenClock::freeze();
    let mut app_steps = prospect_steps();
    app_steps.push(answer("Yes, Saturday and Sunday."));
    let app_model = script(app_steps);
    let app = spawn_app_with(AppOptions::new(app_model.clone()).edit(with_nudge)).await;
    app.send("6701", "How much is the handbuilding weekend?")
        .await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "6701", hours(2)).await;
    let requests_before = app.manychat_requests().await.len();
    // The model stages a tag and a flow, then declines (escalates).
    let model = script(vec![
        tool_calls([
            call("tag", "add_tag", json!({"tag": "interested_wheel"})),
            call(
                "flow",
                "send_flow",
                json!({"flow": "handbuilding_guide", "contactAsked": false}),
            ),
        ]),
        reply(escalation_json("out_of_scope")),
    ]);
    let rig = rig_at(&app, chrono::Utc::now() + hours(3), model.clone());
    rig.worker.run_once().await;
    assert_eq!(model.calls(), 2);

    assert_eq!(
        nudge_state(&app, &conversation).await,
        (NudgeStatus::Skipped, Some("escalated".to_owned()))
    );
    assert_eq!(rig.metrics.nudge_count("skipped", "escalated"), 1);
    let turns = app.store.turns(conversation.id).await.unwrap();
    let skipped = turns
        .iter()
        .find(|t| t.outcome.as_deref() == Some("nudge_skipped"))
        .expect("recorded nudge_skipped");
    assert!(!skipped.bound, "a skipped nudge never enters history");
    assert_eq!(skipped.escalation_reason, None, "no person is called");
    let statuses = statuses(skipped);
    assert!(
        statuses.iter().all(|s| *s == "discarded"),
        "no staged action is performed: {:?}",
        skipped.actions
    );
    let stored = stored(&app, &conversation).await;
    assert_eq!(
        stored.escalated_at, None,
        "a declined nudge is not an escalation"
    );
    let writes = |requests: Vec<Recorded>| {
        requests
            .into_iter()
            .filter(|r| r.path != "/fb/subscriber/getInfo")
            .count()
    };
    assert_eq!(
        writes(app.manychat_requests().await),
        requests_before,
        "nothing was sent"
    );
    let replies = queued_replies(&app).await;
    assert_eq!(replies, 0, "no escalation copy, no reply");

    // The contact's next turn does not see it.
    app.send("6701", "Is it two days?").await;
    app.settle().await;
    let next = app_model.requests().last().cloned().unwrap();
    let history = user_text(&next);
    assert_eq!(
        history.matches("\nagent: ").count(),
        1,
        "only the first answer is history: {history}"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_5_a_failed_or_aborted_model_call_sends_nothing() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    let failing = quiet_contact(&app, "6702", hours(2)).await;
    let model = Arc::new(ScriptedModel::new(vec![Err(ModelError::Http {
        status: 500,
        kind: "server_error".into(),
    })]));
    let rig = rig_at(&app, chrono::Utc::now() + hours(3), model);
    rig.worker.run_once().await;
    assert_eq!(
        nudge_state(&app, &failing).await,
        (NudgeStatus::Skipped, Some("model_error".to_owned()))
    );

    // A call past MODEL_ABORT_MS is cut off: no race, the abort is its only bound.
    let hanging = quiet_contact(&app, "6703", hours(2)).await;
    let (_rig, pass) = nudge_call_running(&app, "Too late.", Duration::from_secs(31)).await;
    tokio::time::advance(Duration::from_secs(30)).await;
    pass.await.unwrap();
    assert_eq!(
        nudge_state(&app, &hanging).await,
        (NudgeStatus::Skipped, Some("model_aborted".to_owned()))
    );
    for conversation in [&failing, &hanging] {
        let outcomes: Vec<_> = app
            .store
            .turns(conversation.id)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|t| t.outcome)
            .collect();
        assert!(
            outcomes.contains(&"nudge_skipped".to_owned()),
            "{outcomes:?}"
        );
        assert!(!outcomes.contains(&"nudge_sent".to_owned()));
    }
    let replies = queued_replies(&app).await;
    assert_eq!(replies, 0);
}

#[tokio::test(start_paused = true)]
async fn spec_025_verification_6_the_note_is_outside_the_fence_and_the_reply_goes_through_the_reply_field_and_flow_text_before_actions()
 {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(script(prospect_steps())).edit(with_nudge)).await;
    app.send("6801", "How much is the handbuilding weekend?")
        .await;
    app.settle().await;
    // Due now on the app's clock, so that the app's outbox worker finds the reply due.
    let conversation = schedule_after_last_message(&app, "6801", chrono::Duration::zero()).await;
    let last_inbound = conversation.last_message_at.unwrap();
    let model = script(vec![
        tool_calls([
            call(
                "flow",
                "send_flow",
                json!({"flow": "handbuilding_guide", "contactAsked": false}),
            ),
            call("tag", "add_tag", json!({"tag": "interested_wheel"})),
        ]),
        answer("Here is the weekend guide. Would May suit you?"),
    ]);
    let rig = rig_at(&app, chrono::Utc::now(), model.clone());
    let before_nudge = app.manychat_requests().await.len();
    rig.worker.run_once().await;
    let requests_before = app.manychat_requests().await;

    // The note: outside the fence, where the contact's message would be.
    let prompt = user_text(&model.requests()[0]);
    let note = format!(
        "[no reply from the contact since {}; decide whether to follow up]",
        last_inbound.format("%Y-%m-%d %H:%M UTC")
    );
    let (before_note, after_label) = prompt
        .split_once("SERVER NOTE (follow-up")
        .expect("the follow-up note's section");
    assert!(after_label.contains(&note), "{prompt}");
    let unfenced = format!("the note is not fenced: {after_label}");
    assert_lacks(after_label, "<<<", &unfenced);
    assert_lacks(&prompt, "CONTACT MESSAGE (untrusted", "no contact message");
    assert!(
        before_note.contains("How much is the handbuilding weekend?"),
        "the history is there"
    );

    // Flows are staged on a nudge turn: nothing but the human_active read reached ManyChat.
    let during: Vec<String> = requests_before[before_nudge..]
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(during, ["/fb/subscriber/getInfo"]);
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent);
    let turn = nudge_sent_turn(&app, &conversation).await;
    assert!(turn.bound, "a sent nudge is history");
    assert_eq!(turn.text, "Here is the weekend guide. Would May suit you?");

    // The outbox delivers it: the reply field and flow, then the actions.
    tokio::time::advance(Duration::from_secs(5)).await;
    app.worker.run_once().await.expect("the outbox worker runs");
    let new: Vec<Recorded> = app.manychat_requests().await[requests_before.len()..].to_vec();
    let summary: Vec<(String, Value)> = new
        .iter()
        .map(|r| {
            let key = match r.path.as_str() {
                "/fb/subscriber/setCustomFieldByName" => r.body["field_name"].clone(),
                FLOW => r.body["flow_ns"].clone(),
                "/fb/subscriber/addTagByName" => r.body["tag_name"].clone(),
                _ => Value::Null,
            };
            (r.path.clone(), key)
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "/fb/subscriber/setCustomFieldByName".to_owned(),
                json!("ai_message")
            ),
            ("/fb/sending/sendFlow".to_owned(), json!(REPLY_FLOW)),
            (
                "/fb/sending/sendFlow".to_owned(),
                json!("content20250301000000_200002")
            ),
            (
                "/fb/subscriber/addTagByName".to_owned(),
                json!("interested-wheel-course")
            ),
        ],
        "text first, then the actions: {new:?}"
    );
    assert_eq!(
        new[0].body["field_value"],
        json!("Here is the weekend guide. Would May suit you?")
    );
    let turn = app.store.turn(turn.id).await.unwrap().unwrap();
    let statuses = statuses(&turn);
    assert_eq!(statuses, ["performed", "performed"]);
}

#[tokio::test(start_paused = true)]
async fn spec_025_an_inbound_message_during_the_nudge_model_call_cancels_it_and_nothing_is_sent() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    let conversation = quiet_contact(&app, "6901", hours(2)).await;
    let (rig, pass) =
        nudge_call_running(&app, "Any questions about Monday?", Duration::from_secs(20)).await;
    let running = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(running.status, NudgeStatus::Running);

    // The contact writes while the nudge's model call runs.
    let (status, _) = app.send("6901", "Actually, is there parking?").await;
    assert_eq!(status, 200);
    app.settle().await;
    tokio::time::advance(Duration::from_secs(20)).await;
    pass.await.unwrap();

    assert_eq!(
        nudge_state(&app, &conversation).await,
        (NudgeStatus::Cancelled, Some("contact_replied".to_owned()))
    );
    assert_no_nudge_turn_or_reply(&app, &conversation).await;
    assert_eq!(rig.metrics.nudge_count("sent", ""), 0);
}

#[tokio::test(start_paused = true)]
async fn spec_025_nudge_turns_count_against_the_budget_and_the_hourly_rate() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge_and_one_turn_an_hour)).await;
    let conversation = quiet_contact(&app, "7001", hours(2)).await;
    let at = hour_start(conversation.last_message_at.unwrap() + hours(3));
    let day = at.date_naive();
    let spent = app.store.budget(day).await.unwrap();
    let rig = rig_at(
        &app,
        at + chrono::Duration::minutes(1),
        script(vec![answer("Any questions about Monday?")]),
    );
    rig.worker.run_once().await;
    let turn = nudge_sent_turn(&app, &conversation).await;
    assert!(turn.input_tokens > 0);
    let charged = app.store.budget(day).await.unwrap();
    assert_eq!(
        charged.tokens - spent.tokens,
        turn.input_tokens + turn.output_tokens,
        "the day's budget counts the nudge turn"
    );
    assert_eq!(
        app.store
            .rate_count(&conversation.subscriber_id, at)
            .await
            .unwrap(),
        1,
        "the contact's hour counts it"
    );

    // A second follow-up in the same hour finds the hour's one turn used.
    let scheduled = at + chrono::Duration::minutes(2);
    schedule_later_today(&app, &conversation, scheduled, chrono::Duration::zero()).await;
    let again = rig_at(&app, at + chrono::Duration::minutes(3), script(vec![]));
    assert_cancelled(&app, &again, &conversation, "cap_reached").await;
}

// --- the worker inside `serve` ---------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn spec_025_serve_runs_the_nudge_worker_and_a_due_nudge_reaches_manychat() {
    let _frozen = FrozenClock::freeze();
    let model = script(vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
        answer("Shall I keep a place for you on Monday?"),
    ]);
    let logs = manychat_agent::observability::capture_global();
    let mut options = AppOptions::new(model.clone()).edit(with_nudge);
    options.background_workers = true;
    let app = spawn_app_with(options).await;
    app.send("7101", "How much is the wheel course?").await;
    app.settle_advancing().await;
    let conversation = app.conversation("7101").await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Pending);

    // Two hours pass; the workers' own polls find the nudge, then deliver its reply.
    tokio::time::advance(Duration::from_secs(2 * 3600)).await;
    // Delivered: the reply field written, then the reply flow triggered.
    let delivered = async || {
        let requests = app.manychat_requests().await;
        requests
            .iter()
            .position(|r| r.body["field_value"] == json!("Shall I keep a place for you on Monday?"))
            .is_some_and(|field| {
                requests[field + 1..]
                    .iter()
                    .any(|r| r.body["flow_ns"] == json!(REPLY_FLOW))
            })
    };
    advance_by_steps_until(Duration::from_secs(1), Duration::from_secs(120), delivered).await;
    assert!(delivered().await, "the nudge's reply reached ManyChat");
    let requests = app.manychat_requests().await;
    let reply = requests
        .iter()
        .position(|r| r.body["field_value"] == json!("Shall I keep a place for you on Monday?"))
        .unwrap();
    assert_eq!(requests[reply].path, "/fb/subscriber/setCustomFieldByName");
    assert_eq!(requests[reply + 1].path, "/fb/sending/sendFlow");
    assert_eq!(requests[reply + 1].body["flow_ns"], json!(REPLY_FLOW));
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent);
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains("manychat_agent_nudges_total{state=\"scheduled\",reason=\"\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("manychat_agent_nudges_total{state=\"sent\",reason=\"\"} 1"),
        "{metrics}"
    );
    // One log line for the state change, naming the conversation, never the text.
    let text = logs.text();
    let id = conversation.id.to_string();
    assert!(
        text.lines()
            .any(|l| l.contains("nudge settled") && l.contains(&id) && l.contains("sent")),
        "{text}"
    );
    assert!(!text.contains("Shall I keep a place"));
    app.stop().await;
}

/// `worker` runs follow-ups for a tenant with a `nudge` section, so it needs the model then
/// (and only then: without the section it asks for none, see the CLI tests).
#[test]
fn spec_025_worker_with_a_nudge_section_needs_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    with_nudge(&config);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .arg("worker")
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", sqlite_file_url(dir.path()))
        .env("MANYCHAT_API_TOKEN", "mc-fixture-token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content20260101000000_000900")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains("AGENT_MODEL"), "{errors}");
}

/// Two processes on one PostgreSQL database (two apps, each with its nudge worker): every due
/// nudge is claimed, turned and queued exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_025_two_workers_on_one_postgres_send_each_due_nudge_once() {
    const CONTACTS: usize = 6;
    let url = fresh_postgres_url().await;
    let answers = || {
        script(
            (0..CONTACTS)
                .map(|_| answer("Any questions about Monday?"))
                .collect(),
        )
    };
    let one = spawn_app_with(
        AppOptions::new(answers())
            .edit(with_nudge)
            .env("DATABASE_URL", url.clone()),
    )
    .await;
    let two = spawn_app_with(
        AppOptions::new(answers())
            .edit(with_nudge)
            .env("DATABASE_URL", url),
    )
    .await;
    let mut conversations = Vec::new();
    for n in 0..CONTACTS {
        conversations.push(quiet_contact(&one, &format!("7201{n}"), hours(2)).await);
    }
    let due = chrono::Utc::now() + hours(3);
    let a = rig_at(&one, due, answers());
    let b = rig_at(&two, due, answers());
    let (pass_a, pass_b) = bounded("two racing passes", async {
        tokio::join!(a.worker.run_once(), b.worker.run_once())
    })
    .await;
    assert_eq!(pass_a.claimed + pass_b.claimed, CONTACTS);
    assert_eq!(a.model.calls() + b.model.calls(), CONTACTS, "one turn each");
    let rows = one.outbox().await;
    for conversation in &conversations {
        let nudge = one.store.nudge(conversation.id).await.unwrap().unwrap();
        assert_eq!(nudge.status, NudgeStatus::Sent);
        let replies = rows
            .iter()
            .filter(|r| r.conversation_id == conversation.id && r.kind == OutboxKind::Reply)
            .count();
        assert_eq!(replies, 1, "one follow-up queued");
    }
}

// --- what a nudge turn shares with the contact's turns -----------

/// The tenant's daily token cap.
fn daily_token_cap(dir: &Path, tokens: i64) {
    edit_rules(dir, |rules| {
        rules["budget"]["dailyTokenCap"] = json!(tokens);
    });
}

#[tokio::test(start_paused = true)]
async fn a_due_nudge_is_cancelled_cap_reached_without_a_model_call_when_a_turn_in_flight_reserved_the_rest_of_the_day()
 {
    let _frozen = FrozenClock::freeze();
    const CAP: i64 = 1_000_000;
    let model = Arc::new(ScriptedModel::from_steps(vec![
        ScriptStep::ok(answer("The wheel course starts on Monday.")),
        // Another contact's turn, still in flight when the nudge falls due.
        ScriptStep::ok(answer("Yes, there is parking.")).after(Duration::from_secs(20)),
    ]));
    let app = spawn_app_with(AppOptions::new(model.clone()).edit(|dir| {
        with_nudge(dir);
        daily_token_cap(dir, CAP);
    }))
    .await;
    // Due now on the app's clock, for the app's own nudge worker (serve's).
    let conversation = quiet_contact(&app, "7301", chrono::Duration::zero()).await;
    // The day's stored spend leaves one token: the worker's own budget check lets it through.
    let today = chrono::Utc::now().date_naive();
    let spent = app.store.budget(today).await.unwrap().tokens;
    app.store
        .add_budget(today, CAP - 1 - spent, 0.0)
        .await
        .unwrap();
    let in_flight = send_in_background(&app, "7302", "Is there parking?");
    until(async || model.calls() == 2).await;

    let pass = app.nudges.run_once().await;
    assert_eq!(pass.claimed, 1);
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.reason.as_deref()),
        (NudgeStatus::Cancelled, Some("cap_reached")),
        "the turn in flight reserved what is left of the day"
    );
    assert_eq!(model.calls(), 2, "no model call for the nudge");
    assert_no_nudge_turn_or_reply(&app, &conversation).await;

    tokio::time::advance(Duration::from_secs(30)).await;
    in_flight.await.unwrap();
    app.settle().await;
}

/// ManyChat's requests from `from` on, as (path, field=value or flow namespace), leaving out
/// the human_active reads.
async fn sent_since(app: &TestApp, from: usize) -> Vec<(String, String)> {
    app.manychat_requests().await[from..]
        .iter()
        .filter(|r| r.path != "/fb/subscriber/getInfo")
        .map(|r| {
            let what = match r.path.as_str() {
                FLOW => r.body["flow_ns"].as_str().unwrap_or_default().to_owned(),
                _ => format!(
                    "{}={}",
                    r.body["field_name"].as_str().unwrap_or_default(),
                    r.body["field_value"].as_str().unwrap_or_default()
                ),
            };
            (r.path.clone(), what)
        })
        .collect()
}

/// (id, status, origin) of each entry of the nudge turn's record.
async fn nudge_turn_entries(
    app: &TestApp,
    conversation: &Conversation,
) -> Vec<(String, String, Option<String>)> {
    entries(
        nudge_sent_turn(app, conversation)
            .await
            .actions
            .as_ref()
            .unwrap(),
    )
}

/// Runs the app's outbox worker until its queue is delivered (past the contact's reply gap).
async fn deliver(app: &TestApp) {
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(3)).await;
        app.worker.run_once().await.expect("the outbox worker runs");
    }
}

/// The tenant with a nudge section and one turn per contact an hour.
fn with_nudge_and_one_turn_an_hour(dir: &Path) {
    with_nudge(dir);
    rate_limit(dir, 1);
}

/// The tenant with a nudge section and the flows the server sends on its own (032).
fn with_nudge_and_server_flows(dir: &Path) {
    with_nudge(dir);
    with_server_flows(dir);
}

/// The conversation's `nudge_sent` turn.
async fn nudge_sent_turn(app: &TestApp, conversation: &Conversation) -> Turn {
    app.store
        .turns(conversation.id)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.outcome.as_deref() == Some("nudge_sent"))
        .expect("recorded nudge_sent")
}

/// The status of each entry of a turn's record.
fn statuses(turn: &Turn) -> Vec<&str> {
    turn.actions
        .as_ref()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect()
}

/// How many replies wait in the outbox.
async fn queued_replies(app: &TestApp) -> usize {
    app.outbox()
        .await
        .into_iter()
        .filter(|r| r.kind == OutboxKind::Reply)
        .count()
}

/// Runs a nudge worker clocked now whose nudge turn's model is `model`; returns the worker and
/// how many requests ManyChat had received before it ran.
async fn run_nudge_now(app: &TestApp, model: Arc<ScriptedModel>) -> (Rig, usize) {
    let rig = rig_at(app, chrono::Utc::now(), model);
    let before = app.manychat_requests().await.len();
    rig.worker.run_once().await;
    (rig, before)
}

/// Runs a nudge worker clocked now whose nudge turn queues the follow-up "Any questions about
/// Monday?".
async fn queue_the_follow_up(app: &TestApp) -> Rig {
    let rig = rig_at(
        app,
        chrono::Utc::now(),
        script(vec![answer("Any questions about Monday?")]),
    );
    rig.worker.run_once().await;
    rig
}

/// The contact writes while a reply is queued: the response is silent; once the outbox has
/// delivered, the texts ManyChat received since `before`, in order.
async fn answered_behind_the_queue(
    app: &TestApp,
    subscriber: &str,
    text: &str,
    before: usize,
) -> Vec<String> {
    let (status, body) = app.send(subscriber, text).await;
    assert_eq!(status, 200);
    assert!(block_texts(&body).is_empty(), "silent: {body}");
    app.settle().await;
    deliver(app).await;
    sent_since(app, before)
        .await
        .into_iter()
        .filter(|(path, _)| path == SET_FIELD)
        .map(|(_, what)| what)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn spec_032_b_a_tied_stage_written_on_a_nudge_turn_reports_flow_staged_and_its_flow_follows_the_text()
 {
    let _frozen = FrozenClock::freeze();
    let app =
        spawn_app_with(AppOptions::new(script(prospect_steps())).edit(with_nudge_and_server_flows))
            .await;
    app.send("7401", "How much is the handbuilding weekend?")
        .await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "7401", chrono::Duration::zero()).await;
    let model = script(vec![
        tool_calls([set_field("funnel_stage", "nurturing")]),
        answer("Here is what beginners make in their first month."),
    ]);
    let (_rig, before) = run_nudge_now(&app, model.clone()).await;
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![json!({"staged": true, "flowStaged": "student_gallery"})]
    );
    assert_eq!(
        sent_since(&app, before).await,
        pairs(&[]),
        "nothing is sent during the nudge turn"
    );
    assert_eq!(
        nudge_turn_entries(&app, &conversation).await,
        [
            entry("funnel_stage", "staged", None),
            entry("student_gallery", "staged", Some("stage")),
        ]
    );

    deliver(&app).await;
    assert_eq!(
        sent_since(&app, before).await,
        pairs(&[
            (
                SET_FIELD,
                "ai_message=Here is what beginners make in their first month."
            ),
            (FLOW, REPLY_FLOW),
            (SET_FIELD, "studio_funnel_stage=nurturing"),
            (FLOW, GALLERY_NS),
        ]),
        "the text, then the write, then its tied flow"
    );
    assert_eq!(
        nudge_turn_entries(&app, &conversation).await,
        [
            entry("funnel_stage", "performed", None),
            entry("student_gallery", "performed", Some("stage")),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn spec_032_a_a_nudge_turn_never_sends_the_opening() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(
        AppOptions::new(script(vec![answer("Hello! What would you like to make?")]))
            .edit(with_nudge_and_server_flows),
    )
    .await;
    // Not a prospect yet: an inbound turn that made them one would send the opening.
    app.send("7402", "Do you run pottery classes?").await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "7402", chrono::Duration::zero()).await;
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "nurturing")]),
        answer("Here is what beginners make in their first month."),
    ]);
    let (_rig, before) = run_nudge_now(&app, model.clone()).await;
    assert_eq!(
        app.store
            .nudge(conversation.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        NudgeStatus::Sent
    );
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![
            json!({"staged": true}),
            json!({"staged": true, "flowStaged": "student_gallery"})
        ],
        "the model is not told that an opening goes"
    );
    assert_eq!(sent_since(&app, before).await, pairs(&[]));
    deliver(&app).await;
    let delivered = sent_since(&app, before).await;
    assert!(
        !delivered.iter().any(|(_, what)| what == OPENING_NS),
        "the opening never goes on a nudge turn: {delivered:?}"
    );
    assert_eq!(
        delivered,
        pairs(&[
            (
                SET_FIELD,
                "ai_message=Here is what beginners make in their first month."
            ),
            (FLOW, REPLY_FLOW),
            (SET_FIELD, "studio_intent=prospect"),
            (SET_FIELD, "studio_funnel_stage=nurturing"),
            (FLOW, GALLERY_NS),
        ])
    );
    assert!(
        !nudge_turn_entries(&app, &conversation)
            .await
            .iter()
            .any(|(_, _, origin)| origin.as_deref() == Some("opening")),
        "nor is it recorded"
    );
}

#[tokio::test(start_paused = true)]
async fn system_037_a_message_while_the_nudge_reply_is_queued_is_answered_behind_it() {
    let _frozen = FrozenClock::freeze();
    let model = script(vec![
        answer("The wheel course starts on Monday."),
        answer("Yes, there is free parking."),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    let conversation = quiet_contact(&app, "7501", chrono::Duration::zero()).await;
    let _rig = queue_the_follow_up(&app).await;
    let queued = replies_queued_for(&app, &conversation).await;
    assert_eq!(queued, 1, "the follow-up waits in the outbox");
    let before = app.manychat_requests().await.len();

    // The contact writes while the follow-up is queued: no inline answer ahead of it.
    let texts = answered_behind_the_queue(&app, "7501", "Is there parking?", before).await;
    assert_eq!(
        texts,
        [
            "ai_message=Any questions about Monday?",
            "ai_message=Yes, there is free parking."
        ],
        "ManyChat gets the follow-up first, then the answer"
    );
}

#[tokio::test(start_paused = true)]
async fn system_037_an_escalation_before_the_model_while_the_nudge_reply_is_queued_goes_behind_it()
{
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    let conversation = quiet_contact(&app, "7502", chrono::Duration::zero()).await;
    let _rig = queue_the_follow_up(&app).await;
    let before = app.manychat_requests().await.len();

    // An escalation keyword: the copy, decided without the model, waits its turn too.
    let texts =
        answered_behind_the_queue(&app, "7502", "I want to speak to a person", before).await;
    assert_eq!(
        texts,
        [
            "ai_message=Any questions about Monday?".to_owned(),
            format!("ai_message={}", app.escalation_copy())
        ],
        "ManyChat gets the follow-up first, then the escalation copy"
    );
    let stored = stored(&app, &conversation).await;
    assert!(stored.escalated_at.is_some(), "the contact was handed over");
}

/// The value of the counter sample `family{labels}` (labels in any order) in OpenMetrics `text`,
/// parsed strictly; 0 when the series is absent.
fn counter(text: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    use openmetrics_parser::OpenMetricsValue;
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("not valid OpenMetrics ({e:?}):\n{text}"));
    let mut wanted: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    wanted.sort();
    let Some(family) = parsed.families.get(family) else {
        return 0.0;
    };
    family
        .iter_samples()
        .find_map(|sample| {
            let mut got: Vec<(String, String)> = sample
                .get_labelset()
                .ok()?
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            got.sort();
            match &sample.value {
                OpenMetricsValue::Counter(c) if got == wanted => Some(c.value.as_f64()),
                _ => None,
            }
        })
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn nudge_turns_count_actions_and_guardrail_violations_like_inbound_turns() {
    let _frozen = FrozenClock::freeze();
    let actions = "manychat_agent_actions";
    let violations = "manychat_agent_guardrail_violations";
    // The inbound turn performs schedule_nudge: counted as an action, not only as a nudge.
    let inbound = vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
    ];
    let app = spawn_app_with(AppOptions::new(script(inbound)).edit(with_nudge)).await;
    app.send("6901", "How much is the wheel course?").await;
    app.settle().await;
    let scrape = app.metrics_text().await;
    assert_eq!(
        counter(
            &scrape,
            actions,
            &[("tool", "schedule_nudge"), ("status", "performed")]
        ),
        1.0,
        "{scrape}"
    );
    let conversation = app.conversation("6901").await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Pending);

    // A nudge turn whose reply a guardrail stops (not an AgentReply): the violation is counted,
    // and its staged tag as discarded.
    let model = script(vec![
        tool_calls([call("tag", "add_tag", json!({"tag": "interested_wheel"}))]),
        reply("Sure! The class costs whatever you like."),
    ]);
    let rig = rig_at(&app, nudge.due_at + hours(1), model.clone());
    assert_eq!(rig.worker.run_once().await.claimed, 1);
    assert_eq!(model.calls(), 2);
    assert_eq!(rig.metrics.nudge_count("skipped", "escalated"), 1);
    let text = rig.metrics.render();
    assert_eq!(
        counter(&text, violations, &[("kind", "schema")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        counter(
            &text,
            actions,
            &[("tool", "add_tag"), ("status", "discarded")]
        ),
        1.0,
        "{text}"
    );

    // A nudge turn that is sent with a tag the tenant does not have: the refused write is
    // counted when the turn is written (its staged tag where the outbox performs it).
    schedule_after_last_message(&app, "6901", hours(2)).await;
    let model = script(vec![
        tool_calls([
            call("known", "add_tag", json!({"tag": "interested_wheel"})),
            call("unknown", "add_tag", json!({"tag": "not_a_tenant_tag"})),
        ]),
        answer("Any questions about Monday?"),
    ]);
    let rig = rig_at(&app, chrono::Utc::now() + hours(3), model);
    assert_eq!(rig.worker.run_once().await.claimed, 1);
    assert_eq!(rig.metrics.nudge_count("sent", ""), 1);
    let text = rig.metrics.render();
    assert_eq!(
        counter(
            &text,
            actions,
            &[("tool", "add_tag"), ("status", "refused")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        counter(&text, actions, &[("tool", "add_tag"), ("status", "staged")]),
        0.0,
        "a staged action counts once, when the outbox attempts it"
    );
    assert_eq!(counter(&text, violations, &[("kind", "schema")]), 0.0);
}
