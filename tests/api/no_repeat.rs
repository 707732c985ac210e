//! Spec 013 (no reply is said twice) through the real app: a scripted model repeats an earlier
//! answer; the response ManyChat receives, the stored turn and `/metrics` show what was done.

use manychat_agent::model::mock::reply;
use serde_json::json;

use crate::helpers::*;
use crate::selling::*;

const CLOSER: &str = "Glad I could help. Write whenever you want to book.";

/// An answer with a closing question.
fn answer_asking(text: &str, question: &str) -> manychat_agent::model::ModelResponse {
    reply(
        json!({
            "messages": [text],
            "escalate": false,
            "escalation_reason": null,
            "confidence": 0.8,
            "closing_question": question
        })
        .to_string(),
    )
}

/// The tenant with `messages.closer` set to [`CLOSER`].
fn with_closer(dir: &std::path::Path) {
    edit_rules(dir, |rules| rules["messages"]["closer"] = json!(CLOSER));
}

#[tokio::test]
async fn spec_013_a_repeated_reply_is_replaced_by_the_closer_without_its_closing_question() {
    let model = script(vec![
        answer("The wheel course is 450 USD."),
        // Case, emoji and whitespace aside, the same words.
        answer_asking(
            "the WHEEL course   is 450 USD. 👍",
            "Shall I book you a place?",
        ),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_closer)).await;
    app.send("9101", "How much is the wheel course?").await;
    let (status, body) = app.send("9101", "How much was it again?").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec![CLOSER.to_owned()]);
    app.settle().await;
    let turn = app.turns("9101").await.pop().unwrap();
    assert_eq!(turn.text, CLOSER);
    assert_eq!(turn.duplicate.as_deref(), Some("duplicate_replaced"));
    assert_eq!(
        turn.outcome.as_deref(),
        Some("answered_inline"),
        "not an escalation"
    );
    assert_eq!(turn.escalation_reason, None);
    let first = &app.turns("9101").await[1];
    assert_eq!(first.duplicate, None, "the first answer repeated nothing");
    let metrics = app.metrics_text().await;
    assert_metric(
        &metrics,
        "manychat_agent_duplicate_replies_total{kind=\"replaced\"} 1",
    );
}

#[tokio::test]
async fn spec_013_without_a_closer_the_repeat_is_sent_and_recorded_as_detected() {
    let model = script(vec![
        answer("The wheel course is 450 USD."),
        answer_asking("The wheel course is 450 USD.", "Shall I book you a place?"),
    ]);
    let app = spawn_app(model).await;
    app.send("9102", "How much is the wheel course?").await;
    let (_, body) = app.send("9102", "How much was it again?").await;
    assert_eq!(
        block_texts(&body),
        vec!["The wheel course is 450 USD.\n\nShall I book you a place?".to_owned()],
        "sent as it was, with its closing question"
    );
    app.settle().await;
    let turn = app.turns("9102").await.pop().unwrap();
    assert_eq!(turn.duplicate.as_deref(), Some("duplicate_detected"));
    let metrics = app.metrics_text().await;
    assert_metric(
        &metrics,
        "manychat_agent_duplicate_replies_total{kind=\"detected\"} 1",
    );
    assert_metric(
        &metrics,
        "manychat_agent_duplicate_replies_total{kind=\"replaced\"} 0",
    );
}

#[tokio::test]
async fn spec_013_an_escalation_is_not_checked_for_repeats() {
    let model = script(vec![
        answer("The wheel course is 450 USD."),
        reply(escalation_json("complaint")),
    ]);
    let app = spawn_app_with(AppOptions::new(model).edit(with_closer)).await;
    app.send("9103", "How much is the wheel course?").await;
    let (_, body) = app
        .send("9103", "This is too expensive, I want to complain")
        .await;
    assert_eq!(block_texts(&body), vec![app.escalation_copy()]);
    app.settle().await;
    let turn = app.turns("9103").await.pop().unwrap();
    assert_eq!(turn.duplicate, None);
    assert!(
        app.metrics_text()
            .await
            .contains("manychat_agent_duplicate_replies_total{kind=\"replaced\"} 0")
    );
}
