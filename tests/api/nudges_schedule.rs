//! Spec 025 (in-window nudge), scheduling through the real app: the scripted model's
//! `schedule_nudge` leaves the conversation one pending row and makes no ManyChat request, waits
//! for a prospect, and the contact's next message cancels it.

use manychat_agent::model::mock::tool_calls;
use manychat_agent::store::{Conversation, NudgeStatus};
use serde_json::json;

use crate::helpers::*;
use crate::nudges_helpers::*;
use crate::selling::*;

/// `subscriber` sent `text` and was answered: its conversation.
async fn answered(app: &TestApp, subscriber: &str, text: &str) -> Conversation {
    app.send(subscriber, text).await;
    app.settle().await;
    app.conversation(subscriber).await
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
