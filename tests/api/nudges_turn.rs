//! Spec 025 (in-window nudge), the nudge turn (verification 2, 5, 6): its history fenced with the
//! conversation's nonce (SYSTEM 4), the tools it is not offered, a model that escalates, fails or
//! is aborted sends nothing, the follow-up note outside the fence and the reply before the actions,
//! a contact's message during the model call cancels it, and the turn counts against the budget and
//! the hourly rate.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::ModelError;
use manychat_agent::model::mock::{ScriptedModel, call, reply, tool_calls};
use manychat_agent::store::{NudgeStatus, OutboxKind, Turn};
use serde_json::{Value, json};

use crate::helpers::*;
use crate::nudges_helpers::*;
use crate::selling::*;

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
