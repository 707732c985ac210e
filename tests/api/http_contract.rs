//! SYSTEM 3.1–3.3: route, authentication, per-address limit, strict body, Dynamic Block v2.

use std::sync::Arc;

use manychat_agent::model::ModelError;
use manychat_agent::model::mock::ScriptedModel;
use serde_json::{Value, json};

use crate::helpers::*;

fn instant_reply(text: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies([reply_json(text)]))
}

async fn count_rows(app: &TestApp, table: &str) -> i64 {
    // A second connection on the file, as an operator's sqlite3 shell would open it.
    let conn = rusqlite::Connection::open(&app.database_path).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
        row.get(0)
    })
    .unwrap()
}

/// A request with a wrong secret carrying `body`, from `client` (`x-forwarded-for`) when given.
async fn wrong_secret(
    app: &TestApp,
    client: Option<&str>,
    body: &'static str,
) -> reqwest::Response {
    let mut request = app
        .http
        .post(app.message_url())
        .bearer_auth("wrong-secret-0000000000");
    if let Some(client) = client {
        request = request.header("x-forwarded-for", client);
    }
    request.body(body).send().await.unwrap()
}

#[tokio::test]
async fn system_3_1_bad_secret_gets_401_before_the_body_is_read() {
    let app = spawn_app(instant_reply("hi")).await;
    let response = wrong_secret(&app, None, "{not json at all").await;
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"error": "unauthorized"})
    );
    let missing = app
        .http
        .post(app.message_url())
        .json(&json!({"subscriber_id": "1", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 401);
    assert_eq!(count_rows(&app, "conversations").await, 0);
    assert_eq!(count_rows(&app, "turns").await, 0);
    assert!(app.manychat_requests().await.is_empty());
}

#[tokio::test]
async fn system_3_1_every_configured_secret_is_accepted() {
    let model = Arc::new(ScriptedModel::replies([
        reply_json("one"),
        reply_json("two"),
    ]));
    let app = spawn_app(model).await;
    for secret in [SECRET, SECOND_SECRET] {
        let response = app
            .http
            .post(app.message_url())
            .bearer_auth(secret)
            .json(&json!({"subscriber_id": "42", "text": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "secret {secret:?}");
        let body: Value = response.json().await.unwrap();
        // The callback carries the Authorization the caller presented (rotation keeps working).
        assert_eq!(
            body["content"]["external_message_callback"]["headers"]["Authorization"],
            json!(format!("Bearer {secret}"))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn system_3_1_per_address_limit_has_separate_budgets_for_valid_and_invalid_secrets() {
    // Frozen: all 301 requests arrive within the same instant of the limiter's minute.
    let _frozen = FrozenClock::freeze();
    let app = spawn_app(instant_reply("hi")).await;
    let mut statuses = Vec::new();
    for _ in 0..301 {
        let response = wrong_secret(&app, None, "{}").await;
        statuses.push(response.status().as_u16());
    }
    assert!(statuses[..300].iter().all(|s| *s == 401));
    assert_eq!(statuses[300], 429);
    // The authenticated budget is separate: a valid request from the same address still passes.
    let (status, _) = app.send("7", "hello").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn system_3_1_health_and_ready_answer() {
    let app = spawn_app(instant_reply("hi")).await;
    assert_eq!(app.get("/health").await.status().as_u16(), 200);
    let ready = app.get("/ready").await;
    assert_eq!(ready.status().as_u16(), 200);
    let metrics = app.metrics_text().await;
    assert!(metrics.contains("manychat_agent_outbox_delivered_total 0"));
}

async fn expect_400(app: &TestApp, body: impl Into<reqwest::Body>, field: &str) {
    let response = app.post_raw(body).await;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "invalid_request");
    assert!(
        body["message"].as_str().unwrap_or_default().contains(field),
        "message {body} should name {field}"
    );
}

#[tokio::test]
async fn system_3_2_unknown_key_is_a_400_naming_the_key() {
    let app = spawn_app(instant_reply("hi")).await;
    expect_400(
        &app,
        json!({"subscriber_id": "1", "text": "hi", "tenant": "x"}).to_string(),
        "tenant",
    )
    .await;
}

#[tokio::test]
async fn system_3_2_bad_bodies_get_specific_errors_and_record_nothing() {
    let app = spawn_app(instant_reply("hi")).await;
    expect_400(&app, "{\"subscriber_id\": \"1\", \"text\": ", "line").await;
    expect_400(
        &app,
        json!({"subscriber_id": "1", "text": 5}).to_string(),
        "text",
    )
    .await;
    expect_400(&app, json!({"subscriber_id": "1"}).to_string(), "text").await;
    expect_400(
        &app,
        json!({"subscriber_id": "1", "text": "a".repeat(4097)}).to_string(),
        "text",
    )
    .await;
    expect_400(
        &app,
        json!({"subscriber_id": "1", "text": "hi", "ai_token": "t".repeat(257)}).to_string(),
        "ai_token",
    )
    .await;
    let response = app.post_raw(vec![0xff, 0xfe, 0x7b]).await;
    assert_eq!(response.status().as_u16(), 400);
    expect_400(&app, "[1,2]", "body").await;
    assert_eq!(count_rows(&app, "turns").await, 0);
}

#[tokio::test]
async fn system_3_2_body_over_64_kib_is_413() {
    let app = spawn_app(instant_reply("hi")).await;
    let huge = json!({"subscriber_id": "1", "text": "a".repeat(70 * 1024)}).to_string();
    let response = app.post_raw(huge).await;
    assert_eq!(response.status().as_u16(), 413);
}

#[tokio::test]
async fn system_3_2_numeric_subscriber_id_is_accepted_and_bad_input_loses_nothing() {
    let app = spawn_app(instant_reply("Our courses start monthly.")).await;
    let response = app
        .post_json(
            &json!({"subscriber_id": 5550123, "text": "When do you start?",
            "first_name": "Invented", "last_name": null, "locale": "en_US", "channel": "whatsapp"}),
        )
        .await;
    assert_eq!(response.status().as_u16(), 200);
    expect_400(
        &app,
        json!({"subscriber_id": "5550123"}).to_string(),
        "text",
    )
    .await;
    let turns = app.turns("5550123").await;
    assert_eq!(turns.len(), 2, "the earlier turn is still there");
    assert_eq!(turns[1].text, "Our courses start monthly.");
}

#[tokio::test]
async fn system_3_3_reply_is_a_dynamic_block_v2_with_the_callback() {
    let app = spawn_app(instant_reply("We have three courses.")).await;
    let (status, body) = app.send("1001", "What do you offer?").await;
    assert_eq!(status, 200);
    // 019: a first message is issued the contact's token, which its block sets.
    let token = block_token(&body, "ai_token").expect("the first response sets the token");
    assert_eq!(
        body,
        json!({
            "version": "v2",
            "content": {
                "type": "whatsapp",
                "messages": [{"type": "text", "text": "We have three courses."}],
                "actions": [{"action": "set_field_value", "field_name": "ai_token", "value": token}],
                "external_message_callback": {
                    "url": "https://agent.example.test/v1/channels/manychat/message",
                    "method": "post",
                    "headers": {"Authorization": format!("Bearer {SECRET}")},
                    "payload": {
                        "text": "{{last_input_text}}",
                        "subscriber_id": "{{contact.id}}",
                        "user_id": "{{user_id}}",
                        "ai_token": "{{ai_token}}",
                        "offering": "{{offering}}"
                    },
                    "timeout": 86400
                }
            }
        })
    );
}

#[tokio::test]
async fn system_3_3_whatsapp_joins_the_messages_into_one() {
    let output = json!({
        "messages": ["First part.", "Second part."],
        "escalate": false, "escalation_reason": null, "confidence": 0.9,
        "closing_question": "Shall I send details?"
    })
    .to_string();
    let app = spawn_app(Arc::new(ScriptedModel::replies([output]))).await;
    let (_, body) = app.send("1002", "Tell me more").await;
    assert_eq!(
        block_texts(&body),
        vec!["First part.\n\nSecond part.\n\nShall I send details?".to_owned()]
    );
    assert!(body["content"].get("quick_replies").is_none());
}

#[tokio::test]
async fn system_3_3_a_failing_turn_answers_the_escalation_copy_never_500() {
    let model = Arc::new(ScriptedModel::new(vec![Err(ModelError::Http {
        status: 500,
        kind: "server_error".into(),
    })]));
    let app = spawn_app(model).await;
    let (status, body) = app.send("1003", "hello").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    let turns = app.turns("1003").await;
    assert_eq!(turns.last().unwrap().outcome.as_deref(), Some("error"));
    assert!(app.conversation("1003").await.escalated_at.is_some());
}

#[tokio::test]
async fn system_3_3_model_output_that_is_not_json_fails_closed() {
    let app = spawn_app(Arc::new(ScriptedModel::replies(["not json"]))).await;
    let (status, body) = app.send("1004", "hello").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    let turns = app.turns("1004").await;
    assert_eq!(
        turns.last().unwrap().outcome.as_deref(),
        Some("failed_validation")
    );
}

#[tokio::test]
async fn system_3_3_other_channels_keep_messages_apart_and_name_their_type() {
    let output = json!({
        "messages": ["First part.", "Second part."],
        "escalate": false, "escalation_reason": null, "confidence": 0.9,
        "closing_question": null
    })
    .to_string();
    let options =
        AppOptions::new(Arc::new(ScriptedModel::replies([output]))).env("CHANNEL", "telegram");
    let app = spawn_app_with(options).await;
    let (_, body) = app.send("1005", "Tell me more").await;
    assert_eq!(body["content"]["type"], "telegram");
    assert_eq!(block_texts(&body), vec!["First part.", "Second part."]);
}

#[tokio::test(start_paused = true)]
async fn system_017_trust_proxy_counts_the_forwarded_client_and_ignores_it_otherwise() {
    let _frozen = FrozenClock::freeze();
    let options = AppOptions::new(instant_reply("hi")).env("TRUST_PROXY", "loopback");
    let app = spawn_app_with(options).await;
    let refused = async |client: &str| {
        let mut last = 0;
        for _ in 0..301 {
            last = wrong_secret(&app, Some(client), "{}")
                .await
                .status()
                .as_u16();
        }
        last
    };
    assert_eq!(
        refused("203.0.113.7").await,
        429,
        "the forwarded client's budget is spent"
    );
    // Another client behind the same trusted proxy has its own budget.
    let other = wrong_secret(&app, Some("203.0.113.8"), "{}").await;
    assert_eq!(other.status().as_u16(), 401);
}

#[tokio::test(start_paused = true)]
async fn system_017_forwarded_header_from_an_untrusted_peer_is_ignored() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app(instant_reply("hi")).await; // TRUST_PROXY empty
    for n in 0..300 {
        wrong_secret(&app, Some(&format!("203.0.113.{}", n % 200)), "{}").await;
    }
    // Rotating the header does not buy a fresh budget: the peer address is what counts.
    let response = wrong_secret(&app, Some("198.51.100.1"), "{}").await;
    assert_eq!(response.status().as_u16(), 429);
}
