//! What the nudge suites (`nudges_*.rs`, and `window_closing.rs`) share: a nudge worker on the
//! app's store, tenant and fake ManyChat with its own model, metrics and clock (`Rig`), the
//! `schedule_nudge` call and contacts with a nudge scheduled, the nudge's stored state, the check
//! that a due nudge was cancelled without a model call, and what reached the outbox and ManyChat.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::channel::Channel;
use manychat_agent::clock::Clock;
use manychat_agent::config::{ConfigContext, ConfigHandle};
use manychat_agent::ids::Secret;
use manychat_agent::manychat::{ManyChatClient, ManyChatLimiter};
use manychat_agent::metrics::Metrics;
use manychat_agent::model::ModelResponse;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, call, tool_calls};
use manychat_agent::nudge::worker::Pass;
use manychat_agent::nudge::{AgentNudgeTurn, NudgeSettings, NudgeTurnSettings, NudgeWorker};
use manychat_agent::store::{Conversation, NudgeStatus, OutboxKind, Turn};
use manychat_agent::turn::TurnsShared;
use serde_json::json;

use crate::helpers::*;
use crate::selling::*;

pub fn schedule(delay: &str) -> manychat_agent::model::ToolCall {
    call(
        format!("nudge_{delay}"),
        "schedule_nudge",
        json!({"delay": delay}),
    )
}

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
pub async fn nudge_call_running(
    app: &TestApp,
    text: &str,
    delay: Duration,
) -> (Rig, Background<Pass>) {
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
pub fn rig(app: &TestApp, offset: chrono::Duration) -> Rig {
    rig_at(app, chrono::Utc::now() + offset, script(Vec::new()))
}

/// The conversation as the store holds it now.
pub async fn stored(app: &TestApp, conversation: &Conversation) -> Conversation {
    let read = app.store.conversation(conversation.id).await;
    read.unwrap().expect("the conversation is stored")
}

/// The replies queued in the outbox for `conversation`.
pub async fn replies_queued_for(app: &TestApp, conversation: &Conversation) -> usize {
    app.outbox()
        .await
        .into_iter()
        .filter(|r| r.conversation_id == conversation.id && r.kind == OutboxKind::Reply)
        .count()
}

/// The status and reason of `conversation`'s nudge.
pub async fn nudge_state(
    app: &TestApp,
    conversation: &Conversation,
) -> (NudgeStatus, Option<String>) {
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    (nudge.status, nudge.reason)
}

/// A contact who wrote once, with a nudge scheduled `due_in` after their message.
pub async fn quiet_contact(
    app: &TestApp,
    subscriber: &str,
    due_in: chrono::Duration,
) -> Conversation {
    app.send(subscriber, "How much is the wheel course?").await;
    app.settle().await;
    schedule_after_last_message(app, subscriber, due_in).await
}

/// Schedules the conversation's `later_today` nudge at `at`, due `due_in` later.
pub async fn schedule_later_today(
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
pub async fn schedule_after_last_message(
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

pub async fn assert_cancelled(app: &TestApp, rig: &Rig, conversation: &Conversation, reason: &str) {
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

pub fn quiet() -> Arc<ScriptedModel> {
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

/// The tenant's hourly rate limit per contact.
pub fn rate_limit(dir: &Path, per_hour: u32) {
    edit_rules(dir, |rules| {
        rules["rateLimit"]["turnsPerSubscriberPerHour"] = json!(per_hour);
    });
}

pub fn hour_start(at: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    use chrono::{DurationRound, TimeDelta};
    at.duration_trunc(TimeDelta::hours(1)).unwrap()
}

/// A contact who became a prospect for the handbuilding weekend, with a nudge due in 2 h.
pub fn prospect_steps() -> Vec<ModelResponse> {
    vec![
        tool_calls([prospect(), set_field("course", "handbuilding")]),
        answer("The handbuilding weekend is 180 USD."),
    ]
}

pub async fn assert_no_nudge_turn_or_reply(app: &TestApp, conversation: &Conversation) {
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

/// Runs the app's outbox worker until its queue is delivered (past the contact's reply gap).
pub async fn deliver(app: &TestApp) {
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(3)).await;
        app.worker.run_once().await.expect("the outbox worker runs");
    }
}

/// The tenant with a nudge section and one turn per contact an hour.
pub fn with_nudge_and_one_turn_an_hour(dir: &Path) {
    with_nudge(dir);
    rate_limit(dir, 1);
}

/// The conversation's `nudge_sent` turn.
pub async fn nudge_sent_turn(app: &TestApp, conversation: &Conversation) -> Turn {
    app.store
        .turns(conversation.id)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.outcome.as_deref() == Some("nudge_sent"))
        .expect("recorded nudge_sent")
}
