//! Spec 031 (the window-closing flow) through the real app: the nudge worker's pass, clocked
//! where each case needs it, sends `windowClosing.flowNs` through the fake ManyChat; the store
//! holds the contact's one row and the agent turn.

use std::path::Path;

use manychat_agent::store::{NewTurn, NudgeStatus, WindowClosingStatus};
use serde_json::json;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, ResponseTemplate};

use crate::helpers::*;
use crate::nudges_helpers::{Rig, hours, mark_link_sent, rig_at};
use crate::selling::*;

const WINDOW_FLOW: &str = "content20260101000000_000955";

fn with_window_closing(dir: &Path) {
    with_nudge(dir);
    edit_tools(dir, |tools| {
        tools["windowClosing"] = json!({"flowNs": WINDOW_FLOW});
    });
}

fn minutes(n: i64) -> chrono::Duration {
    chrono::Duration::minutes(n)
}

fn answers(n: usize) -> std::sync::Arc<manychat_agent::model::mock::ScriptedModel> {
    script(
        (0..n)
            .map(|_| answer("The wheel course starts on Monday."))
            .collect(),
    )
}

/// The app with the window-closing flow configured, its model answering `n` times.
async fn window_app(n: usize) -> TestApp {
    spawn_app_with(AppOptions::new(answers(n)).edit(with_window_closing)).await
}

/// The contact of `conversation` wrote `text` at `at` (recorded straight in the store).
async fn wrote_at(
    app: &TestApp,
    conversation: &manychat_agent::store::Conversation,
    text: &str,
    at: chrono::DateTime<chrono::Utc>,
) {
    app.store
        .record_turn(&NewTurn::user(conversation.id, text, true, at))
        .await
        .unwrap();
}

/// A frozen clock, the window-closing app answering `n` times, and `subscriber`'s one
/// answered message: its conversation, last written at `last`.
async fn silent_contact(
    n: usize,
    subscriber: &str,
) -> (
    FrozenClock,
    TestApp,
    manychat_agent::store::Conversation,
    chrono::DateTime<chrono::Utc>,
) {
    let frozen = FrozenClock::freeze();
    let app = window_app(n).await;
    let conversation = wrote_once(&app, subscriber).await;
    let last = conversation.last_message_at.unwrap();
    (frozen, app, conversation, last)
}

/// The contact wrote once and was answered.
async fn wrote_once(app: &TestApp, subscriber: &str) -> manychat_agent::store::Conversation {
    app.send(subscriber, "How much is the wheel course?").await;
    app.settle().await;
    app.conversation(subscriber).await
}

/// One worker pass at `at`, on a model with no script (any call would be counted).
async fn pass_at(app: &TestApp, at: chrono::DateTime<chrono::Utc>) -> Rig {
    let rig = rig_at(app, at, script(Vec::new()));
    rig.worker.run_once().await;
    rig
}

/// The window-closing flow's `sendFlow` requests ManyChat received, by subscriber.
async fn window_flows(app: &TestApp) -> Vec<String> {
    app.manychat_requests()
        .await
        .iter()
        .filter(|r| r.path == FLOW && r.body["flow_ns"] == WINDOW_FLOW)
        .map(|r| {
            r.body["subscriber_id"]
                .to_string()
                .trim_matches('"')
                .to_owned()
        })
        .collect()
}

async fn row(
    app: &TestApp,
    conversation: &manychat_agent::store::Conversation,
) -> Option<(WindowClosingStatus, Option<String>)> {
    app.store
        .window_closing(conversation.id)
        .await
        .unwrap()
        .map(|r| (r.status, r.reason))
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_verification_2_sent_at_1380_minutes_with_no_model_call_and_recorded()
 {
    let (_frozen, app, conversation, last) = silent_contact(1, "8101").await;

    pass_at(&app, last + minutes(1379)).await;
    assert!(window_flows(&app).await.is_empty(), "not before +1380 min");
    assert_eq!(row(&app, &conversation).await, None);

    let rig = pass_at(&app, last + minutes(1380)).await;
    assert_eq!(window_flows(&app).await, vec!["8101".to_owned()]);
    assert_eq!(rig.model.calls(), 0, "no model call");
    assert_eq!(
        row(&app, &conversation).await,
        Some((WindowClosingStatus::Sent, None))
    );
    let turn = app.turns("8101").await.pop().unwrap();
    assert_eq!(turn.outcome.as_deref(), Some("window_closing_sent"));
    assert_eq!(turn.text, "", "no text");
    assert!(!turn.bound, "never in the model's history");
    assert_eq!(
        turn.actions.unwrap(),
        json!([{"tool": "send_flow", "id": "window_closing", "status": "performed", "origin": "window_closing"}]),
        "the flow is its one performed action"
    );
    assert_eq!(rig.metrics.window_closing_count("sent", ""), 1);
    assert!(
        rig.metrics
            .render()
            .contains("manychat_agent_turns_total{outcome=\"window_closing_sent\"} 1")
    );

    // Once: later passes inside the window send nothing more.
    pass_at(&app, last + minutes(1381)).await;
    pass_at(&app, last + minutes(1439)).await;
    assert_eq!(window_flows(&app).await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_verification_3_each_skip_reason_in_order_without_a_send() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(AppOptions::new(answers(5)).edit(|dir| {
        with_window_closing(dir);
        edit_rules(dir, |rules| rules["handoff"]["holdHours"] = json!(72));
    }))
    .await;
    let tagged = |subscriber: &'static str, status: u16, tags: &'static [&'static str]| {
        let tags: Vec<_> = tags.iter().map(|t| json!({"id": 1, "name": t})).collect();
        Mock::given(method("GET"))
            .and(path("/fb/subscriber/getInfo"))
            .and(query_param("subscriber_id", subscriber))
            .respond_with(ResponseTemplate::new(status).set_body_json(json!({
                "status": "success",
                "data": {"id": "1", "tags": tags, "custom_fields": []}
            })))
            .with_priority(1)
    };
    let human = &["human-handling"];
    // escalated, and tagged: the escalation is checked first (no read is made).
    let escalated = wrote_once(&app, "8201").await;
    let last = escalated.last_message_at.unwrap();
    app.store
        .set_escalated(escalated.id, last + minutes(1))
        .await
        .unwrap();
    tagged("8201", 200, human).mount(&app.manychat).await;
    // link_sent, and tagged: the funnel is checked before the read.
    let link = wrote_once(&app, "8202").await;
    let answer_turn = app.turns("8202").await.pop().unwrap();
    mark_link_sent(&app, answer_turn.id).await;
    tagged("8202", 200, human).mount(&app.manychat).await;
    let active = wrote_once(&app, "8203").await;
    tagged("8203", 200, human).mount(&app.manychat).await;
    let unread = wrote_once(&app, "8204").await;
    tagged("8204", 500, &[]).mount(&app.manychat).await;
    // Held for a person: handed over before the idle gap, still within holdHours.
    let held = wrote_once(&app, "8205").await;
    app.store
        .set_escalated(held.id, last - hours(25))
        .await
        .unwrap();
    tagged("8205", 200, &[]).mount(&app.manychat).await;
    for conversation in [&escalated, &link, &active, &unread, &held] {
        assert_eq!(conversation.last_message_at, Some(last), "one instant");
    }

    let rig = pass_at(&app, last + minutes(1380)).await;
    assert!(window_flows(&app).await.is_empty(), "nothing sent");
    assert_eq!(rig.model.calls(), 0);
    for (conversation, reason) in [
        (&escalated, "escalated"),
        (&link, "link_sent"),
        (&active, "human_active"),
        (&unread, "read_failed"),
        (&held, "held"),
    ] {
        assert_eq!(
            row(&app, conversation).await,
            Some((WindowClosingStatus::Skipped, Some(reason.to_owned()))),
            "{reason}"
        );
        assert_eq!(rig.metrics.window_closing_count("skipped", reason), 1);
    }
    let reads: Vec<String> = app
        .manychat_requests()
        .await
        .iter()
        .filter(|r| r.path.starts_with("/fb/subscriber/getInfo"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        reads.len(),
        3,
        "read only for the contacts the cheaper checks let through"
    );

    // A skip other than contact_replied is final: a new silence sends nothing.
    let later = last + hours(30);
    wrote_at(&app, &active, "back again", later).await;
    pass_at(&app, later + minutes(1380)).await;
    assert!(window_flows(&app).await.is_empty());
}

/// Fails the window-closing flow's `sendFlow` with a 500.
async fn window_flow_fails(app: &TestApp) {
    flow_answers(
        app,
        WINDOW_FLOW,
        manychat_error(500, "temporarily unavailable"),
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_verification_3_contact_replied_leaves_the_contact_due_again() {
    let (_frozen, app, conversation, last) = silent_contact(1, "8301").await;
    window_flow_fails(&app).await;
    let rig = pass_at(&app, last + minutes(1380)).await;
    assert_eq!(
        row(&app, &conversation).await,
        Some((WindowClosingStatus::Retry, None))
    );
    assert_eq!(rig.metrics.window_closing_count("retry", ""), 1);
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;

    // The contact wrote before the retry: released, due again from the new message.
    let replied = last + minutes(1385);
    app.store
        .record_turn(&NewTurn::user(
            conversation.id,
            "still there?",
            true,
            replied,
        ))
        .await
        .unwrap();
    let rig = pass_at(&app, last + minutes(1390)).await;
    assert_eq!(
        rig.metrics
            .window_closing_count("released", "contact_replied"),
        1
    );
    assert_eq!(row(&app, &conversation).await, None);
    assert!(window_flows(&app).await.is_empty());
    pass_at(&app, replied + minutes(1379)).await;
    assert!(window_flows(&app).await.is_empty());
    pass_at(&app, replied + minutes(1380)).await;
    assert_eq!(window_flows(&app).await, vec!["8301".to_owned()]);
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_verification_4_no_resend_after_an_idle_reset() {
    let (_frozen, app, conversation, last) = silent_contact(1, "8401").await;
    pass_at(&app, last + minutes(1380)).await;
    assert_eq!(window_flows(&app).await.len(), 1);
    // Two days later (past idleResetHours) the contact writes again and falls silent.
    let again = last + hours(48);
    wrote_at(&app, &conversation, "hello again", again).await;
    pass_at(&app, again + minutes(1380)).await;
    pass_at(&app, again + minutes(1400)).await;
    assert_eq!(window_flows(&app).await.len(), 1, "once per contact ever");
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_verification_5_a_pending_nudge_is_cancelled_and_a_sent_nudge_does_not_block()
 {
    let (_frozen, app, pending, last) = silent_contact(2, "8501").await;
    app.store
        .schedule_nudge(pending.id, "tomorrow", last + minutes(1380), last)
        .await
        .unwrap();
    // The other contact's nudge went out earlier.
    let nudged = wrote_once(&app, "8502").await;
    app.store
        .schedule_nudge(nudged.id, "later_today", last + hours(2), last)
        .await
        .unwrap();
    let claimed = app
        .store
        .claim_due_nudges(last + hours(2), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    app.store
        .settle_nudge(&claimed[0], NudgeStatus::Sent, None, last + hours(2))
        .await
        .unwrap();

    let rig = pass_at(&app, last + minutes(1380)).await;
    let mut sent = window_flows(&app).await;
    sent.sort();
    assert_eq!(sent, vec!["8501".to_owned(), "8502".to_owned()]);
    let nudge = app.store.nudge(pending.id).await.unwrap().unwrap();
    assert_eq!(
        (nudge.status, nudge.reason.as_deref()),
        (NudgeStatus::Cancelled, Some("window_closing"))
    );
    assert_eq!(rig.metrics.nudge_count("cancelled", "window_closing"), 1);
    assert_eq!(rig.model.calls(), 0, "the nudge's model never ran");
    let nudge = app.store.nudge(nudged.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent, "a sent nudge stays sent");
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_a_send_failing_until_the_window_closes_is_given_up_and_counts_as_sent()
 {
    let (_frozen, app, conversation, last) = silent_contact(1, "8601").await;
    window_flow_fails(&app).await;
    pass_at(&app, last + minutes(1380)).await;
    pass_at(&app, last + minutes(1400)).await;
    let attempts = window_flows(&app).await.len();
    assert_eq!(attempts, 2, "tried again while the window is open");
    assert_eq!(
        row(&app, &conversation).await,
        Some((WindowClosingStatus::Retry, None))
    );
    // The last try a minute before the window closes fails: given up.
    let rig = pass_at(&app, last + minutes(1439)).await;
    assert_eq!(window_flows(&app).await.len(), 3);
    assert_eq!(
        row(&app, &conversation).await,
        Some((WindowClosingStatus::GivenUp, None))
    );
    assert_eq!(rig.metrics.window_closing_count("given_up", ""), 1);
    let stored = app
        .store
        .window_closing(conversation.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.attempts, 3);
    // Counted as sent: ManyChat answering again changes nothing, nor a new silence.
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    let again = last + hours(48);
    wrote_at(&app, &conversation, "hello again", again).await;
    pass_at(&app, again + minutes(1380)).await;
    assert!(window_flows(&app).await.is_empty());
}

/// A process claims the contact's flow and dies before it settles it: within the nudge
/// worker's bound (the rig's `MODEL_ABORT_MS` of 30 s plus 60 s) the row stays the dead claim's;
/// past it the row is `lost`, counted like `given_up`, and counts as sent: it is never sent,
/// since the dead process may have sent it, also after a new silence.
async fn spec_031_window_closing_a_flow_left_running_by_a_dead_process_is_marked_lost_and_counts_as_sent(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let mut options = AppOptions::new(answers(1)).edit(with_window_closing);
    if let Backend::Postgres = backend {
        options = options.env("DATABASE_URL", fresh_postgres_url().await);
    }
    let app = spawn_app_with(options).await;
    let conversation = wrote_once(&app, "8801").await;
    let last = conversation.last_message_at.unwrap();
    let due = last + minutes(1380);
    let claimed = app
        .store
        .claim_window_closings(manychat_agent::nudge::closing::claim_at(due))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "the dead process's claim");

    let rig = pass_at(&app, due + chrono::Duration::seconds(89)).await;
    assert_eq!(
        row(&app, &conversation).await,
        Some((WindowClosingStatus::Running, None)),
        "within the bound the claim may still be alive"
    );
    assert_eq!(rig.metrics.window_closing_count("lost", "process_died"), 0);

    let rig = pass_at(&app, due + chrono::Duration::seconds(91)).await;
    assert_eq!(
        row(&app, &conversation).await,
        Some((WindowClosingStatus::Lost, Some("process_died".to_owned())))
    );
    assert_eq!(rig.worker.run_once().await.lost_window_closings, 0, "once");
    assert!(rig.metrics.render().contains(
        "manychat_agent_window_closings_total{state=\"lost\",reason=\"process_died\"} 1"
    ));
    pass_at(&app, last + minutes(1439)).await;
    let again = last + hours(48);
    wrote_at(&app, &conversation, "hello again", again).await;
    pass_at(&app, again + minutes(1380)).await;
    assert!(window_flows(&app).await.is_empty(), "never sent");
    assert!(
        app.metrics_text().await.contains(
            "manychat_agent_window_closings_total{state=\"lost\",reason=\"process_died\"} 0"
        ),
        "the series is there from the start"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_031_window_closing_a_flow_left_running_by_a_dead_process_is_marked_lost_and_counts_as_sent_sqlite()
 {
    spec_031_window_closing_a_flow_left_running_by_a_dead_process_is_marked_lost_and_counts_as_sent(
        Backend::Sqlite,
    )
    .await;
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_031_window_closing_a_flow_left_running_by_a_dead_process_is_marked_lost_and_counts_as_sent_postgres()
 {
    spec_031_window_closing_a_flow_left_running_by_a_dead_process_is_marked_lost_and_counts_as_sent(
        Backend::Postgres,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_031_window_closing_two_workers_on_one_postgres_send_once() {
    const CONTACTS: usize = 4;
    let url = fresh_postgres_url().await;
    let one = spawn_app_with(
        AppOptions::new(answers(CONTACTS))
            .edit(with_window_closing)
            .env("DATABASE_URL", url.clone()),
    )
    .await;
    let two = spawn_app_with(
        AppOptions::new(answers(0))
            .edit(with_window_closing)
            .env("DATABASE_URL", url),
    )
    .await;
    let mut last = None;
    for n in 0..CONTACTS {
        let conversation = wrote_once(&one, &format!("8701{n}")).await;
        last = last.max(conversation.last_message_at);
    }
    let due = last.unwrap() + minutes(1381);
    let a = rig_at(&one, due, script(Vec::new()));
    let b = rig_at(&two, due, script(Vec::new()));
    bounded("two racing passes", async {
        tokio::join!(a.worker.run_once(), b.worker.run_once())
    })
    .await;
    let mut sent = window_flows(&one).await;
    sent.extend(window_flows(&two).await);
    sent.sort();
    let expected: Vec<String> = (0..CONTACTS).map(|n| format!("8701{n}")).collect();
    assert_eq!(sent, expected, "each contact's flow sent once");
}
