//! Flows in the turn (029). On an inbound turn `send_flow` sends the flow during the
//! model call, before the reply; the payment link's chain follows it at once; every other write
//! stays staged until after the response. The fake ManyChat records what it received, in order.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply, tool_calls};
use manychat_agent::model::{ModelRequest, ToolCall};
use serde_json::json;
use wiremock::ResponseTemplate;

use crate::helpers::*;
use crate::selling::*;

/// A prospect interested in the handbuilding weekend: the writes that let its guide go.
fn handbuilding_prospect() -> [ToolCall; 2] {
    [
        set_field("intent", "prospect"),
        set_field("course", "handbuilding"),
    ]
}

fn request_text(request: &ModelRequest) -> String {
    format!("{:?}", request.messages)
}

#[tokio::test]
async fn spec_029_verification_1_send_flow_sends_during_the_call_once_per_turn_and_refuses_another_offering_without_a_request()
 {
    let mut first = handbuilding_prospect().to_vec();
    first.push(send_flow("handbuilding_guide", false));
    // The same flow again in the same step, and another offering's flow.
    first.push(send_flow("handbuilding_guide", false));
    first.push(send_flow("glaze_lab_guide", false));
    let model = script(vec![
        tool_calls(first),
        answer("That is the weekend guide."),
    ]);
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    let (status, _) = app.send("7101", "What is the weekend course like?").await;
    assert_eq!(status, 200);
    // `sent: true` is ManyChat's answer, given to the model before its next step.
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![
            json!({"staged": true}),
            json!({"staged": true, "flowsAvailable": ["handbuilding_guide"]}),
            json!({"sent": true}),
            json!({"sent": true}),
            json!({
                "sent": false,
                "reason": "other_offering",
                "error": "this flow belongs to another offering than the contact's: send only \
                          a flow the FLOWS notice accepts now"
            }),
        ]
    );
    app.settle().await;
    assert_received_because(
        &app,
        &[
            (FLOW, HANDBUILDING_GUIDE_NS),
            (SET_FIELD, "studio_intent=prospect"),
            (SET_FIELD, "studio_course=handbuilding"),
        ],
        "the flow went first, once; the other offering's flow made no request; the staged \
         writes followed the response",
    )
    .await;
    assert_eq!(
        agent_turn(&app, "7101").await.actions,
        Some(json!([
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
            {"tool": "set_field", "id": "course", "value": "handbuilding", "status": "performed"},
            {"tool": "send_flow", "id": "handbuilding_guide", "status": "performed"},
            {"tool": "send_flow", "id": "glaze_lab_guide", "status": "refused", "reason": "other_offering"}
        ])),
        "the other offering's flow is recorded refused, with its reason"
    );
}

#[tokio::test]
async fn spec_029_verification_1_a_flow_over_the_cap_is_not_sent() {
    let mut calls = handbuilding_prospect().to_vec();
    calls.extend([
        set_field("clay_experience", "none"),
        set_field("clay_experience", "some"),
        set_field("clay_experience", "regular"),
        add_tag("interested_wheel"),
        add_tag("gift_buyer"),
        remove_tag("interested_wheel"),
        send_flow("handbuilding_guide", false),
    ]);
    let model = script(vec![tool_calls(calls), answer("Noted.")]);
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    let (status, _) = app.send("7102", "Tell me everything").await;
    assert_eq!(status, 200);
    app.settle().await;
    assert_eq!(
        tool_results(&model.requests()[1])[8],
        json!({"sent": false, "reason": "action_limit"})
    );
    assert!(
        !received(&app)
            .await
            .iter()
            .any(|(p, what)| p == FLOW && what == HANDBUILDING_GUIDE_NS)
    );
    let actions = agent_turn(&app, "7102").await.actions.unwrap();
    assert_eq!(actions[8]["status"], "dropped_over_cap", "{actions}");
}

#[tokio::test]
async fn spec_029_bad_input_manychat_refusing_or_answering_200_with_an_error_status_is_sent_false()
{
    for (subscriber, response) in [
        ("7103", manychat_error(400, "Flow not found")),
        ("7104", manychat_error(200, "Flow not found")),
    ] {
        let mut calls = handbuilding_prospect().to_vec();
        calls.push(send_flow("handbuilding_guide", false));
        let model = script(vec![tool_calls(calls), answer("Let me tell you instead.")]);
        let app = spawn_app_with(AppOptions::new(model.clone())).await;
        flow_answers(&app, HANDBUILDING_GUIDE_NS, response).await;
        let (status, _) = app.send(subscriber, "What is the weekend like?").await;
        assert_eq!(status, 200);
        app.settle().await;
        assert_eq!(
            tool_results(&model.requests()[1])[2],
            json!({"sent": false}),
            "{subscriber}"
        );
        let actions = agent_turn(&app, subscriber).await.actions.unwrap();
        assert_eq!(actions[2]["status"], "failed", "{subscriber}: {actions}");
    }
}

#[tokio::test]
async fn spec_029_verification_3_the_final_step_names_the_flows_sent_and_refused() {
    let mut calls = handbuilding_prospect().to_vec();
    calls.push(send_flow("handbuilding_guide", false));
    // Three tool steps: the fourth is the final step, which gets the server's note.
    let model = script(vec![
        tool_calls(calls),
        tool_calls([send_flow("booking_link", true)]),
        tool_calls([add_tag("interested_wheel")]),
        answer("Both are on their way."),
    ]);
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    flow_answers(
        &app,
        BOOKING_LINK_NS,
        ResponseTemplate::new(400).set_body_json(json!({"status": "error"})),
    )
    .await;
    let (status, _) = app.send("7105", "Weekend details and how to book?").await;
    assert_eq!(status, 200);
    app.settle().await;
    let requests = model.requests();
    let last = request_text(requests.last().unwrap());
    assert!(
        last.contains("flows sent (the contact receives them before your reply; do not repeat their content): handbuilding_guide"),
        "{last}"
    );
    assert!(
        last.contains(
            "flows ManyChat refused (they did not go out; do not say they did): booking_link"
        ),
        "{last}"
    );
}

#[tokio::test]
async fn spec_029_verification_4_the_payment_links_chain_follows_it_during_the_turn_and_staged_actions_run_after_the_response()
 {
    let model = script(vec![
        tool_calls([
            set_field("intent", "prospect"),
            add_tag("gift_buyer"),
            send_flow("booking_link", true),
        ]),
        answer("There is the booking page."),
    ]);
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    let (status, body) = app.send("7106", "How do I book?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["There is the booking page."]);
    assert_eq!(
        tool_results(&model.requests()[1])[2],
        json!({"sent": true}),
        "ManyChat answered the link before the model's next step"
    );
    // The link, then the intent write it takes with it, then link_sent: all during the turn.
    let during = pairs(&[
        (FLOW, BOOKING_LINK_NS),
        (SET_FIELD, "studio_intent=prospect"),
        (SET_FIELD, "studio_funnel_stage=link_sent"),
    ]);
    assert_eq!(received(&app).await[..3], during[..]);
    app.settle().await;
    let mut after = during;
    after.push((ADD_TAG.to_owned(), "buying-as-gift".to_owned()));
    assert_eq!(
        received(&app).await,
        after,
        "the staged tag goes after the response"
    );
    assert_eq!(
        agent_turn(&app, "7106").await.actions.unwrap()[3],
        json!({"tool": "set_field", "id": "funnel_stage", "value": "link_sent", "status": "performed"})
    );
}

#[tokio::test]
async fn spec_029_verification_5_an_escalated_turn_keeps_its_sent_flow_and_discards_the_staged_writes()
 {
    let mut calls = handbuilding_prospect().to_vec();
    calls.push(send_flow("handbuilding_guide", false));
    calls.push(add_tag("gift_buyer"));
    let model = script(vec![
        tool_calls(calls),
        reply(escalation_json("wants to talk to a person")),
    ]);
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    let (status, body) = app.send("7107", "Can I talk to someone?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    app.settle().await;
    let sent = received(&app).await;
    assert_eq!(
        sent[0],
        (FLOW.to_owned(), HANDBUILDING_GUIDE_NS.to_owned()),
        "the flow went before the handoff copy"
    );
    assert!(
        !sent
            .iter()
            .any(|(_, what)| what == "studio_intent=prospect")
    );
    let actions = agent_turn(&app, "7107").await.actions.unwrap();
    let statuses: Vec<(&str, &str)> = actions
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses[..4],
        [
            ("intent", "discarded"),
            ("course", "discarded"),
            ("handbuilding_guide", "performed"),
            ("gift_buyer", "discarded"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn spec_029_verification_5_a_deferred_call_aborted_after_sending_a_flow_records_it() {
    let _frozen = FrozenClock::freeze();
    let mut calls = handbuilding_prospect().to_vec();
    calls.push(send_flow("handbuilding_guide", false));
    let model = Arc::new(ScriptedModel::from_steps(vec![
        ScriptStep::ok(tool_calls(calls)),
        ScriptStep::ok(answer("Too late.")).after(Duration::from_secs(60)),
    ]));
    let app = spawn_app_with(AppOptions::new(model.clone())).await;
    returning_contact_held_at_the_deadline(&app, &model, "7108", "What is the weekend like?").await;
    app.queued_after(Duration::from_secs(22)).await;
    let turn = agent_turn(&app, "7108").await;
    assert_eq!(turn.outcome.as_deref(), Some("error"));
    assert_eq!(
        turn.text,
        app.acknowledgement(),
        "the holding line it received"
    );
    assert_eq!(
        turn.actions,
        Some(json!([
            {"tool": "set_field", "id": "intent", "value": "prospect", "status": "discarded"},
            {"tool": "set_field", "id": "course", "value": "handbuilding", "status": "discarded"},
            {"tool": "send_flow", "id": "handbuilding_guide", "status": "performed"}
        ]))
    );
    assert_received_because(
        &app,
        &[(FLOW, HANDBUILDING_GUIDE_NS)],
        "the flow went; the discarded writes never did",
    )
    .await;
}
