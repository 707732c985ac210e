//! Bad input to the sales rules gets a defined result, and the record says what happened, on both
//! backends (SQLite here; the same cases on Postgres with `--include-ignored`): gated, unknown,
//! backward and premature writes are recorded refused and reach no one, `contactAsked` on a
//! non-link flow is ignored, an unbound request (a wrong token, a forged offering) knows only its
//! own message and its writes are not the contact's sales record, and a refused entry rides the
//! outbox unperformed.

use std::time::Duration;

use manychat_agent::model::mock::tool_calls;
use manychat_agent::store::NewTurn;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::sales_helpers::*;
use crate::selling::*;

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

on_both_backends!(
    sales_bad_input_a_gated_write_is_recorded_refused_and_reaches_no_one,
    sales_bad_input_an_unknown_offering_is_recorded_refused_and_sends_nothing,
    sales_bad_input_a_backward_stage_is_recorded_refused_with_its_value,
    sales_bad_input_a_link_before_prepared_is_recorded_refused_not_prepared,
    sales_bad_input_contact_asked_on_a_non_link_flow_is_ignored_and_not_recorded,
    sales_bad_input_a_forged_offering_on_an_unbound_request_is_neither_stored_nor_an_adverts,
    sales_an_unbound_turn_knows_only_its_own_message_no_notice_and_no_gate_from_records,
    an_unbound_turns_writes_are_not_the_contacts_sales_record,
);
