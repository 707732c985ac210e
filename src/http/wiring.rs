//! ManyChat variables that reach us unsubstituted (a literal `{{…}}`) are a wiring
//! problem in the tenant's ManyChat setup, not a bad request and not a wrong token. Each one is
//! logged at error level with what to fix, counted in `/metrics`
//! (`manychat_agent_variables_not_substituted_total{field=…}`) and listed in `/ready`'s details
//! (naming the replica) until a correctly wired request reaches that replica.
//!
//! Invariant: nothing here logs a contact id, a token or a body (C5); the token case names the
//! conversation by its UUID.

use serde_json::{Value, json};

use super::AppState;
use crate::ids::SubscriberId;
use crate::metrics::Metrics;

/// What an operator does about an unsubstituted contact id.
const ID_FIX: &str = "ManyChat sent the contact id variable as literal text: in the Dynamic Block's \
     request body insert the contact id with ManyChat's variable picker (\"subscriber_id\": \
     \"{{user_id}}\" or \"{{contact.id}}\", as the README's wiring guide shows), then send a test \
     message";

/// What an operator does about an unsubstituted token variable.
fn token_fix(token_field: &str) -> String {
    format!(
        "ManyChat sent the token variable as literal text: create a Text custom field named \
         \"{token_field}\" (MANYCHAT_TOKEN_FIELD) and insert it in the Dynamic Block's body as \
         \"ai_token\"; `manychat-agent manychat check` verifies the field"
    )
}

/// No usable contact id: the request was answered with the escalation copy.
pub(super) fn report_id_not_substituted(metrics: &Metrics, field: &'static str) {
    metrics.not_substituted(field);
    tracing::error!(
        field,
        fix = ID_FIX,
        "wiring problem: ManyChat did not substitute the contact id; answered with the escalation copy"
    );
}

/// `ai_token` arrived as a literal. A contact who has no token yet may have an empty field, so
/// only a contact we already issued a token to shows a wiring problem; the turn goes on as one
/// without a token either way. Checked beside the turn, so the response does not wait for it.
pub(super) fn report_token_not_substituted(state: &AppState, subscriber: &SubscriberId) {
    let store = state.store.clone();
    let metrics = state.metrics.clone();
    let token_field = state.token_field.clone();
    let subscriber = subscriber.clone();
    state.turns.tasks().spawn(async move {
        let conversation = match store.conversation_by_subscriber(&subscriber).await {
            Ok(Some(conversation)) if conversation.token_hash.is_some() => conversation,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(error = %error, "could not check an unsubstituted token variable");
                return;
            }
        };
        metrics.not_substituted("ai_token");
        tracing::error!(
            conversation_id = %conversation.id,
            field = "ai_token",
            fix = %token_fix(&token_field),
            "wiring problem: ManyChat did not substitute the token field; the message is treated as carrying no token"
        );
    });
}

/// A request parsed with its contact id: the contact-id wiring is fixed.
pub(super) fn id_substituted(metrics: &Metrics) {
    metrics.substituted("subscriber_id");
    metrics.substituted("user_id");
}

/// A request carried a real token: the token field's wiring is fixed.
pub(super) fn token_substituted(metrics: &Metrics) {
    metrics.substituted("ai_token");
}

/// This process, as `/ready` names it: each replica counts what reached it alone.
fn replica() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".to_owned());
    format!("{host} (pid {})", std::process::id())
}

/// `/ready`'s details while a wiring problem is open on this replica, else `None`. A problem
/// opens at a request that shows it and clears at the next correctly wired request this replica
/// receives; `requests` counts the ones that showed it meanwhile.
pub(super) fn problems(metrics: &Metrics, token_field: &str) -> Option<Value> {
    let problems: Vec<Value> = metrics
        .not_substituted_counts()
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(field, count)| {
            let fix = if field == "ai_token" {
                token_fix(token_field)
            } else {
                ID_FIX.to_owned()
            };
            json!({
                "problem": "variable_not_substituted",
                "field": field,
                "requests": count,
                "fix": fix,
            })
        })
        .collect();
    (!problems.is_empty()).then(|| {
        json!({
            "wiring": problems,
            "replica": replica(),
            "note": "seen by this replica since its last correctly wired request; clears at the next one",
        })
    })
}
