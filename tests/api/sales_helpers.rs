//! What the sales suites (`sales_*.rs`) share: turns in a row, the prompt a turn sent, a first
//! turn's tool results, the `FLOWS:` notice, a refused `send_flow` with its advice, and the
//! payment-link turn (the contact asks for the booking link).

use std::path::Path;
use std::sync::Arc;

use manychat_agent::model::mock::{ScriptedModel, tool_calls};
use serde_json::Value;

use crate::helpers::*;
use crate::selling::*;

/// A model that, on each of two turns, makes the contact a prospect and sends the payment link
/// the contact asked for.
pub fn booking_link_twice() -> Arc<ScriptedModel> {
    script(vec![
        tool_calls([prospect(), send_flow("booking_link", true)]),
        answer("Here is the booking link."),
        tool_calls([prospect(), send_flow("booking_link", true)]),
        answer("Here is the booking link."),
    ])
}

/// `text` from `subscriber`, one turn: the user text of `model`'s request number `step`.
pub async fn prompt_after(
    app: &TestApp,
    model: &ScriptedModel,
    subscriber: &str,
    text: &str,
    step: usize,
) -> String {
    turn_once(app, subscriber, text).await;
    user_text(&model.requests()[step])
}

/// Each of `texts` from `subscriber`, one turn after the other.
pub async fn turns(app: &TestApp, subscriber: &str, texts: &[&str]) {
    for text in texts {
        turn_once(app, subscriber, text).await;
    }
}

/// The demo tenant on `backend`, one turn of `model`'s (`text` from `subscriber`): the app and
/// the tool results its second step read.
pub async fn first_turn_results(
    backend: Backend,
    model: &Arc<ScriptedModel>,
    subscriber: &str,
    text: &str,
) -> (TestApp, Vec<Value>) {
    let app = app_on(backend, model.clone(), unchanged).await;
    turn_once(&app, subscriber, text).await;
    let results = tool_results(&model.requests()[1]);
    (app, results)
}

/// `result` is a `send_flow` refused for `reason`, with the advice the model acts on.
pub fn assert_refused_flow(result: &Value, reason: &str) {
    assert_eq!(result["sent"], false, "{result}");
    assert_eq!(result["reason"], reason, "{result}");
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("FLOWS notice")),
        "{result}"
    );
}

/// The `FLOWS:` notice of a request (023, 028: what the contact's position accepts now).
pub fn flows_notice(request: &manychat_agent::model::ModelRequest) -> String {
    user_text(request)
        .lines()
        .find(|l| l.starts_with("FLOWS:"))
        .unwrap_or_default()
        .to_owned()
}

/// The demo tenant (`edit` applied) on `backend`, one turn of [`booking_link_twice`]'s:
/// ManyChat received the link, the staged intent write it takes along (029: during the turn),
/// the `link_sent` stage, then `after`.
pub async fn booking_link_turn(
    backend: Backend,
    edit: fn(&Path),
    subscriber: &str,
    text: &str,
    after: &[(&str, &str)],
) -> TestApp {
    let app = app_on(backend, booking_link_twice(), edit).await;
    turn_once(&app, subscriber, text).await;
    let link = [
        (FLOW, BOOKING_LINK_NS),
        (SET_FIELD, "studio_intent=prospect"),
        (SET_FIELD, "studio_funnel_stage=link_sent"),
    ];
    assert_received(&app, &[&link[..], after].concat()).await;
    app
}
