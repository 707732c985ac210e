//! Conversion events (027) through the HTTP route, the fake ManyChat and the real store on both
//! backends (SQLite here; the same cases on Postgres with `--include-ignored`): a performed stage
//! write sends its event after it, the payment link's chain goes in order, an event takes no cap
//! slot, no model-facing text names an event, and the deferred path records it too. Each test is
//! named for the verification item it proves.

use std::time::Duration;

use manychat_agent::model::mock::tool_calls;
use serde_json::json;
use wiremock::Mock;
use wiremock::matchers::{body_partial_json, method, path};

use crate::helpers::*;
use crate::sales_helpers::*;
use crate::selling::*;

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

on_both_backends!(
    spec_027_verification_3_a_performed_stage_write_sends_its_event_after_it,
    spec_027_verification_4_the_payment_link_chain_goes_in_order_and_stops_at_a_failure,
    spec_027_verification_5_an_event_does_not_count_against_the_cap,
    spec_027_verification_2_and_7_no_model_facing_text_names_an_event,
);
