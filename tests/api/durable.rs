//! Every promise the service makes is durable. The process is killed with SIGKILL
//! after it acknowledged a message and restarted; the contact still gets an answer. These run
//! the real binary, so they wait on real events (bounded polls), never on fixed sleeps.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::MockServer;

use crate::helpers::*;

/// A `serve` process of the real binary on a tenant folder and database of its own.
pub(crate) struct Served {
    /// Locked only to read whether it exited while the test waits for it.
    child: std::sync::Mutex<Child>,
    pub(crate) port: u16,
}

impl Served {
    pub(crate) fn start(dir: &Path, manychat: &MockServer, extra: &[(&str, &str)]) -> Self {
        let port = free_port();
        let mut env: HashMap<String, String> = HashMap::from([
            (
                "CONFIG_DIR".into(),
                dir.join("config").display().to_string(),
            ),
            (
                "DATABASE_URL".into(),
                format!("sqlite://{}", dir.join("agent.db").display()),
            ),
            ("MANYCHAT_SHARED_SECRET".into(), SECRET.into()),
            (
                "PUBLIC_BASE_URL".into(),
                "https://agent.example.test".into(),
            ),
            ("MANYCHAT_API_TOKEN".into(), "123:test-token".into()),
            ("MANYCHAT_API_BASE".into(), manychat.uri()),
            (
                "MANYCHAT_REPLY_FLOW_NS".into(),
                "content20250101_reply".into(),
            ),
            ("MANYCHAT_REPLY_GAP_MS".into(), "0".into()),
            ("PORT".into(), port.to_string()),
            ("RUST_LOG".into(), "warn".into()),
        ]);
        for (name, value) in extra {
            env.insert((*name).into(), (*value).into());
        }
        let child = Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
            .arg("serve")
            .env_clear()
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        Self {
            child: std::sync::Mutex::new(child),
            port,
        }
    }

    /// Waits for the service to answer `/health`, however long a busy machine takes to start it,
    /// failing at once if the process exits instead, and after the suite's bound of real time.
    pub(crate) async fn ready(&self) {
        let client = reqwest::Client::new();
        let deadline = RealDeadline::start();
        while !deadline.passed() {
            let health = client
                .get(format!("http://127.0.0.1:{}/health", self.port))
                .send()
                .await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            let exited = self.child.lock().unwrap().try_wait();
            if let Some(status) = exited.expect("the process's status") {
                panic!("the service exited before it answered: {status}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "the service did not answer /health within {:?}",
            crate::bound::BACKGROUND_BOUND
        );
    }

    pub(crate) async fn send(&self, subscriber: &str, text: &str) -> Value {
        reqwest::Client::new()
            .post(format!(
                "http://127.0.0.1:{}/v1/channels/manychat/message",
                self.port
            ))
            .bearer_auth(SECRET)
            .json(&json!({"subscriber_id": subscriber, "text": text}))
            .send()
            .await
            .expect("an answer")
            .json()
            .await
            .expect("a JSON answer")
    }

    /// SIGKILL: nothing is flushed, drained or settled.
    pub(crate) fn kill(mut self) {
        let child = self.child.get_mut().unwrap();
        child.kill().expect("killed");
        let _ = child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(child) = self.child.get_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub(crate) fn tenant() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(&dir.path().join("config"));
    dir
}

pub(crate) fn rules(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("config/rules.json")).unwrap()).unwrap()
}

/// The demo tenant's folder, a fake ManyChat that accepts everything, and the tenant's rules.
async fn tenant_and_manychat() -> (tempfile::TempDir, MockServer, Value) {
    let dir = tenant();
    let manychat = MockServer::start().await;
    manychat_accepts_everything(&manychat).await;
    let rules = rules(dir.path());
    (dir, manychat, rules)
}

/// The texts ManyChat was asked to put in the reply field, in order.
pub(crate) async fn reply_field_writes(manychat: &MockServer) -> Vec<String> {
    bodies_on(manychat, "/fb/subscriber/setCustomFieldByName")
        .await
        .into_iter()
        .filter(|b| b["field_name"] == "ai_message")
        .filter_map(|b| b["field_value"].as_str().map(str::to_owned))
        .collect()
}

pub(crate) async fn tagged(manychat: &MockServer) -> Vec<String> {
    bodies_on(manychat, "/fb/subscriber/addTagByName")
        .await
        .into_iter()
        .filter_map(|b| b["tag_name"].as_str().map(str::to_owned))
        .collect()
}

/// Polls (real time, bounded) until `condition` holds.
pub(crate) async fn eventually(mut condition: impl AsyncFnMut() -> bool, what: &str) {
    let deadline = RealDeadline::start();
    while !deadline.passed() {
        if condition().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never happened: {what}");
}

/// Moves what a killed process left in `dir`'s database an hour into the past: the outbox rows'
/// times, and the window's end (`abort_at`) of the promise in reply row `promise`.
fn an_hour_earlier(dir: &Path, promise: i64, abort_at: chrono::DateTime<chrono::Utc>) {
    const HOUR_MS: i64 = 3_600_000;
    let db = rusqlite::Connection::open(dir.join("agent.db")).unwrap();
    db.execute(
        "UPDATE outbox SET next_attempt_at = next_attempt_at - ?1, created_at = created_at - ?1",
        [HOUR_MS],
    )
    .unwrap();
    let payload: String = db
        .query_row(
            "SELECT payload FROM outbox WHERE id = ?1",
            [promise],
            |row| row.get(0),
        )
        .unwrap();
    let mut payload: Value = serde_json::from_str(&payload).unwrap();
    payload["promise"]["abortAt"] = json!(abort_at - chrono::Duration::hours(1));
    db.execute(
        "UPDATE outbox SET payload = ?1 WHERE id = ?2",
        rusqlite::params![payload.to_string(), promise],
    )
    .unwrap();
}

/// A process serving `dir` with `mock:slow` (it answers after 12 s) and a 0.3 s deadline, so
/// the contact is acknowledged; a model call is aborted after `abort_ms`.
async fn slow_process(dir: &Path, manychat: &MockServer, abort_ms: &str) -> Served {
    let served = Served::start(
        dir,
        manychat,
        &[
            ("AGENT_MODEL", "mock:slow"),
            ("RACE_DEADLINE_MS", "300"),
            ("MODEL_ABORT_MS", abort_ms),
        ],
    );
    served.ready().await;
    served
}

#[tokio::test]
async fn killed_after_the_acknowledgement_the_turn_runs_again_after_restart() {
    let (dir, manychat, rules) = tenant_and_manychat().await;

    // The model answers after 12 s; the deadline is 0.3 s: the contact is acknowledged.
    let first = slow_process(dir.path(), &manychat, "60000").await;
    let body = first.send("8801", "When are the evening classes?").await;
    assert_eq!(
        block_texts(&body),
        vec![
            rules["messages"]["acknowledgement"]
                .as_str()
                .unwrap()
                .to_owned()
        ]
    );
    first.kill();
    assert!(
        reply_field_writes(&manychat).await.is_empty(),
        "nothing was sent before the kill"
    );

    // Restarted (a fast model now): the promise's window lasts, so the turn runs again and its
    // answer reaches the contact through the outbox.
    let second = Served::start(
        dir.path(),
        &manychat,
        &[("AGENT_MODEL", "mock:demo"), ("MODEL_ABORT_MS", "60000")],
    );
    second.ready().await;
    eventually(
        async || !reply_field_writes(&manychat).await.is_empty(),
        "the owed reply is delivered",
    )
    .await;
    let writes = reply_field_writes(&manychat).await;
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_ne!(
        writes[0],
        rules["messages"]["escalation"].as_str().unwrap(),
        "the model's answer, not the fallback"
    );
    assert!(
        tagged(&manychat).await.is_empty(),
        "no handoff: the turn was answered"
    );
    drop(second);

    let store = manychat_agent::store::connect(&sqlite_file_url(dir.path()))
        .await
        .unwrap();
    let conversation = store
        .conversation_by_subscriber(&manychat_agent::ids::SubscriberId::parse("8801").unwrap())
        .await
        .unwrap()
        .expect("the contact is known");
    let turns = store.turns(conversation.id).await.unwrap();
    let kinds: Vec<_> = turns
        .iter()
        .map(|t| (t.role.as_str(), t.outcome.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![("user", None), ("agent", Some("deferred".to_owned()))],
        "the message recorded once, and its answer"
    );
}

#[tokio::test]
async fn killed_and_restarted_after_the_abort_window_the_contact_gets_the_copy_and_the_handoff() {
    let (dir, manychat, rules) = tenant_and_manychat().await;

    // Killed inside its window (a minute: however long a loaded machine takes between the
    // answer and the kill): the first process never settles the turn itself.
    let first = slow_process(dir.path(), &manychat, "60000").await;
    let body = first.send("8802", "Do you have parking?").await;
    assert_eq!(block_texts(&body).len(), 1, "acknowledged");
    first.kill();

    // The promise on disk says when its window ends; the restart comes after that. Instead of
    // waiting the window out in real time, what the process left is moved an hour earlier (the
    // window's end, the rows' times), as if the restart came an hour later.
    let store = manychat_agent::store::connect(&sqlite_file_url(dir.path()))
        .await
        .unwrap();
    let promise: Vec<_> = store
        .outbox_rows()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == manychat_agent::store::OutboxKind::Reply)
        .collect();
    let window_ends: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(promise[0].payload["promise"]["abortAt"].clone())
            .expect("the owed reply is a promise");
    drop(store);
    an_hour_earlier(dir.path(), promise[0].id, window_ends);

    // Restarted once the window has closed: the promise's fallback is delivered by the outbox
    // (the escalation copy, then the handoff tag) and the message records why.
    let second = Served::start(dir.path(), &manychat, &[("AGENT_MODEL", "mock:demo")]);
    second.ready().await;
    eventually(
        async || !tagged(&manychat).await.is_empty(),
        "the handoff is performed",
    )
    .await;
    assert_eq!(
        reply_field_writes(&manychat).await,
        vec![rules["messages"]["escalation"].as_str().unwrap().to_owned()]
    );
    assert_eq!(
        tagged(&manychat).await,
        vec![rules["handoff"]["tag"].as_str().unwrap().to_owned()]
    );

    // The handoff is recorded once ManyChat took it (the process writes it right after).
    let store = manychat_agent::store::connect(&sqlite_file_url(dir.path()))
        .await
        .unwrap();
    let subscriber = manychat_agent::ids::SubscriberId::parse("8802").unwrap();
    eventually(
        async || {
            store
                .conversation_by_subscriber(&subscriber)
                .await
                .unwrap()
                .is_some_and(|c| c.escalated_at.is_some())
        },
        "the conversation is marked escalated",
    )
    .await;
    drop(second);
    let conversation = store
        .conversation_by_subscriber(&subscriber)
        .await
        .unwrap()
        .expect("the contact is known");
    let turns = store.turns(conversation.id).await.unwrap();
    assert_eq!(turns.len(), 1, "no agent turn: the model never answered");
    assert_eq!(turns[0].escalation_reason.as_deref(), Some("interrupted"));
}

// --- in-process: the handoff, load shedding, the escalation reason, the in-flight bound ----

use std::sync::Arc;

use manychat_agent::model::mock::{HangingModel, ScriptedModel};
use manychat_agent::store::{OutboxKind, OutboxStatus};
use wiremock::Mock;
use wiremock::matchers::{method, path};

fn tag_requests(requests: &[Recorded]) -> usize {
    requests
        .iter()
        .filter(|r| r.path == "/fb/subscriber/addTagByName")
        .count()
}

fn handoff_tag(app: &TestApp) -> String {
    app.rules()["handoff"]["tag"].as_str().unwrap().to_owned()
}

fn keyword(app: &TestApp) -> String {
    app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(start_paused = true)]
async fn a_failed_handoff_is_retried_through_the_outbox() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::replies([reply_json("Unused.")]));
    let app = spawn_app(model).await;
    // ManyChat refuses the first tag with a server error, then accepts.
    Mock::given(method("POST"))
        .and(path("/fb/subscriber/addTagByName"))
        .respond_with(manychat_error(500, "Internal error"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&app.manychat)
        .await;

    let (status, body) = app
        .send("9101", &format!("I want a {}", keyword(&app)))
        .await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    app.settle().await;
    assert_eq!(tag_requests(&app.manychat_requests().await), 1);
    let outbox = app.outbox().await;
    let handoff = outbox
        .iter()
        .find(|r| r.kind == OutboxKind::Handoff)
        .expect("the handoff is an outbox row");
    assert_eq!(handoff.status, OutboxStatus::Pending, "kept for a retry");
    assert_eq!(handoff.attempts, 1);

    // Due after the backoff: the worker tags the contact.
    tokio::time::advance(Duration::from_secs(3)).await;
    app.worker.run_once().await.unwrap();
    let requests = app.manychat_requests().await;
    assert_eq!(tag_requests(&requests), 2);
    assert_eq!(requests.last().unwrap().body["tag_name"], handoff_tag(&app));
    let handoff = app.store.outbox_row(handoff.id).await.unwrap().unwrap();
    assert_eq!(handoff.status, OutboxStatus::Delivered);
    let turns = app.turns("9101").await;
    let record = turns.last().unwrap().actions.clone().expect("a record");
    assert_eq!(record[0]["origin"], "handoff");
    assert_eq!(record[0]["status"], "performed");
}

#[tokio::test(start_paused = true)]
async fn a_contact_handed_off_is_not_tagged_again_within_the_idle_window() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::replies([reply_json("Unused.")]));
    // The hold off: every message of the burst escalates anew.
    let app = spawn_app_with(AppOptions::new(model).edit(|dir| {
        crate::selling::edit_rules(dir, |rules| rules["handoff"]["holdHours"] = 0.into())
    }))
    .await;
    let keyword = keyword(&app);
    for _ in 0..3 {
        let (_, body) = app.send("9102", &format!("{keyword} please")).await;
        assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
        app.settle().await;
    }
    assert_eq!(
        tag_requests(&app.manychat_requests().await),
        1,
        "one handoff for the burst"
    );
    let turns = app.turns("9102").await;
    let escalated: Vec<_> = turns
        .iter()
        .filter(|t| t.escalation_reason.is_some())
        .collect();
    assert_eq!(escalated.len(), 3, "every escalation is still recorded");
}

#[tokio::test(start_paused = true)]
async fn the_escalation_reason_is_recorded_logged_and_counted() {
    let _frozen = FrozenClock::freeze();
    let logs = manychat_agent::observability::capture_global();
    let model = Arc::new(ScriptedModel::replies([escalation_json("complaint")]));
    let app = spawn_app(model).await;
    app.send("9103", &format!("{} now", keyword(&app))).await;
    app.send("9104", "This is not what I ordered").await;
    app.settle().await;

    let reasons = |turns: Vec<manychat_agent::store::Turn>| {
        turns
            .into_iter()
            .filter_map(|t| t.escalation_reason)
            .collect::<Vec<_>>()
    };
    assert_eq!(reasons(app.turns("9103").await), vec!["escalation_keyword"]);
    assert_eq!(reasons(app.turns("9104").await), vec!["complaint"]);

    let conversation = app.conversation("9104").await.id.to_string();
    assert!(
        logs.lines()
            .iter()
            .any(|l| l.contains(&conversation) && l.contains("complaint")),
        "the escalation's log line names its reason"
    );
    let metrics = app.metrics_text().await;
    for reason in ["escalation_keyword", "complaint"] {
        assert!(
            metrics.contains(&format!(
                "manychat_agent_escalations_total{{reason=\"{reason}\"}} 1"
            )),
            "{metrics}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_load_shed_contact_is_recorded_and_handed_off() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(HangingModel::new());
    let app = spawn_app_with(AppOptions::new(model.clone()).env("MAX_TURNS_IN_FLIGHT", "1")).await;
    let busy = send_in_background(&app, "9105", "First question");
    until(async || model.calls() == 1).await;

    let (status, body) = app.send("9106", "Second question").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    let turns = app.turns("9106").await;
    assert_eq!(
        turns.len(),
        2,
        "the message and the escalation are recorded"
    );
    assert_eq!(turns[0].text, "Second question");
    assert_eq!(turns[1].escalation_reason.as_deref(), Some("load_shed"));
    assert!(app.conversation("9106").await.escalated_at.is_some());

    // The handoff row falls due after its grace period; the worker tags the contact.
    tokio::time::advance(Duration::from_secs(11)).await;
    app.worker.run_once().await.unwrap();
    let requests = app.manychat_requests().await;
    assert_eq!(tag_requests(&requests), 1);
    drop(busy);
}

#[tokio::test(start_paused = true)]
async fn a_turn_still_computing_after_a_lost_race_counts_against_the_bound() {
    let _frozen = FrozenClock::freeze();
    let model = slow_then("Late answer.", Duration::from_secs(20), "Never reached.");
    let app = spawn_app_with(AppOptions::new(model.clone()).env("MAX_TURNS_IN_FLIGHT", "1")).await;
    let first = send_in_background(&app, "9107", "Slow question");
    until(async || model.calls() == 1).await;
    tokio::time::advance(Duration::from_secs(8)).await;
    let (_, body) = first.await.unwrap();
    assert_eq!(block_texts(&body), vec![app.acknowledgement()], "race lost");

    // The first turn's model call still runs: a second contact is shed, not a 65th call.
    let (_, body) = app.send("9108", "Another question").await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    assert_eq!(
        model.calls(),
        1,
        "no second model call while the first runs"
    );

    // Once the first call ends, its place is free again.
    tokio::time::advance(Duration::from_secs(13)).await;
    app.settle().await;
    let (_, body) = app.send("9109", "A third question").await;
    assert_eq!(block_texts(&body), vec!["Never reached.".to_owned()]);
}
