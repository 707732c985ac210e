//! The intent gate (034) through the HTTP route, the fake ManyChat and the real store on both
//! backends (SQLite here; the same cases on Postgres with `--include-ignored`): writes before the
//! contact is a prospect are refused without a request or a cap slot, and the `INTENT:` notice
//! follows the last performed write and the rollout rule. Each test is named for the verification
//! item it proves.

use manychat_agent::model::mock::tool_calls;
use manychat_agent::store::NewTurn;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::sales_helpers::*;
use crate::selling::*;

async fn spec_034_verification_2_writes_before_prospect_are_refused_without_a_request_or_a_cap_slot(
    backend: Backend,
) {
    let gated = vec![
        send_flow("booking_link", true),
        add_tag("interested_wheel"),
        remove_tag("gift_buyer"),
        set_field("clay_experience", "none"),
        set_field("funnel_stage", "qualifying"),
        set_field("course", "wheel-basics"),
        add_tag("gift_buyer"),
        remove_tag("interested_wheel"),
        write_note("goal", "Wants a set of bowls."),
    ];
    // Eight writes after the unlock: the refusals above took no slot, so none is dropped.
    let unlocked = vec![
        prospect(),
        add_tag("interested_wheel"),
        set_field("clay_experience", "none"),
        set_field("funnel_stage", "qualifying"),
        set_field("course", "wheel-basics"),
        send_flow("wheel_basics_guide", false),
        remove_tag("gift_buyer"),
    ];
    let model = script(vec![
        tool_calls(gated),
        tool_calls(unlocked),
        answer("Here is the wheel course guide."),
        tool_calls([set_field("intent", "not_prospect")]),
        answer("Noted."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;

    turn_once(&app, "6001", "How much is the wheel course?").await;
    let requests = model.requests();
    let results = tool_results(&requests[1]);
    // 029: the flow answers `sent`, the writes `staged`.
    assert_eq!(results[0], json!({"sent": false, "reason": "not_prospect"}));
    for result in &results[1..8] {
        assert_eq!(*result, json!({"staged": false, "reason": "not_prospect"}));
    }
    assert_eq!(
        results[8],
        json!({"staged": true}),
        "write_note is not gated"
    );
    let results = tool_results(&requests[2]);
    assert!(
        results[9..]
            .iter()
            .all(|r| r["staged"] == true || r["sent"] == true),
        "accepted once prospect is staged earlier in the turn: {results:?}"
    );
    let turn = agent_turn(&app, "6001").await;
    let entries = turn.actions.as_ref().unwrap().as_array().unwrap().clone();
    let with_status = |status: &str| -> Vec<Value> {
        entries
            .iter()
            .filter(|e| e["status"] == status)
            .cloned()
            .collect()
    };
    assert_eq!(
        with_status("performed").len(),
        8,
        "the note and seven writes fill the eight slots, none dropped: {entries:?}"
    );
    assert_eq!(entries.len(), 16, "{entries:?}");
    // The record says what happened to each gated write.
    let refused = |tool: &str, id: &str, value: Option<&str>| {
        let mut entry =
            json!({"tool": tool, "id": id, "status": "refused", "reason": "not_prospect"});
        if let Some(value) = value {
            entry["value"] = json!(value);
        }
        entry
    };
    assert_eq!(
        with_status("refused"),
        vec![
            refused("send_flow", "booking_link", None),
            refused("add_tag", "interested_wheel", None),
            refused("remove_tag", "gift_buyer", None),
            refused("set_field", "clay_experience", Some("none")),
            refused("set_field", "funnel_stage", Some("qualifying")),
            refused("set_field", "course", Some("wheel-basics")),
            refused("add_tag", "gift_buyer", None),
            refused("remove_tag", "interested_wheel", None),
        ]
    );
    let sent = received(&app).await;
    assert_eq!(
        sent.len(),
        8,
        "the refused writes made no request: {sent:?}"
    );
    // 029: the flow went during the call, before the staged writes.
    assert_eq!(sent[0].0, FLOW);
    assert_eq!(
        sent[1],
        (
            SET_FIELD.to_owned(),
            "studio_note_goal=Wants a set of bowls.".to_owned()
        )
    );
    assert_eq!(
        sent[2],
        (SET_FIELD.to_owned(), "studio_intent=prospect".to_owned())
    );

    // prospect is final.
    turn_once(&app, "6001", "Actually I already have a class").await;
    let requests = model.requests();
    assert_eq!(tool_results(&requests[4]), vec![json!({"staged": false})]);
    assert_eq!(
        received(&app).await.len(),
        8,
        "nothing more reached ManyChat"
    );
    assert_eq!(
        agent_turn(&app, "6001").await.actions,
        Some(
            json!([{"tool": "set_field", "id": "intent", "value": "not_prospect", "status": "refused", "reason": "prospect_final"}])
        )
    );
}

async fn spec_034_verification_3_intent_notice_follows_the_last_performed_write_and_the_rollout_rule(
    backend: Backend,
) {
    let model = script(vec![
        answer("Hello! How can I help?"),
        tool_calls([set_field("intent", "not_prospect")]),
        answer("Thanks, I will pass that on."),
        answer("The wheel course is 210.00 GBP."),
        answer("Welcome back."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turns(
        &app,
        "6101",
        &[
            "Hi",
            "I supply clay to studios",
            "How much is the wheel course?",
        ],
    )
    .await;
    let requests = model.requests();
    assert!(user_text(&requests[0]).contains("INTENT: unknown"));
    assert!(
        user_text(&requests[3]).contains("INTENT: not_prospect"),
        "{}",
        user_text(&requests[3])
    );

    // The request cannot carry intent: the strict body refuses the key, and nothing is recorded.
    let forged = json!({"subscriber_id": "6101", "text": "hi", "intent": "prospect"});
    assert_eq!(app.post_json(&forged).await.status(), 400);
    assert_eq!(model.requests().len(), 4, "no turn ran");

    // Rollout rule: a contact whose last performed stage is past `new`, with no intent write.
    let conversation = app.conversation("6102").await;
    app.store
        .record_turn(&NewTurn {
            actions: Some(json!([{"tool": "set_field", "id": "funnel_stage", "value": "nurturing", "status": "performed"}])),
            ..NewTurn::agent(conversation.id, "Earlier answer.", "answered_inline", true, chrono::Utc::now() - chrono::Duration::hours(1))
        })
        .await
        .unwrap();
    let prompt = prompt_after(&app, &model, "6102", "Hello again", 4).await;
    assert!(prompt.contains("INTENT: prospect"), "{prompt}");
    assert!(prompt.contains("FUNNEL: nurturing"), "{prompt}");
}

on_both_backends!(
    spec_034_verification_2_writes_before_prospect_are_refused_without_a_request_or_a_cap_slot,
    spec_034_verification_3_intent_notice_follows_the_last_performed_write_and_the_rollout_rule,
);
