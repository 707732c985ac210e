//! A contact's message through the service's real HTTP route (`POST
//! /v1/channels/manychat/message`), answered by a real provider client talking to a fake that
//! refuses what the provider's API refuses. ManyChat is a wiremock fake that accepts everything.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::model::Model;
use crate::settings::Settings;
use crate::startup::{Application, Overrides};

const SECRET: &str = "conformance-secret-0123456789";

/// The reply the provider fakes return: grounded, confident, no price (no guardrail trips).
pub(crate) const ROUTE_REPLY_TEXT: &str = "Our pottery course starts on Monday.";

pub(crate) fn route_reply() -> String {
    json!({
        "messages": [ROUTE_REPLY_TEXT],
        "escalate": false,
        "escalation_reason": null,
        "confidence": 0.95,
        "closing_question": null
    })
    .to_string()
}

/// Starts the app with `model`, sends one contact message and returns the status and body.
pub(crate) async fn answer_through_the_route(model: Arc<dyn Model>) -> (u16, Value) {
    answer_text_through_the_route(model, "When does the pottery course start?", &[]).await
}

/// The demo tenant's escalation copy (`config/rules.json.example`): what a failed turn answers.
pub(crate) fn escalation_copy() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules.json.example");
    let rules: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("rules")).expect("json");
    rules["messages"]["escalation"]
        .as_str()
        .expect("the demo tenant sets an escalation copy")
        .to_owned()
}

/// A PNG the contact sends through the route: a fake ManyChat file host serving the media
/// fixture, its URL as the message text, and the variable that names the host.
pub(crate) async fn image_host() -> (MockServer, String) {
    let files = MockServer::start().await;
    let path = "/1234567/wa/2026/12/01/original_0a1b2c3d4e5f.png";
    Mock::given(method("GET"))
        .and(wiremock::matchers::path(path))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "image/png")
                .set_body_bytes(crate::model::test_support::IMAGE_BYTES.to_vec()),
        )
        .mount(&files)
        .await;
    let url = format!("{}{path}", files.uri());
    (files, url)
}

/// As [`answer_through_the_route`], with the contact's `text` and `extra` variables.
pub(crate) async fn answer_text_through_the_route(
    model: Arc<dyn Model>,
    text: &str,
    extra: &[(&str, String)],
) -> (u16, Value) {
    let manychat = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "success"})))
        .mount(&manychat)
        .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config_dir = dir.path().join("config");
    crate::config::examples::copy_demo_into(&config_dir);
    let vars: Vec<(&str, String)> = vec![
        ("MANYCHAT_SHARED_SECRET", SECRET.into()),
        ("PUBLIC_BASE_URL", "https://agent.example.test".into()),
        ("MANYCHAT_API_TOKEN", "123:test-token".into()),
        ("MANYCHAT_API_BASE", manychat.uri()),
        ("MANYCHAT_REPLY_FLOW_NS", "content_reply_flow_0001".into()),
        ("AGENT_MODEL", model.id().to_owned()),
        ("CONFIG_DIR", config_dir.display().to_string()),
        (
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("agent.db").display()),
        ),
        ("CONTACT_TOKENS_ENFORCED", "false".into()),
    ];
    let vars: Vec<(&str, String)> = extra.iter().cloned().chain(vars).collect();
    let settings = Settings::from_vars(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    })
    .expect("settings");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let overrides = Overrides {
        model: Some(model),
        manual_worker: true,
        ..Overrides::default()
    };
    let app = Application::build(settings, listener, overrides)
        .await
        .expect("app builds");
    let url = format!(
        "http://127.0.0.1:{}/v1/channels/manychat/message",
        app.port()
    );
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let server = tokio::spawn(async move { app.run(token).await });
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(SECRET)
        .json(&json!({"subscriber_id": "1000001", "text": text}))
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    shutdown.cancel();
    let _ = server.await;
    (status, body)
}

/// The texts of the Dynamic Block answer.
/// The route answered 200 with [`ROUTE_REPLY_TEXT`], the model's reply, as its one block.
pub(crate) fn assert_the_route_reply(status: u16, body: &Value) {
    assert_eq!(status, 200);
    assert_eq!(block_texts(body), vec![ROUTE_REPLY_TEXT]);
}

pub(crate) fn block_texts(body: &Value) -> Vec<String> {
    body["content"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}
