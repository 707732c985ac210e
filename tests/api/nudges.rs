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
