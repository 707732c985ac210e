//! The surfaces beside the message route are closed unless the operator opened them: the release
//! route takes its own token (`RELEASE_TOKEN`, never the shared secret pasted into every Dynamic
//! Block), `/metrics` needs `METRICS_TOKEN` unless the listener is on the loopback or
//! `METRICS_OPEN` is set, and `/ready` tells an unauthenticated caller ready or not in fixed
//! words, with no version, host or pid.

use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use serde_json::{Value, json};

use crate::helpers::*;

fn instant_reply(text: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies([reply_json(text)]))
}

const METRICS_TOKEN: &str = "metrics-token-0123456789";

async fn post_release(app: &TestApp, bearer: &str) -> u16 {
    app.http
        .post(format!("{}/v1/channels/manychat/release", app.address))
        .header("content-type", "application/json")
        .bearer_auth(bearer)
        .body(r#"{"subscriber_id": "3200001"}"#)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn get_with(app: &TestApp, route: &str, bearer: Option<&str>) -> (u16, String) {
    let mut request = app.http.get(format!("{}{route}", app.address));
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn the_release_route_takes_its_own_token_never_the_shared_secret() {
    let app = spawn_app(instant_reply("Hello.")).await;
    assert_eq!(post_release(&app, SECRET).await, 401, "the shared secret");
    assert_eq!(post_release(&app, SECOND_SECRET).await, 401);
    assert_eq!(post_release(&app, RELEASE_TOKEN).await, 200);
    app.stop().await;
}

#[tokio::test]
async fn without_release_token_the_release_route_is_off() {
    let app =
        spawn_app_with(AppOptions::new(instant_reply("Hello.")).env("RELEASE_TOKEN", "")).await;
    assert_eq!(post_release(&app, SECRET).await, 404);
    assert_eq!(post_release(&app, RELEASE_TOKEN).await, 404);
    app.stop().await;
}

#[tokio::test]
async fn metrics_on_every_address_need_a_token_unless_opened() {
    let app = spawn_app_with(AppOptions::new(instant_reply("Hello.")).on_all_addresses()).await;
    let (status, body) = get_with(&app, "/metrics", None).await;
    assert_eq!(status, 401, "closed without METRICS_TOKEN: {body}");
    assert!(!body.contains("manychat_agent_"), "{body}");
    assert_eq!(get_with(&app, "/metrics", Some(SECRET)).await.0, 401);
    app.stop().await;

    let opened = spawn_app_with(
        AppOptions::new(instant_reply("Hello."))
            .on_all_addresses()
            .env("METRICS_OPEN", "true"),
    )
    .await;
    assert_eq!(get_with(&opened, "/metrics", None).await.0, 200);
    opened.stop().await;

    let token = spawn_app_with(
        AppOptions::new(instant_reply("Hello."))
            .on_all_addresses()
            .env("METRICS_TOKEN", METRICS_TOKEN),
    )
    .await;
    assert_eq!(get_with(&token, "/metrics", None).await.0, 401);
    let (status, body) = get_with(&token, "/metrics", Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200);
    assert!(body.contains("manychat_agent_"), "{body}");
    token.stop().await;
}

#[tokio::test]
async fn ready_tells_an_unauthenticated_caller_ready_in_fixed_words_and_nothing_else() {
    let app = spawn_app_with(
        AppOptions::new(instant_reply("Hello."))
            .on_all_addresses()
            .env("METRICS_TOKEN", METRICS_TOKEN),
    )
    .await;
    // A wiring problem, which the full answer names with the replica (host and pid).
    let response = app
        .post_json(&json!({"subscriber_id": "{{contact.id}}", "text": "Hello?"}))
        .await;
    assert_eq!(response.status().as_u16(), 200);
    let (status, body) = get_with(&app, "/ready", None).await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer, json!({"status": "ready", "warning": "wiring"}));
    assert!(!body.contains(&std::process::id().to_string()), "{body}");

    let (status, body) = get_with(&app, "/ready", Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200);
    let full: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(full["version"], env!("CARGO_PKG_VERSION"));
    assert!(full["details"]["replica"].is_string(), "{full}");
    app.stop().await;
}
