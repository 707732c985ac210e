//! A deferred reply is shaped as the channel shows it. On WhatsApp (the
//! default channel) a reply of several messages is one field write and one flow trigger, as
//! inline, instead of one pair per message.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};
use serde_json::json;

use crate::helpers::*;

#[tokio::test(start_paused = true)]
async fn a_deferred_whatsapp_reply_is_one_field_write_and_one_trigger() {
    let _frozen = FrozenClock::freeze();
    let answer = json!({
        "messages": ["Classes run on Tuesdays.", "The fee is in the catalog."],
        "escalate": false,
        "escalation_reason": null,
        "confidence": 0.9,
        "closing_question": null
    })
    .to_string();
    let model = Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(reply(answer)).after(Duration::from_secs(9))
    ]));
    let app = spawn_app(model.clone()).await;
    app.returning_contact("9201").await;
    deferred_by_a_late_answer(&app, &model, 1, "9201", "When and how much?").await;

    app.worker.run_once().await.unwrap();
    let requests = app.manychat_requests().await;
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/fb/subscriber/setCustomFieldByName",
            "/fb/sending/sendFlow"
        ]
    );
    assert_eq!(
        requests[0].body["field_value"],
        "Classes run on Tuesdays.\n\nThe fee is in the catalog."
    );
}
