//! A replica's death costs its contacts nothing. A promise (the reply owed after an
//! acknowledgement) is written here as a replica that then died leaves it: its message, the
//! pending reply row holding the escalation copy and the fallback handoff, owned by a process
//! whose lease is gone, and that process's turn ticket. The survivors are real apps on the same
//! PostgreSQL schema; ManyChat is the recording fake.

use std::sync::Arc;

use chrono::Utc;
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::outbox::{HandoffPayload, PromiseNote, ReplyPayload};
use manychat_agent::store::{Exchange, NewOutboxRow, NewTurn, OutboxKind};

use crate::durable::eventually;
use crate::helpers::*;

const ANSWER: &str = "The evening wheel class has two places left.";

/// Writes the promise a replica that died left for `subscriber`'s message `text`, its window
/// ending `window` from now (negative: already over). Returns the promise's reply row.
async fn promise_left_by_a_dead_replica(
    app: &TestApp,
    subscriber: &str,
    text: &str,
    window: chrono::Duration,
) -> i64 {
    let conversation = app.conversation(subscriber).await;
    let now = Utc::now();
    let abort_at = now + window;
    let due = abort_at + chrono::Duration::seconds(5);
    let reply = ReplyPayload {
        promise: Some(PromiseNote {
            abort_at,
            bound: true,
        }),
        ..ReplyPayload::of(vec![app.escalation_copy()])
    };
    let handoff: manychat_agent::config::Handoff =
        serde_json::from_value(app.rules()["handoff"].clone()).unwrap();
    let handoff = HandoffPayload {
        actions: manychat_agent::actions::handoff_actions(Some(&handoff)),
        turn_id: None,
        fallback: true,
    };
    let row = |kind, payload| NewOutboxRow::of(&conversation, kind, payload, now).due_at(due);
    let rows = [
        row(OutboxKind::Reply, serde_json::to_value(&reply).unwrap()),
        row(OutboxKind::Handoff, serde_json::to_value(&handoff).unwrap()),
    ];
    let message = NewTurn::user(conversation.id, text, true, now);
    let ids = app
        .store
        .record_exchange(Exchange {
            outbox: &rows,
            ..Exchange::of(&message)
        })
        .await
        .unwrap();
    ids.outbox[0]
}

/// Gives the contact's promise rows to a process that never renews a lease (a dead replica),
/// which also still holds the contact's turn ticket for a minute. One transaction, as the dead
/// replica left them: a survivor looking between the two writes would claim the promise (its
/// claim gives back the dead replica's ticket) before the ticket is written, and its turn would
/// then wait behind that ticket for its minute, past the promise's window.
async fn owned_by_a_dead_replica(app: &TestApp, schema: &str, subscriber: &str) {
    let conversation = app.conversation(subscriber).await;
    let admin = sqlx::PgPool::connect(&test_database_url()).await.unwrap();
    let dead = uuid::Uuid::new_v4();
    let mut left = admin.begin().await.unwrap();
    sqlx::query(&format!(
        "INSERT INTO {schema}.turn_tickets (conversation_id, holder, lease_until) \
         VALUES ($1, $2, now() + interval '1 minute')"
    ))
    .bind(conversation.id)
    .bind(dead)
    .execute(&mut *left)
    .await
    .unwrap();
    sqlx::query(&format!(
        "UPDATE {schema}.outbox SET owner = $1 WHERE conversation_id = $2"
    ))
    .bind(dead)
    .bind(conversation.id)
    .execute(&mut *left)
    .await
    .unwrap();
    left.commit().await.unwrap();
}

/// What a replica that died mid-turn leaves for the survivors on `schema`: `subscriber`'s
/// promise of "Any evening classes?" (whose abort window ends `window` from now), its rows
/// still owned by the dead replica. The promise's reply row.
async fn dead_replicas_promise(
    app: &TestApp,
    schema: &str,
    subscriber: &str,
    window: chrono::Duration,
) -> i64 {
    let row = promise_left_by_a_dead_replica(app, subscriber, "Any evening classes?", window).await;
    owned_by_a_dead_replica(app, schema, subscriber).await;
    row
}

/// Waits (bounded) until every app on `schema` has looked for orphaned promises at least once
/// since now. Each look follows a renewal of its app's lease (`beat`, then the look, then the
/// next beat), so two renewals seen after now enclose a whole look that began after now. Counted
/// renewal by renewal, not by how far the lease moved: on a busy machine one late renewal moves
/// it as far as two.
async fn after_a_look(schema: &str) {
    let admin = sqlx::PgPool::connect(&test_database_url()).await.unwrap();
    let leases = format!("SELECT holder, lease_until FROM {schema}.replicas");
    let read = async || -> Vec<(uuid::Uuid, chrono::DateTime<Utc>)> {
        sqlx::query_as(&leases).fetch_all(&admin).await.unwrap()
    };
    // Each app's lease as last seen, and how many renewals were seen since now (an app whose
    // first beat comes after now has made one).
    let mut seen: std::collections::HashMap<uuid::Uuid, (chrono::DateTime<Utc>, u32)> = read()
        .await
        .into_iter()
        .map(|(holder, lease)| (holder, (lease, 0)))
        .collect();
    let deadline = RealDeadline::start();
    while !deadline.passed() {
        for (holder, lease) in read().await {
            let (last, renewals) = seen.entry(holder).or_insert((lease, 1));
            if lease > *last {
                *last = lease;
                *renewals += 1;
            }
        }
        if !seen.is_empty() && seen.values().all(|(_, renewals)| *renewals >= 2) {
            return;
        }
        real_pause().await;
    }
    panic!("the survivors did not look again");
}

fn answering(text: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies([reply_json(text)]))
}

async fn survivor(model: Arc<ScriptedModel>, url: &str) -> TestApp {
    spawn_app_with(AppOptions::new(model).env("DATABASE_URL", url.to_owned())).await
}

/// The texts ManyChat was asked to put in the reply field, in order.
async fn replies_delivered(app: &TestApp) -> Vec<String> {
    app.manychat_texts("/fb/subscriber/setCustomFieldByName", "field_value")
        .await
}

async fn tags_sent(app: &TestApp) -> Vec<String> {
    app.manychat_texts("/fb/subscriber/addTagByName", "tag_name")
        .await
}

/// Delivers what the outbox holds that is due now.
async fn deliver(app: &TestApp) {
    for _ in 0..5 {
        if app.worker.run_once().await.unwrap() == 0 {
            break;
        }
    }
}

/// The promise still holds its escalation copy (no turn kept it).
async fn promise_kept(app: &TestApp, row: i64) -> bool {
    let row = app.store.outbox_row(row).await.unwrap().unwrap();
    row.payload.get("promise").is_none()
}

/// Waits (bounded) until a survivor kept the promise whose reply row is `row`.
async fn until_kept(app: &TestApp, row: i64) {
    eventually(
        async || promise_kept(app, row).await,
        "a survivor kept the promise",
    )
    .await;
}

/// A fresh schema and one survivor on it, its model answering [`ANSWER`]: the schema, the
/// model and the survivor.
async fn lone_survivor() -> (String, Arc<ScriptedModel>, TestApp) {
    let (schema, url) = fresh_postgres_schema().await;
    let model = answering(ANSWER);
    let app = survivor(model.clone(), &url).await;
    (schema, model, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn survivor_reruns_a_dead_replicas_turn_within_its_abort_window() {
    let (schema, model, app) = lone_survivor().await;
    let row = dead_replicas_promise(&app, &schema, "8801", chrono::Duration::seconds(30)).await;

    // The survivor's next look (about a second) claims it and runs the turn again.
    until_kept(&app, row).await;
    app.settle().await;
    assert_eq!(model.calls(), 1, "the turn ran again once");
    let contact_text = &model.requests()[0];
    assert!(
        format!("{contact_text:?}").contains("Any evening classes?"),
        "from the contact's recorded message"
    );
    eventually(
        async || {
            deliver(&app).await;
            !replies_delivered(&app).await.is_empty()
        },
        "the answer is delivered",
    )
    .await;
    assert_eq!(replies_delivered(&app).await, vec![ANSWER.to_owned()]);
    assert!(
        tags_sent(&app).await.is_empty(),
        "no handoff: it was answered"
    );
    let turns = app.turns("8801").await;
    assert_eq!(turns.last().unwrap().outcome.as_deref(), Some("deferred"));
    assert!(
        app.outbox()
            .await
            .iter()
            .all(|r| r.kind != OutboxKind::Handoff),
        "the fallback handoff went with the kept promise"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn two_survivors_run_a_dead_replicas_turn_once() {
    let (schema, url) = fresh_postgres_schema().await;
    let (first, second) = (answering(ANSWER), answering(ANSWER));
    let one = survivor(first.clone(), &url).await;
    let two = survivor(second.clone(), &url).await;
    let row = dead_replicas_promise(&one, &schema, "8802", chrono::Duration::seconds(30)).await;

    until_kept(&one, row).await;
    one.settle().await;
    two.settle().await;
    // Another look by both: the promise is no longer anybody's to take.
    after_a_look(&schema).await;
    one.settle().await;
    two.settle().await;
    assert_eq!(first.calls() + second.calls(), 1, "one survivor ran it");
    let delivered =
        async || [replies_delivered(&one).await, replies_delivered(&two).await].concat();
    eventually(
        async || {
            deliver(&one).await;
            deliver(&two).await;
            !delivered().await.is_empty()
        },
        "the answer is delivered",
    )
    .await;
    assert_eq!(
        delivered().await,
        vec![ANSWER.to_owned()],
        "one answer, no copy"
    );
}

/// The claim itself: of two survivors taking the same promise at once, exactly one gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn a_dead_replicas_promise_is_claimed_by_one_survivor_only() {
    let (schema, url) = fresh_postgres_schema().await;
    let one = survivor(answering(ANSWER), &url).await;
    let two = survivor(answering(ANSWER), &url).await;
    // Its window is over, so neither app's own look takes it; the claims here race.
    let row = dead_replicas_promise(&one, &schema, "8803", -chrono::Duration::seconds(1)).await;
    let (a, b) = tokio::join!(one.store.claim_promise(row), two.store.claim_promise(row));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a ^ b, "exactly one claim wins: {a} {b}");
    assert!(
        !one.store.claim_promise(row).await.unwrap()
            && !two.store.claim_promise(row).await.unwrap(),
        "a live survivor's promise is not taken again"
    );
    let tickets: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {schema}.turn_tickets"))
        .fetch_one(&sqlx::PgPool::connect(&test_database_url()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        tickets, 0,
        "the dead replica's ticket went with its promise"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn past_its_window_a_dead_replicas_promise_gets_the_copy_and_one_handoff() {
    let (schema, model, app) = lone_survivor().await;
    dead_replicas_promise(&app, &schema, "8804", -chrono::Duration::seconds(6)).await;
    // A look by the survivor: a promise past its window is not run again.
    after_a_look(&schema).await;
    app.settle().await;
    assert_eq!(model.calls(), 0, "not run again");
    deliver(&app).await;
    assert_eq!(replies_delivered(&app).await, vec![app.escalation_copy()]);
    let tag = app.rules()["handoff"]["tag"].as_str().unwrap().to_owned();
    assert_eq!(tags_sent(&app).await, vec![tag]);
}

/// Two promises of one contact left without their turn, past their windows: the contact gets
/// the copy for each, and is tagged for a person once.
async fn a_delivered_fallback_is_not_followed_by_a_second_handoff(app: TestApp) {
    for text in ["Any evening classes?", "And on Saturdays?"] {
        promise_left_by_a_dead_replica(&app, "8805", text, -chrono::Duration::seconds(6)).await;
    }
    deliver(&app).await;
    let tag = app.rules()["handoff"]["tag"].as_str().unwrap().to_owned();
    assert_eq!(
        replies_delivered(&app).await,
        vec![app.escalation_copy(), app.escalation_copy()]
    );
    assert_eq!(tags_sent(&app).await, vec![tag], "handed off once");
    assert!(app.all_delivered().await, "both fallbacks settled");
    let turns = app.turns("8805").await;
    assert!(
        turns
            .iter()
            .all(|t| t.escalation_reason.as_deref() == Some("interrupted")),
        "both messages record why they were handed over"
    );
}

#[tokio::test]
async fn a_delivered_fallback_is_never_followed_by_a_second_handoff_sqlite() {
    let app =
        spawn_app_with(AppOptions::new(answering(ANSWER)).env("MANYCHAT_REPLY_GAP_MS", "0")).await;
    a_delivered_fallback_is_not_followed_by_a_second_handoff(app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn a_delivered_fallback_is_never_followed_by_a_second_handoff_postgres() {
    let options = AppOptions::new(answering(ANSWER))
        .env("DATABASE_URL", fresh_postgres_url().await)
        .env("MANYCHAT_REPLY_GAP_MS", "0");
    let app = spawn_app_with(options).await;
    a_delivered_fallback_is_not_followed_by_a_second_handoff(app).await;
}

// --- the figure: two real replicas, one killed --------------------------------------------

/// How many contacts the doomed replica acknowledges before it is killed.
const KILLED_CONTACTS: usize = 40;

/// The dead replica's acknowledged contacts get the real answer from the survivor. Two `serve`
/// processes of the real binary share one PostgreSQL schema; `KILLED_CONTACTS` contacts write to
/// one of them at once, its model (an OpenAI-compatible fake) answers after 6 s, past the 5 s
/// race deadline, so each is acknowledged; that replica is then killed with SIGKILL while all
/// of its turns run. `MODEL_ABORT_MS` is 20 s. Every contact gets one reply; at least 90 % get
/// the model's answer, not the escalation copy. Prints the figure (run with `--nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL); runs two replicas of the real binary"]
async fn a_killed_replicas_acknowledged_contacts_get_the_real_answer_from_a_survivor() {
    use crate::durable::{Served, tenant};
    use crate::faults::{final_reply, model_env};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let url = fresh_postgres_url().await;
    let dir = tenant();
    crate::selling::without_sales(&dir.path().join("config"));
    let manychat = MockServer::start().await;
    manychat_accepts_everything(&manychat).await;
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(final_reply(ANSWER))
                .set_delay(std::time::Duration::from_secs(6)),
        )
        .mount(&model)
        .await;
    let mut env = model_env(&model);
    env.extend([
        ("DATABASE_URL", url),
        ("RACE_DEADLINE_MS", "5000".to_owned()),
        ("MODEL_ABORT_MS", "20000".to_owned()),
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let doomed = Served::start(dir.path(), &manychat, &env);
    let survivor = Served::start(dir.path(), &manychat, &env);
    doomed.ready().await;
    survivor.ready().await;
    let rules = crate::durable::rules(dir.path());
    let acknowledgement = rules["messages"]["acknowledgement"].as_str().unwrap();
    let copy = rules["messages"]["escalation"].as_str().unwrap().to_owned();

    let doomed = Arc::new(doomed);
    let mut requests = Vec::new();
    for n in 0..KILLED_CONTACTS {
        let (doomed, subscriber) = (doomed.clone(), format!("{}", 8_870_000 + n));
        requests.push(tokio::spawn(async move {
            let body = doomed.send(&subscriber, "Any evening classes?").await;
            (subscriber, block_texts(&body))
        }));
    }
    let mut acknowledged = Vec::new();
    for request in requests {
        let (subscriber, texts) = request.await.unwrap();
        if texts == [acknowledgement] {
            acknowledged.push(subscriber);
        }
    }
    Arc::into_inner(doomed).expect("no request left").kill();

    let replies = async || {
        let mut by: std::collections::HashMap<String, Vec<String>> = Default::default();
        for request in manychat.received_requests().await.unwrap_or_default() {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
            if request.url.path() == "/fb/subscriber/setCustomFieldByName"
                && body["field_name"] == "ai_message"
            {
                let subscriber = body["subscriber_id"]
                    .to_string()
                    .trim_matches('"')
                    .to_owned();
                by.entry(subscriber)
                    .or_default()
                    .push(body["field_value"].as_str().unwrap_or_default().to_owned());
            }
        }
        by
    };
    // Until every acknowledged contact has a reply, bounded in real time (the suite's bound, far
    // past the abort window, the fallback's margin and the deliveries); what came is counted.
    let deadline = RealDeadline::start();
    let mut delivered = replies().await;
    while !acknowledged.iter().all(|s| delivered.contains_key(s)) && !deadline.passed() {
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        delivered = replies().await;
    }
    let answered = acknowledged
        .iter()
        .filter(|s| delivered.get(*s).is_some_and(|r| r == &[ANSWER.to_owned()]))
        .count();
    let copied = acknowledged
        .iter()
        .filter(|s| {
            delivered
                .get(*s)
                .is_some_and(|r| r == std::slice::from_ref(&copy))
        })
        .count();
    let twice = acknowledged
        .iter()
        .filter(|s| delivered.get(*s).is_some_and(|r| r.len() > 1))
        .count();
    println!(
        "killed replica: {} of {KILLED_CONTACTS} contacts acknowledged; answered by a survivor: \
         {answered}; escalation copy: {copied}; more than one reply: {twice}",
        acknowledged.len()
    );
    assert!(
        acknowledged.len() >= KILLED_CONTACTS * 9 / 10,
        "the turns were acknowledged"
    );
    assert_eq!(twice, 0, "one reply each");
    assert_eq!(
        answered + copied,
        acknowledged.len(),
        "every contact got its reply"
    );
    assert!(
        answered * 10 >= acknowledged.len() * 9,
        "at least 90 % got the real answer: {answered} of {}",
        acknowledged.len()
    );
    drop(survivor);
}
