//! Faults that must not break a promise: the real binary killed with SIGKILL in the middle of a
//! deferred reply's delivery, and restarted on the same database. The model is an
//! OpenAI-compatible fake (an outside HTTP endpoint) whose turn stages two tags; ManyChat is the
//! recording fake, made to hold one request unanswered so the kill lands at a chosen moment.
//! These wait on real events (bounded polls), never on fixed sleeps.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::durable::{Served, eventually, reply_field_writes, tagged, tenant};
use crate::helpers::*;
use crate::selling::{with_nudge, without_sales};

/// The two tags the model's turn stages, as ManyChat names them (the demo tenant's).
const FIRST_TAG: &str = "interested-wheel-course";
const SECOND_TAG: &str = "buying-as-gift";
const REPLY_FLOW: &str = "content20250101_reply";

/// One chat completion of the fake model.
fn completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}
    })
}

fn tag_call(id: &str, tag: &str) -> Value {
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": "add_tag", "arguments": json!({"tag": tag}).to_string()}
        }]}),
        "tool_calls",
    )
}

pub(crate) fn final_reply(text: &str) -> Value {
    let reply = json!({
        "messages": [text], "escalate": false, "escalation_reason": null,
        "confidence": 0.9, "closing_question": null
    });
    completion(
        json!({"role": "assistant", "content": reply.to_string(), "refusal": null}),
        "stop",
    )
}

/// The fake model's next turn: one tag per step, then the reply, which takes `delay` (past the
/// race deadline when the turn is to be deferred).
async fn model_turn_with_two_tags(model: &MockServer, reply: &str, delay: Duration) {
    for (priority, body) in [
        (1, tag_call("call_1", "interested_wheel")),
        (2, tag_call("call_2", "gift_buyer")),
    ] {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .with_priority(priority)
            .up_to_n_times(1)
            .mount(model)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(final_reply(reply))
                .set_delay(delay),
        )
        .with_priority(3)
        .up_to_n_times(1)
        .mount(model)
        .await;
}

/// ManyChat takes the tag `tag` and never answers (for longer than any test runs): a process
/// killed meanwhile never learns whether it was added. Only the first such request hangs.
async fn manychat_holds_tag(manychat: &MockServer, tag: &str) {
    Mock::given(method("POST"))
        .and(path("/fb/subscriber/addTagByName"))
        .and(body_partial_json(json!({"tag_name": tag})))
        .respond_with(manychat_success_after(Duration::from_secs(600)))
        .with_priority(1)
        .up_to_n_times(1)
        .mount(manychat)
        .await;
}

pub(crate) fn model_env(model: &MockServer) -> Vec<(&'static str, String)> {
    vec![
        ("AGENT_MODEL", "openai:gpt-4.1-mini".to_owned()),
        ("OPENAI_API_KEY", "sk-test-key".to_owned()),
        ("OPENAI_BASE_URL", format!("{}/v1", model.uri())),
        ("OUTBOX_LEASE_MS", "2000".to_owned()),
        ("NUDGE_POLL_MS", "1000".to_owned()),
    ]
}

/// A process serving `dir` with `env`, once it is ready.
async fn start(dir: &Path, manychat: &MockServer, env: &[(&'static str, String)]) -> Served {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let served = Served::start(dir, manychat, &env);
    served.ready().await;
    served
}

/// ManyChat was given `reply` once, and its flow was triggered once.
async fn assert_written_and_triggered_once(manychat: &MockServer, reply: &str) {
    assert_eq!(
        reply_field_writes(manychat).await,
        vec![reply.to_owned()],
        "the reply is written once"
    );
    assert_eq!(reply_triggers(manychat).await, 1, "and triggered once");
}

async fn reply_triggers(manychat: &MockServer) -> usize {
    bodies_on(manychat, "/fb/sending/sendFlow")
        .await
        .into_iter()
        .filter(|b| b["flow_ns"] == REPLY_FLOW)
        .count()
}

fn count(tags: &[String], tag: &str) -> usize {
    tags.iter().filter(|t| *t == tag).count()
}

fn tenant_with_tags() -> tempfile::TempDir {
    let dir = tenant();
    without_sales(&dir.path().join("config"));
    dir
}

/// Opens the test's database (after the process is gone).
async fn store(dir: &Path) -> std::sync::Arc<dyn manychat_agent::store::Store> {
    manychat_agent::store::connect(&format!("sqlite://{}", dir.join("agent.db").display()))
        .await
        .unwrap()
}

/// The recorded statuses of the tags staged on the contact's last agent turn.
async fn recorded_tag_statuses(dir: &Path, subscriber: &str) -> Vec<String> {
    let store = store(dir).await;
    let conversation = store
        .conversation_by_subscriber(&manychat_agent::ids::SubscriberId::parse(subscriber).unwrap())
        .await
        .unwrap()
        .expect("the contact is known");
    let turns = store.turns(conversation.id).await.unwrap();
    let last = turns
        .iter()
        .rev()
        .find(|t| t.role.as_str() == "agent")
        .expect("an agent turn");
    last.actions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a["tool"] == "add_tag")
        .map(|a| a["status"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits (bounded) until every reply row in the test's database is delivered.
async fn replies_delivered(dir: &Path) {
    let store = store(dir).await;
    eventually(
        async || {
            store.outbox_rows().await.unwrap().iter().all(|r| {
                r.kind != manychat_agent::store::OutboxKind::Reply
                    || r.status == manychat_agent::store::OutboxStatus::Delivered
            })
        },
        "the reply row is delivered",
    )
    .await;
}

/// The contact's deferred reply is delivered; the process is killed while ManyChat holds the
/// `held` tag unanswered; a restart finishes the row. Returns ManyChat's tag requests.
async fn killed_while_performing(held: &str) -> (tempfile::TempDir, MockServer) {
    let dir = tenant_with_tags();
    let manychat = MockServer::start().await;
    let model = MockServer::start().await;
    manychat_holds_tag(&manychat, held).await;
    manychat_accepts_everything(&manychat).await;
    model_turn_with_two_tags(
        &model,
        "Wheel classes run on Tuesday evenings.",
        Duration::from_secs(1),
    )
    .await;

    let mut env = model_env(&model);
    env.push(("RACE_DEADLINE_MS", "300".to_owned()));
    let first = start(dir.path(), &manychat, &env).await;
    let body = first.send("8901", "When are the wheel classes?").await;
    assert_eq!(block_texts(&body).len(), 1, "acknowledged: {body}");
    eventually(
        async || count(&tagged(&manychat).await, held) == 1,
        "ManyChat holds the tag request",
    )
    .await;
    first.kill();
    assert_eq!(
        reply_triggers(&manychat).await,
        1,
        "the reply went before the kill"
    );

    let second = start(dir.path(), &manychat, &model_env(&model)).await;
    let both_performed = async || {
        let tags = tagged(&manychat).await;
        count(&tags, FIRST_TAG) >= 1 && count(&tags, SECOND_TAG) >= 1 && count(&tags, held) >= 2
    };
    eventually(both_performed, "the restart performs what was left").await;
    replies_delivered(dir.path()).await;
    drop(second);
    (dir, manychat)
}

#[tokio::test]
async fn fault_a_reply_killed_during_its_first_action_is_not_sent_again_and_the_action_repeats_at_most_once()
 {
    let (dir, manychat) = killed_while_performing(FIRST_TAG).await;
    assert_written_and_triggered_once(&manychat, "Wheel classes run on Tuesday evenings.").await;
    let tags = tagged(&manychat).await;
    assert_eq!(
        count(&tags, FIRST_TAG),
        2,
        "the unanswered tag once more: {tags:?}"
    );
    assert_eq!(count(&tags, SECOND_TAG), 1, "{tags:?}");
    assert_eq!(
        recorded_tag_statuses(dir.path(), "8901").await,
        vec!["performed", "performed"]
    );
}

#[tokio::test]
async fn fault_a_reply_killed_after_its_first_action_was_answered_resumes_after_it() {
    let (dir, manychat) = killed_while_performing(SECOND_TAG).await;
    assert_eq!(reply_field_writes(&manychat).await.len(), 1);
    assert_eq!(reply_triggers(&manychat).await, 1);
    let tags = tagged(&manychat).await;
    assert_eq!(
        count(&tags, FIRST_TAG),
        1,
        "the answered tag is never repeated: {tags:?}"
    );
    assert_eq!(
        count(&tags, SECOND_TAG),
        2,
        "the unanswered one once more: {tags:?}"
    );
    assert_eq!(
        recorded_tag_statuses(dir.path(), "8901").await,
        vec!["performed", "performed"]
    );
}

#[tokio::test]
async fn fault_a_nudge_reply_killed_during_its_actions_is_delivered_once() {
    let dir = tenant_with_tags();
    with_nudge(&dir.path().join("config"));
    let manychat = MockServer::start().await;
    let model = MockServer::start().await;
    manychat_accepts_everything(&manychat).await;
    // The contact's own turn, answered inline.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(final_reply("Hello!")))
        .with_priority(1)
        .up_to_n_times(1)
        .mount(&model)
        .await;
    let env = model_env(&model);
    let first = start(dir.path(), &manychat, &env).await;
    let body = first.send("8902", "Hi there").await;
    assert_eq!(block_texts(&body), vec!["Hello!".to_owned()], "{body}");
    first.kill();

    // The follow-up falls due now; its turn stages two tags, and ManyChat holds the first.
    let store = store(dir.path()).await;
    let conversation = store
        .conversation_by_subscriber(&manychat_agent::ids::SubscriberId::parse("8902").unwrap())
        .await
        .unwrap()
        .expect("the contact is known");
    let now = chrono::Utc::now();
    store
        .schedule_nudge(conversation.id, "later_today", now, now)
        .await
        .unwrap();
    drop(store);
    model_turn_with_two_tags(
        &model,
        "Still thinking about the wheel course?",
        Duration::ZERO,
    )
    .await;
    manychat_holds_tag(&manychat, FIRST_TAG).await;

    let second = start(dir.path(), &manychat, &env).await;
    eventually(
        async || count(&tagged(&manychat).await, FIRST_TAG) == 1,
        "the nudge reply is delivered and ManyChat holds its first tag",
    )
    .await;
    second.kill();
    assert_eq!(reply_triggers(&manychat).await, 1);

    let third = start(dir.path(), &manychat, &env).await;
    eventually(
        async || count(&tagged(&manychat).await, SECOND_TAG) == 1,
        "the restart performs what was left",
    )
    .await;
    replies_delivered(dir.path()).await;
    drop(third);
    assert_written_and_triggered_once(&manychat, "Still thinking about the wheel course?").await;
    let tags = tagged(&manychat).await;
    assert_eq!(count(&tags, FIRST_TAG), 2, "{tags:?}");
    assert_eq!(count(&tags, SECOND_TAG), 1, "{tags:?}");
    assert_eq!(
        recorded_tag_statuses(dir.path(), "8902").await,
        vec!["performed", "performed"]
    );
}

// --- in-process: the store cannot take the turn -------------------------------------------

use std::sync::Arc;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};

use crate::selling::Backend;

/// Makes the test's SQLite database refuse every insert into `table`, as a full disk would.
fn refuse_inserts(app: &TestApp, table: &str) {
    let conn = rusqlite::Connection::open(&app.database_path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute_batch(&format!(
        "CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
    ))
    .unwrap();
}

/// The space comes back.
fn accept_inserts(app: &TestApp, table: &str) {
    let conn = rusqlite::Connection::open(&app.database_path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute_batch(&format!("DROP TRIGGER refuse_{table};"))
        .unwrap();
}

fn handoff_tag(app: &TestApp) -> String {
    app.rules()["handoff"]["tag"].as_str().unwrap().to_owned()
}

async fn tags_sent(app: &TestApp) -> Vec<String> {
    app.manychat_texts("/fb/subscriber/addTagByName", "tag_name")
        .await
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|n| n.ends_with(name))
        })
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// A returning contact's message whose turn the store refuses (its inserts into `turns`
/// fail): the contact is answered with the escalation copy. The app.
async fn turn_the_store_refuses(subscriber: &str) -> TestApp {
    let model = Arc::new(ScriptedModel::replies([reply_json(
        "The wheel course has places.",
    )]));
    let app = spawn_app(model).await;
    app.returning_contact(subscriber).await;
    refuse_inserts(&app, "turns");
    let (status, body) = app
        .send(subscriber, "Any places on the wheel course?")
        .await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    app
}

#[tokio::test]
async fn fault_a_contact_told_a_person_will_write_is_handed_off_when_the_store_cannot_take_the_turn()
 {
    let app = turn_the_store_refuses("8903").await;
    until(async || !tags_sent(&app).await.is_empty()).await;
    app.settle().await;
    assert_eq!(
        tags_sent(&app).await,
        vec![handoff_tag(&app)],
        "handed off once"
    );
    assert_eq!(
        metric(&app.metrics_text().await, "handoffs_without_store_total"),
        Some(1.0)
    );
    assert!(app.outbox().await.is_empty(), "nothing could be queued");
    assert!(
        app.turns("8903").await.is_empty(),
        "nothing could be recorded"
    );
}

/// A contact handed to a person moments ago whose next turn the store cannot take gets the copy
/// and is not tagged again: the store shows it in a person's queue already (a turn that broke
/// after writing its handoff row is one such contact).
#[tokio::test]
async fn fault_a_contact_handed_over_moments_ago_is_not_tagged_again_when_the_store_cannot_take_its_next_turn()
 {
    // No hold: the contact's next message is a turn of its own (the fake ManyChat would report
    // the tag gone, which hands the contact back).
    let model = Arc::new(ScriptedModel::replies([reply_json("Unused.")]));
    let options = AppOptions::new(model).edit(|dir| {
        crate::selling::edit_rules(dir, |rules| rules["handoff"]["holdHours"] = json!(0))
    });
    let app = spawn_app_with(options).await;
    app.returning_contact("8906").await;
    let (_, body) = app.send("8906", "I would like a refund please").await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    until(async || !tags_sent(&app).await.is_empty()).await;
    refuse_inserts(&app, "turns");

    let (status, body) = app.send("8906", "Hello? Anyone there?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    app.settle().await;
    assert_eq!(
        tags_sent(&app).await,
        vec![handoff_tag(&app)],
        "handed off once"
    );
}

#[tokio::test(start_paused = true)]
async fn fault_an_escalation_copy_is_never_followed_by_the_real_answer_when_space_comes_back() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps([ScriptStep::ok(reply(
        reply_json("The evening class has places."),
    ))
    .after(Duration::from_secs(9))]));
    let app = spawn_app(model.clone()).await;
    app.returning_contact("8904").await;
    // The promise of a lost race cannot be written: the contact gets the copy instead.
    refuse_inserts(&app, "outbox");
    let request = send_in_background(&app, "8904", "Any places left?");
    until(async || model.calls() == 1).await;
    tokio::time::advance(Duration::from_secs(8)).await;
    let (status, body) = request.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);

    // Space comes back before the model answers: its answer must not follow the copy.
    accept_inserts(&app, "outbox");
    tokio::time::advance(Duration::from_secs(2)).await;
    app.settle_advancing().await;
    app.worker.run_once().await.unwrap();
    let replies = app
        .manychat_requests_to("/fb/subscriber/setCustomFieldByName")
        .await;
    assert!(replies.is_empty(), "no reply after the copy: {replies:?}");
    assert!(
        app.outbox().await.is_empty(),
        "nothing queued for the contact"
    );
    assert_eq!(
        tags_sent(&app).await,
        vec![handoff_tag(&app)],
        "handed off once"
    );
}

// --- in-process: SIGTERM drains what is due -----------------------------------------------

/// Queues a reply for `subscriber`, due `after` from now by the app's (frozen) clock: the wall
/// has moved on by however long the app took to start, which would eat into the drain.
async fn queue_reply(app: &TestApp, subscriber: &str, text: &str, after: Duration) -> i64 {
    queue_reply_at(app, subscriber, text, app.clock.now(), after).await
}

/// Stops `app` (SIGTERM: the shutdown token) while the paused clock moves `step` at a time, at
/// most `steps` times; how far it moved before the stop ended, or `None` when it did not end.
async fn stop_moving_the_clock(app: TestApp, step: Duration, steps: u32) -> Option<Duration> {
    let mut stopping = tokio::spawn(app.stop());
    let mut moved = Duration::ZERO;
    for _ in 0..steps {
        tokio::select! {
            done = &mut stopping => {
                done.unwrap();
                return Some(moved);
            }
            _ = real_pause() => {
                tokio::time::advance(step).await;
                moved += step;
            }
        }
    }
    None
}

#[tokio::test(start_paused = true)]
async fn fault_sigterm_delivers_the_replies_that_fall_due_within_the_shutdown_drain() {
    let _frozen = FrozenClock::freeze();
    let mut options = AppOptions::new(Arc::new(ScriptedModel::replies(Vec::<String>::new())));
    options.background_workers = true;
    let app = spawn_app_with(options).await;
    let soon = queue_reply(&app, "8905", "Due in two seconds.", Duration::from_secs(2)).await;
    let late = queue_reply(
        &app,
        "8906",
        "Due after the drain.",
        Duration::from_secs(60),
    )
    .await;
    let store = app.store.clone();

    // SIGTERM (the shutdown token): the default drain is 10 s. The clock moves only here.
    let stopped = stop_moving_the_clock(app, Duration::from_millis(50), 4000).await;
    assert!(stopped.is_some(), "shutdown ends within its bounds");
    let status = |row: Option<manychat_agent::store::OutboxRow>| row.unwrap().status;
    assert_eq!(
        status(store.outbox_row(soon).await.unwrap()),
        manychat_agent::store::OutboxStatus::Delivered,
        "due during the drain: delivered before the process stopped"
    );
    assert_eq!(
        status(store.outbox_row(late).await.unwrap()),
        manychat_agent::store::OutboxStatus::Pending,
        "due after it: left for the next start"
    );
}

/// Shutdown keeps its bound: with more rows in hand than the shared rate limit lets out within
/// `SHUTDOWN_DRAIN_MS`, the worker stops at the bound (plus the grace of a request in flight)
/// instead of draining them all; what it did not deliver stays on disk, undelivered and not
/// failed, for the next process.
#[tokio::test(start_paused = true)]
async fn fault_sigterm_stops_the_outbox_at_the_drain_bound_and_leaves_the_rest_on_disk() {
    let _frozen = FrozenClock::freeze();
    let mut options = AppOptions::new(Arc::new(ScriptedModel::replies(Vec::<String>::new())))
        .env("SHUTDOWN_DRAIN_MS", "1000");
    options.background_workers = true;
    let app = spawn_app_with(options).await;
    // 40 contacts' replies, each two requests: 80 requests, 8 s at ManyChat's 10 a second.
    let mut rows = Vec::new();
    for contact in 0..40 {
        let subscriber = format!("{}", 89_100 + contact);
        rows.push(
            queue_due_reply(
                &app,
                &subscriber,
                json!({"messages": ["Owed."], "actions": [], "turnId": null}),
            )
            .await,
        );
    }
    let store = app.store.clone();

    let stopped = stop_moving_the_clock(app, Duration::from_millis(10), 2000).await;
    assert!(stopped.is_some(), "shutdown ends");
    let moved = stopped.unwrap();
    assert!(
        moved <= Duration::from_millis(2500),
        "the worker stops within the drain (1 s) and a request's grace (1 s): {moved:?}"
    );
    let mut delivered = 0;
    for row in rows {
        let row = store.outbox_row(row).await.unwrap().unwrap();
        match row.status {
            manychat_agent::store::OutboxStatus::Delivered => delivered += 1,
            manychat_agent::store::OutboxStatus::Failed => panic!("a row was given up: {row:?}"),
            _ => {}
        }
    }
    assert!(
        delivered < 40,
        "the rest left on disk: {delivered} delivered"
    );
}

/// A database failure's log line says which operation failed, on which backend, and the cause
/// in plain words (here the turn cannot be recorded: the disk is full).
#[tokio::test]
async fn fault_a_database_failure_is_logged_with_its_operation_backend_and_cause() {
    let logs = manychat_agent::observability::capture_global();
    let app = turn_the_store_refuses("8906").await;
    app.settle().await;
    let failed: Vec<serde_json::Value> = logs
        .lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| {
            line["message"] == "turn failed; answering with the escalation copy"
                && line["operation"] == "recording the contact's turn"
        })
        .collect();
    let [line, ..] = &failed[..] else {
        panic!(
            "the turn's failure is logged with its operation: {}",
            logs.text()
        );
    };
    assert_eq!(line["backend"], "sqlite", "{line}");
    let cause = line["error"].as_str().unwrap_or_default();
    assert!(cause.contains("database or disk is full"), "{line}");
    assert!(
        !cause.contains("recording the contact's turn"),
        "the cause is the cause alone: {line}"
    );
}

// --- in-process: the handoff made without the store holds ---------------------------------

/// Makes the backend refuse every insert into `turns` (as a full disk would), or take them
/// again.
async fn refuse_turns(app: &TestApp, schema: Option<&str>, refuse: bool) {
    match (schema, refuse) {
        (None, true) => refuse_inserts(app, "turns"),
        (None, false) => accept_inserts(app, "turns"),
        (Some(schema), refuse) => {
            let admin = sqlx::PgPool::connect(&test_database_url()).await.unwrap();
            let statements = if refuse {
                vec![
                    format!(
                        "CREATE FUNCTION {schema}.refuse_insert() RETURNS trigger LANGUAGE plpgsql \
                         AS $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$"
                    ),
                    format!(
                        "CREATE TRIGGER refuse_turns BEFORE INSERT ON {schema}.turns \
                         FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_insert()"
                    ),
                ]
            } else {
                vec![format!("DROP TRIGGER refuse_turns ON {schema}.turns")]
            };
            for statement in statements {
                sqlx::query(&statement).execute(&admin).await.unwrap();
            }
        }
    }
}

/// "A person will write" holds: a contact handed off directly through ManyChat while the store
/// could not take its turn is held once the store is back; its next message is recorded and
/// answered silently (`held`), the model never reads it, and it is not tagged again.
async fn fault_a_contact_handed_off_without_the_store_is_held_when_the_store_is_back(
    backend: Backend,
) {
    let model = Arc::new(ScriptedModel::replies([
        reply_json("The wheel course has places."),
        reply_json("A second answer nobody should get."),
    ]));
    let (schema, options) = match backend {
        Backend::Sqlite => (None, AppOptions::new(model.clone())),
        Backend::Postgres => {
            let (schema, url) = fresh_postgres_schema().await;
            (
                Some(schema),
                AppOptions::new(model.clone()).env("DATABASE_URL", url),
            )
        }
    };
    let app = spawn_app_with(options).await;
    let tag = handoff_tag(&app);
    // The person keeps the tag on the contact.
    Mock::given(method("GET"))
        .and(path("/fb/subscriber/getInfo"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "status": "success",
            "data": {"id": "8911", "tags": [{"id": 1, "name": tag}], "custom_fields": []}
        })))
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    app.returning_contact("8911").await;
    refuse_turns(&app, schema.as_deref(), true).await;
    let (status, body) = app.send("8911", "Any places on the wheel course?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    until(async || !tags_sent(&app).await.is_empty()).await;
    assert!(
        app.turns("8911").await.is_empty(),
        "nothing could be recorded"
    );

    // The store is back; the contact writes again while a person is expected to answer.
    refuse_turns(&app, schema.as_deref(), false).await;
    let (status, body) = app.send("8911", "Hello? Are you there?").await;
    assert_eq!(status, 200);
    assert_eq!(body["content"]["messages"], json!([]), "held: {body}");
    app.settle().await;
    assert_eq!(model.calls(), 1, "the model never reads a held contact");
    assert!(
        app.conversation("8911").await.escalated_at.is_some(),
        "the hold is on disk"
    );
    let outcomes = app.turn_fields("8911", |t| t.outcome).await;
    assert_eq!(outcomes, [None, Some("held".to_owned())]);
    assert_eq!(tags_sent(&app).await, vec![tag], "handed off once");
    assert!(
        app.manychat_requests_to("/fb/subscriber/setCustomFieldByName")
            .await
            .is_empty(),
        "nothing said after the copy"
    );
}

on_both_backends!(fault_a_contact_handed_off_without_the_store_is_held_when_the_store_is_back);
