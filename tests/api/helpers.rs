//! `spawn_app()` and the fakes the suite shares.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::Model;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};
use manychat_agent::outbox::OutboxWorker;
use manychat_agent::settings::Settings;
use manychat_agent::startup::{Application, Overrides};
use manychat_agent::store::{Conversation, OutboxRow, Store, Turn};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

pub use crate::bound::{Background, RealDeadline, bounded, in_background};

pub const SECRET: &str = "test-secret-0123456789";
pub const SECOND_SECRET: &str = "rotated-secret-9876543210";
/// The release route's own token (`RELEASE_TOKEN`), never the shared secret.
pub const RELEASE_TOKEN: &str = "release-token-0123456789";
pub const REPLY_FLOW: &str = "content_reply_flow_0001";

/// A valid AgentReply, as a model would return it.
pub fn reply_json(text: &str) -> String {
    json!({
        "messages": [text],
        "escalate": false,
        "escalation_reason": null,
        "confidence": 0.9,
        "closing_question": null
    })
    .to_string()
}

/// A model whose first answer, `first`, takes `after` to come, and whose second, `second`,
/// comes at once.
pub fn slow_then(first: &str, after: Duration, second: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(reply(reply_json(first))).after(after),
        ScriptStep::ok(reply(reply_json(second))),
    ]))
}

/// An escalating AgentReply.
pub fn escalation_json(reason: &str) -> String {
    json!({
        "messages": ["One moment."],
        "escalate": true,
        "escalation_reason": reason,
        "confidence": 0.9,
        "closing_question": null
    })
    .to_string()
}

pub struct TestApp {
    pub address: String,
    pub store: Arc<dyn Store>,
    pub manychat: MockServer,
    pub worker: OutboxWorker,
    /// The app's own nudge worker (025), on what its turns share; tests run it by hand.
    pub nudges: manychat_agent::nudge::NudgeWorker,
    /// 031: the active playbook the app's turns are prompted with.
    pub playbook: manychat_agent::learning::playbook::PlaybookCache,
    pub tasks: TaskTracker,
    /// The app's one clock: a service a test builds beside the app reads it too, so the times it
    /// stores and the app's worker compares are on the same clock (two clocks anchored apart
    /// disagree by however long the machine stalled between their two readings).
    pub clock: manychat_agent::clock::Clock,
    /// The tenant config in force, for a test that waits for a reload to land.
    pub config: Arc<manychat_agent::config::ConfigHandle>,
    /// The app's metrics, read without a scrape (a scrape is itself a connection and a request).
    pub metrics: Arc<manychat_agent::metrics::Metrics>,
    pub config_dir: PathBuf,
    pub database_path: PathBuf,
    pub http: reqwest::Client,
    pub shutdown: CancellationToken,
    pub server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// An edit of the copied tenant config folder.
pub type ConfigEdit = Box<dyn FnOnce(&Path) + Send>;

pub struct AppOptions {
    pub model: Arc<dyn Model>,
    /// Extra or replaced environment variables.
    pub env: Vec<(&'static str, String)>,
    /// Tenant config folder to copy (default: the demo tenant's `config/*.example`).
    pub tenant: Option<PathBuf>,
    pub reload_on_sighup: bool,
    /// Edits the copied tenant config folder before the app starts.
    pub edit: Option<ConfigEdit>,
    /// Run the outbox and nudge workers in the background, as `serve` does (default: tests
    /// drive the outbox worker by hand).
    pub background_workers: bool,
    /// Keep the tenant's `burst.windowMs` (the demo's 1500). By default every message is its
    /// own turn (`burst.windowMs` 0), so a test's messages are answered as they come.
    pub burst: bool,
    /// Listen on every address (`0.0.0.0`) instead of the loopback, as a deployment without a
    /// proxy does.
    pub all_addresses: bool,
    /// A clock instead of the system's (e.g. one following a wall the test steps).
    pub clock: Option<manychat_agent::clock::Clock>,
}

impl AppOptions {
    pub fn new(model: Arc<dyn Model>) -> Self {
        Self {
            model,
            env: Vec::new(),
            tenant: None,
            reload_on_sighup: false,
            edit: None,
            background_workers: false,
            burst: false,
            all_addresses: false,
            clock: None,
        }
    }

    /// Keeps the tenant's `burst.windowMs` (see [`AppOptions::burst`]).
    pub fn with_burst(mut self) -> Self {
        self.burst = true;
        self
    }

    pub fn edit(mut self, edit: impl FnOnce(&Path) + Send + 'static) -> Self {
        self.edit = Some(Box::new(edit));
        self
    }

    /// Serves the tenant folder `tenant` instead of the demo's.
    pub fn with_tenant(mut self, tenant: PathBuf) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// Listens on every address (see [`AppOptions::all_addresses`]).
    pub fn on_all_addresses(mut self) -> Self {
        self.all_addresses = true;
        self
    }

    pub fn env(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.env.push((name, value.into()));
        self
    }
}

pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Copies a tenant's config files into `dest`, dropping any `.example` suffix. The demo tenant
/// comes from `shipped_examples()`, never the repo's `config/` (an operator's files live there).
pub fn copy_tenant(source: &Path, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    for name in ["prompt.md", "catalog.json", "rules.json", "tools.json"] {
        for candidate in [name.to_owned(), format!("{name}.example")] {
            let from = source.join(&candidate);
            if from.exists() {
                std::fs::copy(&from, dest.join(name)).unwrap();
                break;
            }
        }
    }
}

/// Rewrites the copied `tools.json`.
pub fn edit_tools(dir: &Path, edit: impl FnOnce(&mut Value)) {
    edit_json(&dir.join("tools.json"), edit);
}

/// Rewrites the copied `rules.json`.
pub fn edit_rules(dir: &Path, edit: impl FnOnce(&mut Value)) {
    edit_json(&dir.join("rules.json"), edit);
}

fn edit_json(file: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(file, value.to_string()).unwrap();
}

/// Copies the demo tenant (`shipped_examples()`) into `dest`.
pub fn copy_demo_tenant(dest: &Path) {
    manychat_agent::config::examples::copy_demo_into(dest);
}

pub async fn spawn_app(model: Arc<dyn Model>) -> TestApp {
    spawn_app_with(AppOptions::new(model)).await
}

pub async fn spawn_app_with(options: AppOptions) -> TestApp {
    let manychat = MockServer::start().await;
    manychat_accepts_everything(&manychat).await;

    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let tenant = options
        .tenant
        .clone()
        .unwrap_or_else(manychat_agent::config::examples::shipped_examples);
    copy_tenant(&tenant, &config_dir);
    if !options.burst {
        edit_rules(&config_dir, |rules| {
            if let Some(rules) = rules.as_object_mut() {
                rules.remove("burst");
            }
        });
    }
    if let Some(edit) = options.edit {
        edit(&config_dir);
    }
    let database_path = dir.path().join("agent.db");

    let mut vars: Vec<(&str, String)> = vec![
        (
            "MANYCHAT_SHARED_SECRET",
            format!("{SECRET},{SECOND_SECRET}"),
        ),
        ("PUBLIC_BASE_URL", "https://agent.example.test".into()),
        ("MANYCHAT_API_TOKEN", "123:test-token".into()),
        ("MANYCHAT_API_BASE", manychat.uri()),
        ("MANYCHAT_REPLY_FLOW_NS", REPLY_FLOW.into()),
        ("MANYCHAT_REPLY_GAP_MS", "2000".into()),
        ("AGENT_MODEL", "mock:scripted".into()),
        ("CONFIG_DIR", config_dir.display().to_string()),
        (
            "DATABASE_URL",
            format!("sqlite://{}", database_path.display()),
        ),
        ("CONTACT_TOKENS_ENFORCED", "false".into()),
        ("RELEASE_TOKEN", RELEASE_TOKEN.into()),
    ];
    for (name, value) in options.env {
        vars.retain(|(n, _)| *n != name);
        vars.push((name, value));
    }
    // The plugin tools' secrets come from the same variables (`serve` reads the process's).
    let secrets: Arc<Vec<(String, String)>> = Arc::new(
        vars.iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect(),
    );
    let plugin_secrets: manychat_agent::plugins::sign::SecretLookup = Arc::new(move |name| {
        secrets
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    });
    let settings = Settings::from_vars(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    })
    .expect("test settings are valid");

    let listen = if options.all_addresses {
        "0.0.0.0:0"
    } else {
        "127.0.0.1:0"
    };
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    let clock = options
        .clock
        .unwrap_or_else(manychat_agent::clock::Clock::system);
    let overrides = Overrides {
        model: Some(options.model),
        clock: Some(clock),
        manual_worker: !options.background_workers,
        reload_on_sighup: options.reload_on_sighup,
        plugin_secrets: Some(plugin_secrets),
        ..Overrides::default()
    };
    let app = Application::build(settings, listener, overrides)
        .await
        .expect("app builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let store = app.store();
    let worker = app.worker();
    let nudges = app.nudge_worker();
    let playbook = app.playbook();
    let tasks = app.tasks();
    let config = app.config();
    let metrics = app.metrics();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let server = tokio::spawn(async move {
        app.run(token).await.expect("server runs");
    });
    TestApp {
        address,
        store,
        manychat,
        worker,
        nudges,
        playbook,
        tasks,
        clock,
        config,
        metrics,
        config_dir,
        database_path,
        http: reqwest::Client::new(),
        shutdown,
        server,
        _dir: dir,
    }
}

/// The fake ManyChat answers every call with success unless a test mounts something else.
pub async fn manychat_accepts_everything(server: &MockServer) {
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "success"})))
        .with_priority(u8::MAX)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/fb/subscriber/getInfo"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"status": "success", "data": {"id": "1", "tags": [], "custom_fields": []}}),
        ))
        .with_priority(u8::MAX)
        .mount(server)
        .await;
}

/// ManyChat's success answer, sent only after `delay` (in real time: a request ManyChat takes
/// its time over, or never answers while a test runs).
pub fn manychat_success_after(delay: Duration) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_json(json!({"status": "success"}))
        .set_delay(delay)
}

/// One request ManyChat received: its path and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub path: String,
    pub body: Value,
}

impl TestApp {
    pub fn message_url(&self) -> String {
        format!("{}/v1/channels/manychat/message", self.address)
    }

    /// Posts a raw body with the first secret.
    pub async fn post_raw(&self, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.http
            .post(self.message_url())
            .bearer_auth(SECRET)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post_json(&self, body: &Value) -> reqwest::Response {
        self.post_raw(body.to_string()).await
    }

    /// Sends a contact message and returns (status, JSON body).
    /// Bounded in real time: a response that never comes fails the test.
    pub async fn send(&self, subscriber: &str, text: &str) -> (u16, Value) {
        bounded("the response to a contact message", async {
            let response = self
                .post_json(&json!({"subscriber_id": subscriber, "text": text}))
                .await;
            let status = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            (status, body)
        })
        .await
    }

    /// The requests the fake ManyChat received, in order, leaving out contact-token writes
    /// (019: a contact's first turn writes its token beside the model call).
    pub async fn manychat_requests(&self) -> Vec<Recorded> {
        self.all_manychat_requests()
            .await
            .into_iter()
            .filter(|r| r.body["field_name"] != "ai_token")
            .collect()
    }

    /// The requests ManyChat received on `path`, in order (contact-token writes left out).
    pub async fn manychat_requests_to(&self, path: &str) -> Vec<Recorded> {
        let mut requests = self.manychat_requests().await;
        requests.retain(|r| r.path == path);
        requests
    }

    /// The text under `key` of each request ManyChat received on `path`, in order: the tags
    /// added (`tag_name`), the replies written (`field_value`).
    pub async fn manychat_texts(&self, path: &str, key: &str) -> Vec<String> {
        let requests = self.manychat_requests_to(path).await;
        requests
            .iter()
            .filter_map(|r| r.body[key].as_str().map(str::to_owned))
            .collect()
    }

    /// The paths ManyChat received, in order (contact-token writes left out).
    pub async fn manychat_paths(&self) -> Vec<String> {
        let requests = self.manychat_requests().await;
        requests.into_iter().map(|r| r.path).collect()
    }

    pub async fn all_manychat_requests(&self) -> Vec<Recorded> {
        self.manychat
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|r| Recorded {
                path: r.url.path().to_owned(),
                body: serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            })
            .collect()
    }

    pub async fn conversation(&self, subscriber: &str) -> Conversation {
        let id = manychat_agent::ids::SubscriberId::parse(subscriber).unwrap();
        self.store
            .conversation_for(&id, "whatsapp", chrono::Utc::now())
            .await
            .unwrap()
    }

    /// Makes `subscriber` a contact that already holds a token (019), so its turns write none
    /// beside the model call: for tests that move the clock past the deadline while a turn
    /// runs, where a token write still in flight would be queued to the outbox too.
    pub async fn returning_contact(&self, subscriber: &str) {
        let conversation = self.conversation(subscriber).await;
        self.store
            .set_token(conversation.id, &"0".repeat(64), chrono::Utc::now())
            .await
            .unwrap();
    }

    pub async fn turns(&self, subscriber: &str) -> Vec<Turn> {
        let conversation = self.conversation(subscriber).await;
        self.store.turns(conversation.id).await.unwrap()
    }

    /// One field of each of `subscriber`'s turns, in order.
    pub async fn turn_fields<T>(&self, subscriber: &str, field: impl Fn(Turn) -> T) -> Vec<T> {
        self.turns(subscriber)
            .await
            .into_iter()
            .map(field)
            .collect()
    }

    /// Waits until the contact's last recorded turn has `outcome` (a lost race's reply is
    /// recorded as `deferred` once the model answers).
    pub async fn until_last_outcome(&self, subscriber: &str, outcome: &str) {
        until(async || {
            let turns = self.turns(subscriber).await;
            turns
                .last()
                .is_some_and(|t| t.outcome.as_deref() == Some(outcome))
        })
        .await;
    }

    /// Moves tokio's clock `by`, waits until the outbox holds a row (a late reply, or the
    /// escalation copy an abort queues), then until the app's tasks have settled.
    pub async fn queued_after(&self, by: Duration) {
        self.advance_until_queued(by).await;
        self.settle().await;
    }

    /// [`Self::queued_after`] on a frozen clock: settles with [`Self::settle_advancing`].
    pub async fn queued_after_advancing(&self, by: Duration) {
        self.advance_until_queued(by).await;
        self.settle_advancing().await;
    }

    async fn advance_until_queued(&self, by: Duration) {
        tokio::time::advance(by).await;
        until(async || !self.outbox().await.is_empty()).await;
    }

    /// The outbox rows a turn owes its contact (replies, handoffs), oldest first, leaving out
    /// contact-token writes (019: a new token's fallback write is queued with every first
    /// response; `store.outbox_rows()` has them).
    pub async fn outbox(&self) -> Vec<OutboxRow> {
        self.store
            .outbox_rows()
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.kind != manychat_agent::store::OutboxKind::ContactToken)
            .collect()
    }

    /// Every outbox row is delivered: nothing is left owed.
    pub async fn all_delivered(&self) -> bool {
        let rows = self.outbox().await;
        rows.iter()
            .all(|r| r.status == manychat_agent::store::OutboxStatus::Delivered)
    }

    /// Waits until agent tasks and post-response actions still running have finished.
    /// Polls in real time (not tokio's, which tests may freeze), so it works in both modes.
    pub async fn settle(&self) {
        let deadline = RealDeadline::start();
        while !deadline.passed() {
            if self.tasks.is_empty() {
                return;
            }
            real_pause().await;
        }
        panic!("tasks did not settle");
    }

    /// `settle` for tests on a frozen clock: moves tokio's clock in small steps while tasks are
    /// pending, so work that waits on it (the ManyChat rate limiter after a burst) can finish.
    pub async fn settle_advancing(&self) {
        let deadline = RealDeadline::start();
        while !deadline.passed() {
            if self.tasks.is_empty() {
                return;
            }
            tokio::time::advance(Duration::from_millis(10)).await;
            real_pause().await;
        }
        panic!("tasks did not settle");
    }

    pub fn escalation_copy(&self) -> String {
        self.rules()["messages"]["escalation"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub fn acknowledgement(&self) -> String {
        self.rules()["messages"]["acknowledgement"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub fn rules(&self) -> Value {
        let text = std::fs::read_to_string(self.config_dir.join("rules.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// A GET of `route` (`/health`, `/metrics`) on the app.
    pub async fn get(&self, route: &str) -> reqwest::Response {
        let url = format!("{}{route}", self.address);
        self.http.get(url).send().await.unwrap()
    }

    /// The app's `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        self.get("/metrics").await.text().await.unwrap()
    }

    /// Stops the app and waits until it has drained.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.server.await.expect("server stops cleanly");
    }
}

/// 019: the token a response block sets in `field` (its `set_field_value` action), if any.
pub fn block_token(body: &Value, field: &str) -> Option<String> {
    body["content"]["actions"]
        .as_array()?
        .iter()
        .find(|a| a["action"] == "set_field_value" && a["field_name"] == field)
        .and_then(|a| a["value"].as_str())
        .map(str::to_owned)
}

/// The texts of a Dynamic Block response.
pub fn block_texts(body: &Value) -> Vec<String> {
    body["content"]["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Freezes tokio's paused clock so that only `tokio::time::advance` moves it. A paused clock
/// normally auto-advances whenever the runtime idles, which real IO (SQLite's worker thread, a
/// socket) makes it do at random points; a running `spawn_blocking` task inhibits that.
pub struct FrozenClock {
    release: std::sync::mpsc::Sender<()>,
}

impl FrozenClock {
    pub fn freeze() -> Self {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || {
            let _ = wait.recv();
        });
        Self { release }
    }
}

impl Drop for FrozenClock {
    fn drop(&mut self) {
        let _ = self.release.send(());
    }
}

/// Gives other threads (SQLite's worker, sockets) a moment without touching tokio's clock.
pub async fn real_pause() {
    let _ = tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(5))).await;
    tokio::task::yield_now().await;
}

/// Lets tasks woken by an `advance` run (the app's tasks are on the same thread).
pub async fn let_tasks_run() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Sends a message from a separate task, so a test can move the clock while it is in flight;
/// awaiting the response is bounded.
pub fn send_in_background(app: &TestApp, subscriber: &str, text: &str) -> Background<(u16, Value)> {
    let http = app.http.clone();
    let url = app.message_url();
    let body = json!({"subscriber_id": subscriber, "text": text});
    in_background(async move {
        let response = http
            .post(url)
            .bearer_auth(SECRET)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// The deadline (8 s) passes while `request` waits on a model still thinking: the contact is
/// answered 200 with the acknowledgement.
pub async fn acknowledged_at_the_deadline(app: &TestApp, request: Background<(u16, Value)>) {
    tokio::time::advance(Duration::from_secs(8)).await;
    let (status, body) = request.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.acknowledgement()]);
}

/// `text` from `subscriber` on a model whose answer (its call number `call`) comes 9 s in: the
/// contact is acknowledged at the deadline, and a second later the reply is recorded as
/// deferred.
pub async fn deferred_by_a_late_answer(
    app: &TestApp,
    model: &ScriptedModel,
    call: usize,
    subscriber: &str,
    text: &str,
) {
    let request = send_in_background(app, subscriber, text);
    until(async || model.calls() == call).await;
    acknowledged_at_the_deadline(app, request).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    app.until_last_outcome(subscriber, "deferred").await;
    app.settle().await;
}

/// Moves the frozen clock in `step`s until `done`, and returns how far it moved; panics past
/// `limit`.
pub async fn advance_by_steps_until(
    step: Duration,
    limit: Duration,
    mut done: impl AsyncFnMut() -> bool,
) -> Duration {
    let mut moved = Duration::ZERO;
    loop {
        if done().await {
            return moved;
        }
        assert!(moved < limit, "not done after {moved:?} of tokio time");
        tokio::time::advance(step).await;
        moved += step;
        real_pause().await;
    }
}

/// The piece of `text` that `piece` takes from what follows the first `marker` (its first line,
/// its first word); panics, naming both, where there is none.
pub fn piece_after<'a>(
    text: &'a str,
    marker: &str,
    piece: impl FnOnce(&'a str) -> Option<&'a str>,
) -> &'a str {
    text.split(marker)
        .nth(1)
        .and_then(piece)
        .unwrap_or_else(|| panic!("nothing after {marker:?} in: {text}"))
}

/// Polls `condition` in real time (tokio's clock may be frozen) until it holds.
pub async fn until(mut condition: impl AsyncFnMut() -> bool) {
    let deadline = RealDeadline::start();
    while !deadline.passed() {
        if condition().await {
            return;
        }
        real_pause().await;
    }
    panic!("condition not reached");
}

/// ManyChat's refusal: `status` with its error body (`{"status": "error", "message": ...}`).
pub fn manychat_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({"status": "error", "message": message}))
}

/// A model whose one answer is `text` after `delay` (a turn still thinking while the test moves
/// the clock).
pub fn slow_reply(text: &str, delay: Duration) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_steps([ScriptStep::ok(reply(
        reply_json(text),
    ))
    .after(delay)]))
}

/// The JSON bodies `server` (a fake ManyChat) received on `path`, in order.
pub async fn bodies_on(server: &MockServer, path: &str) -> Vec<Value> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .filter(|r| r.url.path() == path)
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .collect()
}

/// The metrics text holds `line` (a sample with its value, or a metric's name).
pub fn assert_metric(metrics: &str, line: &str) {
    assert!(metrics.contains(line), "{line} not in: {metrics}");
}

/// A fresh schema on `TEST_DATABASE_URL`'s PostgreSQL: its name and the URL whose
/// `search_path` is that schema.
pub async fn fresh_postgres_schema() -> (String, String) {
    let base = test_database_url();
    let schema = manychat_agent::store::postgres::create_test_schema(&base)
        .await
        .unwrap();
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options[search_path]={schema}");
    (schema, url)
}

/// The URL of the SQLite file `agent.db` in `dir` (created on first connect).
pub fn sqlite_file_url(dir: &Path) -> String {
    format!("sqlite://{}/agent.db", dir.display())
}

/// Another replica (a holder this app is not) holds the conversation's turn ticket in `schema`,
/// its lease running for `lease` (a PostgreSQL interval: `'2 seconds'`) from now.
pub async fn another_replica_holds_the_ticket(
    schema: &str,
    conversation: &Conversation,
    lease: &str,
) -> chrono::DateTime<chrono::Utc> {
    let admin = sqlx::PgPool::connect(&test_database_url()).await.unwrap();
    sqlx::query_scalar(&format!(
        "INSERT INTO {schema}.turn_tickets (conversation_id, holder, lease_until) \
         VALUES ($1, gen_random_uuid(), now() + $2::interval) RETURNING lease_until"
    ))
    .bind(conversation.id)
    .bind(lease)
    .fetch_one(&admin)
    .await
    .unwrap()
}

/// The URL of a fresh schema on `TEST_DATABASE_URL`'s PostgreSQL.
pub async fn fresh_postgres_url() -> String {
    fresh_postgres_schema().await.1
}

/// `TEST_DATABASE_URL`: the tests that need PostgreSQL are `#[ignore]`d and fail without it.
pub fn test_database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .expect("TEST_DATABASE_URL is not set: this test needs PostgreSQL")
}

/// Queues a reply row (`text`, no actions) for `subscriber`, created at `now` and due `after`
/// it: what a turn owes the contact through the outbox. Returns the row's id.
pub async fn queue_reply_at(
    app: &TestApp,
    subscriber: &str,
    text: &str,
    now: chrono::DateTime<chrono::Utc>,
    after: Duration,
) -> i64 {
    let payload = json!({"messages": [text], "actions": [], "turnId": null});
    let due = now + chrono::Duration::from_std(after).unwrap();
    queue_reply_payload(app, subscriber, payload, now, due).await
}

/// Queues a reply row with `payload` (`{messages, actions, turnId}`) for `subscriber`, created
/// at `now` and due at `due`. Returns the row's id.
pub async fn queue_reply_payload(
    app: &TestApp,
    subscriber: &str,
    payload: Value,
    now: chrono::DateTime<chrono::Utc>,
    due: chrono::DateTime<chrono::Utc>,
) -> i64 {
    let conversation = app.conversation(subscriber).await;
    let row = manychat_agent::store::NewOutboxRow::of(
        &conversation,
        manychat_agent::store::OutboxKind::Reply,
        payload,
        now,
    );
    app.store.enqueue(&row.due_at(due)).await.unwrap()
}

/// Queues a reply row with `payload` for `subscriber`, due now (by the app's clock). Returns
/// the row's id. The app's clock, not the wall: on a frozen tokio clock it reads the time the
/// app started, and a row due a second before the wall's now is not yet due to the app's worker
/// once the machine took longer than that to get here (0 rows claimed, not 1).
pub async fn queue_due_reply(app: &TestApp, subscriber: &str, payload: Value) -> i64 {
    let now = app.clock.now();
    let due = now - chrono::Duration::seconds(1);
    queue_reply_payload(app, subscriber, payload, now, due).await
}

/// Runs each `case(backend)` as a test on SQLite and on PostgreSQL (ignored without
/// `TEST_DATABASE_URL`), in modules `sqlite` and `postgres` of the calling file. The cases come
/// in groups separated by `;`, each led by its tests' attribute (default `#[tokio::test]`).
macro_rules! on_both_backends {
    ($(#[$test:meta] $($case:ident),+ $(,)?);+ $(;)?) => {
        mod sqlite {
            $($(
                #[$test]
                async fn $case() {
                    super::$case(super::Backend::Sqlite).await;
                }
            )+)+
        }
        mod postgres {
            $($(
                #[$test]
                #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
                async fn $case() {
                    super::$case(super::Backend::Postgres).await;
                }
            )+)+
        }
    };
    ($($case:ident),* $(,)?) => {
        on_both_backends!(#[tokio::test] $($case),*);
    };
}
pub(crate) use on_both_backends;

/// The value of an unlabelled series in `/metrics`.
pub async fn series(app: &TestApp, name: &str) -> f64 {
    let text = app.metrics_text().await;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("manychat_agent_{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics"))
}

/// The console owner's login every console test uses, API and browser alike.
pub mod console_login {
    use std::sync::OnceLock;

    use manychat_agent::console::auth::PasswordHashSetting;

    pub const PASSWORD: &str = "the owner's long password";

    /// `PASSWORD`'s hash, made once per test binary: Argon2id is slow by design.
    pub fn hash() -> &'static str {
        static HASH: OnceLock<String> = OnceLock::new();
        HASH.get_or_init(|| PasswordHashSetting::make(PASSWORD).as_str().to_owned())
    }
}

/// A finished learning run that compared 24 contacts who paid with 31 who did not, with one
/// pending proposal per text, each seen in 7 conversations that paid and 2 that did not and
/// citing `turns`: their ids, in `texts`' order.
pub async fn pending_proposals(store: &dyn Store, texts: &[&str], turns: &[i64]) -> Vec<i64> {
    use manychat_agent::store::learning::{NewProposal, ProposalStatus, RunEnd, RunStatus};
    let now = chrono::Utc::now();
    let week = format!("review-{}", uuid::Uuid::new_v4());
    let run = store
        .claim_learning_run(&week, true, now)
        .await
        .unwrap()
        .unwrap();
    let end = RunEnd {
        status: RunStatus::Completed,
        converted_count: 24,
        not_converted_count: 31,
        cost_usd: 0.2,
        reason: None,
        proposals: texts
            .iter()
            .map(|text| NewProposal {
                text: (*text).to_owned(),
                rationale: "Invented rationale: the paying side heard it first".to_owned(),
                converted_count: 7,
                not_converted_count: 2,
                turn_ids: turns.iter().map(i64::to_string).collect(),
            })
            .collect(),
        at: now,
    };
    store.finish_learning_run(run, &end).await.unwrap();
    let pending = store.proposals(ProposalStatus::Pending, 100).await.unwrap();
    texts
        .iter()
        .map(|t| pending.iter().find(|p| p.text == *t).unwrap().id)
        .collect()
}
