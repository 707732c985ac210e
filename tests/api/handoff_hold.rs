//! The handoff that holds: after a handoff the assistant stays out of the conversation for
//! `handoff.holdHours`, until the tag is gone, or until an operator releases the contact; the
//! first turn after a release is told that a person had the conversation.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::ModelError;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::helpers::*;
use crate::selling::edit_rules;

/// The demo tenant's handoff tag.
const TAG: &str = "needs-studio-reply";

/// The fake ManyChat shows the contact with the handoff tag (a person has the conversation).
async fn contact_has_the_tag(app: &TestApp) {
    getinfo_answers(
        app,
        ResponseTemplate::new(200).set_body_json(json!({
            "status": "success",
            "data": {"id": "1", "tags": [{"id": 1, "name": TAG}], "custom_fields": []}
        })),
    )
    .await;
}

async fn getinfo_answers(app: &TestApp, response: ResponseTemplate) {
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    Mock::given(method("GET"))
        .and(path("/fb/subscriber/getInfo"))
        .respond_with(response)
        .with_priority(1)
        .mount(&app.manychat)
        .await;
}

/// Asserts the response is the held one: a valid v2 block, no messages, the callback kept.
fn assert_held_response(status: u16, body: &Value) {
    assert_eq!(status, 200);
    assert_eq!(body["version"], "v2", "{body}");
    assert_eq!(body["content"]["messages"], json!([]), "{body}");
    assert!(
        body["content"]["external_message_callback"]["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/v1/channels/manychat/message")),
        "the callback stays registered: {body}"
    );
}

fn paths(requests: &[Recorded]) -> Vec<String> {
    requests.iter().map(|r| r.path.clone()).collect()
}

/// A model turn answering `text`, and how many of them.
fn replies(texts: &[&str]) -> Vec<ScriptStep> {
    texts
        .iter()
        .map(|t| ScriptStep::ok(reply(reply_json(t))))
        .collect()
}

/// Sends a message to a held contact and asserts it was held: the held response, no model call,
/// no ManyChat request but the one tag read, the message recorded, a silent `held` turn.
/// `subscriber` asks for a refund and is handed to a person (the keyword check escalates).
async fn ask_for_a_refund(app: &TestApp, subscriber: &str) {
    app.send(subscriber, "I want a refund").await;
    app.settle().await;
}

/// An app whose model is never asked, with `subscriber` already handed to a person.
async fn handed_over(subscriber: &str) -> (Arc<ScriptedModel>, TestApp) {
    let model = Arc::new(ScriptedModel::from_steps(vec![]));
    let app = spawn_app(model.clone()).await;
    ask_for_a_refund(&app, subscriber).await;
    (model, app)
}

/// `subscriber`'s next message, `text`, is answered by the model with `reply`: the hold was
/// released, for `reason`. The conversation as the store then holds it.
async fn answered_after_release(
    app: &TestApp,
    subscriber: &str,
    (text, reply): (&str, &str),
    reason: &str,
) -> manychat_agent::store::Conversation {
    let (_, body) = app.send(subscriber, text).await;
    app.settle().await;
    assert_eq!(block_texts(&body), vec![reply.to_owned()]);
    let conversation = app.conversation(subscriber).await;
    assert_eq!(conversation.hold_release_reason.as_deref(), Some(reason));
    conversation
}

async fn assert_held(app: &TestApp, model: &ScriptedModel, subscriber: &str) {
    let calls = model.calls();
    contact_has_the_tag(app).await;
    let (status, body) = app.send(subscriber, "Are you there?").await;
    app.settle().await;
    assert_held_response(status, &body);
    assert_eq!(model.calls(), calls, "no model call while held");
    assert_eq!(
        paths(&app.all_manychat_requests().await),
        vec!["/fb/subscriber/getInfo"],
        "one tag read and nothing else while held"
    );
    let turns = app.turns(subscriber).await;
    let [.., message, held] = &turns[..] else {
        panic!("the held message and its turn are recorded");
    };
    assert_eq!(message.text, "Are you there?");
    assert!(message.bound, "the contact's message is recorded as usual");
    assert_eq!(held.outcome.as_deref(), Some("held"));
    assert_eq!(held.text, "");
    assert!(
        !held.bound,
        "the held turn never enters the model's history"
    );
    assert!(held.actions.is_none(), "no handoff again");
}

#[tokio::test(start_paused = true)]
async fn handoff_every_escalation_path_starts_the_hold() {
    let _frozen = FrozenClock::freeze();
    struct Path {
        name: &'static str,
        rules: fn(&mut Value),
        steps: Vec<ScriptStep>,
        messages: &'static [&'static str],
    }
    let paths = [
        Path {
            name: "keyword",
            rules: |_| {},
            steps: vec![],
            messages: &["I want a refund"],
        },
        Path {
            name: "the model",
            rules: |_| {},
            steps: vec![ScriptStep::ok(reply(escalation_json("complaint")))],
            messages: &["My order never came"],
        },
        Path {
            name: "the confidence floor",
            rules: |_| {},
            steps: vec![ScriptStep::ok(reply(
                json!({"messages": ["Maybe."], "escalate": false, "escalation_reason": null,
                       "confidence": 0.1, "closing_question": null})
                .to_string(),
            ))],
            messages: &["Is it glazed?"],
        },
        Path {
            name: "a failure",
            rules: |_| {},
            steps: vec![ScriptStep::err(ModelError::Http {
                status: 500,
                kind: "server_error".into(),
            })],
            messages: &["Hello"],
        },
        Path {
            name: "the turn cap",
            rules: |r| r["maxTurnsPerConversation"] = 1.into(),
            steps: replies(&["Hi."]),
            messages: &["Hello", "And another thing"],
        },
        Path {
            name: "the rate limit",
            rules: |r| r["rateLimit"]["turnsPerSubscriberPerHour"] = 1.into(),
            steps: replies(&["Hi."]),
            messages: &["Hello", "And another thing"],
        },
    ];
    for (n, case) in paths.into_iter().enumerate() {
        let model = Arc::new(ScriptedModel::from_steps(case.steps));
        let rules = case.rules;
        let app = spawn_app_with(AppOptions::new(model.clone()).edit(move |dir| {
            crate::selling::without_sales(dir);
            edit_rules(dir, rules);
        }))
        .await;
        let subscriber = format!("{}", 3_100_100 + n);
        let mut last = Value::Null;
        for text in case.messages {
            last = app.send(&subscriber, text).await.1;
            app.settle_advancing().await;
        }
        assert_eq!(
            block_texts(&last),
            vec![app.escalation_copy()],
            "{}",
            case.name
        );
        assert!(app.conversation(&subscriber).await.escalated_at.is_some());
        app.manychat.reset().await;
        assert_held(&app, &model, &subscriber).await;
        app.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn handoff_hold_expires_after_hold_hours_and_the_next_turn_is_told() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps(replies(&["Welcome back."])));
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .edit(|dir| edit_rules(dir, |r| r["handoff"]["holdHours"] = 2.into())),
    )
    .await;
    ask_for_a_refund(&app, "3100201").await;
    assert_held(&app, &model, "3100201").await;

    tokio::time::advance(Duration::from_secs(2 * 3600)).await;
    let asked = ("Hello again", "Welcome back.");
    let conversation = answered_after_release(&app, "3100201", asked, "hold_expired").await;
    assert_eq!(
        conversation.hold_released_at,
        conversation
            .escalated_at
            .map(|at| at + chrono::Duration::hours(2)),
        "the hold ran out two hours after the handoff"
    );
    assert!(!conversation.hold_note_due, "the note was given");
    let prompt = format!("{:?}", model.requests().last().unwrap());
    assert!(
        prompt.contains("A person from the business handled this conversation from"),
        "the first turn after the release is told: {prompt}"
    );
    assert!(prompt.contains("not in the history"));
}

#[tokio::test(start_paused = true)]
async fn handoff_the_tag_removed_releases_the_hold_and_the_message_is_answered() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps(replies(&[
        "Happy to help.",
        "Sure.",
    ])));
    let app = spawn_app(model.clone()).await;
    ask_for_a_refund(&app, "3100301").await;
    assert_held(&app, &model, "3100301").await;

    // The person removed the tag in ManyChat: the default fake shows no tags.
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    let asked = ("Thanks, one more question", "Happy to help.");
    answered_after_release(&app, "3100301", asked, "tag_removed").await;
    let prompt = format!("{:?}", model.requests().last().unwrap());
    assert!(prompt.contains("A person from the business handled this conversation"));

    // The next turn is not told again, and reads no tag.
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    app.send("3100301", "And the price?").await;
    app.settle().await;
    let prompt = format!("{:?}", model.requests().last().unwrap());
    assert!(!prompt.contains("A person from the business handled"));
    assert!(
        !paths(&app.all_manychat_requests().await).contains(&"/fb/subscriber/getInfo".to_owned()),
        "a contact that is not held is never read for the tag"
    );
}

#[tokio::test(start_paused = true)]
async fn handoff_a_failed_or_slow_tag_read_keeps_the_hold() {
    let _frozen = FrozenClock::freeze();
    let (model, app) = handed_over("3100401").await;

    getinfo_answers(
        &app,
        ResponseTemplate::new(500).set_body_json(json!({"status": "error"})),
    )
    .await;
    let (status, body) = app.send("3100401", "Hello?").await;
    app.settle().await;
    assert_held_response(status, &body);

    getinfo_answers(
        &app,
        ResponseTemplate::new(200)
            .set_body_json(json!({"status": "success", "data": {"tags": []}}))
            .set_delay(Duration::from_secs(30)),
    )
    .await;
    let request = send_in_background(&app, "3100401", "Still there?");
    until(async || !app.all_manychat_requests().await.is_empty()).await;
    tokio::time::advance(Duration::from_millis(1600)).await;
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .expect("the held response within its bound")
        .unwrap();
    assert_held_response(status, &body);
    assert_eq!(model.calls(), 0);
    let conversation = app.conversation("3100401").await;
    assert_eq!(conversation.hold_released_at, None, "still held");
    let held = app
        .turns("3100401")
        .await
        .iter()
        .filter(|t| t.outcome.as_deref() == Some("held"))
        .count();
    assert_eq!(held, 2);
}

async fn post_release(app: &TestApp, secret: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = app
        .http
        .post(format!("{}/v1/channels/manychat/release", app.address))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(secret) = secret {
        request = request.bearer_auth(secret);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(start_paused = true)]
async fn handoff_an_operator_release_through_the_route_hands_the_contact_back() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps(replies(&["Back with you."])));
    let app = spawn_app(model.clone()).await;
    ask_for_a_refund(&app, "3100501").await;
    contact_has_the_tag(&app).await;
    let body = r#"{"subscriber_id": "3100501"}"#;

    assert_eq!(post_release(&app, None, body).await.0, 401);
    assert_eq!(
        post_release(&app, Some("wrong-secret-000000"), body)
            .await
            .0,
        401
    );
    for bad in [
        "",
        "{}",
        r#"{"subscriber_id": true}"#,
        r#"{"subscriber_id": "abc"}"#,
        // The message route's parser: a key given twice is refused, never read as its last.
        r#"{"subscriber_id": "1", "subscriber_id": "3100501"}"#,
        r#"{"subscriber_id": "18446744073709551615"}"#,
    ] {
        let (status, answer) = post_release(&app, Some(RELEASE_TOKEN), bad).await;
        assert_eq!(status, 400, "{bad}");
        assert!(answer["field"].is_string(), "the field is named: {answer}");
    }
    assert_eq!(
        app.conversation("3100501").await.hold_released_at,
        None,
        "a refused release changes nothing"
    );
    assert_eq!(
        post_release(&app, Some(RELEASE_TOKEN), r#"{"subscriber_id": "3100599"}"#).await,
        (200, json!({"released": false})),
        "an unknown contact"
    );
    assert_eq!(
        post_release(&app, Some(RELEASE_TOKEN), body).await,
        (200, json!({"released": true}))
    );
    assert_eq!(
        post_release(&app, Some(RELEASE_TOKEN), body).await,
        (200, json!({"released": false})),
        "not held any more"
    );
    assert!(
        app.all_manychat_requests().await.is_empty(),
        "a release sends nothing to ManyChat"
    );
    let conversation = app.conversation("3100501").await;
    assert_eq!(
        conversation.hold_release_reason.as_deref(),
        Some("released")
    );

    // The tag is still on the contact, but the operator released it: answered, and told.
    let (_, answer) = app.send("3100501", "Hello").await;
    app.settle().await;
    assert_eq!(block_texts(&answer), vec!["Back with you.".to_owned()]);
    let prompt = format!("{:?}", model.requests().last().unwrap());
    assert!(prompt.contains("A person from the business handled this conversation"));
    let metrics = app.metrics_text().await;
    assert_metric(
        &metrics,
        r#"manychat_agent_hold_releases_total{reason="released"} 1"#,
    );
}

#[tokio::test(start_paused = true)]
async fn handoff_a_new_handoff_after_a_release_holds_again_and_tags_again() {
    let _frozen = FrozenClock::freeze();
    let (model, app) = handed_over("3100601").await;
    let body = r#"{"subscriber_id": "3100601"}"#;
    assert_eq!(
        post_release(&app, Some(RELEASE_TOKEN), body).await.1["released"],
        true
    );
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    tokio::time::advance(Duration::from_secs(60)).await;
    let (_, answer) = app
        .send("3100601", "It is a complaint, refund please")
        .await;
    app.settle().await;
    assert_eq!(block_texts(&answer), vec![app.escalation_copy()]);
    let tags = app
        .manychat_requests_to("/fb/subscriber/addTagByName")
        .await;
    assert_eq!(tags.len(), 1, "handed back, then over again: tagged again");
    app.manychat.reset().await;
    assert_held(&app, &model, "3100601").await;
}

#[tokio::test(start_paused = true)]
async fn handoff_metrics_count_held_messages_and_contacts_held_now() {
    let _frozen = FrozenClock::freeze();
    let (model, app) = handed_over("3100701").await;
    assert_held(&app, &model, "3100701").await;
    let metrics = app.metrics_text().await;
    assert_metric(&metrics, "manychat_agent_held_messages_total 1");
    assert_metric(&metrics, "manychat_agent_contacts_held 1");
}

/// Replicas share the hold: a release through one holds for the other's next message, on
/// PostgreSQL.
#[tokio::test]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn handoff_postgres_a_release_on_one_replica_frees_the_contact_on_the_other() {
    let (_, url) = fresh_postgres_schema().await;
    let model = Arc::new(ScriptedModel::from_steps(replies(&["Back with you."])));
    let one = spawn_app_with(AppOptions::new(model.clone()).env("DATABASE_URL", url.clone())).await;
    let two = spawn_app_with(AppOptions::new(model.clone()).env("DATABASE_URL", url)).await;
    one.send("3100801", "I want a refund").await;
    one.settle().await;
    assert_held(&two, &model, "3100801").await;
    let body = r#"{"subscriber_id": "3100801"}"#;
    assert_eq!(
        post_release(&one, Some(RELEASE_TOKEN), body).await.1["released"],
        true
    );
    let (_, answer) = two.send("3100801", "Hello").await;
    two.settle().await;
    assert_eq!(block_texts(&answer), vec!["Back with you.".to_owned()]);
}

#[tokio::test(start_paused = true)]
async fn hours_a_handoff_while_closed_answers_with_the_closed_copy_and_still_holds() {
    let _frozen = FrozenClock::freeze();
    const CLOSED: &str = "We are closed now; a person will reply when we open.";
    for (weekly, expected_closed) in [
        (json!({}), true),
        (
            json!({"mon": ["00:00-24:00"], "tue": ["00:00-24:00"], "wed": ["00:00-24:00"],
                   "thu": ["00:00-24:00"], "fri": ["00:00-24:00"], "sat": ["00:00-24:00"],
                   "sun": ["00:00-24:00"]}),
            false,
        ),
    ] {
        let model = Arc::new(ScriptedModel::from_steps(vec![]));
        let app = spawn_app_with(AppOptions::new(model.clone()).edit(move |dir| {
            edit_rules(dir, |r| {
                r["hours"] = json!({"timezone": "Europe/Madrid", "weekly": weekly});
                r["messages"]["escalationClosed"] = CLOSED.into();
            })
        }))
        .await;
        let (_, body) = app.send("3100901", "I want a refund").await;
        app.settle().await;
        let expected = if expected_closed {
            CLOSED.to_owned()
        } else {
            app.escalation_copy()
        };
        assert_eq!(block_texts(&body), vec![expected]);
        let tagged = app
            .manychat_requests()
            .await
            .iter()
            .any(|r| r.path == "/fb/subscriber/addTagByName" && r.body["tag_name"] == TAG);
        assert!(tagged, "the handoff is unchanged");
        app.manychat.reset().await;
        assert_held(&app, &model, "3100901").await;
        app.stop().await;
    }
}

/// Load shedding is a handoff path, but never for a contact held already: its message is
/// recorded as held and answered silently, with no copy, no tag read and no handoff again.
#[tokio::test(start_paused = true)]
async fn handoff_a_load_shed_message_from_a_held_contact_gets_no_copy_and_no_handoff_again() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(manychat_agent::model::mock::HangingModel::new());
    let app = spawn_app_with(AppOptions::new(model.clone()).env("MAX_TURNS_IN_FLIGHT", "1")).await;
    ask_for_a_refund(&app, "3100801").await;
    let handed_over = app.conversation("3100801").await.escalated_at;
    assert!(handed_over.is_some());
    let id = app.conversation("3100801").await.id;
    let rows = async || {
        let all = app.outbox().await;
        all.iter().filter(|r| r.conversation_id == id).count()
    };
    let handoff_rows = rows().await;

    // Another contact's turn takes the only place: the held contact's message is shed.
    let busy = send_in_background(&app, "3100802", "A question");
    until(async || model.calls() == 1).await;
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    let (status, body) = app.send("3100801", "Are you there?").await;
    assert_held_response(status, &body);
    tokio::time::advance(Duration::from_secs(11)).await;
    app.worker.run_once().await.unwrap();
    // The busy contact's own writes (its new token's field) are not the held contact's; a tag
    // read (a GET, no body) counts.
    let held_contacts: Vec<Recorded> = app
        .all_manychat_requests()
        .await
        .into_iter()
        .filter(|r| r.body["subscriber_id"] != serde_json::json!(3100802))
        .collect();
    assert_eq!(
        paths(&held_contacts),
        Vec::<String>::new(),
        "no tag read, no tag, no flow"
    );
    let conversation = app.conversation("3100801").await;
    assert_eq!(conversation.escalated_at, handed_over, "no new handoff");
    assert_eq!(rows().await, handoff_rows, "no handoff row");
    let turns = app.turns("3100801").await;
    let [.., message, held] = &turns[..] else {
        panic!("the shed message and its held turn are recorded");
    };
    assert_eq!(message.text, "Are you there?");
    assert_eq!(held.outcome.as_deref(), Some("held"));
    assert_eq!(held.escalation_reason, None);
    drop(busy);
}

static WALL_STEP_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The machine's wall clock, which the test steps (NTP).
fn stepped_wall() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
        + chrono::Duration::milliseconds(WALL_STEP_MS.load(std::sync::atomic::Ordering::SeqCst))
}

/// The wall clock is followed: a +26 h NTP step while a contact is held for 24 h ends the hold
/// at the contact's next message (without a restart), and that message is recorded at the new
/// wall time.
#[tokio::test]
async fn a_wall_clock_step_past_the_hold_ends_it_without_a_restart() {
    let model = Arc::new(ScriptedModel::from_steps(replies(&["Welcome back."])));
    let mut options = AppOptions::new(model.clone());
    options.clock = Some(manychat_agent::clock::Clock::following(stepped_wall));
    let app = spawn_app_with(options).await;
    ask_for_a_refund(&app, "3100301").await;
    assert_held(&app, &model, "3100301").await;

    WALL_STEP_MS.store(26 * 3_600_000, std::sync::atomic::Ordering::SeqCst);
    let asked = ("Hello again", "Welcome back.");
    answered_after_release(&app, "3100301", asked, "hold_expired").await;
    let turns = app.turns("3100301").await;
    let message = turns
        .iter()
        .rev()
        .find(|t| t.text == "Hello again")
        .unwrap();
    let wall = stepped_wall();
    assert!(
        (wall - message.created_at).num_seconds().abs() <= 5,
        "recorded at the wall's time: {} against {wall}",
        message.created_at
    );
}
