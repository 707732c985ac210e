//! What a nudge turn shares with the contact's own turns: the day's tokens a turn in flight
//! reserved, the flows the server sends on its own (032: a tied stage's flow follows the text, the
//! opening never goes), the outbox's order (037: a message or an escalation while the nudge's reply
//! is queued goes behind it), and the action and guardrail counters.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, call, reply, tool_calls};
use manychat_agent::store::{Conversation, NudgeStatus};
use serde_json::json;

use crate::helpers::*;
use crate::nudges_helpers::*;
use crate::selling::*;

/// The tenant's daily token cap.
fn daily_token_cap(dir: &Path, tokens: i64) {
    edit_rules(dir, |rules| {
        rules["budget"]["dailyTokenCap"] = json!(tokens);
    });
}

/// ManyChat's requests from `from` on, as (path, field=value or flow namespace), leaving out
/// the human_active reads.
async fn sent_since(app: &TestApp, from: usize) -> Vec<(String, String)> {
    app.manychat_requests().await[from..]
        .iter()
        .filter(|r| r.path != "/fb/subscriber/getInfo")
        .map(|r| {
            let what = match r.path.as_str() {
                FLOW => r.body["flow_ns"].as_str().unwrap_or_default().to_owned(),
                _ => format!(
                    "{}={}",
                    r.body["field_name"].as_str().unwrap_or_default(),
                    r.body["field_value"].as_str().unwrap_or_default()
                ),
            };
            (r.path.clone(), what)
        })
        .collect()
}

/// (id, status, origin) of each entry of the nudge turn's record.
async fn nudge_turn_entries(
    app: &TestApp,
    conversation: &Conversation,
) -> Vec<(String, String, Option<String>)> {
    entries(
        nudge_sent_turn(app, conversation)
            .await
            .actions
            .as_ref()
            .unwrap(),
    )
}

/// The tenant with a nudge section and the flows the server sends on its own (032).
fn with_nudge_and_server_flows(dir: &Path) {
    with_nudge(dir);
    with_server_flows(dir);
}

/// Runs a nudge worker clocked now whose nudge turn's model is `model`; returns the worker and
/// how many requests ManyChat had received before it ran.
async fn run_nudge_now(app: &TestApp, model: Arc<ScriptedModel>) -> (Rig, usize) {
    let rig = rig_at(app, chrono::Utc::now(), model);
    let before = app.manychat_requests().await.len();
    rig.worker.run_once().await;
    (rig, before)
}

/// Runs a nudge worker clocked now whose nudge turn queues the follow-up "Any questions about
/// Monday?".
async fn queue_the_follow_up(app: &TestApp) -> Rig {
    let rig = rig_at(
        app,
        chrono::Utc::now(),
        script(vec![answer("Any questions about Monday?")]),
    );
    rig.worker.run_once().await;
    rig
}

/// The contact writes while a reply is queued: the response is silent; once the outbox has
/// delivered, the texts ManyChat received since `before`, in order.
async fn answered_behind_the_queue(
    app: &TestApp,
    subscriber: &str,
    text: &str,
    before: usize,
) -> Vec<String> {
    let (status, body) = app.send(subscriber, text).await;
    assert_eq!(status, 200);
    assert!(block_texts(&body).is_empty(), "silent: {body}");
    app.settle().await;
    deliver(app).await;
    sent_since(app, before)
        .await
        .into_iter()
        .filter(|(path, _)| path == SET_FIELD)
        .map(|(_, what)| what)
        .collect()
}

/// The value of the counter sample `family{labels}` (labels in any order) in OpenMetrics `text`,
/// parsed strictly; 0 when the series is absent.
fn counter(text: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    use openmetrics_parser::OpenMetricsValue;
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("not valid OpenMetrics ({e:?}):\n{text}"));
    let mut wanted: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    wanted.sort();
    let Some(family) = parsed.families.get(family) else {
        return 0.0;
    };
    family
        .iter_samples()
        .find_map(|sample| {
            let mut got: Vec<(String, String)> = sample
                .get_labelset()
                .ok()?
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            got.sort();
            match &sample.value {
                OpenMetricsValue::Counter(c) if got == wanted => Some(c.value.as_f64()),
                _ => None,
            }
        })
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn a_due_nudge_is_cancelled_cap_reached_without_a_model_call_when_a_turn_in_flight_reserved_the_rest_of_the_day()
 {
    let _frozen = FrozenClock::freeze();
    const CAP: i64 = 1_000_000;
    let model = Arc::new(ScriptedModel::from_steps(vec![
        ScriptStep::ok(answer("The wheel course starts on Monday.")),
        // Another contact's turn, still in flight when the nudge falls due.
        ScriptStep::ok(answer("Yes, there is parking.")).after(Duration::from_secs(20)),
    ]));
    let app = spawn_app_with(AppOptions::new(model.clone()).edit(|dir| {
        with_nudge(dir);
        daily_token_cap(dir, CAP);
    }))
    .await;
    // Due now on the app's clock, for the app's own nudge worker (serve's).
    let conversation = quiet_contact(&app, "7301", chrono::Duration::zero()).await;
    // The day's stored spend leaves one token: the worker's own budget check lets it through.
    let today = chrono::Utc::now().date_naive();
    let spent = app.store.budget(today).await.unwrap().tokens;
    app.store
        .add_budget(today, CAP - 1 - spent, 0.0)
        .await
        .unwrap();
    let in_flight = send_in_background(&app, "7302", "Is there parking?");
    until(async || model.calls() == 2).await;

    let pass = app.nudges.run_once().await;
    assert_eq!(pass.claimed, 1);
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.reason.as_deref()),
        (NudgeStatus::Cancelled, Some("cap_reached")),
        "the turn in flight reserved what is left of the day"
    );
    assert_eq!(model.calls(), 2, "no model call for the nudge");
    assert_no_nudge_turn_or_reply(&app, &conversation).await;

    tokio::time::advance(Duration::from_secs(30)).await;
    in_flight.await.unwrap();
    app.settle().await;
}

#[tokio::test(start_paused = true)]
async fn spec_032_b_a_tied_stage_written_on_a_nudge_turn_reports_flow_staged_and_its_flow_follows_the_text()
 {
    let _frozen = FrozenClock::freeze();
    let app =
        spawn_app_with(AppOptions::new(script(prospect_steps())).edit(with_nudge_and_server_flows))
            .await;
    app.send("7401", "How much is the handbuilding weekend?")
        .await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "7401", chrono::Duration::zero()).await;
    let model = script(vec![
        tool_calls([set_field("funnel_stage", "nurturing")]),
        answer("Here is what beginners make in their first month."),
    ]);
    let (_rig, before) = run_nudge_now(&app, model.clone()).await;
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![json!({"staged": true, "flowStaged": "student_gallery"})]
    );
    assert_eq!(
        sent_since(&app, before).await,
        pairs(&[]),
        "nothing is sent during the nudge turn"
    );
    assert_eq!(
        nudge_turn_entries(&app, &conversation).await,
        [
            entry("funnel_stage", "staged", None),
            entry("student_gallery", "staged", Some("stage")),
        ]
    );

    deliver(&app).await;
    assert_eq!(
        sent_since(&app, before).await,
        pairs(&[
            (
                SET_FIELD,
                "ai_message=Here is what beginners make in their first month."
            ),
            (FLOW, REPLY_FLOW),
            (SET_FIELD, "studio_funnel_stage=nurturing"),
            (FLOW, GALLERY_NS),
        ]),
        "the text, then the write, then its tied flow"
    );
    assert_eq!(
        nudge_turn_entries(&app, &conversation).await,
        [
            entry("funnel_stage", "performed", None),
            entry("student_gallery", "performed", Some("stage")),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn spec_032_a_a_nudge_turn_never_sends_the_opening() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(
        AppOptions::new(script(vec![answer("Hello! What would you like to make?")]))
            .edit(with_nudge_and_server_flows),
    )
    .await;
    // Not a prospect yet: an inbound turn that made them one would send the opening.
    app.send("7402", "Do you run pottery classes?").await;
    app.settle().await;
    let conversation = schedule_after_last_message(&app, "7402", chrono::Duration::zero()).await;
    let model = script(vec![
        tool_calls([prospect(), set_field("funnel_stage", "nurturing")]),
        answer("Here is what beginners make in their first month."),
    ]);
    let (_rig, before) = run_nudge_now(&app, model.clone()).await;
    assert_eq!(
        app.store
            .nudge(conversation.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        NudgeStatus::Sent
    );
    assert_eq!(
        tool_results(&model.requests()[1]),
        vec![
            json!({"staged": true}),
            json!({"staged": true, "flowStaged": "student_gallery"})
        ],
        "the model is not told that an opening goes"
    );
    assert_eq!(sent_since(&app, before).await, pairs(&[]));
    deliver(&app).await;
    let delivered = sent_since(&app, before).await;
    assert!(
        !delivered.iter().any(|(_, what)| what == OPENING_NS),
        "the opening never goes on a nudge turn: {delivered:?}"
    );
    assert_eq!(
        delivered,
        pairs(&[
            (
                SET_FIELD,
                "ai_message=Here is what beginners make in their first month."
            ),
            (FLOW, REPLY_FLOW),
            (SET_FIELD, "studio_intent=prospect"),
            (SET_FIELD, "studio_funnel_stage=nurturing"),
            (FLOW, GALLERY_NS),
        ])
    );
    assert!(
        !nudge_turn_entries(&app, &conversation)
            .await
            .iter()
            .any(|(_, _, origin)| origin.as_deref() == Some("opening")),
        "nor is it recorded"
    );
}

#[tokio::test(start_paused = true)]
async fn system_037_a_message_while_the_nudge_reply_is_queued_is_answered_behind_it() {
    let _frozen = FrozenClock::freeze();
    let model = script(vec![
        answer("The wheel course starts on Monday."),
        answer("Yes, there is free parking."),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_nudge)).await;
    let conversation = quiet_contact(&app, "7501", chrono::Duration::zero()).await;
    let _rig = queue_the_follow_up(&app).await;
    let queued = replies_queued_for(&app, &conversation).await;
    assert_eq!(queued, 1, "the follow-up waits in the outbox");
    let before = app.manychat_requests().await.len();

    // The contact writes while the follow-up is queued: no inline answer ahead of it.
    let texts = answered_behind_the_queue(&app, "7501", "Is there parking?", before).await;
    assert_eq!(
        texts,
        [
            "ai_message=Any questions about Monday?",
            "ai_message=Yes, there is free parking."
        ],
        "ManyChat gets the follow-up first, then the answer"
    );
}

#[tokio::test(start_paused = true)]
async fn system_037_an_escalation_before_the_model_while_the_nudge_reply_is_queued_goes_behind_it()
{
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(quiet()).edit(with_nudge)).await;
    let conversation = quiet_contact(&app, "7502", chrono::Duration::zero()).await;
    let _rig = queue_the_follow_up(&app).await;
    let before = app.manychat_requests().await.len();

    // An escalation keyword: the copy, decided without the model, waits its turn too.
    let texts =
        answered_behind_the_queue(&app, "7502", "I want to speak to a person", before).await;
    assert_eq!(
        texts,
        [
            "ai_message=Any questions about Monday?".to_owned(),
            format!("ai_message={}", app.escalation_copy())
        ],
        "ManyChat gets the follow-up first, then the escalation copy"
    );
    let stored = stored(&app, &conversation).await;
    assert!(stored.escalated_at.is_some(), "the contact was handed over");
}

#[tokio::test(start_paused = true)]
async fn nudge_turns_count_actions_and_guardrail_violations_like_inbound_turns() {
    let _frozen = FrozenClock::freeze();
    let actions = "manychat_agent_actions";
    let violations = "manychat_agent_guardrail_violations";
    // The inbound turn performs schedule_nudge: counted as an action, not only as a nudge.
    let inbound = vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
    ];
    let app = spawn_app_with(AppOptions::new(script(inbound)).edit(with_nudge)).await;
    app.send("6901", "How much is the wheel course?").await;
    app.settle().await;
    let scrape = app.metrics_text().await;
    assert_eq!(
        counter(
            &scrape,
            actions,
            &[("tool", "schedule_nudge"), ("status", "performed")]
        ),
        1.0,
        "{scrape}"
    );
    let conversation = app.conversation("6901").await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Pending);

    // A nudge turn whose reply a guardrail stops (not an AgentReply): the violation is counted,
    // and its staged tag as discarded.
    let model = script(vec![
        tool_calls([call("tag", "add_tag", json!({"tag": "interested_wheel"}))]),
        reply("Sure! The class costs whatever you like."),
    ]);
    let rig = rig_at(&app, nudge.due_at + hours(1), model.clone());
    assert_eq!(rig.worker.run_once().await.claimed, 1);
    assert_eq!(model.calls(), 2);
    assert_eq!(rig.metrics.nudge_count("skipped", "escalated"), 1);
    let text = rig.metrics.render();
    assert_eq!(
        counter(&text, violations, &[("kind", "schema")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        counter(
            &text,
            actions,
            &[("tool", "add_tag"), ("status", "discarded")]
        ),
        1.0,
        "{text}"
    );

    // A nudge turn that is sent with a tag the tenant does not have: the refused write is
    // counted when the turn is written (its staged tag where the outbox performs it).
    schedule_after_last_message(&app, "6901", hours(2)).await;
    let model = script(vec![
        tool_calls([
            call("known", "add_tag", json!({"tag": "interested_wheel"})),
            call("unknown", "add_tag", json!({"tag": "not_a_tenant_tag"})),
        ]),
        answer("Any questions about Monday?"),
    ]);
    let rig = rig_at(&app, chrono::Utc::now() + hours(3), model);
    assert_eq!(rig.worker.run_once().await.claimed, 1);
    assert_eq!(rig.metrics.nudge_count("sent", ""), 1);
    let text = rig.metrics.render();
    assert_eq!(
        counter(
            &text,
            actions,
            &[("tool", "add_tag"), ("status", "refused")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        counter(&text, actions, &[("tool", "add_tag"), ("status", "staged")]),
        0.0,
        "a staged action counts once, when the outbox attempts it"
    );
    assert_eq!(counter(&text, violations, &[("kind", "schema")]), 0.0);
}
