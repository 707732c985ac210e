//! 019 under a crowd: a new contact's token rides on the response that answers its message
//! (one `set_field_value` action), costing none of ManyChat's request budget; the API write is
//! the fallback, queued due later, settled without a request when the contact's next request
//! carries the token, and written by the outbox only when no request proved it in time.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::{OutboxKind, OutboxRow, OutboxStatus};
use manychat_agent::tokens::{self, RESPONSE_FALLBACK};
use serde_json::{Value, json};

use crate::helpers::*;

const SET_FIELD: &str = "/fb/subscriber/setCustomFieldByName";

fn answering(replies: usize) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies(
        (0..replies).map(|i| reply_json(&format!("Answer {i}."))),
    ))
}

async fn send(app: &TestApp, subscriber: &str, text: &str, token: Option<&str>) -> Value {
    let mut body = json!({"subscriber_id": subscriber, "text": text});
    if let Some(token) = token {
        body["ai_token"] = json!(token);
    }
    bounded("a contact message", async {
        app.post_json(&body).await.json().await.unwrap()
    })
    .await
}

/// The token writes ManyChat's API received (field `ai_token`).
async fn api_token_writes(app: &TestApp) -> Vec<String> {
    app.all_manychat_requests()
        .await
        .into_iter()
        .filter(|r| r.path == SET_FIELD && r.body["field_name"] == "ai_token")
        .filter_map(|r| r.body["field_value"].as_str().map(str::to_owned))
        .collect()
}

async fn token_rows(app: &TestApp) -> Vec<OutboxRow> {
    app.store
        .outbox_rows()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == OutboxKind::ContactToken)
        .collect()
}

/// The first response sets the token; nothing reaches ManyChat's API for it; the fallback row
/// waits [`RESPONSE_FALLBACK`]; the next request carrying the token is bound and settles it.
async fn token_rides_on_the_response_and_the_next_request_settles_its_fallback(app: TestApp) {
    let first = send(&app, "7300001", "Hello", None).await;
    app.settle().await;
    assert_eq!(
        block_texts(&first),
        vec!["Answer 0."],
        "the text is unchanged"
    );
    let token = block_token(&first, "ai_token").expect("the response sets the token field");
    let actions = first["content"]["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "one action, within ManyChat's 5");
    assert!(api_token_writes(&app).await.is_empty(), "no request spent");
    let conversation = app.conversation("7300001").await;
    assert_eq!(conversation.token_hash, Some(tokens::hash(&token)));

    let rows = token_rows(&app).await;
    assert_eq!(rows.len(), 1, "the API write is kept as the fallback");
    assert_eq!(rows[0].status, OutboxStatus::Pending);
    assert_eq!(rows[0].payload["generation"], json!(1));
    let wait = (rows[0].next_attempt_at - rows[0].created_at)
        .to_std()
        .unwrap();
    assert_eq!(
        wait, RESPONSE_FALLBACK,
        "due only if no request proves it first"
    );

    let second = send(&app, "7300001", "Again", Some(&token)).await;
    app.settle().await;
    assert!(
        block_token(&second, "ai_token").is_none(),
        "a bound request is issued nothing"
    );
    let turns = app.turns("7300001").await;
    assert!(turns.iter().all(|t| t.bound), "the token bound the request");
    let row = app.store.outbox_row(rows[0].id).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Delivered, "settled by the proof");
    assert_eq!(row.payload, json!({"generation": 1}), "its token removed");
    assert!(api_token_writes(&app).await.is_empty(), "still no request");
}

#[tokio::test]
async fn system_019_a_new_contacts_token_rides_on_its_response_and_its_next_request_settles_the_fallback()
 {
    let app =
        spawn_app_with(AppOptions::new(answering(2)).env("CONTACT_TOKENS_ENFORCED", "true")).await;
    token_rides_on_the_response_and_the_next_request_settles_its_fallback(app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn system_019_a_new_contacts_token_rides_on_its_response_and_its_next_request_settles_the_fallback_on_postgres()
 {
    let app = spawn_app_with(
        AppOptions::new(answering(2))
            .env("CONTACT_TOKENS_ENFORCED", "true")
            .env("DATABASE_URL", fresh_postgres_url().await),
    )
    .await;
    token_rides_on_the_response_and_the_next_request_settles_its_fallback(app).await;
}

/// No request proved the token: the outbox writes it through the API once the fallback is due,
/// not before; a settled or superseded row is never written.
#[tokio::test(start_paused = true)]
async fn system_019_a_token_no_request_proved_is_written_through_the_api_when_its_fallback_is_due()
{
    let _frozen = FrozenClock::freeze();
    let app =
        spawn_app_with(AppOptions::new(answering(1)).env("CONTACT_TOKENS_ENFORCED", "true")).await;
    let first = send(&app, "7300002", "Hello", None).await;
    app.settle_advancing().await;
    let token = block_token(&first, "ai_token").unwrap();

    assert_eq!(app.worker.run_once().await.unwrap(), 0, "not due yet");
    tokio::time::advance(RESPONSE_FALLBACK + Duration::from_secs(1)).await;
    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    assert_eq!(api_token_writes(&app).await, vec![token.clone()]);
    let written = app.all_manychat_requests().await.pop().unwrap();
    assert_eq!(written.body["subscriber_id"], json!(7300002));
    let rows = token_rows(&app).await;
    assert_eq!(rows[0].status, OutboxStatus::Delivered);
    assert_eq!(rows[0].payload, json!({"generation": 1}));
}
