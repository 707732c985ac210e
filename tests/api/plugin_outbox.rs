//! A plugin write riding a deferred reply's outbox row is performed once, never retried, also
//! across a process that stops while the business's endpoint holds the request: the row says
//! the write is under way before its request leaves, and a worker that resumes the row settles
//! it `failed` (it may have run) instead of calling the endpoint again. The "process" is an
//! app's outbox worker whose batch is aborted mid-request; the restart is a second app on the
//! same database.

use std::time::Duration;

use manychat_agent::actions::{Operation, StagedAction};
use manychat_agent::store::{NewTurn, OutboxStatus};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;
use crate::plugins_helpers::{
    LEAD, PLUGIN_SECRET, SECRET_ENV, plugins_json, signed_requests, write_plugins,
};
use crate::selling::*;

/// The demo tenant (no sales markers) with the plugins at `server`, on the database at `url`.
async fn app_on_database(url: &str, server: &MockServer) -> TestApp {
    let plugins = plugins_json(&server.uri());
    spawn_app_with(
        AppOptions::new(script(Vec::new()))
            .edit(move |dir| {
                without_sales(dir);
                write_plugins(dir, &plugins);
            })
            .env(SECRET_ENV, PLUGIN_SECRET)
            .env("DATABASE_URL", url.to_owned()),
    )
    .await
}

/// The endpoint: the first `create_lead` for `hung` is taken and never answered (for longer
/// than any test runs, on a frozen clock); every other call answers 204.
async fn endpoint_holding(hung: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(LEAD))
        .and(body_partial_json(json!({"subscriber_id": hung})))
        .respond_with(ResponseTemplate::new(204).set_delay(Duration::from_secs(3600)))
        .with_priority(1)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(LEAD))
        .respond_with(ResponseTemplate::new(204))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

/// The contact's deferred reply with one staged `create_lead`, its agent turn recorded: the
/// row's id.
async fn queue_reply_with_a_write(app: &TestApp, subscriber: &str) -> i64 {
    let conversation = app.conversation(subscriber).await;
    let now = chrono::Utc::now();
    let mut arguments = serde_json::Map::new();
    arguments.insert("class".into(), json!("wheel_basics"));
    arguments.insert("summary".into(), json!("Wants the wheel class."));
    let write = StagedAction::new(
        "create_lead",
        "",
        Operation::Plugin {
            tool: "create_lead".into(),
            arguments,
        },
    );
    let mut turn = NewTurn::agent(conversation.id, "Noted.", "deferred", true, now);
    turn.actions = Some(manychat_agent::actions::record(std::slice::from_ref(
        &write,
    )));
    let turn_id = app.store.record_turn(&turn).await.unwrap();
    let payload = json!({"messages": ["Noted."], "actions": [write], "turnId": turn_id});
    queue_due_reply(app, subscriber, payload).await
}

async fn lead_calls_for(server: &MockServer, subscriber: &str) -> usize {
    signed_requests(server, LEAD)
        .await
        .iter()
        .filter(|b| b["subscriber_id"] == subscriber)
        .count()
}

/// A database on `backend` that outlives one process (SQLite: a file in `dir`).
async fn lasting_database_url(backend: Backend, dir: &std::path::Path) -> String {
    match backend {
        Backend::Sqlite => sqlite_file_url(dir),
        Backend::Postgres => fresh_postgres_url().await,
    }
}

async fn recorded_write(app: &TestApp, subscriber: &str) -> Value {
    agent_turn(app, subscriber).await.actions.unwrap()[0].clone()
}

async fn plugin_a_write_under_way_when_its_process_stopped_is_never_sent_again(backend: Backend) {
    let _frozen = FrozenClock::freeze();
    let _dir = tempfile::tempdir().unwrap();
    let url = lasting_database_url(backend, _dir.path()).await;
    let server = endpoint_holding("8122").await;
    let first = app_on_database(&url, &server).await;

    // The normal path: the text, then the write, once.
    let normal = queue_reply_with_a_write(&first, "8121").await;
    first.worker.run_once().await.unwrap();
    assert_eq!(lead_calls_for(&server, "8121").await, 1);
    let row = first.store.outbox_row(normal).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Delivered);
    assert_eq!(row.payload["actions"][0]["entry"]["status"], "performed");
    assert_eq!(recorded_write(&first, "8121").await["status"], "performed");

    // The process stops while the endpoint holds the write's request.
    let id = queue_reply_with_a_write(&first, "8122").await;
    let worker = first.worker.clone();
    let batch = tokio::spawn(async move { worker.run_once().await });
    until(async || lead_calls_for(&server, "8122").await == 1).await;
    batch.abort();
    let _ = batch.await;
    let row = first.store.outbox_row(id).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Delivering);
    assert_eq!(row.messages_delivered, 1, "the text went first");
    assert_eq!(
        (
            row.trigger_timeouts,
            &row.payload["actions"][0]["entry"]["status"]
        ),
        (1, &json!("staged")),
        "the row says the write is under way"
    );

    // Restarted: once the dead worker's lease lapses, another takes the row.
    let second = app_on_database(&url, &server).await;
    tokio::time::advance(manychat_agent::outbox::DEFAULT_LEASE + Duration::from_secs(1)).await;
    assert_eq!(second.worker.run_once().await.unwrap(), 1);
    assert_eq!(
        lead_calls_for(&server, "8122").await,
        1,
        "the endpoint is never called again"
    );
    let row = second.store.outbox_row(id).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Delivered);
    assert_eq!(row.attempts, 2);
    let write = recorded_write(&second, "8122").await;
    assert_eq!(write["status"], "failed");
    assert_eq!(write["error"], manychat_agent::plugins::MAY_HAVE_RUN);
    assert!(
        second
            .metrics_text()
            .await
            .contains("manychat_agent_actions_total{tool=\"create_lead\",status=\"failed\"} 1")
    );
    // Nothing is left to send.
    assert_eq!(second.worker.run_once().await.unwrap(), 0);
    assert_eq!(lead_calls_for(&server, "8122").await, 1);
    let texts: Vec<Value> = second
        .manychat_requests()
        .await
        .into_iter()
        .chain(first.manychat_requests().await)
        .filter(|r| {
            r.path == "/fb/subscriber/setCustomFieldByName" && r.body["subscriber_id"] == 8122
        })
        .map(|r| r.body["field_value"].clone())
        .collect();
    assert_eq!(texts, vec![json!("Noted.")], "the text is not sent again");
    second.stop().await;
    first.stop().await;
}

/// An inline reply's plugin write (performed once the response is written) is marked under way
/// in the turn's record before its request leaves. The process stops while the endpoint holds
/// the request (its work never goes on: the clock is frozen); the restarted process (on
/// PostgreSQL, any replica once the turn is older than `STALE_MARK`: here its clock runs ten
/// minutes ahead) settles the write `failed` ("it may have run") instead of leaving it `staged`,
/// and never calls the endpoint again.
async fn plugin_an_inline_write_under_way_when_its_process_stopped_is_settled_failed(
    backend: Backend,
) {
    let _frozen = FrozenClock::freeze();
    let _dir = tempfile::tempdir().unwrap();
    let url = lasting_database_url(backend, _dir.path()).await;
    let server = endpoint_holding("8131").await;
    let plugins = plugins_json(&server.uri());
    let model = script(vec![
        manychat_agent::model::mock::tool_calls([crate::plugins_helpers::lead(
            "wheel_basics",
            "Wants the wheel class.",
        )]),
        answer("Noted."),
    ]);
    let first = spawn_app_with(
        AppOptions::new(model)
            .edit(move |dir| {
                without_sales(dir);
                write_plugins(dir, &plugins);
            })
            .env(SECRET_ENV, PLUGIN_SECRET)
            .env("DATABASE_URL", url.clone()),
    )
    .await;
    let (_, body) = first.send("8131", "I'd like the wheel class").await;
    assert_eq!(block_texts(&body), vec!["Noted."]);
    until(async || lead_calls_for(&server, "8131").await == 1).await;
    let write = recorded_write(&first, "8131").await;
    assert_eq!(
        (&write["status"], &write["error"]),
        (&json!("staged"), &json!("under way")),
        "the record says the write is under way"
    );

    // Restarted (the first process's work never goes on).
    let mut options = AppOptions::new(script(Vec::new()))
        .edit(without_sales)
        .env("DATABASE_URL", url);
    options.clock = Some(manychat_agent::clock::Clock::starting_at(
        chrono::Utc::now() + chrono::Duration::minutes(10),
    ));
    let second = spawn_app_with(options).await;
    until(async || recorded_write(&second, "8131").await["status"] == "failed").await;
    let write = recorded_write(&second, "8131").await;
    assert_eq!(write["error"], manychat_agent::plugins::MAY_HAVE_RUN);
    assert_eq!(
        lead_calls_for(&server, "8131").await,
        1,
        "the endpoint is never called again"
    );
}

on_both_backends!(
    #[tokio::test(start_paused = true)]
    plugin_a_write_under_way_when_its_process_stopped_is_never_sent_again,
    plugin_an_inline_write_under_way_when_its_process_stopped_is_settled_failed,
);
