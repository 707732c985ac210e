//! The funnel (023) and the payment gate (032 C) through the HTTP route, the fake ManyChat and the
//! real store on both backends (SQLite here; the same cases on Postgres with `--include-ignored`):
//! a backward stage is refused and `link_sent` never offered, a performed flow is refused as
//! already sent, the payment link writes `link_sent` after it, and it waits for `prepared` unless
//! the contact asked. Each test is named for the verification item it proves.

use manychat_agent::model::mock::{ScriptedModel, tool_calls};
use serde_json::json;

use crate::helpers::*;
use crate::sales_helpers::*;
use crate::selling::*;

/// The flows `send_flow` offered in `model`'s request number `step`.
fn flows_offered_at(model: &ScriptedModel, step: usize) -> Vec<String> {
    tool_enum(&model.requests()[step], "send_flow", "flow")
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

on_both_backends!(
    spec_023_verification_1_a_backward_stage_is_refused_and_link_sent_is_not_offered,
    spec_023_verification_3_a_performed_flow_is_refused_as_already_sent_a_repeatable_one_is_not,
    spec_023_verification_4_the_payment_link_writes_link_sent_after_it_and_nothing_when_it_fails,
    spec_032_verification_4_the_payment_link_waits_for_prepared_unless_the_contact_asked,
);
