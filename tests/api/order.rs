//! 037: one turn at a time per contact, in arrival order; the wait counts against the deadline;
//! the order holds across two instances sharing one Postgres database.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};
use manychat_agent::store::{OutboxKind, OutboxStatus};
use serde_json::{Value, json};

use crate::helpers::*;
use crate::selling::user_text;

fn send(app: &TestApp, subscriber: &str, text: &str) -> Background<Value> {
    let request = send_in_background(app, subscriber, text);
    in_background(async move { request.await.unwrap().1 })
}

/// "First question" then "Second question" from `subscriber`, the second sent while the first
/// turn's model call runs (it answers `first_answer` after `seconds`; the second call answers
/// "Second answer." at once): the app, its model and the two requests in flight.
async fn second_message_during_the_first_turn(
    subscriber: &str,
    first_answer: &str,
    seconds: u64,
) -> (
    TestApp,
    Arc<ScriptedModel>,
    Background<Value>,
    Background<Value>,
) {
    let model = slow_then(first_answer, Duration::from_secs(seconds), "Second answer.");
    let app = spawn_app(model.clone()).await;
    let first = send(&app, subscriber, "First question");
    until(async || model.calls() == 1).await;
    let second = send(&app, subscriber, "Second question");
    // The second turn is in line behind the first (the event, not a count of pauses).
    until(async || series(&app, "turns_waiting").await == 1.0).await;
    (app, model, first, second)
}

#[tokio::test(start_paused = true)]
async fn system_037_a_second_message_waits_for_the_first_turn_and_sees_its_reply() {
    let _frozen = FrozenClock::freeze();
    let (app, model, first, second) =
        second_message_during_the_first_turn("7001", "First answer.", 3).await;
    assert_eq!(model.calls(), 1, "the second turn waits before the model");
    assert!(
        app.turns("7001").await.is_empty(),
        "nothing is recorded before a turn's outcome: the first turn is still thinking, the \
         second has not started"
    );

    tokio::time::advance(Duration::from_secs(3)).await;
    until(async || first.is_finished() && second.is_finished()).await;
    assert_eq!(block_texts(&first.await.unwrap()), vec!["First answer."]);
    assert_eq!(block_texts(&second.await.unwrap()), vec!["Second answer."]);
    let history = user_text(&model.requests()[1]);
    assert!(
        history.contains("First answer."),
        "history includes the previous reply"
    );
    let texts = app.turn_fields("7001", |t| t.text).await;
    assert_eq!(
        texts,
        vec![
            "First question",
            "First answer.",
            "Second question",
            "Second answer."
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn system_037_a_turn_that_cannot_start_by_its_deadline_answers_silently_and_replies_later() {
    let _frozen = FrozenClock::freeze();
    let (app, model, first, second) =
        second_message_during_the_first_turn("7002", "Slow first answer.", 20).await;

    tokio::time::advance(Duration::from_secs(8)).await;
    until(async || first.is_finished() && second.is_finished()).await;
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec![app.acknowledgement()]
    );
    let second = second.await.unwrap();
    assert!(
        block_texts(&second).is_empty(),
        "silent: the previous turn has not settled"
    );
    assert!(second["content"]["external_message_callback"].is_object());

    tokio::time::advance(Duration::from_secs(12)).await;
    until(async || app.outbox().await.len() == 2).await;
    app.settle().await;
    let rows = app.outbox().await;
    assert_eq!(rows[0].payload["messages"], json!(["Slow first answer."]));
    assert_eq!(rows[1].payload["messages"], json!(["Second answer."]));
    assert!(user_text(&model.requests()[1]).contains("Slow first answer."));
}

#[tokio::test]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn system_037_order_holds_across_two_instances_sharing_postgres() {
    let url = fresh_postgres_url().await;

    // The first instance's model takes a moment, so the second message arrives mid-turn.
    let first_model = Arc::new(ScriptedModel::from_steps([ScriptStep::ok(reply(
        reply_json("Answer from the first instance."),
    ))
    .after(Duration::from_millis(400))]));
    let second_model = Arc::new(ScriptedModel::replies([reply_json(
        "Answer from the second instance.",
    )]));
    let one =
        spawn_app_with(AppOptions::new(first_model.clone()).env("DATABASE_URL", url.clone())).await;
    let two = spawn_app_with(AppOptions::new(second_model.clone()).env("DATABASE_URL", url)).await;

    let first = send(&one, "7003", "Question to the first instance");
    until(async || first_model.calls() == 1).await;
    let second = send(&two, "7003", "Question to the second instance");
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec!["Answer from the first instance."]
    );
    assert_eq!(
        block_texts(&second.await.unwrap()),
        vec!["Answer from the second instance."]
    );
    assert!(
        user_text(&second_model.requests()[0]).contains("Answer from the first instance."),
        "the second instance waited for the first turn and read its reply"
    );
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn system_037_a_wait_is_abandoned_after_abort_plus_deadline() {
    let _frozen = FrozenClock::freeze();
    let (schema, url) = fresh_postgres_schema().await;
    let model = Arc::new(ScriptedModel::replies([reply_json("Never used.")]));
    let app = spawn_app_with(AppOptions::new(model.clone()).env("DATABASE_URL", url)).await;

    // Another replica holds this conversation's turn ticket and never lets go (it keeps
    // renewing its lease).
    let conversation = app.conversation("7004").await;
    another_replica_holds_the_ticket(&schema, &conversation, "1 hour").await;

    let request = send(&app, "7004", "Is anyone there?");
    // The request has arrived once its turn waits for its place (its race deadline, 8 s, is
    // armed).
    until(async || series(&app, "turns_waiting").await == 1.0).await;
    for _ in 0..8 {
        tokio::time::advance(Duration::from_secs(1)).await;
        real_pause().await;
    }
    let body = request.await.unwrap();
    assert!(block_texts(&body).is_empty(), "silent at the deadline");
    // The silent response is a promise, on disk before it left.
    let turns = app.turns("7004").await;
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].text, "Is anyone there?", "the message is not lost");
    assert_eq!(
        app.outbox().await.len(),
        2,
        "the owed reply and its handoff"
    );

    // MODEL_ABORT_MS + RACE_DEADLINE_MS = 38 s after arrival, the wait is abandoned.
    // The waiting task polls the other replica's ticket on the store between its sleeps:
    // each second of the clock leaves that poll a moment of real time. The check after it is
    // bounded.
    for _ in 0..31 {
        tokio::time::advance(Duration::from_secs(1)).await;
        real_pause().await;
    }
    until(async || app.turns("7004").await.len() == 2).await;
    app.settle().await;
    assert_eq!(model.calls(), 0);
    let turns = app.turns("7004").await;
    assert_eq!(turns.len(), 2, "the message is recorded once");
    assert_eq!(turns[1].escalation_reason.as_deref(), Some("wait_expired"));
    let outbox = app.outbox().await;
    assert_eq!(
        outbox[0].payload["messages"],
        json!([app.escalation_copy()])
    );
    assert!(outbox[0].next_attempt_at <= turns[1].created_at, "due now");
}

#[tokio::test(start_paused = true)]
async fn system_037_a_scripted_opening_while_a_reply_is_queued_goes_behind_it() {
    let _frozen = FrozenClock::freeze();
    let model = slow_reply(
        "Our wheel course starts on Monday.",
        Duration::from_secs(10),
    );
    let app = spawn_app(model.clone()).await;
    app.returning_contact("7005").await;
    let rules = app.rules();
    let trigger = rules["openingTrigger"]["keywords"][0].as_str().unwrap();
    let opening = rules["openingTrigger"]["message"].as_str().unwrap();

    // The first turn loses its race: its reply is queued in the outbox.
    let first = send(&app, "7005", "Which courses do you run?");
    until(async || model.calls() == 1).await;
    tokio::time::advance(Duration::from_secs(8)).await;
    until(async || first.is_finished()).await;
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec![app.acknowledgement()]
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    app.settle().await;
    let queued: Vec<_> = app
        .outbox()
        .await
        .into_iter()
        .filter(|r| r.kind == OutboxKind::Reply && r.status == OutboxStatus::Pending)
        .collect();
    assert_eq!(queued.len(), 1, "the first reply waits in the outbox");
    let before = app.manychat_requests().await.len();

    // The contact sends the opening trigger meanwhile: no inline answer ahead of that reply.
    let (status, body) = app.send("7005", trigger).await;
    assert_eq!(status, 200);
    assert!(block_texts(&body).is_empty(), "silent: {body}");
    assert_eq!(
        model.calls(),
        1,
        "the opening is still answered without the model"
    );
    let turns = app.turns("7005").await;
    assert_eq!(
        turns.last().and_then(|t| t.outcome.as_deref()),
        Some("answered_scripted")
    );

    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(3)).await;
        app.worker.run_once().await.expect("the outbox worker runs");
    }
    let texts: Vec<String> = app.manychat_requests().await[before..]
        .iter()
        .filter(|r| r.body["field_name"] == "ai_message")
        .map(|r| {
            r.body["field_value"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts,
        ["Our wheel course starts on Monday.", opening],
        "ManyChat gets the queued reply first, then the opening"
    );
}
