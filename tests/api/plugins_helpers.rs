//! What the plugin suites (`plugins_*.rs`, `plugin_outbox.rs`, and the CLI's) share: the business's
//! own tools (`config/plugins.json`: the read `seats_left`, the write `create_lead`) and their
//! secret, a fake endpoint, the app with them on either backend, the endpoint's requests with their
//! Standard Webhooks signature verified from the secret, and the model's calls of the tools.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::ToolCall;
use manychat_agent::model::mock::{ScriptedModel, call};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;
use crate::selling::*;

pub const PLUGIN_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

pub const SECRET_ENV: &str = "PLUGIN_STUDIO_SECRET";

pub const SEATS: &str = "/agent/seats-left";

pub const LEAD: &str = "/hooks/lead";

/// `plugins.json` with a read (`seats_left`) and a write (`create_lead`) at `base`.
pub fn plugins_json(base: &str) -> Value {
    json!({
        "tools": [
            {
                "name": "seats_left",
                "kind": "read",
                "url": format!("{base}{SEATS}"),
                "secretEnv": SECRET_ENV,
                "description": "How many seats are left in a class. Use when the contact asks if there is room.",
                "parameters": {"class": {"type": "enum", "values": ["wheel_basics", "handbuilding"]}},
                "result": {
                    "seats": {"type": "number", "integer": true, "min": 0},
                    "next_date": {"type": "text", "maxLength": 40, "optional": true}
                }
            },
            {
                "name": "create_lead",
                "kind": "write",
                "url": format!("{base}{LEAD}"),
                "secretEnv": SECRET_ENV,
                "description": "Record the contact as a lead once they said which class they want.",
                "parameters": {
                    "class": {"type": "enum", "values": ["wheel_basics", "handbuilding"]},
                    "summary": {"type": "note", "maxLength": 300}
                }
            }
        ]
    })
}

pub fn write_plugins(dir: &Path, plugins: &Value) {
    std::fs::write(dir.join("plugins.json"), plugins.to_string()).unwrap();
}

/// The tenant's endpoint: `seats_left` answers `seats`, `create_lead` answers 204.
pub async fn endpoint(seats: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SEATS))
        .respond_with(ResponseTemplate::new(200).set_body_json(seats))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(LEAD))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    server
}

/// The options of an app whose tenant has the endpoint's plugins (and its sales section only
/// with `sales`), their secret in the environment.
pub fn plugin_options(model: Arc<ScriptedModel>, server: &MockServer, sales: bool) -> AppOptions {
    let plugins = plugins_json(&server.uri());
    AppOptions::new(model)
        .edit(move |dir| {
            if !sales {
                without_sales(dir);
            }
            write_plugins(dir, &plugins);
        })
        .env(SECRET_ENV, PLUGIN_SECRET)
}

/// `app_with_plugins` (SQLite, no sales section) that reloads its config on SIGHUP.
pub async fn reloading_app_with_plugins(model: Arc<ScriptedModel>, server: &MockServer) -> TestApp {
    let mut options = plugin_options(model, server, false);
    options.reload_on_sighup = true;
    spawn_app_with(options).await
}

/// The demo tenant (sales markers off unless `sales`) with the plugins at `server`, on `backend`.
pub async fn app_with_plugins(
    backend: Backend,
    model: Arc<ScriptedModel>,
    server: &MockServer,
    sales: bool,
) -> TestApp {
    let mut options = plugin_options(model, server, sales);
    if let Backend::Postgres = backend {
        options = options.env("DATABASE_URL", fresh_postgres_url().await);
    }
    spawn_app_with(options).await
}

/// Every request the endpoint received at `at`, each signature verified from the secret.
pub async fn signed_requests(server: &MockServer, at: &str) -> Vec<Value> {
    let webhook = standardwebhooks::Webhook::new(PLUGIN_SECRET).unwrap();
    let mut bodies = Vec::new();
    for request in server.received_requests().await.unwrap_or_default() {
        if request.url.path() != at {
            continue;
        }
        webhook
            .verify(&request.body, &request.headers)
            .expect("the call is signed with the tool's secret");
        let agent = request.headers.get("user-agent").unwrap().to_str().unwrap();
        assert!(agent.starts_with("manychat-agent/"), "{agent}");
        assert_eq!(
            request.headers.get("content-type").unwrap(),
            "application/json"
        );
        bodies.push(serde_json::from_slice(&request.body).unwrap());
    }
    bodies
}

pub fn seats(class: &str, n: usize) -> ToolCall {
    call(format!("seats_{n}"), "seats_left", json!({"class": class}))
}

pub fn lead(class: &str, summary: &str) -> ToolCall {
    call(
        format!("lead_{class}"),
        "create_lead",
        json!({"class": class, "summary": summary}),
    )
}

pub fn get_contact(n: usize) -> ToolCall {
    call(format!("read_{n}"), "get_contact", json!({}))
}

/// Waits (bounded) for the turn's tasks to end.
pub async fn settled(app: &TestApp) {
    app.settle().await;
}

/// On a paused clock: moves it 100 ms at a time until `condition` holds (at most 100 s).
pub async fn advancing_until(condition: impl AsyncFnMut() -> bool) {
    advance_by_steps_until(
        Duration::from_millis(100),
        Duration::from_secs(100),
        condition,
    )
    .await;
}

/// A row of the outbox carries staged actions.
pub async fn actions_queued(app: &TestApp) -> bool {
    app.outbox().await.iter().any(|r| {
        r.payload["actions"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
}
