//! SYSTEM 3.5 and 9 (P0): the outbox worker — success, retryable failure, dead letter,
//! an outage outlived, a reply too old to help, two workers, database errors, shutdown, pacing and order; 012's
//! deferred actions.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::actions::{Operation, StagedAction};
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::{
    ClaimRules, NewOutboxRow, NewTurn, OutboxKind, OutboxRow, OutboxStatus,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::helpers::*;

async fn app() -> TestApp {
    spawn_app(Arc::new(ScriptedModel::replies(Vec::<String>::new()))).await
}

fn messages(texts: &[&str]) -> Value {
    json!({"messages": texts, "actions": [], "turnId": null})
}

async fn fail_flow_with(app: &TestApp, status: u16, body: Value, times: Option<u64>) {
    let mock = Mock::given(method("POST"))
        .and(path("/fb/sending/sendFlow"))
        .respond_with(ResponseTemplate::new(status).set_body_json(body))
        .with_priority(1);
    let mock = match times {
        Some(n) => mock.up_to_n_times(n),
        None => mock,
    };
    mock.mount(&app.manychat).await;
}

/// A fresh app whose flow sends ManyChat answers with `status` and `body` (the first `times`
/// of them, or all), after the worker's first attempt at one reply of `text` for `subscriber`:
/// the app, the row's id and the row.
async fn first_attempt(
    status: u16,
    body: Value,
    times: Option<u64>,
    subscriber: &str,
    text: &str,
) -> (TestApp, i64, OutboxRow) {
    let app = app().await;
    fail_flow_with(&app, status, body, times).await;
    let id = queue_due_reply(&app, subscriber, messages(&[text])).await;
    app.worker.run_once().await.unwrap();
    let row = row_of(&app, id).await;
    (app, id, row)
}

fn paths(requests: &[Recorded]) -> Vec<&str> {
    requests.iter().map(|r| r.path.as_str()).collect()
}

#[tokio::test]
async fn system_3_5_delivery_is_field_then_flow_per_message() {
    let app = app().await;
    let id = queue_due_reply(&app, "3001", messages(&["Hello there."])).await;
    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let requests = app.manychat_requests().await;
    assert_eq!(
        paths(&requests),
        vec![
            "/fb/subscriber/setCustomFieldByName",
            "/fb/sending/sendFlow"
        ]
    );
    let row = row_of(&app, id).await;
    assert_eq!(row.status, OutboxStatus::Delivered);
    assert_eq!(row.attempts, 1);
    assert!(row.delivered_at.is_some());
}

// On a frozen clock: the backoff is measured from the failed attempt, not from whenever a busy
// machine let the test read the row (a second later, the wall had eaten half of it).
#[tokio::test(start_paused = true)]
async fn system_3_5_retryable_failure_retries_later_and_rewrites_the_field() {
    let _frozen = FrozenClock::freeze();
    let unavailable = json!({"status": "error", "message": "unavailable"});
    let (app, id, row) = first_attempt(503, unavailable, Some(1), "3002", "Retry me.").await;
    assert_eq!(row.status, OutboxStatus::Pending);
    assert_eq!(row.attempts, 1);
    assert!(row.last_error.is_some());
    let wait = row.next_attempt_at - app.clock.now();
    assert!(
        wait > chrono::Duration::milliseconds(1000) && wait <= chrono::Duration::seconds(2),
        "backoff after the first attempt is 2 s, was {wait}"
    );
    // Not due yet: nothing is claimed.
    assert_eq!(app.worker.run_once().await.unwrap(), 0);

    // Make it due, as the clock would.
    sql_exec(
        &app,
        &format!("UPDATE outbox SET next_attempt_at = 0 WHERE id = {id}"),
    )
    .await;
    app.worker.run_once().await.unwrap();
    let row = row_of(&app, id).await;
    assert_eq!(row.status, OutboxStatus::Delivered);
    assert_eq!(row.attempts, 2);
    let fields = requests_to(&app, "/fb/subscriber/setCustomFieldByName").await;
    assert_eq!(fields, 2, "the field is rewritten before every trigger");
}

/// Changes the file behind the app's back, as an operator's sqlite3 shell would.
async fn sql_exec(app: &TestApp, sql: &str) {
    let conn = rusqlite::Connection::open(&app.database_path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn.execute_batch(sql).unwrap();
}

#[tokio::test]
async fn system_3_5_non_retryable_error_dead_letters_at_once() {
    let not_found =
        json!({"status": "error", "message": "Flow not found", "details": {"messages": []}});
    let (app, _, row) = first_attempt(400, not_found, None, "3003", "Nope.").await;
    assert_eq!(row.status, OutboxStatus::Failed);
    assert_eq!(row.attempts, 1);
    sql_exec(&app, "UPDATE outbox SET next_attempt_at = 0").await;
    assert_eq!(
        app.worker.run_once().await.unwrap(),
        0,
        "never claimed again"
    );
}

#[tokio::test]
async fn system_3_5_error_status_in_a_200_body_is_a_failure() {
    let bad_flow = json!({"status": "error", "message": "bad flow"});
    let (_, _, row) = first_attempt(200, bad_flow, None, "3004", "Hmm.").await;
    assert_eq!(row.status, OutboxStatus::Failed);
}

/// One `run_once` on the frozen clock, moving it while ManyChat's limiter or a pacing gap waits.
async fn run_once_advancing(app: &TestApp) -> usize {
    let worker = app.worker.clone();
    let mut run = tokio::spawn(async move { worker.run_once().await.unwrap() });
    loop {
        tokio::select! {
            done = &mut run => return done.unwrap(),
            _ = real_pause() => tokio::time::advance(Duration::from_millis(20)).await,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn fault_a_ten_minute_manychat_outage_loses_no_reply_and_is_probed_one_request_at_a_time() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503)
                .insert_header("Retry-After", "30")
                .set_body_json(json!({"status": "error", "message": "unavailable"})),
        )
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(queue_due_reply(&app, &format!("35{n:02}"), messages(&["Still here."])).await);
    }
    let began = tokio::time::Instant::now();
    while began.elapsed() < Duration::from_secs(600) {
        run_once_advancing(&app).await;
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    let during = app.manychat_requests().await.len();
    for id in &ids {
        let status = status_of(&app, *id).await;
        assert_eq!(status, OutboxStatus::Pending, "still owed after 10 minutes");
    }
    // The first claim's rows fail together; then one probe at a time, 30 s (Retry-After) to a
    // minute apart, instead of every row on its own backoff.
    assert!(during <= 10 + 20, "{during} requests during the outage");

    // ManyChat is back (its recorded requests start again from none).
    app.manychat.reset().await;
    manychat_accepts_everything(&app.manychat).await;
    for _ in 0..300 {
        run_once_advancing(&app).await;
        let rows = app.outbox().await;
        if rows.iter().all(|r| r.status == OutboxStatus::Delivered) {
            break;
        }
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    for id in &ids {
        let status = status_of(&app, *id).await;
        assert_eq!(status, OutboxStatus::Delivered, "row {id}: nothing lost");
    }
    let triggers = requests_to(&app, "/fb/sending/sendFlow").await;
    assert_eq!(triggers, 20, "each reply triggered once after the outage");
}

#[tokio::test(start_paused = true)]
async fn fault_a_reply_that_keeps_failing_is_dead_lettered_only_when_too_old_to_help() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    fail_flow_with(&app, 500, json!({"status": "error"}), None).await;
    let id = queue_due_reply(&app, "3005", messages(&["Again."])).await;
    let queued = row_of(&app, id).await;
    // Six hours of a failing ManyChat (OUTBOX_GIVE_UP_AFTER_MS's default), a minute at a time.
    let mut seen_failed_at = None;
    for minute in 0..(6 * 60 + 5) {
        run_once_advancing(&app).await;
        let row = row_of(&app, id).await;
        if row.status == OutboxStatus::Failed {
            seen_failed_at = Some(minute);
            break;
        }
        assert_eq!(row.status, OutboxStatus::Pending, "minute {minute}");
        assert!(
            row.next_attempt_at <= queued.created_at + chrono::Duration::hours(6),
            "never retried past the give-up time"
        );
        tokio::time::advance(Duration::from_secs(60)).await;
    }
    let minute = seen_failed_at.expect("dead-lettered once too old");
    assert!(
        minute >= 6 * 60 - 1,
        "not before six hours: minute {minute}"
    );
}

#[tokio::test]
async fn system_3_5_two_workers_never_deliver_one_row() {
    let app = app().await;
    for n in 0..12 {
        queue_due_reply(&app, &format!("31{n:02}"), messages(&["Once."])).await;
    }
    let first = app.worker.clone();
    let second = app.worker.clone();
    let (a, b) = bounded("two racing passes", async {
        tokio::join!(first.run_once(), second.run_once())
    })
    .await;
    assert_eq!(
        a.unwrap() + b.unwrap() + app.worker.run_once().await.unwrap(),
        12
    );
    let flows = requests_to(&app, "/fb/sending/sendFlow").await;
    assert_eq!(flows, 12, "each row delivered exactly once");
}

#[tokio::test]
async fn system_3_5_a_database_error_does_not_kill_the_worker() {
    let app = app().await;
    queue_due_reply(&app, "3006", messages(&["Survive."])).await;
    sql_exec(&app, "ALTER TABLE outbox RENAME TO outbox_away").await;
    // The worker runs on this thread: its log lines are captured here.
    let (logs, _guard) = manychat_agent::observability::capture();
    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    // The worker's poll met the missing table, then the table is repaired.
    until(async || logs.text().contains("outbox worker: database error")).await;
    let_tasks_run().await;
    assert!(!running.is_finished(), "the worker survives the error");
    sql_exec(&app, "ALTER TABLE outbox_away RENAME TO outbox").await;
    let deadline = RealDeadline::start();
    while app.outbox().await[0].status != OutboxStatus::Delivered && !deadline.passed() {
        real_pause().await;
    }
    assert_eq!(app.outbox().await[0].status, OutboxStatus::Delivered);
    token.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn system_3_5_shutdown_finishes_the_batch_in_hand() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    let id = queue_due_reply(&app, "3007", messages(&["One.", "Two."])).await;
    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    let deadline = RealDeadline::start();
    while app.manychat_requests().await.len() != 2 && !deadline.passed() {
        real_pause().await;
    }
    // The gap is a relative sleep: let the worker reach it before the clock moves.
    settle_worker(&app, id).await;
    // Shutdown arrives while the worker waits the pacing gap before the second message.
    token.cancel();
    advance_until(async || running.is_finished()).await;
    running.await.unwrap();
    assert_eq!(app.manychat_requests().await.len(), 4);
    let row = row_of(&app, id).await;
    assert_eq!(row.status, OutboxStatus::Delivered);
}

#[tokio::test(start_paused = true)]
async fn system_3_5_pacing_holds_per_contact_and_contacts_never_wait_for_each_other() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    let a = queue_due_reply(&app, "3008", messages(&["A1.", "A2."])).await;
    queue_due_reply(&app, "3008", messages(&["B1."])).await;
    queue_due_reply(&app, "3009", messages(&["C1."])).await;

    let worker = app.worker.clone();
    let batch = in_background(async move { worker.run_once().await.unwrap() });
    let deadline = RealDeadline::start();
    while app.manychat_requests().await.len() != 4 && !deadline.passed() {
        real_pause().await;
    }
    settle_worker(&app, a).await;
    // A1 and C1 went out at once; A2 waits the gap; B1 is not claimed (no overtaking).
    let texts: Vec<Value> = app
        .manychat_requests()
        .await
        .iter()
        .filter(|r| r.path == "/fb/subscriber/setCustomFieldByName")
        .map(|r| r.body["field_value"].clone())
        .collect();
    assert_eq!(texts.len(), 2);
    assert!(texts.contains(&json!("A1.")) && texts.contains(&json!("C1.")));

    tokio::time::advance(Duration::from_millis(1999)).await;
    let_tasks_run().await;
    assert_eq!(
        app.manychat_requests().await.len(),
        4,
        "A2 waits the full gap"
    );
    advance_until(async || batch.is_finished()).await;
    assert_eq!(batch.await.unwrap(), 2);
    assert_eq!(app.manychat_requests().await.len(), 6);

    // B1 is due only a gap after A ended.
    assert_eq!(app.worker.run_once().await.unwrap(), 0);
    tokio::time::advance(Duration::from_millis(2000)).await;
    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let last = app.manychat_requests().await;
    assert_eq!(last[last.len() - 2].body["field_value"], json!("B1."));
}

/// The fake ManyChat counts a request before its response reaches the worker: waits until the
/// worker took the response to row `id`'s first message (its progress is saved), then lets it
/// start its next relative sleep (on this thread), so that advancing the frozen clock moves past
/// that sleep's deadline.
async fn settle_worker(app: &TestApp, id: i64) {
    until(async || row_of(app, id).await.messages_delivered == 1).await;
    let_tasks_run().await;
}

/// Moves the frozen clock in small steps until `done`: a relative sleep registered a little
/// late (the worker runs on real IO) is still passed, without any real-time wait deciding the
/// outcome. Bounded at 20 s of tokio time: a stopped worker drains for `SHUTDOWN_DRAIN_MS`
/// (10 s) while a row is still open.
async fn advance_until(done: impl AsyncFnMut() -> bool) {
    advance_by_steps_until(Duration::from_millis(10), Duration::from_secs(20), done).await;
}

async fn agent_turn_with_actions(app: &TestApp, subscriber: &str, actions: &[StagedAction]) -> i64 {
    let conversation = app.conversation(subscriber).await;
    let mut turn = NewTurn::agent(
        conversation.id,
        "Reply.",
        "deferred",
        true,
        chrono::Utc::now(),
    );
    turn.actions = Some(manychat_agent::actions::record(actions));
    app.store.record_turn(&turn).await.unwrap()
}

/// The outbox row `id` as the store holds it.
async fn row_of(app: &TestApp, id: i64) -> OutboxRow {
    app.store.outbox_row(id).await.unwrap().unwrap()
}

/// Whether ManyChat received a request `matches` holds for.
async fn any_request(app: &TestApp, matches: impl Fn(&Recorded) -> bool) -> bool {
    app.manychat_requests().await.iter().any(matches)
}

/// How many requests ManyChat received at `path`.
async fn requests_to(app: &TestApp, path: &str) -> usize {
    let requests = app.manychat_requests().await;
    requests.iter().filter(|r| r.path == path).count()
}

/// Queues, due now, the reply "Here you go." of `subscriber`'s agent turn that staged the
/// `interested` tag: the turn's id and the row's.
async fn queue_tagging_reply(app: &TestApp, subscriber: &str) -> (i64, i64) {
    let actions = vec![tag_action("interested", "Interested Lead")];
    let turn_id = agent_turn_with_actions(app, subscriber, &actions).await;
    let payload = json!({"messages": ["Here you go."], "actions": actions, "turnId": turn_id});
    (turn_id, queue_due_reply(app, subscriber, payload).await)
}

/// Advances the paused clock `step_ms` at a time until row `id` is delivered (for at most
/// `limit_secs`): how long it took.
async fn until_delivered(app: &TestApp, id: i64, step_ms: u64, limit_secs: u64) -> Duration {
    let (step, limit) = (
        Duration::from_millis(step_ms),
        Duration::from_secs(limit_secs),
    );
    advance_by_steps_until(step, limit, async || {
        status_of(app, id).await == OutboxStatus::Delivered
    })
    .await
}

fn tag_action(id: &str, tag: &str) -> StagedAction {
    StagedAction::new("add_tag", id, Operation::AddTag { tag: tag.into() })
}

#[tokio::test]
async fn spec_012_verification_6_deferred_actions_run_once_after_the_text() {
    let app = app().await;
    fail_flow_with(&app, 503, json!({"status": "error"}), Some(1)).await;
    let (turn_id, _) = queue_tagging_reply(&app, "3010").await;

    app.worker.run_once().await.unwrap();
    assert!(
        !any_request(&app, |r| r.path == "/fb/subscriber/addTagByName").await,
        "a failed delivery performs no action"
    );
    sql_exec(&app, "UPDATE outbox SET next_attempt_at = 0").await;
    app.worker.run_once().await.unwrap();
    let requests = app.manychat_requests().await;
    let order = paths(&requests);
    assert_eq!(
        order[order.len() - 3..],
        [
            "/fb/subscriber/setCustomFieldByName",
            "/fb/sending/sendFlow",
            "/fb/subscriber/addTagByName"
        ]
    );
    assert_eq!(
        requests.last().unwrap().body,
        json!({"subscriber_id": 3010, "tag_name": "Interested Lead"})
    );
    let turn = app.store.turn(turn_id).await.unwrap().unwrap();
    assert_eq!(
        turn.actions,
        Some(json!([{"tool": "add_tag", "id": "interested", "status": "performed"}]))
    );
    let tags = requests
        .iter()
        .filter(|r| r.path == "/fb/subscriber/addTagByName")
        .count();
    assert_eq!(tags, 1, "performed once");
}

#[tokio::test]
async fn spec_012_verification_6_dead_lettered_row_performs_no_action() {
    let app = app().await;
    fail_flow_with(&app, 400, json!({"status": "error", "message": "no"}), None).await;
    let (turn_id, _) = queue_tagging_reply(&app, "3011").await;
    app.worker.run_once().await.unwrap();
    assert!(
        !any_request(&app, |r| r.body["tag_name"] == "Interested Lead").await,
        "the reply's own actions are never performed (only the handoff is:)"
    );
    let turn = app.store.turn(turn_id).await.unwrap().unwrap();
    assert_eq!(
        turn.actions.unwrap()[0],
        json!({"tool": "add_tag", "id": "interested", "status": "dead_lettered"})
    );
}

// --- lanes, leases, the at-most-twice trigger and the dead letter's handoff -------------------

/// Queues a reply row for `subscriber` due long ago, so it is due whatever the app's clock
/// reads (a frozen tokio clock lags the wall clock).
async fn queue_overdue(app: &TestApp, subscriber: &str, texts: &[&str]) -> i64 {
    let conversation = app.conversation(subscriber).await;
    let now = chrono::Utc::now();
    app.store
        .enqueue(
            &NewOutboxRow::of(&conversation, OutboxKind::Reply, messages(texts), now)
                .due_at(now - chrono::Duration::hours(1)),
        )
        .await
        .unwrap()
}

/// Stops the worker `running` under `token`, letting its calls run `grace` first.
async fn stop_worker_after<T>(token: &CancellationToken, running: &Background<T>, grace: Duration) {
    token.cancel();
    tokio::time::advance(grace).await;
    advance_until(async || running.is_finished()).await;
}

/// A fresh app whose flow sends to `subscriber` hang.
async fn hanging_app(subscriber: u64) -> TestApp {
    let app = app().await;
    hang_flows_of(&app, subscriber).await;
    app
}

/// The fake ManyChat accepts this contact's flow triggers but never answers them.
async fn hang_flows_of(app: &TestApp, subscriber: u64) {
    Mock::given(method("POST"))
        .and(path("/fb/sending/sendFlow"))
        .and(body_partial_json(json!({"subscriber_id": subscriber})))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"status": "success"}))
                .set_delay(Duration::from_secs(3600)),
        )
        .with_priority(1)
        .mount(&app.manychat)
        .await;
}

/// The requests to `endpoint` for one contact, in order.
async fn requests_of(app: &TestApp, endpoint: &str, subscriber: u64) -> Vec<Recorded> {
    app.manychat_requests()
        .await
        .into_iter()
        .filter(|r| r.path == endpoint && r.body["subscriber_id"] == json!(subscriber))
        .collect()
}

async fn flows_of(app: &TestApp, subscriber: u64) -> usize {
    requests_of(app, "/fb/sending/sendFlow", subscriber)
        .await
        .len()
}

async fn status_of(app: &TestApp, id: i64) -> OutboxStatus {
    row_of(app, id).await.status
}

#[tokio::test(start_paused = true)]
async fn a_hanging_contact_does_not_delay_another_contact() {
    let _frozen = FrozenClock::freeze();
    let app = hanging_app(4001).await;
    let stuck = queue_overdue(&app, "4001", &["Stuck."]).await;
    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    until(async || flows_of(&app, 4001).await == 1).await;

    // Another contact's reply is written while the first contact's trigger hangs.
    let free = queue_overdue(&app, "4002", &["Not stuck."]).await;
    let waited = until_delivered(&app, free, 50, 5).await;
    assert!(
        waited < Duration::from_secs(3),
        "delivered about a poll interval later, not after the hanging call's 10 s: {waited:?}"
    );
    assert_eq!(flows_of(&app, 4002).await, 1);
    assert_eq!(
        status_of(&app, stuck).await,
        OutboxStatus::Delivering,
        "the first contact's call still hangs"
    );

    stop_worker_after(&token, &running, Duration::from_secs(11)).await;
}

#[tokio::test(start_paused = true)]
async fn a_contacts_pacing_gap_does_not_delay_another_contact() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    let first = queue_overdue(&app, "4003", &["A1.", "A2.", "A3."]).await;
    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    until(async || flows_of(&app, 4003).await == 1).await;
    settle_worker(&app, first).await;

    // The first contact now waits its 2 s gap; the second contact's reply goes out meanwhile.
    let other = queue_overdue(&app, "4004", &["B1."]).await;
    until_delivered(&app, other, 50, 5).await;
    assert_eq!(
        flows_of(&app, 4003).await,
        1,
        "the other contact was answered inside the first contact's gap"
    );

    token.cancel();
    advance_until(async || running.is_finished()).await;
    assert_eq!(flows_of(&app, 4003).await, 3, "shutdown finished the row");
}

#[tokio::test(start_paused = true)]
async fn a_backlog_is_sent_at_the_full_budget_without_idling_between_batches() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    // 60 contacts' replies: 120 requests, six claims' worth of rows.
    for n in 0..60 {
        queue_overdue(&app, &format!("42{n:02}"), &["Backlog."]).await;
    }
    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    let took = advance_by_steps_until(
        Duration::from_millis(50),
        Duration::from_secs(30),
        async || {
            let rows = app.outbox().await;
            rows.iter().all(|r| r.status == OutboxStatus::Delivered)
        },
    )
    .await;
    // At 10/s after a burst of 5, 120 requests need 11.5 s. Claiming a batch of 10 rows, waiting
    // for all of it and then idling a second before the next claim takes 14 s (each idle second
    // refills only half of itself: the limiter's burst of 5).
    assert!(
        took <= Duration::from_millis(12_500),
        "the backlog took {took:?} of tokio time"
    );
    assert_eq!(app.manychat_requests().await.len(), 120);
    token.cancel();
    advance_until(async || running.is_finished()).await;
}

#[tokio::test(start_paused = true)]
async fn lapsed_lease_is_taken_again_within_seconds() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    let id = queue_overdue(&app, "4005", &["After the crash."]).await;
    // A worker claims the row with the default lease (10 s) and dies without settling it. It
    // reads the app's clock: the wall is ahead of the frozen clock by however long the app took
    // to start, which would lengthen the lease as the app's worker sees it.
    let claimed = app
        .store
        .claim_outbox(ClaimRules {
            now: app.clock.now(),
            limit: 10,
            lease: manychat_agent::outbox::DEFAULT_LEASE,
            reply_gap: Duration::from_secs(2),
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);

    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    let waited = until_delivered(&app, id, 250, 30).await;
    assert!(
        waited >= Duration::from_secs(9) && waited <= Duration::from_secs(13),
        "taken again once the 10 s lease lapsed (plus a poll), not before: {waited:?}"
    );
    let row = row_of(&app, id).await;
    assert_eq!(row.attempts, 2);
    assert_eq!(flows_of(&app, 4005).await, 1);
    token.cancel();
    advance_until(async || running.is_finished()).await;
}

#[tokio::test(start_paused = true)]
async fn a_live_workers_row_is_never_taken_while_its_call_hangs() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app_with(
        AppOptions::new(Arc::new(ScriptedModel::replies(Vec::<String>::new())))
            .env("OUTBOX_LEASE_MS", "2000"),
    )
    .await;
    let start = tokio::time::Instant::now();
    hang_flows_of(&app, 4006).await;
    let id = queue_overdue(&app, "4006", &["Slow."]).await;
    let token = CancellationToken::new();
    let running = in_background(app.worker.clone().run(token.clone()));
    until(async || flows_of(&app, 4006).await == 1).await;

    // For 9 s of a 2 s lease, another replica looks for due rows every quarter second, on the
    // app's clock (the wall, read after the app started, is ahead of it by however long that
    // took: past 2 s, no renewal would ever look current).
    for _ in 0..36 {
        tokio::time::advance(Duration::from_millis(250)).await;
        let now = app.clock.now();
        // The live worker's renewal, due by now, has landed (a lapsed lease never comes back).
        until(async || {
            row_of(&app, id)
                .await
                .lease_until
                .is_some_and(|at| at > now)
        })
        .await;
        let taken = app
            .store
            .claim_outbox(ClaimRules {
                now,
                limit: 10,
                lease: Duration::from_secs(2),
                reply_gap: Duration::from_secs(2),
            })
            .await
            .unwrap();
        assert!(
            taken.is_empty(),
            "the live worker's row was taken at {:?}",
            start.elapsed()
        );
    }
    assert_eq!(status_of(&app, id).await, OutboxStatus::Delivering);
    assert_eq!(flows_of(&app, 4006).await, 1);

    stop_worker_after(&token, &running, Duration::from_secs(2)).await;
}

#[tokio::test(start_paused = true)]
async fn timed_out_trigger_is_retried_at_most_once() {
    let _frozen = FrozenClock::freeze();
    let app = hanging_app(4007).await;
    let id = queue_overdue(&app, "4007", &["Maybe delivered."]).await;

    for attempt in 1..=2 {
        let worker = app.worker.clone();
        let batch = in_background(async move { worker.run_once().await.unwrap() });
        until(async || flows_of(&app, 4007).await == attempt).await;
        // The attempt is counted before the trigger leaves, and the client's timeout is armed
        // before its request does: both hold once the fake saw the trigger.
        until(async || row_of(&app, id).await.trigger_timeouts == attempt as i32).await;
        let_tasks_run().await;
        // ManyChat's client gives up after 10 s without an answer.
        tokio::time::advance(Duration::from_secs(11)).await;
        advance_until(async || batch.is_finished()).await;
        let row = row_of(&app, id).await;
        assert_eq!(row.trigger_timeouts, attempt as i32);
        sql_exec(&app, "UPDATE outbox SET next_attempt_at = 0").await;
    }
    let row = row_of(&app, id).await;
    assert_eq!(
        row.status,
        OutboxStatus::Failed,
        "a second unanswered trigger is not sent a third time"
    );
    assert!(
        row.last_error.unwrap().contains("may have run"),
        "the dead letter says why"
    );
    assert_eq!(app.worker.run_once().await.unwrap(), 0);
    assert_eq!(flows_of(&app, 4007).await, 2, "sent at most twice in all");
}

#[tokio::test(start_paused = true)]
async fn accepted_message_is_not_resent() {
    let _frozen = FrozenClock::freeze();
    let app = app().await;
    // The first trigger is accepted, the second refused with a 503, then all is well.
    for (priority, status) in [(1, 200), (2, 503)] {
        Mock::given(method("POST"))
            .and(path("/fb/sending/sendFlow"))
            .and(body_partial_json(json!({"subscriber_id": 4008})))
            .respond_with(ResponseTemplate::new(status).set_body_json(json!({
                "status": if status == 200 { "success" } else { "error" }
            })))
            .up_to_n_times(1)
            .with_priority(priority)
            .mount(&app.manychat)
            .await;
    }
    let id = queue_overdue(&app, "4008", &["One.", "Two."]).await;

    for expected_flows in [2, 3] {
        let worker = app.worker.clone();
        let batch = in_background(async move { worker.run_once().await.unwrap() });
        until(async || flows_of(&app, 4008).await >= expected_flows - 1).await;
        settle_worker(&app, id).await;
        advance_until(async || batch.is_finished()).await;
        assert_eq!(flows_of(&app, 4008).await, expected_flows);
        sql_exec(&app, "UPDATE outbox SET next_attempt_at = 0").await;
    }
    let row = row_of(&app, id).await;
    assert_eq!(row.status, OutboxStatus::Delivered);
    assert_eq!(row.attempts, 2);
    let written: Vec<Value> = requests_of(&app, "/fb/subscriber/setCustomFieldByName", 4008)
        .await
        .iter()
        .map(|r| r.body["field_value"].clone())
        .collect();
    assert_eq!(
        written,
        vec![json!("One."), json!("Two."), json!("Two.")],
        "the accepted first message is not sent again; the second is retried"
    );
}

async fn metrics_text(app: &TestApp) -> String {
    reqwest::get(format!("{}/metrics", app.address))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn dead_lettered_reply_hands_the_contact_to_a_person() {
    let app = app().await;
    fail_flow_with(&app, 400, json!({"status": "error", "message": "no"}), None).await;
    let (turn_id, id) = queue_tagging_reply(&app, "4009").await;
    assert_eq!(app.conversation("4009").await.escalated_at, None);

    app.worker.run_once().await.unwrap();
    assert_eq!(status_of(&app, id).await, OutboxStatus::Failed);
    let handoff_tag = app.rules()["handoff"]["tag"].as_str().unwrap().to_owned();
    let tags = requests_of(&app, "/fb/subscriber/addTagByName", 4009).await;
    assert_eq!(tags.len(), 1, "the handoff only, once");
    assert_eq!(
        tags[0].body,
        json!({"subscriber_id": 4009, "tag_name": handoff_tag})
    );
    assert!(app.conversation("4009").await.escalated_at.is_some());
    let turn = app.store.turn(turn_id).await.unwrap().unwrap();
    assert_eq!(
        turn.actions,
        Some(json!([
            {"tool": "add_tag", "id": "interested", "status": "dead_lettered"},
            {"tool": "add_tag", "id": "handoff", "status": "performed", "origin": "handoff"}
        ]))
    );
    let metrics = metrics_text(&app).await;
    assert!(metrics.contains("manychat_agent_outbox_dead_letter_handoffs_total 1"));
    assert!(metrics.contains("manychat_agent_handoff_failed_total 0"));
}

#[tokio::test]
async fn a_refused_handoff_is_recorded_and_counted() {
    let app = app().await;
    fail_flow_with(&app, 400, json!({"status": "error", "message": "no"}), None).await;
    Mock::given(method("POST"))
        .and(path("/fb/subscriber/addTagByName"))
        .respond_with(manychat_error(400, "Tag not found"))
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    let turn_id = agent_turn_with_actions(&app, "4010", &[]).await;
    queue_due_reply(
        &app,
        "4010",
        json!({"messages": ["Here you go."], "actions": [], "turnId": turn_id}),
    )
    .await;

    app.worker.run_once().await.unwrap();
    assert_eq!(
        requests_of(&app, "/fb/subscriber/addTagByName", 4010)
            .await
            .len(),
        1,
        "the handoff was tried once"
    );
    assert!(app.conversation("4010").await.escalated_at.is_some());
    let turn = app.store.turn(turn_id).await.unwrap().unwrap();
    let record = turn.actions.unwrap();
    assert_eq!(record[0]["origin"], "handoff");
    assert_eq!(record[0]["status"], "failed");
    let metrics = metrics_text(&app).await;
    assert!(metrics.contains("manychat_agent_handoff_failed_total 1"));
}
