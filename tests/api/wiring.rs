//! ManyChat wiring that holds in production. The callback survives either variable
//! dialect and an unsubstituted variable is a reported wiring problem (item 1); `manychat check`
//! reads the account and names every missing or mistyped flow, tag and field (item 2); one
//! ManyChat budget across replicas and sendFlow's per-contact limit (item 3); ManyChat's error
//! code kept in the record (item 5).

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use manychat_agent::clock::Clock;
use manychat_agent::ids::SubscriberId;
use manychat_agent::manychat::ManyChatError;
use manychat_agent::model::mock::{ScriptedModel, call, reply, tool_calls};
use manychat_agent::model::{ModelResponse, ToolCall};
use manychat_agent::store::{NewOutboxRow, OutboxKind, OutboxStatus};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::helpers::*;

const FLOW: &str = "/fb/sending/sendFlow";

fn instant_reply(text: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies([reply_json(text)]))
}

fn steps(steps: Vec<ModelResponse>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(steps.into_iter().map(Ok).collect()))
}

fn send_flow(id: &str) -> ToolCall {
    call(
        format!("flow_{id}"),
        "send_flow",
        json!({"flow": id, "contactAsked": true}),
    )
}

async fn get_text(app: &TestApp, route: &str) -> (u16, String) {
    let response = app.get(route).await;
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn ready(app: &TestApp) -> (u16, Value) {
    let (status, body) = get_text(app, "/ready").await;
    (status, serde_json::from_str(&body).unwrap())
}

async fn metric(app: &TestApp, line_start: &str) -> Option<String> {
    let (_, body) = get_text(app, "/metrics").await;
    body.lines()
        .find(|line| line.starts_with(line_start))
        .map(str::to_owned)
}

/// The count of requests whose `field` held a literal ManyChat variable (0 from the start).
async fn not_substituted(app: &TestApp, field: &str) -> String {
    let series = format!("manychat_agent_variables_not_substituted_total{{field=\"{field}\"}} ");
    let line = metric(app, &series).await.expect("the series is served");
    line[series.len()..].to_owned()
}

// ---- item 1: the callback survives either dialect ----

#[tokio::test]
async fn callback_payload_carries_the_contact_under_user_id_and_contact_id() {
    let app = spawn_app(instant_reply("Hello.")).await;
    let (status, body) = app.send("5552101", "Hi").await;
    assert_eq!(status, 200);
    let payload = &body["content"]["external_message_callback"]["payload"];
    assert_eq!(payload["user_id"], json!("{{user_id}}"));
    assert_eq!(payload["subscriber_id"], json!("{{contact.id}}"));
    assert_eq!(payload["text"], json!("{{last_input_text}}"));
}

#[tokio::test]
async fn a_callback_in_the_documented_dialect_reaches_the_contact() {
    let app = spawn_app(instant_reply("Our courses start monthly.")).await;
    // ManyChat substituted only the documented {{user_id}}; {{contact.id}} came back as is.
    let response = app
        .post_json(&json!({
            "subscriber_id": "{{contact.id}}", "user_id": "5552102",
            "text": "When do you start?", "ai_token": ""
        }))
        .await;
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(block_texts(&body), vec!["Our courses start monthly."]);
    let turns = app.turns("5552102").await;
    assert_eq!(
        turns.len(),
        2,
        "the message and the reply, for the user_id contact"
    );
    assert_eq!(
        not_substituted(&app, "user_id").await,
        "0",
        "a valid user_id is not a wiring problem"
    );
}

#[tokio::test]
async fn an_unsubstituted_contact_id_is_answered_counted_and_flagged() {
    let logs = manychat_agent::observability::capture_global();
    let app = spawn_app(instant_reply("Never used.")).await;
    let response = app
        .post_json(&json!({
            "subscriber_id": "{{contact.id}}", "user_id": "{{user_id}}", "text": "Hello?"
        }))
        .await;
    assert_eq!(
        response.status().as_u16(),
        200,
        "never a 400 for the contact"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    assert!(
        body["content"]["external_message_callback"].is_object(),
        "the callback stays registered"
    );
    assert_eq!(not_substituted(&app, "subscriber_id").await, "1");
    assert_eq!(
        metric(&app, "manychat_agent_bad_requests_total")
            .await
            .as_deref(),
        Some("manychat_agent_bad_requests_total 0"),
        "a wiring problem is not a bad request"
    );
    let (status, ready) = ready(&app).await;
    assert_eq!(
        status, 200,
        "ready stays 200: the problem is ManyChat's setup"
    );
    assert_eq!(ready["status"], json!("ready"));
    let problem = &ready["details"]["wiring"][0];
    assert_eq!(problem["field"], json!("subscriber_id"));
    assert_eq!(problem["problem"], json!("variable_not_substituted"));
    assert_eq!(problem["requests"], json!(1));
    assert!(
        problem["fix"].as_str().unwrap().contains("{{user_id}}"),
        "{problem}"
    );
    assert!(app.outbox().await.is_empty());
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("ManyChat did not substitute the contact id"))
        .expect("the wiring problem is logged");
    assert!(line.contains("\"level\":\"ERROR\""), "{line}");
    assert!(
        line.contains("subscriber_id") && line.contains("{{user_id}}"),
        "{line}"
    );
    assert!(!line.contains("Hello?"), "no message text: {line}");
}

#[tokio::test]
async fn ready_has_no_details_while_the_wiring_holds() {
    let app = spawn_app(instant_reply("Hello.")).await;
    app.send("5552103", "Hi").await;
    let (status, ready) = ready(&app).await;
    assert_eq!(
        (status, ready),
        (
            200,
            json!({"status": "ready", "version": env!("CARGO_PKG_VERSION")})
        )
    );
}

#[tokio::test]
async fn ready_names_the_replica_that_saw_a_wiring_problem_and_clears_it_at_a_correctly_wired_request()
 {
    let app = spawn_app(instant_reply("Hello.")).await;
    app.post_json(&json!({"subscriber_id": "{{contact.id}}", "text": "Hello?"}))
        .await;
    let (_, seen) = ready(&app).await;
    assert_eq!(
        seen["details"]["wiring"][0]["field"],
        json!("subscriber_id")
    );
    let replica = seen["details"]["replica"].as_str().unwrap_or_default();
    assert!(
        replica.contains(&format!("(pid {})", std::process::id())),
        "{seen}"
    );

    let (status, _) = app.send("5552109", "Hi").await;
    assert_eq!(status, 200);
    let (_, fixed) = ready(&app).await;
    assert_eq!(
        fixed,
        json!({"status": "ready", "version": env!("CARGO_PKG_VERSION")}),
        "a correctly wired request clears the problem"
    );
    assert_eq!(
        not_substituted(&app, "subscriber_id").await,
        "1",
        "the counter keeps its history"
    );
}

#[tokio::test]
async fn an_unsubstituted_token_is_a_wiring_problem_not_a_wrong_token() {
    let model = Arc::new(ScriptedModel::replies([
        reply_json("First answer."),
        reply_json("Second answer."),
        reply_json("Third answer."),
    ]));
    let logs = manychat_agent::observability::capture_global();
    let app = spawn_app(model).await;
    // A new contact's empty token field is expected: not a problem.
    let response = app
        .post_json(&json!({"subscriber_id": "5552104", "text": "Hi", "ai_token": "{{ai_token}}"}))
        .await;
    assert_eq!(response.status().as_u16(), 200);
    app.settle().await;
    assert!(
        app.conversation("5552104").await.token_hash.is_some(),
        "the contact was issued a token"
    );
    assert_eq!(not_substituted(&app, "ai_token").await, "0");

    // The contact holds a token now: a literal variable means ManyChat does not substitute it.
    let response = app
        .post_json(
            &json!({"subscriber_id": "5552104", "text": "Again", "ai_token": "{{ai_token}}"}),
        )
        .await;
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(block_texts(&body), vec!["Second answer."]);
    app.settle().await;
    assert_eq!(not_substituted(&app, "ai_token").await, "1");
    let (_, ready) = ready(&app).await;
    assert_eq!(ready["details"]["wiring"][0]["field"], json!("ai_token"));
    assert!(
        ready["details"]["wiring"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("\"ai_token\""),
        "{ready}"
    );
    // Read as a missing token (rollout: history still read), never as a wrong one.
    let turns = app.turns("5552104").await;
    assert!(
        turns[2].bound,
        "a missing token reads history while not enforced"
    );
    let conversation = app.conversation("5552104").await.id.to_string();
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("ManyChat did not substitute the token") && l.contains(&conversation))
        .expect("the wiring problem is logged with the conversation");
    assert!(line.contains("\"level\":\"ERROR\""), "{line}");
    assert!(!line.contains("5552104"), "no contact id: {line}");
}

// ---- item 2: `manychat check` ----

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
}

/// The demo tenant's names, as a ManyChat account would list them.
fn demo_account_mocks() -> (Value, Value, Value) {
    let flows = json!({"status": "success", "data": {"flows": [
        {"ns": REPLY_FLOW, "name": "Reply", "folder_id": 0},
        {"ns": "content20250301000000_200001", "name": "Wheel guide", "folder_id": 0},
        {"ns": "content20250301000000_200002", "name": "Handbuilding guide", "folder_id": 0},
        {"ns": "content20250301000000_200003", "name": "Glaze guide", "folder_id": 0},
        {"ns": "content20250301000000_200004", "name": "Booking", "folder_id": 0}
    ], "folders": []}});
    let tags = json!({"status": "success", "data": [
        {"id": 1, "name": "interested-wheel-course"},
        {"id": 2, "name": "buying-as-gift"},
        {"id": 3, "name": "source-market-stall"},
        {"id": 4, "name": "needs-studio-reply"}
    ]});
    let fields: Vec<Value> = [
        "ai_message",
        "ai_token",
        "studio_intent",
        "studio_funnel_stage",
        "studio_course",
        "clay_experience",
    ]
    .iter()
    .enumerate()
    .map(|(i, name)| json!({"id": i + 1, "name": name, "type": "text", "description": ""}))
    .collect();
    (flows, tags, json!({"status": "success", "data": fields}))
}

async fn mount_account(server: &MockServer, flows: Value, tags: Value, fields: Value) {
    for (route, body) in [
        ("/fb/page/getFlows", flows),
        ("/fb/page/getTags", tags),
        ("/fb/page/getCustomFields", fields),
    ] {
        Mock::given(method("GET"))
            .and(path(route))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .mount(server)
            .await;
    }
}

/// The demo tenant's config (notes' fields included) with the names the fake account lacks.
fn tenant_with_notes() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    let tools: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("tools.json")).unwrap())
            .unwrap();
    let notes = tools["notes"]
        .as_array()
        .map(|notes| {
            notes
                .iter()
                .map(|n| n["field"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    (dir, notes)
}

/// A fake account holding every name the demo tenant (notes' fields included) relies on, and
/// that tenant's folder.
async fn complete_account() -> (MockServer, tempfile::TempDir) {
    let server = MockServer::start().await;
    let (flows, tags, mut fields) = demo_account_mocks();
    let (dir, notes) = tenant_with_notes();
    for (i, note) in notes.iter().enumerate() {
        fields["data"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": 100 + i, "name": note, "type": "text", "description": ""}));
    }
    mount_account(&server, flows, tags, fields).await;
    (server, dir)
}

async fn run_check(server_uri: String, config: &std::path::Path) -> std::process::Output {
    run_check_with_token(server_uri, config, "123:test-token").await
}

async fn run_check_with_token(
    server_uri: String,
    config: &std::path::Path,
    token: &'static str,
) -> std::process::Output {
    run_check_with_env(server_uri, config, token, &[]).await
}

async fn run_check_with_env(
    server_uri: String,
    config: &std::path::Path,
    token: &'static str,
    extra: &[(&'static str, &'static str)],
) -> std::process::Output {
    let config = config.to_owned();
    let extra = extra.to_vec();
    tokio::task::spawn_blocking(move || {
        binary()
            .args(["manychat", "check"])
            .env_clear()
            .env("CONFIG_DIR", config)
            .env("MANYCHAT_API_TOKEN", token)
            .env("MANYCHAT_API_BASE", server_uri)
            .env("MANYCHAT_REPLY_FLOW_NS", REPLY_FLOW)
            .envs(extra)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manychat_check_passes_when_the_account_has_every_name_and_only_reads() {
    let (server, dir) = complete_account().await;
    let output = run_check(server.uri(), dir.path()).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout.contains("ManyChat account matches"), "{stdout}");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    assert!(
        requests.iter().all(|r| r.method.as_str() == "GET"),
        "read-only"
    );
    assert!(
        requests
            .iter()
            .all(|r| r.headers.get("authorization").unwrap() == "Bearer 123:test-token")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manychat_check_against_the_demo_sandbox_says_the_sandbox_mirrors_the_config() {
    let (server, dir) = complete_account().await;
    let real = run_check(server.uri(), dir.path()).await;
    assert!(
        !String::from_utf8_lossy(&real.stdout).contains("sandbox"),
        "{real:?}"
    );
    let output = run_check_with_token(server.uri(), dir.path(), "sandbox:demo").await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("it mirrors that config")
            && stdout.contains("against your real ManyChat account"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "tenant config: {} (prompt.md, catalog.json, rules.json, tools.json, knowledge/: 1 \
             document)",
            dir.path().display()
        )),
        "the config used is named: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manychat_check_prints_one_line_per_problem_and_fails() {
    let server = MockServer::start().await;
    let (mut flows, mut tags, mut fields) = demo_account_mocks();
    // No reply flow, no handoff tag, the reply field a Number field, no notes' fields.
    flows["data"]["flows"].as_array_mut().unwrap().remove(0);
    tags["data"].as_array_mut().unwrap().pop();
    fields["data"][0]["type"] = json!("number");
    mount_account(&server, flows, tags, fields).await;
    let (dir, notes) = tenant_with_notes();
    let output = run_check(server.uri(), dir.path()).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3 + notes.len(), "{stdout}");
    assert!(
        lines.contains(&format!(
            "MANYCHAT_REPLY_FLOW_NS: flow \"{REPLY_FLOW}\" is not in the ManyChat account (a flow is named by its namespace, content…)"
        ).as_str()),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "rules.json: $.handoff.tag: tag \"needs-studio-reply\" is not in the ManyChat account"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "MANYCHAT_REPLY_FIELD: custom field \"ai_message\" is a number field; it must be a Text field"
        ),
        "{stdout}"
    );
    for note in &notes {
        assert!(stdout.contains(&format!("\"{note}\" is not in the ManyChat account")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manychat_check_reports_manychat_refusing_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"status": "error", "message": "Wrong format token", "details": {"messages": []}}),
        ))
        .mount(&server)
        .await;
    let (dir, _) = tenant_with_notes();
    let output = run_check(server.uri(), dir.path()).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "cannot read the ManyChat account: ManyChat refused getFlows (HTTP 401): the API token was refused (MANYCHAT_API_TOKEN)"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manychat_check_passes_against_the_demo_sandbox() {
    let (dir, _) = tenant_with_notes();
    let env: HashMap<String, String> = [
        ("CONFIG_DIR".to_owned(), dir.path().display().to_string()),
        ("MANYCHAT_REPLY_FLOW_NS".to_owned(), REPLY_FLOW.to_owned()),
    ]
    .into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let sandbox = manychat_agent::manychat::sandbox::spawn_with_account(
        listener,
        shutdown.clone(),
        manychat_agent::cli::demo_sandbox_account(&env),
    )
    .await
    .unwrap();
    let output = run_check(sandbox.base_url.clone(), dir.path()).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    shutdown.cancel();
}

/// With the delivery handshake on, `manychat check` wants its two fields in the account as Text
/// fields, each named by its variable; without it, neither is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manychat_check_wants_the_delivery_handshakes_two_text_fields_when_it_is_on() {
    let (server, dir) = complete_account().await;
    let handshake = [("MANYCHAT_DELIVERED_FIELD", "ai_delivered")];
    let off = run_check(server.uri(), dir.path()).await;
    assert_eq!(off.status.code(), Some(0), "{off:?}");
    let on = run_check_with_env(server.uri(), dir.path(), "123:test-token", &handshake).await;
    assert_eq!(on.status.code(), Some(1), "{on:?}");
    let stdout = String::from_utf8_lossy(&on.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        vec![
            "MANYCHAT_DELIVERED_FIELD: custom field \"ai_delivered\" is not in the ManyChat account (create it as a Text field)",
            "MANYCHAT_DELIVERY_ID_FIELD: custom field \"ai_delivery_id\" is not in the ManyChat account (create it as a Text field)",
        ],
        "{stdout}"
    );

    // The account gains both, the delivered field as a Number field.
    let server = MockServer::start().await;
    let (flows, tags, mut fields) = demo_account_mocks();
    let (dir, notes) = tenant_with_notes();
    let listed = fields["data"].as_array_mut().unwrap();
    for (i, (name, kind)) in notes
        .iter()
        .map(|n| (n.as_str(), "text"))
        .chain([("ai_delivered", "number"), ("ai_delivery_id", "text")])
        .enumerate()
    {
        listed.push(json!({"id": 100 + i, "name": name, "type": kind, "description": ""}));
    }
    mount_account(&server, flows, tags, fields).await;
    let output = run_check_with_env(server.uri(), dir.path(), "123:test-token", &handshake).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.trim(),
        "MANYCHAT_DELIVERED_FIELD: custom field \"ai_delivered\" is a number field; it must be a Text field"
    );
}

/// `config check --env` says whether the delivery handshake is on, and what a trigger that got
/// no answer does either way; a handshake field that is the reply field is refused, named.
#[test]
fn config_check_env_says_whether_the_delivery_handshake_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    let check = |extra: &[(&str, &str)]| {
        binary()
            .args(["config", "check", "--env"])
            .env_clear()
            .env("CONFIG_DIR", &config)
            .env(
                "DATABASE_URL",
                format!("sqlite://{}", dir.path().join("agent.db").display()),
            )
            .env("AGENT_MODEL", "mock:demo")
            .env("MANYCHAT_SHARED_SECRET", SECRET)
            .env("PUBLIC_BASE_URL", "https://agent.example.test")
            .env("MANYCHAT_API_TOKEN", "123:test-token")
            .env("MANYCHAT_REPLY_FLOW_NS", REPLY_FLOW)
            .envs(extra.iter().copied())
            .output()
            .unwrap()
    };
    let off = check(&[]);
    assert_eq!(off.status.code(), Some(0), "{off:?}");
    assert!(
        String::from_utf8_lossy(&off.stdout).contains(
            "deferred replies: no delivery handshake (MANYCHAT_DELIVERED_FIELD unset): a trigger \
             that got no answer is sent again once, so a message may reach the contact twice"
        ),
        "{off:?}"
    );
    let on = check(&[("MANYCHAT_DELIVERED_FIELD", "ai_delivered")]);
    assert_eq!(on.status.code(), Some(0), "{on:?}");
    assert!(
        String::from_utf8_lossy(&on.stdout).contains(
            "deferred replies: delivery handshake on (MANYCHAT_DELIVERED_FIELD ai_delivered, \
             MANYCHAT_DELIVERY_ID_FIELD ai_delivery_id)"
        ),
        "{on:?}"
    );
    let clash = check(&[("MANYCHAT_DELIVERED_FIELD", "ai_message")]);
    assert_eq!(clash.status.code(), Some(1), "{clash:?}");
    assert!(
        String::from_utf8_lossy(&clash.stderr).contains(
            "MANYCHAT_DELIVERED_FIELD: must name a field other than MANYCHAT_REPLY_FIELD's"
        ),
        "{clash:?}"
    );
}

// ---- item 3: one budget across replicas; sendFlow's per-contact limit ----

/// Records when each request reached the fake ManyChat.
#[derive(Clone, Default)]
pub(crate) struct Arrivals(pub(crate) Arc<Mutex<Vec<Instant>>>);

impl Respond for Arrivals {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.0.lock().unwrap().push(Instant::now());
        ResponseTemplate::new(200).set_body_json(json!({"status": "success"}))
    }
}

/// Real time, not tokio's paused clock: the shared bucket is timed by the database's clock,
/// which tokio cannot pause. Two app instances on one Postgres schema, each with its own fake
/// ManyChat, deliver 16 deferred replies (a field write and a sendFlow each: 32 requests) with
/// their own outbox workers at once; ManyChat's arrivals, merged, never exceed 10 in any sliding
/// second (the shared bucket has no burst). The bound allows 50 ms of delivery jitter (a loaded
/// machine delays a request between its slot and its arrival); the run takes ~3.1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn two_app_instances_on_one_postgres_never_exceed_ten_per_second() {
    const REPLIES: usize = 16;
    let url = fresh_postgres_url().await;
    let one =
        spawn_app_with(AppOptions::new(instant_reply("x")).env("DATABASE_URL", url.clone())).await;
    let two = spawn_app_with(AppOptions::new(instant_reply("x")).env("DATABASE_URL", url)).await;

    // Both fakes record into one list: what ManyChat's account receives.
    let arrivals = Arrivals::default();
    let per_instance: Vec<Arrivals> = vec![Arrivals::default(), Arrivals::default()];
    for (app, own) in [&one, &two].into_iter().zip(&per_instance) {
        Mock::given(method("POST"))
            .respond_with(Both(arrivals.clone(), own.clone()))
            .with_priority(1)
            .mount(&app.manychat)
            .await;
    }
    let now = Clock::system().now();
    for n in 0..REPLIES {
        let conversation = one.conversation(&format!("55530{n:02}")).await;
        one.store
            .enqueue(&NewOutboxRow::of(
                &conversation,
                OutboxKind::Reply,
                json!({"messages": [format!("Reply {n}.")], "actions": [], "turnId": null}),
                now,
            ))
            .await
            .unwrap();
    }
    let started = Instant::now();
    while one
        .store
        .outbox_rows()
        .await
        .unwrap()
        .iter()
        .any(|r| r.status != OutboxStatus::Delivered)
    {
        let (a, b) = bounded("two racing passes", async {
            tokio::join!(one.worker.run_once(), two.worker.run_once())
        })
        .await;
        a.unwrap();
        b.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "delivery stalled"
        );
    }

    for own in &per_instance {
        assert!(
            !own.0.lock().unwrap().is_empty(),
            "both instances delivered part of the replies"
        );
    }
    let mut times = arrivals.0.lock().unwrap().clone();
    times.sort();
    assert_eq!(times.len(), 2 * REPLIES);
    assert_at_most_ten_in_any_sliding_second(&times);
    let total = times[times.len() - 1] - times[0];
    assert!(
        total >= Duration::from_millis(3_000),
        "32 requests one per 100 ms take 3.1 s, took {total:?}"
    );
}

/// Records into two lists: every instance's, and this instance's.
struct Both(Arrivals, Arrivals);

impl Respond for Both {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.1.respond(request);
        self.0.respond(request)
    }
}

/// Never more than 10 arrivals in any sliding second: any 11 consecutive ones span a second
/// (less 50 ms for the way from a slot to its arrival).
fn assert_at_most_ten_in_any_sliding_second(times: &[Instant]) {
    for (i, window) in times.windows(11).enumerate() {
        assert!(
            window[10] - window[0] >= Duration::from_millis(950),
            "arrivals {i} to {} within {:?}: above 10 in a second combined",
            i + 10,
            window[10] - window[0]
        );
    }
}

#[tokio::test]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn the_shared_bucket_takes_a_burst_of_five_then_names_the_wait() {
    let store = manychat_agent::store::postgres::connect_isolated(&test_database_url())
        .await
        .unwrap();
    use manychat_agent::store::CounterStore;
    assert!(store.shares_manychat_budget());
    // The bucket is timed by the database's clock, which this test cannot stop: an interval far
    // longer than the five calls can take keeps a slot from refilling mid-burst on a loaded
    // machine (at 100 ms the sixth call sometimes found a fresh slot).
    let interval = Duration::from_secs(60);
    for n in 0..5 {
        assert_eq!(
            store.take_manychat_slot(interval, 5).await.unwrap(),
            None,
            "slot {n} of the burst"
        );
    }
    let wait = store
        .take_manychat_slot(interval, 5)
        .await
        .unwrap()
        .expect("the sixth waits");
    assert!(wait > Duration::ZERO && wait <= interval, "{wait:?}");
}

/// The app on a tenant without the sales funnel (a flow is tried at once: no intent gate), its
/// model sending the wheel course's guide flow, then replying.
async fn app_sending_the_wheel_guide() -> TestApp {
    let model = steps(vec![
        tool_calls([send_flow("wheel_basics_guide")]),
        reply(reply_json("Here is the guide.")),
    ]);
    spawn_app_with(AppOptions::new(model).edit(crate::selling::without_sales)).await
}

#[tokio::test]
async fn send_flow_past_100_an_hour_for_a_contact_is_refused_and_recorded() {
    let app = app_sending_the_wheel_guide().await;
    let contact = SubscriberId::parse("5552301").unwrap();
    let now = Clock::system().now();
    for _ in 0..100 {
        assert!(app.store.count_flow_send(&contact, now, 100).await.unwrap());
    }

    app.send("5552301", "Can I see the wheel course?").await;
    app.settle().await;
    assert!(
        !app.manychat_requests().await.iter().any(|r| r.path == FLOW),
        "the 101st sendFlow of the hour never reaches ManyChat"
    );
    let turns = app.turns("5552301").await;
    let actions = turns[1].actions.clone().unwrap();
    assert_eq!(actions[0]["status"], json!("failed"));
    assert_eq!(
        actions[0]["error"],
        json!(ManyChatError::FlowCapReached.to_string())
    );
    assert!(
        actions[0]["error"]
            .as_str()
            .unwrap()
            .contains("100 flows in the past hour"),
        "{actions}"
    );
}

// ---- item 5: ManyChat's error code ----

#[tokio::test]
async fn manychat_error_code_is_kept_in_the_action_record() {
    let app = app_sending_the_wheel_guide().await;
    Mock::given(method("POST"))
        .and(path(FLOW))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "status": "error", "message": "Flow is not published", "code": 3011,
            "details": {"messages": [{"message": "Flow is not published"}]}
        })))
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    app.send("5552501", "Can I see the wheel course?").await;
    app.settle().await;
    let turns = app.turns("5552501").await;
    let actions = turns[1].actions.clone().unwrap();
    assert_eq!(
        actions[0]["error"],
        json!("ManyChat refused sendFlow (HTTP 400, code 3011)")
    );
}

#[tokio::test]
async fn manychat_error_code_is_kept_in_the_outbox_last_error() {
    let app = spawn_app(instant_reply("unused")).await;
    Mock::given(method("POST"))
        .and(path(FLOW))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "status": "error", "message": "Subscriber is outside the messaging window", "code": 2011
        })))
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    let id = queue_reply_at(
        &app,
        "5552502",
        "A reply owed.",
        Clock::system().now(),
        Duration::ZERO,
    )
    .await;
    app.worker.run_once().await.unwrap();
    let row = app.store.outbox_row(id).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Failed, "a refusal is final");
    assert_eq!(
        row.last_error.as_deref(),
        Some("ManyChat reported an error for sendFlow (HTTP 200, code 2011)")
    );
}
