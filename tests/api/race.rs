//! SYSTEM 3.4: the race between the model and the deadline, measured from arrival, on tokio's
//! frozen clock (no test waits real time for a deadline).

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{HangingModel, ScriptedModel};
use manychat_agent::store::OutboxStatus;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn system_3_4_race_won_replies_inline_and_records_the_turn() {
    let app = spawn_app(Arc::new(ScriptedModel::replies([reply_json(
        "Classes run on weekday evenings.",
    )])))
    .await;
    let (status, body) = app.send("2001", "When are classes?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["Classes run on weekday evenings."]);
    let turns = app.turns("2001").await;
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0].text, "When are classes?");
    assert_eq!(turns[1].outcome.as_deref(), Some("answered_inline"));
    assert!(turns[1].input_tokens > 0, "usage is recorded");
    assert!(app.outbox().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn system_3_4_race_lost_acknowledges_now_and_delivers_the_reply_through_the_outbox() {
    let _frozen = FrozenClock::freeze();
    let model = slow_reply("The evening class has places.", Duration::from_secs(9));
    let app = spawn_app(model.clone()).await;
    app.returning_contact("2002").await;
    let request = send_in_background(&app, "2002", "Any places left?");
    until(async || model.calls() == 1).await;

    acknowledged_at_the_deadline(&app, request).await;
    // The acknowledgement is a promise, on disk before it left: the message, and
    // the owed reply holding the escalation copy until the model answers.
    assert_eq!(
        app.turns("2002").await.last().unwrap().text,
        "Any places left?"
    );
    let promised = app.outbox().await;
    assert_eq!(promised.len(), 2, "the owed reply and its fallback handoff");
    assert_eq!(promised[0].payload["messages"][0], app.escalation_copy());
    assert!(
        promised[0].next_attempt_at > promised[0].created_at + chrono::Duration::seconds(20),
        "not due before the model call's abort window ends"
    );

    // The model call was not cancelled: its answer arrives and keeps the promise.
    tokio::time::advance(Duration::from_secs(1)).await;
    app.until_last_outcome("2002", "deferred").await;
    app.settle().await;
    let kept = app.outbox().await;
    assert_eq!(kept.len(), 1, "the fallback handoff is gone");
    assert_eq!(
        kept[0].payload["messages"][0],
        "The evening class has places."
    );
    let turns = app.turns("2002").await;
    assert_eq!(turns.last().unwrap().outcome.as_deref(), Some("deferred"));

    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let requests = app.manychat_requests().await;
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/fb/subscriber/setCustomFieldByName");
    assert_eq!(
        requests[0].body,
        json!({"subscriber_id": 2002, "field_name": "ai_message",
               "field_value": "The evening class has places."})
    );
    assert_eq!(requests[1].path, "/fb/sending/sendFlow");
    assert_eq!(
        requests[1].body,
        json!({"subscriber_id": 2002, "flow_ns": REPLY_FLOW})
    );
    assert_eq!(app.outbox().await[0].status, OutboxStatus::Delivered);
}

#[tokio::test(start_paused = true)]
async fn system_3_4_abort_records_no_agent_turn_and_sends_the_escalation_copy_later() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(HangingModel::new());
    let app = spawn_app(model.clone()).await;
    let request = send_in_background(&app, "2003", "Hello?");
    until(async || model.calls() == 1).await;

    acknowledged_at_the_deadline(&app, request).await;

    app.queued_after(Duration::from_secs(22)).await;
    assert_eq!(
        model.cancelled(),
        1,
        "the call is aborted at MODEL_ABORT_MS"
    );
    let turns = app.turns("2003").await;
    assert_eq!(turns.len(), 1, "no agent turn on abort");
    assert!(app.conversation("2003").await.escalated_at.is_some());

    app.worker.run_once().await.unwrap();
    let requests = app.manychat_requests().await;
    assert_eq!(
        requests[0].body["field_value"],
        json!(app.escalation_copy())
    );
    assert_eq!(requests[1].path, "/fb/sending/sendFlow");
}

#[tokio::test]
async fn system_3_3_silent_response_when_a_reply_is_already_queued() {
    let model = Arc::new(ScriptedModel::replies([reply_json("Second answer.")]));
    let app = spawn_app(model).await;
    let now = chrono::Utc::now();
    queue_reply_at(&app, "2004", "First answer.", now, Duration::from_secs(300)).await;
    let (status, body) = app.send("2004", "And another thing").await;
    assert_eq!(status, 200);
    assert!(block_texts(&body).is_empty(), "silent: no overtaking");
    assert!(body["content"]["external_message_callback"].is_object());
    app.settle().await;
    let rows = app.outbox().await;
    assert_eq!(rows.len(), 2, "the new reply queues behind the first");
    assert_eq!(rows[1].payload["messages"], json!(["Second answer."]));
}

#[tokio::test]
async fn system_4_escalation_sends_the_copy_and_performs_the_handoff_after_the_response() {
    let model = Arc::new(ScriptedModel::replies([escalation_json(
        "explicit_request",
    )]));
    let app = spawn_app(model).await;
    let (_, body) = app.send("2005", "Can I talk to someone?").await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    app.settle().await;
    let handoff_tag = app.rules()["handoff"]["tag"].as_str().unwrap().to_owned();
    let requests = app.manychat_requests().await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/fb/subscriber/addTagByName");
    assert_eq!(
        requests[0].body,
        json!({"subscriber_id": 2005, "tag_name": handoff_tag})
    );
    let turns = app.turns("2005").await;
    let agent = turns.last().unwrap();
    assert_eq!(agent.outcome.as_deref(), Some("escalated_model"));
    assert_eq!(
        agent.actions,
        Some(
            json!([{"tool": "add_tag", "id": "handoff", "status": "performed", "origin": "handoff"}])
        )
    );
    assert!(app.conversation("2005").await.escalated_at.is_some());
}

/// A model (or anything in the agent) that panics is a bug; the contact still gets the tenant's
/// escalation copy with a 200, not a dropped connection or a holding line nobody follows up.
#[tokio::test]
async fn system_3_3_a_turn_that_panics_answers_the_escalation_copy() {
    struct PanickingModel;

    #[async_trait::async_trait]
    impl manychat_agent::model::Model for PanickingModel {
        fn id(&self) -> &str {
            "mock:panicking"
        }

        async fn step(
            &self,
            _request: &manychat_agent::model::ModelRequest,
        ) -> Result<manychat_agent::model::ModelResponse, manychat_agent::model::ModelError>
        {
            panic!("a bug in a provider adapter");
        }
    }

    let app = spawn_app(Arc::new(PanickingModel)).await;
    let (status, body) = app.send("2009", "When are classes?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    // The service goes on answering.
    let (status, _) = app.send("2010", "Hello?").await;
    assert_eq!(status, 200);
}
