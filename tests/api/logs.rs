//! C5: whole turns with invented personal data leave none of it in any log line.

use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn system_c5_no_personal_data_reaches_any_log_line() {
    let logs = manychat_agent::observability::capture_global();
    let phone = "+44 7700 900123";
    let email = "zebulon.quartermaine@example.org";
    let name = "Zebulon";
    let surname = "Quartermaine";
    let subscriber = "88001234567";
    let message = format!("Hi, I'm {name} {surname}, call me on {phone} or mail {email} please");
    let model = Arc::new(ScriptedModel::replies([
        reply_json("Thanks, we will be in touch."),
        escalation_json("explicit_request"),
        "not json".to_owned(),
    ]));
    let app = spawn_app(model).await;
    for _ in 0..3 {
        let response = app
            .post_json(&json!({"subscriber_id": subscriber, "text": message,
                "first_name": name, "last_name": surname}))
            .await;
        assert_eq!(response.status().as_u16(), 200);
    }
    // A refused request with personal data in it.
    let refused = app
        .post_json(&json!({"subscriber_id": subscriber, "text": message, "phone": phone}))
        .await;
    assert_eq!(refused.status().as_u16(), 400);
    app.settle().await;

    let conversation = app.conversation(subscriber).await;
    let text = logs.text();
    assert!(
        text.contains(&conversation.id.to_string()),
        "the capture sees this test's turns (identified by conversation UUID)"
    );
    for secret in [
        phone,
        "7700 900123",
        email,
        name,
        surname,
        subscriber,
        &message,
        SECRET,
    ] {
        assert!(!text.contains(secret), "log lines contain {secret:?}");
    }
}

/// A message stopped before the model (here by an escalation keyword) is one log line, which
/// names why.
#[tokio::test]
async fn one_line_per_pre_model_escalation() {
    let logs = manychat_agent::observability::capture_global();
    let model = Arc::new(ScriptedModel::replies([reply_json("Unused.")]));
    let app = spawn_app(model.clone()).await;
    let keyword = app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_owned();
    app.send("6801", &format!("please, {keyword}")).await;
    app.settle().await;
    assert_eq!(model.calls(), 0);
    let conversation = app.conversation("6801").await.id.to_string();
    let escalation_lines: Vec<String> = logs
        .lines()
        .into_iter()
        .filter(|line| line.contains(&conversation) && line.contains("escalated_precheck"))
        .collect();
    assert_eq!(escalation_lines.len(), 1, "{escalation_lines:#?}");
    // The line names the escalation reason.
    assert!(
        escalation_lines[0].contains("escalation_keyword"),
        "{escalation_lines:#?}"
    );
}

/// C5: ManyChat's refusal can quote the contact; only its code and a fixed description are kept.
#[tokio::test]
async fn system_c5_a_manychat_refusal_quoting_the_contact_reaches_no_log_line_or_row() {
    use manychat_agent::clock::Clock;
    use manychat_agent::store::OutboxStatus;
    use wiremock::matchers::method;
    use wiremock::{Mock, ResponseTemplate};

    let logs = manychat_agent::observability::capture_global();
    let (name, phone, email) = (
        "Philippa Ombudsworth",
        "+34 612 48 97 03",
        "p.ombud@example.net",
    );
    let app = spawn_app(Arc::new(ScriptedModel::replies(Vec::<String>::new()))).await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "status": "error", "code": 2400,
            "message": format!("Contact {name} ({phone}, {email}) cannot receive this"),
            "details": {"messages": [{"message": format!("{name} is blocked")}]}
        })))
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    let conversation = app.conversation("5552801").await;
    let id = queue_reply_at(
        &app,
        "5552801",
        "A reply owed.",
        Clock::system().now(),
        std::time::Duration::ZERO,
    )
    .await;
    app.worker.run_once().await.unwrap();

    let row = app.store.outbox_row(id).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Failed, "a refusal is final");
    let stored = row.last_error.unwrap();
    assert!(stored.contains("HTTP 400, code 2400"), "{stored}");
    let text = logs.text();
    assert!(
        text.contains(&conversation.id.to_string()),
        "the capture sees this delivery"
    );
    assert!(text.contains("2400"), "the code is logged: {text}");
    for secret in [
        name,
        "Philippa",
        "Ombudsworth",
        phone,
        "612 48 97 03",
        email,
        "blocked",
    ] {
        assert!(
            !stored.contains(secret),
            "outbox.last_error holds {secret:?}"
        );
        assert!(!text.contains(secret), "a log line holds {secret:?}");
    }
}
