//! 019 at the turn: which requests read and extend history, and when tokens are (re)issued.

use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::selling::user_text;

async fn enforced_app(replies: usize) -> (TestApp, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::replies(
        (0..replies).map(|i| reply_json(&format!("Answer {i}."))),
    ));
    let app =
        spawn_app_with(AppOptions::new(model.clone()).env("CONTACT_TOKENS_ENFORCED", "true")).await;
    (app, model)
}

async fn send_with_token(
    app: &TestApp,
    subscriber: &str,
    text: &str,
    token: Option<&str>,
) -> Value {
    let mut body = json!({"subscriber_id": subscriber, "text": text});
    if let Some(token) = token {
        body["ai_token"] = json!(token);
    }
    app.post_json(&body).await.json().await.unwrap()
}

/// The tokens written to the contact's token field so far.
async fn written_tokens(app: &TestApp) -> Vec<String> {
    app.all_manychat_requests()
        .await
        .into_iter()
        .filter(|r| r.body["field_name"] == "ai_token")
        .filter_map(|r| r.body["field_value"].as_str().map(str::to_owned))
        .collect()
}

/// `text`, the contact's first message, sent without a token: the token it was issued (its
/// response sets it in the token field).
pub(crate) async fn first_token(app: &TestApp, subscriber: &str, text: &str) -> String {
    let body = send_with_token(app, subscriber, text, None).await;
    app.settle().await;
    block_token(&body, "ai_token").expect("the first response carries the contact's token")
}

/// How many tokens the contact was issued so far.
async fn issued(app: &TestApp, subscriber: &str) -> i64 {
    app.conversation(subscriber).await.token_generation
}

#[tokio::test]
async fn system_019_first_turn_issues_a_token_set_by_its_response_and_stored_as_a_hash() {
    let (app, _) = enforced_app(1).await;
    let body = send_with_token(&app, "8001", "Hello", None).await;
    app.settle().await;
    let token = block_token(&body, "ai_token").expect("the response sets the token field");
    assert_eq!(token.len(), 43);
    assert!(
        written_tokens(&app).await.is_empty(),
        "no API write while the response carries it"
    );
    let conversation = app.conversation("8001").await;
    assert_eq!(
        conversation.token_hash.as_deref(),
        Some(manychat_agent::tokens::hash(&token).as_str())
    );
    assert!(app.turns("8001").await.iter().all(|t| t.bound));
}

#[tokio::test(start_paused = true)]
async fn system_019_current_token_reads_history_and_a_wrong_one_is_answered_alone() {
    let _frozen = FrozenClock::freeze();
    let (app, model) = enforced_app(4).await;
    let token = first_token(&app, "8002", "My first question").await;

    send_with_token(&app, "8002", "Second, with my token", Some(&token)).await;
    assert!(
        user_text(&model.requests()[1]).contains("My first question"),
        "bound: reads history"
    );

    let wrong = "x".repeat(43);
    send_with_token(&app, "8002", "Third, with a forged token", Some(&wrong)).await;
    app.settle().await;
    let third = user_text(&model.requests()[2]);
    assert!(
        !third.contains("My first question"),
        "unbound: its own message only"
    );
    let turns = app.turns("8002").await;
    let forged = turns
        .iter()
        .find(|t| t.text == "Third, with a forged token")
        .unwrap();
    assert!(!forged.bound, "stored unbound");
    // The token was issued minutes ago: an unbound request reissues at most hourly.
    assert_eq!(issued(&app, "8002").await, 1, "no reissue within the hour");
    tokio::time::advance(std::time::Duration::from_secs(61 * 60)).await;
    send_with_token(&app, "8002", "Fourth, forged again", Some(&wrong)).await;
    app.settle().await;
    assert_eq!(issued(&app, "8002").await, 2, "reissued after an hour");
}

#[tokio::test(start_paused = true)]
async fn system_019_previous_token_still_binds_after_a_reissue() {
    let _frozen = FrozenClock::freeze();
    let (app, model) = enforced_app(3).await;
    let first = first_token(&app, "8003", "Opening question").await;
    tokio::time::advance(std::time::Duration::from_secs(61 * 60)).await;
    // A missing token is unbound and triggers a reissue; the first token becomes "previous".
    let body = send_with_token(&app, "8003", "No token this time", None).await;
    app.settle().await;
    assert_eq!(issued(&app, "8003").await, 2);
    assert_eq!(
        block_token(&body, "ai_token"),
        None,
        "a reissue after an unbound request is never shown to its sender"
    );
    let written = written_tokens(&app).await;
    assert_eq!(
        written.len(),
        1,
        "it is written to the field through the API"
    );
    assert_ne!(written[0], first);
    send_with_token(&app, "8003", "Back with the first token", Some(&first)).await;
    assert!(user_text(&model.requests()[2]).contains("Opening question"));
}

#[tokio::test]
async fn system_019_flag_off_lets_a_missing_token_read_history() {
    let model = Arc::new(ScriptedModel::replies([reply_json("A."), reply_json("B.")]));
    let app = spawn_app(model.clone()).await; // CONTACT_TOKENS_ENFORCED=false in spawn_app
    send_with_token(&app, "8004", "Earlier message", None).await;
    send_with_token(&app, "8004", "Later message", None).await;
    assert!(user_text(&model.requests()[1]).contains("Earlier message"));
    assert!(app.turns("8004").await.iter().all(|t| t.bound));
}

/// ManyChat's contact ids are positive 64-bit signed integers (1 to 9223372036854775807): an id
/// outside that range names no contact and is refused with 400 on both routes, nothing stored.
#[tokio::test]
async fn a_contact_id_outside_manychats_range_is_refused_with_400_on_every_route() {
    let (app, model) = enforced_app(1).await;
    for id in [
        json!("99999999999999999999"),
        json!("18446744073709551615"),
        json!("9223372036854775808"),
        json!(18446744073709551615u64),
        json!("0"),
        json!(0),
    ] {
        let response = app
            .post_json(&json!({"subscriber_id": id, "text": "hi"}))
            .await;
        assert_eq!(response.status().as_u16(), 400, "{id}");
        let refused: Value = response.json().await.unwrap();
        assert_eq!(refused["field"], "subscriber_id", "{refused}");
    }
    let at_the_edge = app
        .post_json(&json!({"subscriber_id": "9223372036854775807", "text": "hi"}))
        .await;
    assert_eq!(at_the_edge.status().as_u16(), 200);
    app.settle().await;
    assert_eq!(model.calls(), 1, "only the id in range reached the model");
    app.stop().await;
}

#[tokio::test]
async fn one_contact_one_id_a_padded_id_is_refused_before_any_lookup_or_write() {
    let (app, model) = enforced_app(1).await;
    app.returning_contact("88001").await;
    let before = app.turns("88001").await.len();
    for body in [
        json!({"subscriber_id": "088001", "text": "hi"}),
        json!({"user_id": "0088001", "text": "hi"}),
        json!({"subscriber_id": "088001", "user_id": "88001", "text": "hi"}),
    ] {
        let response = app.post_json(&body).await;
        assert_eq!(response.status().as_u16(), 400, "{body}");
        let refused: Value = response.json().await.unwrap();
        assert!(
            refused["field"] == "subscriber_id" || refused["field"] == "user_id",
            "{refused}"
        );
    }
    app.settle().await;
    assert_eq!(model.calls(), 0);
    assert!(
        app.all_manychat_requests().await.is_empty(),
        "no getInfo, no token write to the real contact"
    );
    assert_eq!(app.turns("88001").await.len(), before);
    let conversation = app.conversation("88001").await;
    assert_eq!(
        conversation.token_hash.as_deref(),
        Some("0".repeat(64).as_str()),
        "its token is untouched"
    );
}
