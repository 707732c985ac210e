//! The flows the server sends on its own. The opening flow (032 A, with
//! 034's timing: it goes on the prospect turn, before the model's first flow or before a reply
//! that does not escalate, at most once per contact) and stage-tied flows (032 B: an accepted
//! funnel write to a tied stage sends its flow). Through the HTTP route, the fake ManyChat (the
//! order of what it received) and the real store; the racing cases on both backends.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply, tool_calls};
use manychat_agent::model::{Message, Model, ModelError, ModelRequest, ModelResponse};
use manychat_agent::store::NewTurn;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::selling::*;

/// The app on `backend` with the selling tenant's server-sent flows.
async fn app_with_server_flows(backend: Backend, model: Arc<dyn Model>) -> TestApp {
    app_on(backend, model, with_server_flows).await
}

async fn app(model: Arc<ScriptedModel>) -> TestApp {
    app_with_server_flows(Backend::Sqlite, model).await
}

/// The app on `model` after `subscriber`'s one turn of `text` (answered 200, settled).
async fn after_a_turn(model: Arc<ScriptedModel>, subscriber: &str, text: &str) -> TestApp {
    let app = app(model).await;
    turn_once(&app, subscriber, text).await;
    app
}

/// The intent write's result on the prospect turn (034).
fn opening_queued() -> Value {
    json!({
        "staged": true,
        "openingQueued": {"flow": "studio_welcome", "description": OPENING_DESCRIPTION}
    })
}

// --- 032 A / 034: the opening ----------------------------------------------------------------------

/// The step's tool results are the staged write's alone: no opening was queued with it.
fn assert_nothing_queued(request: &ModelRequest, why: &str) {
    assert_eq!(
        tool_results(request),
        vec![json!({"staged": true})],
        "{why}"
    );
}

#[tokio::test]
async fn spec_032_verification_2_the_opening_is_never_the_models_choice() {
    let model = script(vec![
        tool_calls([prospect(), send_flow("studio_welcome", false)]),
        answer("Happy to help."),
    ]);
    let app = after_a_turn(model.clone(), "8001", "What courses do you run?").await;
    let request = &model.requests()[0];
    let send_flow = request
        .tools
        .iter()
        .find(|t| t.name == "send_flow")
        .expect("send_flow is offered");
    let offered = send_flow.parameters["properties"]["flow"]["enum"].clone();
    assert!(
        !offered
            .as_array()
            .unwrap()
            .contains(&json!("studio_welcome")),
        "{offered}"
    );
    assert!(
        offered
            .as_array()
            .unwrap()
            .contains(&json!("student_gallery"))
    );
    assert_eq!(
        tool_results(&model.requests()[1])[1],
        json!({"staged": false, "error": "unknown flow id"}),
        "naming it anyway is refused"
    );
    assert_eq!(
        sends_of(&app, OPENING_NS).await,
        1,
        "the server sent it (before the reply), not the model"
    );
}

#[tokio::test]
async fn spec_034_verification_4_the_opening_goes_just_before_the_models_first_flow_stays_sent_on_escalation_and_never_twice()
 {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "handbuilding"),
            send_flow("handbuilding_guide", false),
        ]),
        reply(escalation_json("explicit_request")),
        // A later turn records prospect again (the escalation discarded the first write).
        tool_calls([prospect()]),
        answer("The weekend runs on Saturdays."),
    ]);
    let app = app(model.clone()).await;
    let body = turn_once(&app, "8002", "What is the weekend course like? Can I call?").await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![
            opening_queued(),
            json!({"staged": true, "flowsAvailable": ["handbuilding_guide"]}),
            json!({"sent": true}),
        ]
    );
    let sent = received(&app).await;
    assert_eq!(
        sent[..2],
        pairs(&[(FLOW, OPENING_NS), (FLOW, HANDBUILDING_GUIDE_NS)])[..],
        "the opening just before the model's flow: {sent:?}"
    );
    assert!(
        !sent
            .iter()
            .any(|(_, what)| what == "studio_intent=prospect"),
        "the escalation discarded the staged writes"
    );
    assert_eq!(
        entries(&agent_turn(&app, "8002").await.actions.unwrap())[..4],
        [
            entry("intent", "discarded", None),
            entry("course", "discarded", None),
            entry("studio_welcome", "performed", Some("opening")),
            entry("handbuilding_guide", "performed", None),
        ],
        "the opening is recorded like any flow, and escalation cannot recall it"
    );
    assert!(app.conversation("8002").await.opening_sent_at.is_some());

    // The contact is unknown again, and a later turn records prospect: no second opening.
    turn_once(&app, "8002", "How much is the weekend?").await;
    assert_nothing_queued(&model.requests()[3], "not queued again");
    assert_eq!(sends_of(&app, OPENING_NS).await, 1);
}

#[tokio::test]
async fn spec_034_verification_4_on_a_later_prospect_turn_with_no_flow_the_opening_goes_before_the_reply()
 {
    let model = script(vec![
        answer("Hello! How can I help?"),
        tool_calls([prospect()]),
        answer("The weekend course is two days of handbuilding."),
    ]);
    let app = after_a_turn(model.clone(), "8003", "Hi").await;
    assert!(
        received(&app).await.is_empty(),
        "a bare hello is unknown: no opening"
    );

    let (status, body) = app.send("8003", "What is the weekend course?").await;
    assert_eq!(status, 200);
    assert_eq!(
        block_texts(&body),
        vec!["The weekend course is two days of handbuilding."]
    );
    // Before the response returned, the opening had gone; the staged write follows the reply.
    assert_eq!(
        received(&app).await.first(),
        Some(&(FLOW.to_owned(), OPENING_NS.to_owned()))
    );
    app.settle().await;
    assert_received(
        &app,
        &[(FLOW, OPENING_NS), (SET_FIELD, "studio_intent=prospect")],
    )
    .await;
    let requests = model.requests();
    assert_eq!(tool_results(&requests[2]), vec![opening_queued()]);
    // The model was told what a queued opening means for its reply (032's newer rule).
    assert!(
        requests[2].system.contains(
            "closing_question is null unless the contact's message already answers that question"
        ),
        "the opening rules are in the system prompt"
    );
    assert_eq!(
        entries(&agent_turn(&app, "8003").await.actions.unwrap()),
        [
            entry("intent", "performed", None),
            entry("studio_welcome", "performed", Some("opening")),
        ]
    );
}

#[tokio::test]
async fn spec_034_verification_4_no_opening_on_unknown_or_not_prospect_turns() {
    let model = script(vec![
        answer("Hello! How can I help?"),
        tool_calls([set_field("intent", "not_prospect")]),
        answer("Thanks, I will pass that on to the studio."),
    ]);
    let app = after_a_turn(model.clone(), "8004", "Hi").await;
    turn_once(&app, "8004", "I sell clay to studios").await;
    assert_nothing_queued(&model.requests()[2], "the write is staged and nothing more");
    assert_received(&app, &[(SET_FIELD, "studio_intent=not_prospect")]).await;
    assert_eq!(app.conversation("8004").await.opening_sent_at, None);
}

#[tokio::test]
async fn spec_034_verification_4_an_escalated_prospect_turn_with_no_flow_forfeits_the_opening() {
    let model = script(vec![
        tool_calls([prospect()]),
        reply(escalation_json("price_negotiation")),
        tool_calls([prospect()]),
        answer("The weekend course is on Saturdays."),
    ]);
    let app = after_a_turn(
        model.clone(),
        "8005",
        "How much is the weekend? Any discount?",
    )
    .await;
    assert!(
        !received(&app)
            .await
            .iter()
            .any(|(p, what)| p == FLOW && what == OPENING_NS),
        "not sent on the escalated turn"
    );
    // A person has the conversation: a later prospect turn still gets no opening.
    turn_once(&app, "8005", "OK, tell me about the weekend").await;
    assert_nothing_queued(&model.requests()[3], "the write is staged and nothing more");
    assert_eq!(sends_of(&app, OPENING_NS).await, 0);
    assert_eq!(app.conversation("8005").await.opening_sent_at, None);
}

/// A prospect turn whose call is cut short (MODEL_ABORT_MS) escalates with no flow sent: its
/// intent write stays on its record, discarded, and the opening is forfeited for good.
#[tokio::test(start_paused = true)]
async fn spec_034_verification_4_an_aborted_prospect_turn_with_no_flow_forfeits_the_opening() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps(vec![
        ScriptStep::ok(tool_calls([prospect()])),
        ScriptStep::ok(answer("Too late.")).after(Duration::from_secs(60)),
        ScriptStep::ok(tool_calls([prospect()])),
        ScriptStep::ok(answer("The weekend course is on Saturdays.")),
    ]));
    let app = app_with_server_flows(Backend::Sqlite, model.clone()).await;
    returning_contact_held_at_the_deadline(&app, &model, "8011", "How much is the weekend?").await;
    app.queued_after(Duration::from_secs(22)).await;
    let aborted = agent_turn(&app, "8011").await;
    assert_eq!(aborted.outcome.as_deref(), Some("error"));
    assert_eq!(
        entries(aborted.actions.as_ref().unwrap()),
        [entry("intent", "discarded", None)],
        "the prospect turn's write is on its record"
    );
    assert_eq!(sends_of(&app, OPENING_NS).await, 0);

    turn_once(&app, "8011", "OK, tell me about the weekend").await;
    assert_nothing_queued(
        &model.requests()[3],
        "no opening queued on a later prospect turn",
    );
    assert_eq!(sends_of(&app, OPENING_NS).await, 0);
    assert_eq!(app.conversation("8011").await.opening_sent_at, None);
}

#[tokio::test]
async fn spec_034_verification_4_a_rollout_rule_prospect_never_gets_the_opening() {
    let model = script(vec![tool_calls([prospect()]), answer("Welcome back.")]);
    let app = app(model.clone()).await;
    // A contact whose last performed stage is past `new`, with no intent write.
    let conversation = app.conversation("8006").await;
    app.store
        .record_turn(&NewTurn {
            actions: Some(json!([{"tool": "set_field", "id": "funnel_stage", "value": "nurturing", "status": "performed"}])),
            ..NewTurn::agent(
                conversation.id,
                "Earlier answer.",
                "answered_inline",
                true,
                chrono::Utc::now() - chrono::Duration::hours(1),
            )
        })
        .await
        .unwrap();
    turn_once(&app, "8006", "Hello again").await;
    assert_nothing_queued(
        &model.requests()[1],
        "no write made them a prospect: nothing is queued",
    );
    assert_eq!(sends_of(&app, OPENING_NS).await, 0);
}

#[tokio::test]
async fn spec_032_the_opening_takes_no_action_slot() {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "handbuilding"),
            send_flow("handbuilding_guide", false),
            set_field("clay_experience", "none"),
            set_field("clay_experience", "some"),
            set_field("clay_experience", "regular"),
            add_tag("interested_wheel"),
            add_tag("gift_buyer"),
        ]),
        answer("That is the weekend guide."),
    ]);
    let app = after_a_turn(model.clone(), "8007", "Tell me about the weekend").await;
    let results = tool_results(&model.requests()[1]);
    assert_eq!(
        results[7],
        json!({"staged": true}),
        "eight actions of the model's fit beside the opening: {results:?}"
    );
    let actions = agent_turn(&app, "8007").await.actions.unwrap();
    assert!(
        !actions.to_string().contains("dropped_over_cap"),
        "{actions}"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_034_verification_4_a_lost_race_sends_the_opening_when_the_call_settles_before_the_queued_reply()
 {
    let _frozen = FrozenClock::freeze();
    let model = tools_then_late(
        [prospect()],
        answer("The weekend course is two days."),
        Duration::from_secs(10),
    );
    let app = app_with_server_flows(Backend::Sqlite, model.clone()).await;
    returning_contact_held_at_the_deadline(&app, &model, "8008", "What is the weekend course?")
        .await;
    assert!(
        received(&app).await.is_empty(),
        "the holding line first: the call has not settled"
    );

    tokio::time::advance(Duration::from_secs(2)).await;
    until(async || {
        app.turns("8008")
            .await
            .iter()
            .any(|t| t.outcome.as_deref() == Some("deferred"))
    })
    .await;
    app.settle_advancing().await;
    assert_received(&app, &[(FLOW, OPENING_NS)]).await;
    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    app.settle_advancing().await;
    assert_received_because(
        &app,
        &[
            (FLOW, OPENING_NS),
            (SET_FIELD, "ai_message=The weekend course is two days."),
            (FLOW, REPLY_FLOW),
            (SET_FIELD, "studio_intent=prospect"),
        ],
        "holding line, then the opening, then the reply and its actions",
    )
    .await;
}

/// A model for racing turns: each turn's first step records `prospect` (all first steps meet
/// at a barrier when there is one, so the turns are in flight together), its second answers.
struct ProspectModel {
    barrier: Option<tokio::sync::Barrier>,
    calls: AtomicUsize,
}

impl ProspectModel {
    fn new(racing: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            barrier: racing.map(tokio::sync::Barrier::new),
            calls: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Model for ProspectModel {
    fn id(&self) -> &str {
        ScriptedModel::DEFAULT_ID
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let after_tools = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::ToolResults { .. }));
        if after_tools {
            return Ok(answer("The weekend course is two days."));
        }
        if let Some(barrier) = &self.barrier {
            barrier.wait().await;
        }
        Ok(tool_calls([prospect()]))
    }
}

/// Three first messages at once (or, racing without waiting for each other, a contact's most
/// turns in flight): the opening goes once, and one turn records it.
async fn three_first_messages_send_the_opening_once(backend: Backend, token: Option<&str>) {
    // Racing turns: as many as a contact may have in flight at once (`turn::place`).
    let racing = manychat_agent::turn::place::IN_FLIGHT_PER_CONTACT;
    let messages = if token.is_some() { racing } else { 3 };
    let model = ProspectModel::new(token.map(|_| racing));
    let app = app_with_server_flows(backend, model.clone()).await;
    let subscriber = "8010";
    if token.is_some() {
        // Racing turns that do not wait for each other (037: unbound turns neither wait nor
        // block), so all three reach the opening together.
        app.returning_contact(subscriber).await;
    }
    let requests: Vec<_> = ["Hi, the weekend?", "How much is it?", "When is it?"]
        .into_iter()
        .take(messages)
        .map(|text| {
            let http = app.http.clone();
            let url = app.message_url();
            let mut body = json!({"subscriber_id": subscriber, "text": text});
            if let Some(token) = token {
                body["ai_token"] = json!(token);
            }
            in_background(async move {
                let response = http.post(url).bearer_auth(SECRET).json(&body).send().await;
                response.unwrap().status().as_u16()
            })
        })
        .collect();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    app.settle().await;
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        2 * messages,
        "every turn ran"
    );
    assert_eq!(sends_of(&app, OPENING_NS).await, 1);
    let recorded = app
        .turns(subscriber)
        .await
        .iter()
        .filter_map(|t| t.actions.as_ref())
        .filter(|a| a.to_string().contains("\"origin\":\"opening\""))
        .count();
    assert_eq!(recorded, 1, "one turn records the opening");
    assert!(app.conversation(subscriber).await.opening_sent_at.is_some());
}

async fn spec_032_three_first_messages_send_the_opening_once(backend: Backend) {
    three_first_messages_send_the_opening_once(backend, None).await;
}

async fn spec_032_racing_turns_claim_the_opening_once(backend: Backend) {
    three_first_messages_send_the_opening_once(backend, Some("not-the-contacts-token")).await;
}

on_both_backends!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    spec_032_three_first_messages_send_the_opening_once,
    spec_032_racing_turns_claim_the_opening_once,
);

// --- 032 B: stage-tied flows -----------------------------------------------------------------------

#[tokio::test]
async fn spec_032_verification_3_a_write_to_a_tied_stage_sends_its_flow_once_after_the_opening_and_reports_flow_sent()
 {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "handbuilding"),
            set_field("funnel_stage", "nurturing"),
        ]),
        answer("Here is what beginners make."),
        // Again at nurturing (sent once), then offered: the glaze-lab guide is another offering's.
        tool_calls([
            set_field("funnel_stage", "nurturing"),
            set_field("funnel_stage", "offered"),
        ]),
        answer("The weekend is 180.00 GBP."),
    ]);
    let app = after_a_turn(model.clone(), "8020", "What is the weekend course like?").await;
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![
            opening_queued(),
            json!({"staged": true, "flowsAvailable": ["handbuilding_guide"]}),
            json!({"staged": true, "flowSent": "student_gallery"}),
        ]
    );
    assert_received_because(
        &app,
        &[
            (FLOW, OPENING_NS),
            (FLOW, GALLERY_NS),
            (SET_FIELD, "studio_intent=prospect"),
            (SET_FIELD, "studio_course=handbuilding"),
            (SET_FIELD, "studio_funnel_stage=nurturing"),
        ],
        "nothing goes ahead of the opening; the tied flow before the reply, the writes after",
    )
    .await;
    assert_eq!(
        entries(&agent_turn(&app, "8020").await.actions.unwrap()),
        [
            entry("intent", "performed", None),
            entry("course", "performed", None),
            entry("funnel_stage", "performed", None),
            entry("studio_welcome", "performed", Some("opening")),
            entry("student_gallery", "performed", Some("stage")),
        ]
    );

    turn_once(&app, "8020", "Nice. And the price?").await;
    assert_eq!(
        tool_results(&model.requests()[3]),
        vec![json!({"staged": true}), json!({"staged": true})],
        "already performed, and another offering's flow: nothing sent, nothing reported"
    );
    assert_eq!(sends_of(&app, GALLERY_NS).await, 1);
    assert_eq!(sends_of(&app, GLAZE_LAB_GUIDE_NS).await, 0);
}

#[tokio::test]
async fn spec_032_verification_3_a_write_that_skips_a_tied_stage_sends_only_the_stage_written() {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "glaze-lab"),
            set_field("funnel_stage", "offered"),
        ]),
        answer("The glaze lab is 95.00 GBP."),
    ]);
    let app = after_a_turn(model.clone(), "8021", "How much is the glaze lab?").await;
    assert_eq!(
        tool_results(&model.requests()[1])[2],
        json!({"staged": true, "flowSent": "glaze_lab_guide"})
    );
    assert_eq!(sends_of(&app, GLAZE_LAB_GUIDE_NS).await, 1);
    assert_eq!(
        sends_of(&app, GALLERY_NS).await,
        0,
        "nurturing was skipped: its flow is not sent"
    );
}

#[tokio::test]
async fn spec_032_b_a_tied_flow_manychat_refuses_is_reported_flow_refused() {
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "nurturing")]),
        answer("Let me tell you about it."),
    ]);
    let app = app(model.clone()).await;
    refuse_flow(&app, GALLERY_NS).await;
    turn_once(&app, "8022", "What do beginners make?").await;
    assert_eq!(
        tool_results(&model.requests()[1])[1],
        json!({"staged": true, "flowRefused": "student_gallery"})
    );
    let actions = entries(&agent_turn(&app, "8022").await.actions.unwrap());
    assert!(
        actions.contains(&entry("student_gallery", "failed", Some("stage"))),
        "{actions:?}"
    );
}

#[tokio::test]
async fn spec_032_b_a_tied_flow_past_the_action_limit_is_dropped_and_reported() {
    let model = script(vec![
        tool_calls([
            prospect(),
            set_field("course", "handbuilding"),
            set_field("clay_experience", "none"),
            set_field("clay_experience", "some"),
            set_field("clay_experience", "regular"),
            add_tag("interested_wheel"),
            add_tag("gift_buyer"),
            // The eighth action: the write is staged, its flow has no slot left.
            set_field("funnel_stage", "nurturing"),
        ]),
        answer("Noted."),
    ]);
    let app = after_a_turn(model.clone(), "8023", "Tell me everything").await;
    assert_eq!(
        tool_results(&model.requests()[1])[7],
        json!({
            "staged": true,
            "flowDropped": {"flow": "student_gallery", "reason": "action_limit"}
        })
    );
    assert_eq!(sends_of(&app, GALLERY_NS).await, 0);
    let actions = entries(&agent_turn(&app, "8023").await.actions.unwrap());
    assert!(
        actions.contains(&entry("student_gallery", "dropped_over_cap", Some("stage"))),
        "{actions:?}"
    );
}
#[tokio::test(start_paused = true)]
async fn spec_030_the_reply_waits_for_the_opening_flow() {
    let _frozen = FrozenClock::freeze();
    let model = script(vec![
        tool_calls([prospect()]),
        answer("Lovely to meet you."),
    ]);
    let app = spawn_app_with(AppOptions::new(model.clone()).edit(|dir: &Path| {
        with_server_flows(dir);
        flow_settles(dir, "studio_welcome", 4);
    }))
    .await;
    app.returning_contact("7901").await;
    let request = send_in_background(&app, "7901", "I'd love to try the wheel");
    until(async || {
        app.manychat_requests()
            .await
            .iter()
            .any(|r| r.body["flow_ns"] == OPENING_NS)
    })
    .await;
    // ManyChat has the request, but the turn takes the flow's answer time only when it reads
    // the response; the clock stays still until the turn is recorded (just before the hold), so
    // the answer time is this instant.
    until(async || app.turns("7901").await.iter().any(|t| t.outcome.is_some())).await;
    let answered = tokio::time::Instant::now();
    // The hold's timer is armed on this thread right after that write.
    let_tasks_run().await;
    for _ in 0..39 {
        tokio::time::advance(Duration::from_millis(100)).await;
        let_tasks_run().await;
    }
    assert!(!request.is_finished(), "held for the opening");
    tokio::time::advance(Duration::from_millis(100)).await;
    let (_, body) = request.await.unwrap();
    assert_eq!(block_texts(&body), vec!["Lovely to meet you."]);
    assert_eq!(
        tokio::time::Instant::now() - answered,
        Duration::from_secs(4)
    );
}
