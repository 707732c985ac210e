//! The business's own tools (`config/plugins.json`) through the real app on both backends (SQLite
//! here; the same cases on Postgres with `--include-ignored`): the scripted model calls them, a
//! fake endpoint records every request, and the store holds `turns.actions` and
//! `turns.plugin_reads`. A write is staged, performed once after the text, signed and recorded
//! without its note, on a deferred reply's outbox row too; a read runs during the step, is recorded
//! without its answer, and shares the turn's two reads with `get_contact`.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, tool_calls};
use serde_json::json;

use crate::helpers::*;
use crate::plugins_helpers::*;
use crate::selling::*;

async fn plugin_a_write_is_performed_once_after_the_text_signed_and_recorded_without_its_note(
    backend: Backend,
) {
    let server = endpoint(json!({"seats": 3})).await;
    let model = script(vec![
        tool_calls([lead(
            "handbuilding",
            "Wants the handbuilding class, evenings.",
        )]),
        tool_calls([lead(
            "handbuilding",
            "Wants the handbuilding class, evenings.",
        )]),
        answer("I will note that down."),
        answer("You are welcome."),
    ]);
    let app = app_with_plugins(backend, model.clone(), &server, false).await;
    let (status, body) = app.send("8101", "I'd like the handbuilding class").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["I will note that down."]);
    settled(&app).await;

    let sent = signed_requests(&server, LEAD).await;
    assert_eq!(
        sent,
        vec![json!({
            "tool": "create_lead",
            "subscriber_id": "8101",
            "arguments": {"class": "handbuilding", "summary": "Wants the handbuilding class, evenings."}
        })],
        "one request: the repeat was de-duplicated"
    );
    let turn = agent_turn(&app, "8101").await;
    assert_eq!(
        turn.actions.clone().unwrap(),
        json!([{
            "tool": "create_lead",
            "status": "performed",
            "arguments": {"class": "handbuilding", "summary": {"length": 39}}
        }])
    );
    assert!(!turn.actions.unwrap().to_string().contains("evenings"));
    // Counted like a built-in action's outcome.
    let metrics = app.metrics_text().await;
    assert!(
        metrics
            .contains("manychat_agent_actions_total{tool=\"create_lead\",status=\"performed\"} 1"),
        "{metrics}"
    );

    // The next turn's history lists the performed write by name.
    app.send("8101", "Thanks!").await;
    let history = user_text(&model.requests()[3]);
    assert!(
        history.contains("[actions performed: create_lead]"),
        "{history}"
    );
    app.stop().await;
}

async fn plugin_a_read_runs_during_the_step_and_is_recorded_without_its_answer(backend: Backend) {
    let server = endpoint(json!({"seats": 4, "next_date": "Saturday 10:00", "secret": "x"})).await;
    let model = script(vec![
        tool_calls([seats("wheel_basics", 1)]),
        answer("There are four seats left."),
    ]);
    let app = app_with_plugins(backend, model.clone(), &server, false).await;
    app.returning_contact("8102").await;
    app.send("8102", "Is there room in the wheel class?").await;

    let sent = signed_requests(&server, SEATS).await;
    assert_eq!(
        sent,
        vec![
            json!({"tool": "seats_left", "subscriber_id": "8102", "arguments": {"class": "wheel_basics"}})
        ]
    );
    let result = &tool_results(&model.requests()[1])[0];
    assert_eq!(result["available"], true);
    assert_eq!(result["seats"], 4, "a number is outside the fence");
    assert!(
        result.get("secret").is_none(),
        "an undeclared key is dropped"
    );
    let fenced = result["fenced"].as_str().unwrap();
    let nonce = {
        let text = user_text(&model.requests()[0]);
        let start = text.find("<<<CONTACT nonce=").unwrap() + 17;
        text[start..start + 16].to_owned()
    };
    assert!(
        fenced.starts_with(&format!("<<<CONTACT nonce={nonce}>>>")),
        "text comes back inside the turn's own fence: {fenced}"
    );
    assert!(fenced.contains("Saturday 10:00"));
    assert!(
        result.get("next_date").is_none(),
        "text is only inside the fence"
    );

    let turn = agent_turn(&app, "8102").await;
    let reads = app.store.turn_plugin_reads(turn.id).await.unwrap().unwrap();
    assert_eq!(reads[0]["tool"], "seats_left");
    assert_eq!(reads[0]["available"], true);
    assert!(reads[0]["ms"].is_u64());
    assert!(
        !reads.to_string().contains("wheel_basics"),
        "never the arguments"
    );
    assert!(!reads.to_string().contains("Saturday"), "never the answer");
    app.stop().await;
}

async fn plugin_reads_share_the_turns_two_reads_with_get_contact(backend: Backend) {
    let server = endpoint(json!({"seats": 2})).await;
    let model = script(vec![
        tool_calls([get_contact(1), seats("wheel_basics", 1)]),
        tool_calls([seats("handbuilding", 2)]),
        answer("Two seats left."),
    ]);
    let app = app_with_plugins(backend, model.clone(), &server, false).await;
    app.returning_contact("8103").await;
    app.send("8103", "Any room?").await;

    assert_eq!(
        signed_requests(&server, SEATS).await.len(),
        1,
        "the third read makes no call"
    );
    let results = tool_results(&model.requests()[2]);
    assert_eq!(results[1]["available"], true);
    assert_eq!(results[2], json!({"available": false}));
    let turn = agent_turn(&app, "8103").await;
    let reads = app.store.turn_plugin_reads(turn.id).await.unwrap().unwrap();
    assert_eq!(reads.as_array().unwrap().len(), 2);
    assert_eq!(reads[1]["available"], false);
    app.stop().await;
}

async fn plugin_a_write_on_a_deferred_reply_rides_the_outbox_row_after_the_text(backend: Backend) {
    let _frozen = FrozenClock::freeze();
    let server = endpoint(json!({"seats": 1})).await;
    let model = Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(tool_calls([lead("wheel_basics", "Wants the wheel class.")])),
        // Past the race deadline: the reply and its write go to the outbox.
        ScriptStep::ok(answer("Noted, thank you.")).after(Duration::from_secs(9)),
    ]));
    let app = app_with_plugins(backend, model, &server, false).await;
    let request = send_in_background(&app, "8104", "The wheel class please");
    advancing_until(async || actions_queued(&app).await).await;
    let (_, body) = request.await.unwrap();
    assert_ne!(
        block_texts(&body),
        vec!["Noted, thank you."],
        "the race was lost"
    );
    assert!(
        signed_requests(&server, LEAD).await.is_empty(),
        "nothing before the text"
    );
    app.settle_advancing().await;
    app.worker.run_once().await.unwrap();
    let sent = signed_requests(&server, LEAD).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["arguments"]["class"], "wheel_basics");
    let turn = agent_turn(&app, "8104").await;
    assert_eq!(turn.actions.unwrap()[0]["status"], "performed");
    app.stop().await;
}

on_both_backends!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    plugin_a_write_is_performed_once_after_the_text_signed_and_recorded_without_its_note,
    plugin_a_read_runs_during_the_step_and_is_recorded_without_its_answer,
    plugin_reads_share_the_turns_two_reads_with_get_contact;
    #[tokio::test(start_paused = true)]
    plugin_a_write_on_a_deferred_reply_rides_the_outbox_row_after_the_text,
);
