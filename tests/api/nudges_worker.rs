//! Spec 025 (in-window nudge), the worker at due time (verification 3, 4; the crash case): each
//! reason a due nudge is cancelled without a model call, a failed read, a nudge that passes every
//! check claimed and sent once, and a row a dead process left running marked lost and never sent.

use std::time::Duration;

use manychat_agent::store::NudgeStatus;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::helpers::*;
use crate::nudges_helpers::*;
use crate::selling::*;

/// The app nudges run on: a quiet model, `later_today` configured, and ManyChat's getInfo
/// answering `status` with `tags`.
async fn nudge_app(status: u16, tags: &[&str]) -> TestApp {
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    get_info_answers(&app, status, tags).await;
    app
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
