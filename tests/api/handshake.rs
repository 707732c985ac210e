//! The delivery handshake (`MANYCHAT_DELIVERED_FIELD`): a deferred reply whose process was
//! killed after a trigger left, before ManyChat answered, is resumed by a new process. With the
//! handshake it reads the contact once and does not send again a message the reply flow
//! recorded as delivered; a message the flow did not record is sent again once. Without it (or
//! when the read fails) the message is sent again once, so it may reach the contact twice.
//!
//! The "process" is an outbox worker whose batch is aborted while ManyChat holds its trigger
//! (the clock frozen: nothing of it runs on); the restart is a new app, or a new worker, on the
//! same database and the same ManyChat, once the dead worker's lease has lapsed.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::ids::Secret;
use manychat_agent::manychat::{ManyChatClient, ManyChatLimiter};
use manychat_agent::metrics::Metrics;
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::outbox::{DEFAULT_LEASE, OutboxWorker};
use manychat_agent::settings::Settings;
use manychat_agent::store::{OutboxRow, OutboxStatus};
use serde_json::{Value, json};
use wiremock::MockServer;

use crate::handshake_fake::{DELIVERED_FIELD, FakeManyChat, ID_FIELD, REPLY_FIELD};
use crate::helpers::*;
use crate::selling::Backend;

/// The handshake's variable as a deployment sets it.
const HANDSHAKE: (&str, &str) = ("MANYCHAT_DELIVERED_FIELD", DELIVERED_FIELD);

/// ManyChat, shared by every process of a test, with the fake's contacts and reply flow.
async fn manychat() -> (MockServer, FakeManyChat) {
    let server = MockServer::start().await;
    let fake = FakeManyChat::default();
    fake.mount(&server).await;
    manychat_accepts_everything(&server).await;
    (server, fake)
}

/// A database on `backend` that outlives one process (SQLite: a file in `dir`).
async fn lasting_database_url(backend: Backend, dir: &std::path::Path) -> String {
    match backend {
        Backend::Sqlite => sqlite_file_url(dir),
        Backend::Postgres => fresh_postgres_url().await,
    }
}

/// One process of the service on `database` and `manychat`, the handshake on when `handshake`.
async fn process(database: &str, manychat: &MockServer, handshake: bool) -> TestApp {
    let mut options = AppOptions::new(Arc::new(ScriptedModel::replies(Vec::<String>::new())))
        .env("DATABASE_URL", database.to_owned())
        .env("MANYCHAT_API_BASE", manychat.uri())
        .env("MANYCHAT_REPLY_GAP_MS", "0");
    if handshake {
        options = options.env(HANDSHAKE.0, HANDSHAKE.1);
    }
    spawn_app_with(options).await
}

fn reply(texts: &[&str]) -> Value {
    json!({"messages": texts, "actions": [], "turnId": null})
}

/// Queues a reply of `texts` for `subscriber`, due an hour ago: due whatever the app's clock
/// reads (a frozen tokio clock lags the wall by however long the app took to start).
async fn queue_overdue(app: &TestApp, subscriber: &str, texts: &[&str]) -> i64 {
    let now = chrono::Utc::now();
    let due = now - chrono::Duration::hours(1);
    queue_reply_payload(app, subscriber, reply(texts), now, due).await
}

/// Runs one batch of `worker` until ManyChat holds a new trigger (the `held`th), then kills it.
async fn killed_while_a_trigger_is_held(worker: &OutboxWorker, fake: &FakeManyChat, held: usize) {
    let worker = worker.clone();
    let batch = tokio::spawn(async move { worker.run_once().await });
    until(async || fake.held() == held).await;
    batch.abort();
    let _ = batch.await;
}

/// The restarted process takes the dead worker's row once its lease lapsed and delivers it to
/// the end (the frozen clock moved along while it waits on the limiter).
async fn resumed_to_the_end(worker: &OutboxWorker) {
    tokio::time::advance(DEFAULT_LEASE + Duration::from_secs(1)).await;
    let worker = worker.clone();
    let batch = in_background(async move { worker.run_once().await.unwrap() });
    advance_by_steps_until(
        Duration::from_millis(10),
        Duration::from_secs(20),
        async || batch.is_finished(),
    )
    .await;
}

async fn requests_to(server: &MockServer, route: &str) -> Vec<Value> {
    bodies_on(server, route).await
}

async fn row(app: &TestApp, id: i64) -> OutboxRow {
    app.store.outbox_row(id).await.unwrap().unwrap()
}

/// A reply of two messages whose first trigger ManyChat held (the flow ran when `flow_ran`)
/// while the process was killed, resumed by a second process: the fake, both apps, the row.
async fn killed_at_the_first_trigger(
    backend: Backend,
    dir: &std::path::Path,
    handshake: bool,
    flow_ran: bool,
    subscriber: &str,
) -> (MockServer, FakeManyChat, TestApp, TestApp, i64) {
    let database = lasting_database_url(backend, dir).await;
    let (server, fake) = manychat().await;
    let first = process(&database, &server, handshake).await;
    let id = queue_overdue(&first, subscriber, &["One.", "Two."]).await;
    fake.hold(1, if flow_ran { |_| true } else { |_| false });
    killed_while_a_trigger_is_held(&first.worker, &fake, 1).await;
    let killed = row(&first, id).await;
    assert_eq!(
        (
            killed.status,
            killed.messages_delivered,
            killed.trigger_timeouts
        ),
        (OutboxStatus::Delivering, 0, 1),
        "the row says the first trigger left without an answer"
    );
    let second = process(&database, &server, handshake).await;
    resumed_to_the_end(&second.worker).await;
    (server, fake, first, second, id)
}

async fn handshake_a_message_the_reply_flow_recorded_is_not_sent_again_after_a_kill(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let dir = tempfile::tempdir().unwrap();
    let (server, fake, first, second, id) =
        killed_at_the_first_trigger(backend, dir.path(), true, true, "9101").await;

    assert_eq!(
        fake.inbox("9101"),
        vec!["One.", "Two."],
        "each message reached the contact once"
    );
    assert_eq!(
        requests_to(&server, "/fb/sending/sendFlow").await.len(),
        2,
        "one trigger per message: the held one was not sent again"
    );
    assert_eq!(fake.get_infos(), 1, "the contact was read once");
    // Each message's text and its delivery id went in one request, the id naming the row and
    // the message only.
    let writes = requests_to(&server, "/fb/subscriber/setCustomFields").await;
    assert_eq!(
        writes,
        vec![
            json!({"subscriber_id": 9101, "fields": [
                {"field_name": REPLY_FIELD, "field_value": "One."},
                {"field_name": ID_FIELD, "field_value": format!("{id}.0")}
            ]}),
            json!({"subscriber_id": 9101, "fields": [
                {"field_name": REPLY_FIELD, "field_value": "Two."},
                {"field_name": ID_FIELD, "field_value": format!("{id}.1")}
            ]}),
        ]
    );
    assert!(
        requests_to(&server, "/fb/subscriber/setCustomFieldByName")
            .await
            .is_empty()
    );
    assert_eq!(
        fake.field("9101", DELIVERED_FIELD),
        Some(json!(format!("{id}.1")))
    );
    let done = row(&second, id).await;
    assert_eq!(
        (done.status, done.messages_delivered, done.attempts),
        (OutboxStatus::Delivered, 2, 2)
    );
    second.stop().await;
    first.stop().await;
}

async fn handshake_a_message_the_reply_flow_did_not_record_is_sent_again_once(backend: Backend) {
    let _frozen = FrozenClock::freeze();
    let dir = tempfile::tempdir().unwrap();
    let (server, fake, first, second, id) =
        killed_at_the_first_trigger(backend, dir.path(), true, false, "9102").await;

    assert_eq!(fake.inbox("9102"), vec!["One.", "Two."]);
    let texts: Vec<Value> = requests_to(&server, "/fb/subscriber/setCustomFields")
        .await
        .iter()
        .map(|w| w["fields"][0]["field_value"].clone())
        .collect();
    assert_eq!(
        texts,
        vec![json!("One."), json!("One."), json!("Two.")],
        "the first message sent again once, after the read"
    );
    assert_eq!(requests_to(&server, "/fb/sending/sendFlow").await.len(), 3);
    assert_eq!(fake.get_infos(), 1);
    assert_eq!(row(&second, id).await.status, OutboxStatus::Delivered);
    second.stop().await;
    first.stop().await;
}

async fn without_the_handshake_a_message_whose_trigger_got_no_answer_is_sent_again_once(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let dir = tempfile::tempdir().unwrap();
    let (server, fake, first, second, id) =
        killed_at_the_first_trigger(backend, dir.path(), false, true, "9103").await;

    assert_eq!(
        fake.inbox("9103"),
        vec!["One.", "One.", "Two."],
        "at most twice: the flow had run, and ran again"
    );
    assert_eq!(fake.get_infos(), 0, "nothing is read without the handshake");
    assert!(
        requests_to(&server, "/fb/subscriber/setCustomFields")
            .await
            .is_empty(),
        "the text alone, as before"
    );
    assert_eq!(
        requests_to(&server, "/fb/subscriber/setCustomFieldByName")
            .await
            .len(),
        3
    );
    assert_eq!(row(&second, id).await.status, OutboxStatus::Delivered);
    second.stop().await;
    first.stop().await;
}

async fn handshake_when_the_contact_cannot_be_read_the_message_is_sent_again_once(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let dir = tempfile::tempdir().unwrap();
    let database = lasting_database_url(backend, dir.path()).await;
    let (server, fake) = manychat().await;
    let first = process(&database, &server, true).await;
    let id = queue_overdue(&first, "9104", &["One."]).await;
    fake.hold(1, |_| true);
    killed_while_a_trigger_is_held(&first.worker, &fake, 1).await;
    fake.fail_get_info();
    let second = process(&database, &server, true).await;
    resumed_to_the_end(&second.worker).await;

    assert_eq!(fake.get_infos(), 1, "read once, and refused");
    assert_eq!(
        fake.inbox("9104"),
        vec!["One.", "One."],
        "today's behaviour: sent again, once"
    );
    assert_eq!(requests_to(&server, "/fb/sending/sendFlow").await.len(), 2);
    assert_eq!(row(&second, id).await.status, OutboxStatus::Delivered);
    second.stop().await;
    first.stop().await;
}

/// A new process's outbox worker on `app`'s store and `manychat`, built from the environment
/// as `serve` builds it (`MANYCHAT_DELIVERED_FIELD` set when `handshake`), with its own limiter.
fn restarted_worker(app: &TestApp, manychat: &MockServer, handshake: bool) -> OutboxWorker {
    let mut vars = vec![
        ("MANYCHAT_SHARED_SECRET", SECRET.to_owned()),
        ("PUBLIC_BASE_URL", "https://agent.example.test".to_owned()),
        ("MANYCHAT_REPLY_GAP_MS", "0".to_owned()),
    ];
    if handshake {
        vars.push((HANDSHAKE.0, HANDSHAKE.1.to_owned()));
    }
    let settings = Settings::from_vars(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    let client = ManyChatClient::new(
        &manychat.uri(),
        &Secret::new("123:test-token"),
        ManyChatLimiter::new(),
    )
    .unwrap();
    manychat_agent::startup::outbox_worker(
        &settings,
        app.store.clone(),
        client,
        REPLY_FLOW.to_owned(),
        app.clock,
        Arc::new(Metrics::default()),
        app.config.clone(),
    )
}

/// A reply of twenty messages, each one's first trigger held by ManyChat while its process is
/// killed (the flow ran for every other one: the 1st, 3rd, …), each kill followed by a new
/// process; the last one finishes the row. What the contact received.
async fn twenty_kills(backend: Backend, handshake: bool, subscriber: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let database = lasting_database_url(backend, dir.path()).await;
    let (server, fake) = manychat().await;
    let app = process(&database, &server, handshake).await;
    let texts: Vec<String> = (1..=20).map(|n| format!("Message {n}.")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let id = queue_overdue(&app, subscriber, &refs).await;
    fake.hold(20, |n| n % 2 == 1);
    for kill in 1..=20 {
        let worker = restarted_worker(&app, &server, handshake);
        if kill > 1 {
            tokio::time::advance(DEFAULT_LEASE + Duration::from_secs(1)).await;
        }
        killed_while_a_trigger_is_held(&worker, &fake, kill).await;
        assert_eq!(row(&app, id).await.messages_delivered, kill as i32 - 1);
    }
    resumed_to_the_end(&restarted_worker(&app, &server, handshake)).await;
    let done = row(&app, id).await;
    assert_eq!(
        (done.status, done.messages_delivered),
        (OutboxStatus::Delivered, 20)
    );
    assert_eq!(
        fake.get_infos(),
        if handshake { 20 } else { 0 },
        "one read per resumed trigger, none without the handshake"
    );
    let inbox = fake.inbox(subscriber);
    let mut once = inbox.clone();
    once.dedup();
    assert_eq!(once, texts, "every message arrived, in order");
    app.stop().await;
    inbox
}

async fn handshake_twenty_kills_at_the_delivery_moment_send_no_message_twice(backend: Backend) {
    let _frozen = FrozenClock::freeze();
    let inbox = twenty_kills(backend, true, "9105").await;
    assert_eq!(inbox.len(), 20, "no duplicates: {inbox:?}");
}

async fn without_the_handshake_twenty_kills_send_each_message_whose_flow_ran_twice(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let inbox = twenty_kills(backend, false, "9106").await;
    assert_eq!(
        inbox.len(),
        30,
        "the ten messages whose held trigger ran reached the contact twice: {inbox:?}"
    );
}

/// One message whose trigger goes unanswered twice (two processes killed while ManyChat held
/// it; the flow ran the second time when `second_ran`), then a third process: what the contact
/// received and the row.
async fn unanswered_twice(
    backend: Backend,
    second_ran: bool,
    subscriber: &str,
) -> (Vec<String>, OutboxRow) {
    let dir = tempfile::tempdir().unwrap();
    let database = lasting_database_url(backend, dir.path()).await;
    let (server, fake) = manychat().await;
    let app = process(&database, &server, true).await;
    let id = queue_overdue(&app, subscriber, &["One."]).await;
    fake.hold_every(2, if second_ran { |n| n == 2 } else { |_| false });
    for kill in 1..=2 {
        if kill > 1 {
            tokio::time::advance(DEFAULT_LEASE + Duration::from_secs(1)).await;
        }
        killed_while_a_trigger_is_held(&restarted_worker(&app, &server, true), &fake, kill).await;
    }
    assert_eq!(row(&app, id).await.trigger_timeouts, 2);
    resumed_to_the_end(&restarted_worker(&app, &server, true)).await;
    assert_eq!(fake.get_infos(), 2, "read before each repeat");
    assert_eq!(
        requests_to(&server, "/fb/sending/sendFlow").await.len(),
        2,
        "never a third trigger"
    );
    let inbox = fake.inbox(subscriber);
    let done = row(&app, id).await;
    app.stop().await;
    (inbox, done)
}

async fn handshake_a_message_unanswered_twice_that_the_flow_recorded_is_delivered_not_dead_lettered(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let (inbox, done) = unanswered_twice(backend, true, "9107").await;
    assert_eq!(inbox, vec!["One."]);
    assert_eq!(
        (done.status, done.messages_delivered),
        (OutboxStatus::Delivered, 1)
    );
}

async fn handshake_a_message_unanswered_twice_that_the_flow_never_recorded_is_dead_lettered(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let (inbox, done) = unanswered_twice(backend, false, "9108").await;
    assert!(inbox.is_empty(), "{inbox:?}");
    assert_eq!(done.status, OutboxStatus::Failed);
    assert!(done.last_error.unwrap().contains("may have run"));
}

on_both_backends!(
    #[tokio::test(start_paused = true)]
    handshake_a_message_the_reply_flow_recorded_is_not_sent_again_after_a_kill,
    handshake_a_message_the_reply_flow_did_not_record_is_sent_again_once,
    without_the_handshake_a_message_whose_trigger_got_no_answer_is_sent_again_once,
    handshake_when_the_contact_cannot_be_read_the_message_is_sent_again_once,
    handshake_twenty_kills_at_the_delivery_moment_send_no_message_twice,
    without_the_handshake_twenty_kills_send_each_message_whose_flow_ran_twice,
    handshake_a_message_unanswered_twice_that_the_flow_recorded_is_delivered_not_dead_lettered,
    handshake_a_message_unanswered_twice_that_the_flow_never_recorded_is_dead_lettered,
);
