//! Offerings (028, 042) through the HTTP route, the fake ManyChat and the real store on both
//! backends (SQLite here; the same cases on Postgres with `--include-ignored`): `send_flow` is
//! scoped to the turn's offering, the offering locks from `offered`, the inbound offering, the
//! stored offering follows inbound and performed writes, and a shared flow sent before a switch
//! stays sent. Each test is named for the verification item it proves.

use std::path::Path;

use manychat_agent::model::mock::tool_calls;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::sales_helpers::*;
use crate::selling::*;

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

on_both_backends!(
    spec_028_verification_2_send_flow_is_scoped_to_the_turns_offering,
    spec_028_verification_3_the_offering_locks_from_offered,
    spec_028_verification_4_and_042_verification_5_the_inbound_offering,
    spec_028_verification_5_the_stored_offering_follows_inbound_and_performed_writes,
    spec_028_verification_6_a_shared_flow_sent_before_a_switch_stays_sent,
);
