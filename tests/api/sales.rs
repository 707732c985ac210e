//! The sales funnel through the HTTP route, the fake ManyChat and the real store on
//! both backends (SQLite here; the same cases on Postgres with `--include-ignored`): the intent
//! gate (034), the funnel (023), conversion events (027), offerings (028, 042) and the payment
//! gate (032 C). Each test is named for the verification item it proves.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptedModel, tool_calls};
use manychat_agent::store::NewTurn;
use serde_json::{Value, json};
use wiremock::Mock;
use wiremock::matchers::{body_partial_json, method, path};

use crate::helpers::*;
use crate::selling::*;

/// A model that, on each of two turns, makes the contact a prospect and sends the payment link
/// the contact asked for.
fn booking_link_twice() -> Arc<ScriptedModel> {
    script(vec![
        tool_calls([prospect(), send_flow("booking_link", true)]),
        answer("Here is the booking link."),
        tool_calls([prospect(), send_flow("booking_link", true)]),
        answer("Here is the booking link."),
    ])
}

// --- 034: the intent gate ------------------------------------------------------------------------

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

// --- 023: the funnel ---------------------------------------------------------------------------

async fn spec_023_verification_1_a_backward_stage_is_refused_and_link_sent_is_not_offered(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "offered")]),
        answer("It is 210.00 GBP."),
        tool_calls([
            set_field("funnel_stage", "qualifying"),
            set_field("funnel_stage", "offered"),
            set_field("funnel_stage", "prepared"),
            set_field("funnel_stage", "nurturing"),
        ]),
        answer("Great."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turns(
        &app,
        "6201",
        &["How much is the wheel course?", "Fine, I have my own apron"],
    )
    .await;
    let requests = model.requests();
    assert!(
        !tool_enum(&requests[0], "set_field", "value").contains(&"link_sent".to_owned()),
        "link_sent never comes from the model"
    );
    assert_eq!(
        tool_results(&requests[3]),
        vec![
            json!({"staged": false}),
            json!({"staged": true}),
            json!({"staged": true}),
            json!({"staged": false}),
        ],
        "backward refused, equal accepted, forward accepted, then backward of the staged floor"
    );
    let sent = received(&app).await;
    assert_eq!(
        sent[2..],
        pairs(&[
            (SET_FIELD, "studio_funnel_stage=offered"),
            (SET_FIELD, "studio_funnel_stage=prepared")
        ])[..]
    );
}

/// 023 § Sent once, with a stable prefix: the enum keeps every flow (the config's), the turn's
/// `FLOWS:` notice says the performed one was sent, and the tool refuses it with a reason the
/// model can act on; nothing reaches ManyChat for it. A repeatable flow stays accepted.
async fn spec_023_verification_3_a_performed_flow_is_refused_as_already_sent_a_repeatable_one_is_not(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "wheel-basics"),
            send_flow("wheel_basics_guide", false),
            send_flow("booking_link", true),
        ]),
        answer("Sending the guide and the link."),
        tool_calls([send_flow("wheel_basics_guide", false)]),
        answer("Anything else?"),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turns(
        &app,
        "6301",
        &[
            "Send me the wheel guide and the booking link",
            "And the guide again?",
        ],
    )
    .await;
    let requests = model.requests();
    // The tools are the same bytes on both turns: the enum does not shrink.
    assert_eq!(requests[0].tools, requests[2].tools);
    let after = flows_offered_at(&model, 2);
    assert!(
        after.contains(&"wheel_basics_guide".to_owned()),
        "{after:?}"
    );
    assert_eq!(
        flows_notice(&requests[2]),
        "FLOWS: accepted now: booking_link; already sent: wheel_basics_guide"
    );
    let [refused] = &tool_results(&requests[3])[..] else {
        panic!("one result");
    };
    assert_eq!(refused["sent"], false);
    assert_eq!(refused["reason"], "already_sent");
    assert!(
        refused["error"].as_str().unwrap().contains("already sent"),
        "{refused}"
    );
    // The guide went out once, on the first turn; the second turn's record holds the refusal.
    assert_eq!(
        flows_sent(&app).await,
        vec![WHEEL_BASICS_GUIDE_NS, BOOKING_LINK_NS]
    );
    assert_eq!(
        agent_turn(&app, "6301").await.actions,
        Some(json!([
            {"tool": "send_flow", "id": "wheel_basics_guide", "status": "refused", "reason": "already_sent"}
        ]))
    );
}

async fn spec_023_verification_4_the_payment_link_writes_link_sent_after_it_and_nothing_when_it_fails(
    backend: Backend,
) {
    let app = booking_link_turn(backend, unchanged, "6401", "How do I book?", &[]).await;
    assert_eq!(
        agent_turn(&app, "6401").await.actions,
        Some(json!([
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
            {"tool": "send_flow", "id": "booking_link", "status": "performed", "contactAsked": true},
            {"tool": "set_field", "id": "funnel_stage", "value": "link_sent", "status": "performed"}
        ]))
    );

    refuse_flow(&app, BOOKING_LINK_NS).await;
    turn_once(&app, "6402", "How do I book?").await;
    let sent = received(&app).await;
    assert_eq!(
        sent[3..],
        pairs(&[
            (FLOW, BOOKING_LINK_NS),
            (SET_FIELD, "studio_intent=prospect"),
        ])[..],
        "no link_sent after a failed flow"
    );
    let actions = agent_turn(&app, "6402").await.actions.unwrap();
    assert_eq!(actions.as_array().unwrap().len(), 2, "{actions}");
    assert_eq!(actions[1]["status"], "failed");
}

// --- 027: conversion events ----------------------------------------------------------------------

async fn spec_027_verification_3_a_performed_stage_write_sends_its_event_after_it(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "nurturing")]),
        answer("Here is more about it."),
        tool_calls([set_field("funnel_stage", "nurturing")]),
        answer("Still here."),
        tool_calls([prospect(), set_field("funnel_stage", "nurturing")]),
        answer("Here is more about it."),
    ]);
    let app = app_on(backend, model.clone(), with_events).await;
    turn_once(&app, "6501", "Tell me about the wheel course").await;
    let sent = app.manychat_requests().await;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[1].body["field_value"], "nurturing");
    assert_eq!(sent[2].path, FLOW);
    assert_eq!(
        sent[2].body,
        json!({"subscriber_id": 6501, "flow_ns": QUALIFIED_EVENT_NS}),
        "the event flow, after the write, with the turn's subscriber"
    );
    assert_eq!(
        agent_turn(&app, "6501").await.actions.unwrap()[2],
        json!({"tool": "send_event", "id": "lead_qualified", "status": "performed"})
    );
    // A write equal to the last performed stage sends none.
    turn_once(&app, "6501", "Ok").await;
    assert_eq!(app.manychat_requests().await.len(), 4);

    // A failed write sends none.
    Mock::given(method("POST"))
        .and(path(SET_FIELD))
        .and(body_partial_json(json!({"field_value": "nurturing"})))
        .respond_with(manychat_error(400, "Field not found"))
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    turn_once(&app, "6502", "Tell me about the wheel course").await;
    let sent = app.manychat_requests().await;
    assert_eq!(sent.len(), 6, "intent and the failed write, no event");
    assert_eq!(sent[5].body["field_value"], "nurturing");
    let actions = agent_turn(&app, "6502").await.actions.unwrap();
    assert_eq!(actions.as_array().unwrap().len(), 2, "{actions}");
}

async fn spec_027_verification_4_the_payment_link_chain_goes_in_order_and_stops_at_a_failure(
    backend: Backend,
) {
    let after = [(FLOW, CHECKOUT_EVENT_NS)];
    let app = booking_link_turn(backend, with_events, "6601", "How do I pay?", &after).await;
    let actions = agent_turn(&app, "6601").await.actions.unwrap();
    assert_eq!(
        actions[3],
        json!({"tool": "send_event", "id": "checkout_started", "status": "performed"})
    );

    refuse_flow(&app, BOOKING_LINK_NS).await;
    turn_once(&app, "6602", "How do I pay?").await;
    assert_eq!(
        received(&app).await[4..],
        pairs(&[
            (FLOW, BOOKING_LINK_NS),
            (SET_FIELD, "studio_intent=prospect"),
        ])[..],
        "nothing after the failed flow"
    );
}

async fn spec_027_verification_5_an_event_does_not_count_against_the_cap(backend: Backend) {
    let eight = vec![
        prospect(),
        set_field("funnel_stage", "nurturing"),
        add_tag("interested_wheel"),
        add_tag("gift_buyer"),
        set_field("clay_experience", "none"),
        set_field("course", "wheel-basics"),
        send_flow("wheel_basics_guide", false),
        write_note("goal", "Bowls."),
    ];
    let model = script(vec![tool_calls(eight), answer("Done.")]);
    let app = app_on(backend, model.clone(), with_events).await;
    turn_once(&app, "6701", "Tell me about the wheel course").await;
    let results = tool_results(&model.requests()[1]);
    // The flow was sent during the call (029); the rest staged.
    assert!(
        results
            .iter()
            .all(|r| r["staged"] == true || r["sent"] == true),
        "{results:?}"
    );
    let actions = agent_turn(&app, "6701").await.actions.unwrap();
    let list = actions.as_array().unwrap();
    assert_eq!(list.len(), 9, "eight writes and the event: {actions}");
    assert!(list.iter().all(|e| e["status"] == "performed"), "{actions}");
    assert_eq!(list[2]["tool"], "send_event", "right after its write");
}

async fn spec_027_verification_2_and_7_no_model_facing_text_names_an_event(backend: Backend) {
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "nurturing")]),
        answer("Here you are."),
        answer("Anything else?"),
    ]);
    let app = app_on(backend, model.clone(), with_events).await;
    turns(&app, "6801", &["Tell me about the wheel course", "Thanks"]).await;
    assert!(
        agent_turn(&app, "6801").await.actions.is_some(),
        "the second turn was recorded"
    );
    for request in model.requests() {
        let mut seen = format!("{}\n{}", request.system, user_text(&request));
        for tool in request.tools.iter() {
            seen.push_str(&tool.description);
            seen.push_str(&tool.parameters.to_string());
        }
        for result in tool_results(&request) {
            seen.push_str(&result.to_string());
        }
        for secret in [
            "lead_qualified",
            "checkout_started",
            QUALIFIED_EVENT_NS,
            CHECKOUT_EVENT_NS,
            "send_event",
        ] {
            assert!(!seen.contains(secret), "{secret} reached the model");
        }
    }
    let history = user_text(&model.requests()[2]);
    assert!(
        history.contains("[actions performed: set_field intent, set_field funnel_stage]"),
        "{history}"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_027_verification_6_the_event_is_recorded_on_the_deferred_path_too() {
    let _frozen = FrozenClock::freeze();
    let model = tools_then_late(
        [prospect(), set_field("funnel_stage", "nurturing")],
        answer("Later."),
        Duration::from_secs(9),
    );
    let app = spawn_app_with(AppOptions::new(model.clone()).edit(with_events)).await;
    // A contact that holds a token already: no token write is in flight when the clock moves.
    returning_contact_held_at_the_deadline(&app, &model, "6901", "Tell me about the wheel course")
        .await;
    app.queued_after_advancing(Duration::from_secs(1)).await;
    let turn = agent_turn(&app, "6901").await;
    assert_eq!(turn.outcome.as_deref(), Some("deferred"));
    assert_eq!(turn.actions.as_ref().unwrap()[2]["status"], "staged");
    app.worker.run_once().await.unwrap();
    let turn = agent_turn(&app, "6901").await;
    assert_eq!(
        turn.actions.unwrap()[2],
        json!({"tool": "send_event", "id": "lead_qualified", "status": "performed"})
    );
    let sent = app.manychat_requests().await;
    assert_eq!(sent.last().unwrap().body["flow_ns"], QUALIFIED_EVENT_NS);
}

// --- 028: offerings ----------------------------------------------------------------------------

async fn spec_028_verification_2_send_flow_is_scoped_to_the_turns_offering(backend: Backend) {
    let model = script(vec![
        tool_calls([
            prospect(),
            send_flow("wheel_basics_guide", false),
            set_field("course", "handbuilding"),
            send_flow("wheel_basics_guide", false),
            send_flow("handbuilding_guide", false),
            send_flow("booking_link", true),
            set_field("course", "glaze-lab"),
        ]),
        answer("Here is the handbuilding guide."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, "7001", "Tell me about your courses").await;
    let requests = model.requests();
    let results = tool_results(&requests[1]);
    let other_offering = json!({
        "sent": false,
        "reason": "other_offering",
        "error": "this flow belongs to another offering than the contact's: send only a flow \
                  the FLOWS notice accepts now"
    });
    assert_eq!(
        results[1], other_offering,
        "no offering: offering-less flows only"
    );
    assert_eq!(results[2]["staged"], true);
    assert_eq!(
        results[2]["flowsAvailable"],
        json!(["handbuilding_guide"]),
        "the set_field result lists the flows the offering makes available"
    );
    assert_eq!(results[3], other_offering, "another offering's flow");
    assert_eq!(results[4], json!({"sent": true}), "the new offering's flow");
    assert_eq!(
        results[5],
        json!({"sent": true}),
        "the payment link has no offering"
    );
    assert_eq!(
        results[6],
        json!({"staged": false}),
        "a link in flight this turn locks the offering"
    );
    // The description lists every flow with its offering (the config's bytes); the notice
    // says what this turn accepts.
    let description = description(&requests[0], "send_flow");
    assert!(description.contains("- booking_link: "), "{description}");
    assert!(
        description.contains("- wheel_basics_guide: (offering wheel-basics) "),
        "{description}"
    );
    assert_eq!(
        flows_notice(&requests[0]),
        "FLOWS: accepted now: booking_link; already sent: none; an offering's own flows are \
         accepted once its offering is recorded"
    );
    assert_eq!(
        flows_sent(&app).await,
        vec![HANDBUILDING_GUIDE_NS, BOOKING_LINK_NS]
    );
}

async fn spec_028_verification_3_the_offering_locks_from_offered(backend: Backend) {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "wheel-basics"),
            set_field("funnel_stage", "nurturing"),
            set_field("course", "handbuilding"),
        ]),
        answer("Noted."),
        tool_calls([
            set_field("funnel_stage", "offered"),
            set_field("course", "glaze-lab"),
        ]),
        answer("It is 95.00 GBP."),
        tool_calls([set_field("course", "glaze-lab")]),
        answer("Let me pass you to the studio."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turns(
        &app,
        "7101",
        &[
            "Wheel or handbuilding?",
            "Glaze lab price?",
            "Switch me to glaze lab",
        ],
    )
    .await;
    let requests = model.requests();
    assert_eq!(
        tool_results(&requests[1])[3]["staged"],
        true,
        "before offered"
    );
    assert_eq!(
        tool_results(&requests[3]),
        vec![json!({"staged": true}), json!({"staged": false})],
        "offered staged earlier in the turn locks it"
    );
    assert_eq!(
        tool_results(&requests[5]),
        vec![json!({"staged": false})],
        "offered performed"
    );
}

async fn spec_028_verification_4_and_042_verification_5_the_inbound_offering(backend: Backend) {
    let model = script(vec![
        answer("Hello."),
        answer("Hello."),
        answer("Hello."),
        answer("Hello."),
        answer("Hello."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    let post = |subscriber: &str, extra: Value| {
        let mut body = json!({"subscriber_id": subscriber, "text": "Hi"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (subscriber, extra, stored) in [
        ("7201", json!({"offering": "glaze-lab"}), Some("glaze-lab")),
        (
            "7202",
            json!({"course": "handbuilding"}),
            Some("handbuilding"),
        ),
        (
            "7203",
            json!({"offering": "glaze-lab", "course": "handbuilding"}),
            Some("glaze-lab"),
        ),
        ("7204", json!({"offering": "{{offering}}"}), None),
        ("7205", json!({"offering": "no-such-course"}), None),
    ] {
        let response = app.post_json(&post(subscriber, extra)).await;
        assert_eq!(response.status(), 200);
        app.settle().await;
        assert_eq!(
            app.conversation(subscriber).await.offering.as_deref(),
            stored,
            "{subscriber}"
        );
    }
    let requests = model.requests();
    assert!(user_text(&requests[0]).contains("OFFERING: glaze-lab (from the advert"));
    for request in &requests[3..] {
        assert!(
            !user_text(request).contains("OFFERING:"),
            "absent: {}",
            user_text(request)
        );
    }
}

async fn spec_028_verification_5_the_stored_offering_follows_inbound_and_performed_writes(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([prospect(), set_field("course", "handbuilding")]),
        answer("Noted."),
        answer("Handbuilding it is."),
        answer("Glaze lab then."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    // The entry flow stored wheel-basics; the agent then recorded handbuilding.
    inbound_with_offering(&app, "7301", "Hi", "wheel-basics").await;
    turn_once(&app, "7301", "Actually handbuilding").await;
    let requests = model.requests();
    assert!(
        user_text(&requests[2]).contains("OFFERING: handbuilding"),
        "{}",
        user_text(&requests[2])
    );
    assert_eq!(
        app.conversation("7301").await.offering.as_deref(),
        Some("handbuilding"),
        "the performed write is stored"
    );
    // Inbound wins.
    inbound_with_offering(&app, "7301", "Hi again", "glaze-lab").await;
    let prompt = user_text(&model.requests()[3]);
    assert!(prompt.contains("OFFERING: glaze-lab"), "{prompt}");
    assert!(
        prompt.contains("it was handbuilding before this message"),
        "{prompt}"
    );
}

async fn spec_028_verification_6_a_shared_flow_sent_before_a_switch_stays_sent(backend: Backend) {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "wheel-basics"),
            send_flow("wheel_basics_guide", false),
        ]),
        answer("Here is the wheel guide."),
        tool_calls([set_field("course", "handbuilding")]),
        answer("Switched."),
        answer("Anything else?"),
    ]);
    let app = app_on(backend, model.clone(), |dir: &Path| {
        // A shared flow: the wheel guide without its offering.
        edit_tools(dir, |tools| {
            tools["flows"][0]
                .as_object_mut()
                .unwrap()
                .remove("offering");
        });
    })
    .await;
    turns(
        &app,
        "7401",
        &[
            "Wheel course please",
            "Actually, handbuilding",
            "What else?",
        ],
    )
    .await;
    assert_eq!(
        flows_notice(&model.requests()[4]),
        "FLOWS: accepted now: handbuilding_guide, booking_link; already sent: wheel_basics_guide"
    );
    assert!(description(&model.requests()[4], "send_flow").contains("handbuilding_guide"));
}

// --- 032 C: the payment gate --------------------------------------------------------------------

async fn spec_032_verification_4_the_payment_link_waits_for_prepared_unless_the_contact_asked(
    backend: Backend,
) {
    let model = script(vec![
        // Before prepared, not asked: refused.
        tool_calls([prospect(), send_flow("booking_link", false)]),
        answer("Happy to help with anything else."),
        // Prepared staged earlier in the turn: accepted, contactAsked not recorded.
        tool_calls([
            set_field("funnel_stage", "prepared"),
            send_flow("booking_link", true),
        ]),
        answer("Here is the link."),
    ]);
    let (app, results) = first_turn_results(backend, &model, "7501", "I think I will book").await;
    assert_eq!(results[1], json!({"sent": false, "reason": "not_prepared"}));
    assert_received(&app, &[(SET_FIELD, "studio_intent=prospect")]).await;
    turn_once(&app, "7501", "Yes I have everything I need").await;
    let actions = agent_turn(&app, "7501").await.actions.unwrap();
    assert_eq!(
        actions[1],
        json!({"tool": "send_flow", "id": "booking_link", "status": "performed"}),
        "contactAsked is recorded only when it opened the gate"
    );

    // Asked, before prepared: accepted and recorded (023 verification 4 shows the entry).
    let model = script(vec![
        tool_calls([prospect(), send_flow("booking_link", true)]),
        answer("Here is the link."),
        tool_calls([send_flow("wheel_basics_guide", true)]),
        answer("Here."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, "7502", "Send me the payment link").await;
    assert_eq!(
        agent_turn(&app, "7502").await.actions.unwrap()[1]["contactAsked"],
        true
    );
    // contactAsked on a non-link flow: ignored, not recorded (and offering scoping still holds).
    turn_once(&app, "7502", "And the wheel guide").await;
    let results = tool_results(&model.requests()[3]);
    assert_eq!(results.len(), 1);
    assert_refused_flow(&results[0], "other_offering");
}

// --- Bad input gets a defined result, and the record says what happened ---------------

/// A refused entry of the record: no request was made, its reason says why.
fn refused_entry(tool: &str, id: &str, value: Option<&str>, reason: &str) -> Value {
    let mut entry = json!({"tool": tool, "id": id, "status": "refused", "reason": reason});
    if let Some(value) = value {
        entry["value"] = json!(value);
    }
    entry
}

async fn sales_bad_input_a_gated_write_is_recorded_refused_and_reaches_no_one(backend: Backend) {
    let model = script(vec![
        tool_calls([
            add_tag("interested_wheel"),
            send_flow("booking_link", true),
            set_field("funnel_stage", "qualifying"),
            // The same refusal twice is recorded once.
            add_tag("interested_wheel"),
        ]),
        answer("Happy to help."),
        answer("Hello again."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, "6801", "Hi").await;
    assert_eq!(received(&app).await, vec![], "nothing reached ManyChat");
    assert_eq!(
        agent_turn(&app, "6801").await.actions,
        Some(json!([
            refused_entry("add_tag", "interested_wheel", None, "not_prospect"),
            refused_entry("send_flow", "booking_link", None, "not_prospect"),
            refused_entry(
                "set_field",
                "funnel_stage",
                Some("qualifying"),
                "not_prospect"
            ),
        ]))
    );
    // The history note lists performed actions only, and the position is unchanged.
    let prompt = prompt_after(&app, &model, "6801", "Hi again", 2).await;
    assert!(!prompt.contains("actions performed"), "{prompt}");
    assert!(prompt.contains("INTENT: unknown"), "{prompt}");
    assert!(prompt.contains("FUNNEL: none recorded yet"), "{prompt}");
}

async fn sales_bad_input_an_unknown_offering_is_recorded_refused_and_sends_nothing(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([
            prospect(),
            // An offering the catalog does not have, and another offering's flow.
            set_field("course", "pottery-for-dogs"),
            send_flow("glaze_lab_guide", false),
        ]),
        answer("Which course would you like?"),
        answer("Which course would you like?"),
    ]);
    let (app, results) =
        first_turn_results(backend, &model, "6802", "Tell me about the dog course").await;
    assert_eq!(results[1]["staged"], false);
    assert_refused_flow(&results[2], "other_offering");
    assert_received_because(
        &app,
        &[(SET_FIELD, "studio_intent=prospect")],
        "only the intent write reached ManyChat",
    )
    .await;
    let actions = agent_turn(&app, "6802").await.actions.unwrap();
    assert_eq!(
        actions.as_array().unwrap()[1..],
        [
            // The field is named; the model's value is not recorded.
            json!({"tool": "set_field", "id": "course", "status": "refused", "reason": "unknown_value"}),
            refused_entry("send_flow", "glaze_lab_guide", None, "other_offering"),
        ]
    );
    assert!(!actions.to_string().contains("pottery-for-dogs"));
    assert_eq!(app.conversation("6802").await.offering, None);
    turn_once(&app, "6802", "Hello?").await;
    assert!(!user_text(&model.requests()[2]).contains("OFFERING:"));
}

async fn sales_bad_input_a_backward_stage_is_recorded_refused_with_its_value(backend: Backend) {
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "offered")]),
        answer("It is 210.00 GBP."),
        tool_calls([set_field("funnel_stage", "qualifying")]),
        answer("Take your time."),
        answer("Anything else?"),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, "6803", "How much is the wheel course?").await;
    let before = received(&app).await;
    turn_once(&app, "6803", "Let me think about which course").await;
    assert_eq!(
        received(&app).await,
        before,
        "nothing more reached ManyChat"
    );
    assert_eq!(
        agent_turn(&app, "6803").await.actions,
        Some(json!([refused_entry(
            "set_field",
            "funnel_stage",
            Some("qualifying"),
            "backward_stage"
        )]))
    );
    let prompt = prompt_after(&app, &model, "6803", "Ok", 4).await;
    assert!(
        prompt.contains("FUNNEL: offered"),
        "the refused write moved nothing: {prompt}"
    );
}

async fn sales_bad_input_a_link_before_prepared_is_recorded_refused_not_prepared(backend: Backend) {
    let model = script(vec![
        tool_calls([prospect(), send_flow("booking_link", false)]),
        answer("Happy to help with anything else."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, "6804", "I think I will book").await;
    assert_received(&app, &[(SET_FIELD, "studio_intent=prospect")]).await;
    assert_eq!(
        agent_turn(&app, "6804").await.actions,
        Some(json!([
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
            refused_entry("send_flow", "booking_link", None, "not_prepared"),
        ]))
    );
}

async fn sales_bad_input_contact_asked_on_a_non_link_flow_is_ignored_and_not_recorded(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([
            prospect(),
            // Another offering's flow with contactAsked: refused for its offering alone.
            send_flow("glaze_lab_guide", true),
            set_field("course", "wheel-basics"),
            // The turn's offering's flow with contactAsked: sent, contactAsked not recorded.
            send_flow("wheel_basics_guide", true),
        ]),
        answer("Here is the wheel guide."),
    ]);
    let (app, results) =
        first_turn_results(backend, &model, "6805", "Wheel course details please").await;
    assert_refused_flow(&results[1], "other_offering");
    assert_eq!(results[3], json!({"sent": true}));
    assert_eq!(flows_sent(&app).await, vec!["content20250301000000_200001"]);
    assert_eq!(
        agent_turn(&app, "6805").await.actions,
        Some(json!([
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
            refused_entry("send_flow", "glaze_lab_guide", None, "other_offering"),
            {"tool": "set_field", "id": "course", "value": "wheel-basics", "status": "performed"},
            {"tool": "send_flow", "id": "wheel_basics_guide", "status": "performed"},
        ]))
    );
}

async fn sales_bad_input_a_forged_offering_on_an_unbound_request_is_neither_stored_nor_an_adverts(
    backend: Backend,
) {
    let model = script(vec![
        answer("Hello, how can I help?"),
        tool_calls([prospect(), send_flow("glaze_lab_guide", false)]),
        answer("Which course interests you?"),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    // The contact holds a token; a request with another one is unbound (019).
    app.returning_contact("6806").await;
    let forged = json!({"subscriber_id": "6806", "text": "Hi", "offering": "glaze-lab",
        "ai_token": "not-the-contacts-token"});
    assert_eq!(app.post_json(&forged).await.status(), 200);
    app.settle().await;
    let prompt = user_text(&model.requests()[0]);
    assert!(
        !prompt.contains("OFFERING:") && !prompt.contains("from the advert"),
        "an unbound turn is told no sales position: {prompt}"
    );
    assert!(!prompt.contains("INTENT:"), "{prompt}");
    assert_eq!(app.conversation("6806").await.offering, None, "not stored");
    assert!(!agent_turn(&app, "6806").await.bound);
    assert_eq!(received(&app).await, vec![], "nothing reached ManyChat");

    // The next request carries none: the forged offering is gone, its flow refused.
    turn_once(&app, "6806", "Send me the glaze guide").await;
    assert_received(&app, &[(SET_FIELD, "studio_intent=prospect")]).await;
    assert_eq!(
        agent_turn(&app, "6806").await.actions.unwrap()[1],
        refused_entry("send_flow", "glaze_lab_guide", None, "other_offering")
    );
}

async fn sales_an_unbound_turn_knows_only_its_own_message_no_notice_and_no_gate_from_records(
    backend: Backend,
) {
    let model = script(vec![
        tool_calls([
            send_flow("booking_link", false),
            send_flow("glaze_lab_guide", false),
        ]),
        answer("Happy to help."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    app.returning_contact("6810").await;
    // The records of a prospect at `prepared` on glaze-lab: for a bound turn the payment link
    // would go without the contact asking (032 C) and the offering's flow would be allowed.
    let conversation = app.conversation("6810").await;
    app.store
        .record_turn(&NewTurn {
            actions: Some(json!([
                {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
                {"tool": "set_field", "id": "course", "value": "glaze-lab", "status": "performed"},
                {"tool": "set_field", "id": "funnel_stage", "value": "prepared", "status": "performed"},
            ])),
            ..NewTurn::agent(conversation.id, "Earlier answer.", "answered_inline", true, chrono::Utc::now() - chrono::Duration::hours(1))
        })
        .await
        .unwrap();
    let wrong_token = json!({"subscriber_id": "6810", "text": "Send me the link",
        "ai_token": "not-the-contacts-token"});
    assert_eq!(app.post_json(&wrong_token).await.status(), 200);
    app.settle().await;

    let prompt = user_text(&model.requests()[0]);
    for notice in ["INTENT:", "FUNNEL:", "OFFERING:"] {
        assert!(!prompt.contains(notice), "{notice} in {prompt}");
    }
    let results = tool_results(&model.requests()[1]);
    // Nothing recorded is known: the contact is not a prospect for this turn.
    for result in &results[..2] {
        assert_eq!(result, &json!({"sent": false, "reason": "not_prospect"}));
    }
    let turn = agent_turn(&app, "6810").await;
    assert!(!turn.bound);
    let actions = turn.actions.unwrap();
    for entry in actions.as_array().unwrap() {
        assert_eq!(entry["status"], "refused", "{actions}");
    }
    assert_eq!(
        received(&app).await,
        vec![],
        "no flow, no link_sent, no event"
    );
}

/// An unbound turn's own writes count within that turn only: a request with a wrong token makes
/// the contact a prospect at `prepared`, and the contact's next bound turn is told no funnel
/// stage and cannot send the payment link unasked.
async fn an_unbound_turns_writes_are_not_the_contacts_sales_record(backend: Backend) {
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "prepared")]),
        answer("Noted."),
        tool_calls([send_flow("booking_link", false)]),
        answer("Happy to help."),
    ]);
    let app = app_on(backend, model.clone(), unchanged).await;
    app.returning_contact("6811").await;
    let wrong_token = json!({"subscriber_id": "6811", "text": "I am ready to start",
        "ai_token": "not-the-contacts-token"});
    assert_eq!(app.post_json(&wrong_token).await.status(), 200);
    app.settle().await;
    let unbound = agent_turn(&app, "6811").await;
    assert!(!unbound.bound);

    turn_once(&app, "6811", "Hi again").await;
    let bound = agent_turn(&app, "6811").await;
    assert!(bound.bound);
    let prompt = user_text(&model.requests()[2]);
    assert!(prompt.contains("INTENT: unknown"), "{prompt}");
    assert!(prompt.contains("FUNNEL: none recorded yet"), "{prompt}");
    assert_eq!(
        tool_results(&model.requests()[3])[0],
        json!({"sent": false, "reason": "not_prospect"})
    );
    assert!(
        !flows_sent(&app).await.contains(&BOOKING_LINK_NS.to_owned()),
        "the payment link did not go out"
    );
}

/// A refused entry rides the outbox row untouched; the worker
/// performs only what was staged.
#[tokio::test(start_paused = true)]
async fn sales_bad_input_a_refused_entry_rides_the_outbox_unperformed() {
    let _frozen = FrozenClock::freeze();
    let model = tools_then_late(
        [add_tag("interested_wheel"), prospect()],
        answer("Later."),
        Duration::from_secs(9),
    );
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    returning_contact_held_at_the_deadline(&app, &model, "6807", "Tell me about the wheel course")
        .await;
    app.queued_after_advancing(Duration::from_secs(1)).await;
    let refused = refused_entry("add_tag", "interested_wheel", None, "not_prospect");
    let turn = agent_turn(&app, "6807").await;
    assert_eq!(turn.outcome.as_deref(), Some("deferred"));
    assert_eq!(
        turn.actions,
        Some(json!([
            refused,
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "staged"},
        ]))
    );
    app.worker.run_once().await.unwrap();
    assert_eq!(
        agent_turn(&app, "6807").await.actions,
        Some(json!([
            refused,
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
        ]))
    );
    let sent = app.manychat_requests().await;
    assert!(
        sent.iter().all(|r| !r.path.contains("Tag")),
        "the refused tag was never sent: {sent:?}"
    );
    assert_eq!(sent.last().unwrap().body["field_value"], "prospect");
}

/// `text` from `subscriber`, one turn: the user text of `model`'s request number `step`.
async fn prompt_after(
    app: &TestApp,
    model: &ScriptedModel,
    subscriber: &str,
    text: &str,
    step: usize,
) -> String {
    turn_once(app, subscriber, text).await;
    user_text(&model.requests()[step])
}

/// Each of `texts` from `subscriber`, one turn after the other.
async fn turns(app: &TestApp, subscriber: &str, texts: &[&str]) {
    for text in texts {
        turn_once(app, subscriber, text).await;
    }
}

/// The demo tenant on `backend`, one turn of `model`'s (`text` from `subscriber`): the app and
/// the tool results its second step read.
async fn first_turn_results(
    backend: Backend,
    model: &Arc<ScriptedModel>,
    subscriber: &str,
    text: &str,
) -> (TestApp, Vec<Value>) {
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, subscriber, text).await;
    let results = tool_results(&model.requests()[1]);
    (app, results)
}

/// The flows `send_flow` offered in `model`'s request number `step`.
fn flows_offered_at(model: &ScriptedModel, step: usize) -> Vec<String> {
    tool_enum(&model.requests()[step], "send_flow", "flow")
}

/// `result` is a `send_flow` refused for `reason`, with the advice the model acts on.
fn assert_refused_flow(result: &Value, reason: &str) {
    assert_eq!(result["sent"], false, "{result}");
    assert_eq!(result["reason"], reason, "{result}");
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("FLOWS notice")),
        "{result}"
    );
}

/// The `FLOWS:` notice of a request (023, 028: what the contact's position accepts now).
fn flows_notice(request: &manychat_agent::model::ModelRequest) -> String {
    user_text(request)
        .lines()
        .find(|l| l.starts_with("FLOWS:"))
        .unwrap_or_default()
        .to_owned()
}

/// `text` from `subscriber` through an entry flow that names `offering`: it is stored.
async fn inbound_with_offering(app: &TestApp, subscriber: &str, text: &str, offering: &str) {
    let message = json!({"subscriber_id": subscriber, "text": text, "offering": offering});
    app.post_json(&message).await;
    app.settle().await;
    assert_eq!(
        app.conversation(subscriber).await.offering.as_deref(),
        Some(offering)
    );
}

/// The demo tenant (`edit` applied) on `backend`, one turn of [`booking_link_twice`]'s:
/// ManyChat received the link, the staged intent write it takes along (029: during the turn),
/// the `link_sent` stage, then `after`.
async fn booking_link_turn(
    backend: Backend,
    edit: fn(&Path),
    subscriber: &str,
    text: &str,
    after: &[(&str, &str)],
) -> TestApp {
    let app = app_on(backend, booking_link_twice(), edit).await;
    turn_once(&app, subscriber, text).await;
    let link = [
        (FLOW, BOOKING_LINK_NS),
        (SET_FIELD, "studio_intent=prospect"),
        (SET_FIELD, "studio_funnel_stage=link_sent"),
    ];
    assert_received(&app, &[&link[..], after].concat()).await;
    app
}

on_both_backends!(
    spec_034_verification_2_writes_before_prospect_are_refused_without_a_request_or_a_cap_slot,
    spec_034_verification_3_intent_notice_follows_the_last_performed_write_and_the_rollout_rule,
    spec_023_verification_1_a_backward_stage_is_refused_and_link_sent_is_not_offered,
    spec_023_verification_3_a_performed_flow_is_refused_as_already_sent_a_repeatable_one_is_not,
    spec_023_verification_4_the_payment_link_writes_link_sent_after_it_and_nothing_when_it_fails,
    spec_027_verification_3_a_performed_stage_write_sends_its_event_after_it,
    spec_027_verification_4_the_payment_link_chain_goes_in_order_and_stops_at_a_failure,
    spec_027_verification_5_an_event_does_not_count_against_the_cap,
    spec_027_verification_2_and_7_no_model_facing_text_names_an_event,
    spec_028_verification_2_send_flow_is_scoped_to_the_turns_offering,
    spec_028_verification_3_the_offering_locks_from_offered,
    spec_028_verification_4_and_042_verification_5_the_inbound_offering,
    spec_028_verification_5_the_stored_offering_follows_inbound_and_performed_writes,
    spec_028_verification_6_a_shared_flow_sent_before_a_switch_stays_sent,
    spec_032_verification_4_the_payment_link_waits_for_prepared_unless_the_contact_asked,
    sales_bad_input_a_gated_write_is_recorded_refused_and_reaches_no_one,
    sales_bad_input_an_unknown_offering_is_recorded_refused_and_sends_nothing,
    sales_bad_input_a_backward_stage_is_recorded_refused_with_its_value,
    sales_bad_input_a_link_before_prepared_is_recorded_refused_not_prepared,
    sales_bad_input_contact_asked_on_a_non_link_flow_is_ignored_and_not_recorded,
    sales_bad_input_a_forged_offering_on_an_unbound_request_is_neither_stored_nor_an_adverts,
    sales_an_unbound_turn_knows_only_its_own_message_no_notice_and_no_gate_from_records,
    an_unbound_turns_writes_are_not_the_contacts_sales_record,
);

// --- Item 9: the sales golden suites, on the demo tenant and on a second, invented vertical --------

/// Runs the sales golden `suite` on the tenant in `config` (the demo's shipped examples alone,
/// never the repo's `config/`, where an operator's own files live).
async fn sales_suite_passes(config: &std::path::Path, suite: &str, at_least: usize) {
    let env: std::collections::HashMap<String, String> =
        [("CONFIG_DIR".to_owned(), config.display().to_string())].into();
    let report = manychat_agent::evals::runner::run(&env, &repo_path(suite), Some("mock:demo"))
        .await
        .expect("suite runs");
    assert!(
        report.results.len() >= at_least,
        "{} cases",
        report.results.len()
    );
    assert_eq!(report.failed(), 0, "{report}");
}

/// SALES 023 item 5, 028 item 7, 032 item 5 and 034 item 6 on the demo tenant.
#[tokio::test]
async fn sales_golden_suite_passes_on_the_demo_tenant() {
    sales_suite_passes(
        &manychat_agent::config::examples::shipped_examples(),
        "evals/sales-demo",
        26,
    )
    .await;
}

/// The same rules on an invented bicycle workshop (042: the sales layer sells offerings, not
/// courses): its own catalog, fields and flows, no payment options.
#[tokio::test]
async fn sales_golden_suite_passes_on_a_second_vertical() {
    sales_suite_passes(
        &repo_path("tests/fixtures/tenant-cycle"),
        "evals/tenant-cycle",
        13,
    )
    .await;
}
