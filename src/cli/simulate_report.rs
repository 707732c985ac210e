//! What `simulate` prints after the reply: what the agent did, read back from the database
//! the service writes (the demo's SQLite file by default, `DATABASE_URL` otherwise), since the
//! response carries only the text. The fields it set, the flows it sent, the tags, a note's
//! length, the stored escalation reason, and a reply still to come through the outbox. Without
//! that database it says it cannot tell, and where it looked. In the owner's language
//! (`rules.json` `ownerLanguage` of `CONFIG_DIR`; English when it does not load).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::config::Language;
use crate::ids::SubscriberId;
use crate::store::{OutboxKind, OutboxStatus, Role, Store, Turn};
use crate::words::{self, Key};

/// How long the actions performed after the response may take to be recorded.
const SETTLE: Duration = Duration::from_secs(3);

/// The lines to print, each a sentence; the first says which database was read.
pub(super) async fn describe(
    env: &HashMap<String, String>,
    subscriber: &SubscriberId,
) -> Vec<String> {
    let url = env
        .get("DATABASE_URL")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .unwrap_or(crate::settings::DEFAULT_DATABASE_URL);
    let place = crate::store::describe_database(url);
    let language = super::handoff::tenant_config(env)
        .map(|t| t.rules.owner_language)
        .unwrap_or_default();
    let w = |key| words::text(language, key);
    let store = match super::existing_store(env).await {
        Ok(store) => store,
        Err(error) => {
            return vec![words::fill(
                language,
                Key::SimCannotRead,
                &[&place, &error.to_string()],
            )];
        }
    };
    let mut lines = vec![words::fill(language, Key::SimReadFrom, &[&place])];
    let Some(turn) = latest_agent_turn(store.as_ref(), subscriber).await else {
        lines.push(format!("  {}", w(Key::SimNoTurn)));
        return lines;
    };
    let entries: Vec<Value> = turn
        .actions
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if entries.is_empty() {
        lines.push(format!("  {}", w(Key::SimNoAction)));
    }
    for entry in &entries {
        lines.push(format!("  {}", action_line(language, entry)));
    }
    if let Ok(Some(knowledge)) = store.turn_knowledge(turn.id).await {
        lines.push(format!("  {}", knowledge_line(&knowledge)));
    }
    if let Some(reason) = &turn.escalation_reason {
        let words = words::reason(language, reason);
        lines.push(format!(
            "  {}",
            words::fill(language, Key::SimHandedOver, &[reason, &words])
        ));
    }
    if let Some(due) = queued_reply(store.as_ref(), turn.conversation_id).await {
        let due = due.format("%H:%M:%S UTC").to_string();
        lines.push(format!(
            "  {}",
            words::fill(language, Key::SimQueued, &[&due])
        ));
    }
    lines
}

/// Knowledge at scale: the ids (and counts) of the offerings and passages the turn was given,
/// never their text.
fn knowledge_line(knowledge: &Value) -> String {
    let ids = |key: &str| -> Vec<&str> {
        knowledge
            .get(key)
            .and_then(Value::as_array)
            .map(|ids| ids.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let (offerings, passages) = (ids("offerings"), ids("passages"));
    let list = |ids: &[&str]| match ids.is_empty() {
        true => String::new(),
        false => format!(": {}", ids.join(", ")),
    };
    let miss = match knowledge.get("miss").and_then(Value::as_bool) {
        Some(true) => " (its search found nothing)",
        _ => "",
    };
    format!(
        "knowledge given: {} offerings{}; {} passages{}{miss}",
        offerings.len(),
        list(&offerings),
        passages.len(),
        list(&passages),
    )
}

/// The contact's latest agent turn, once the actions it performs after the response are
/// recorded (or [`SETTLE`] has passed).
async fn latest_agent_turn(store: &dyn Store, subscriber: &SubscriberId) -> Option<Turn> {
    let conversation = store.conversation_by_subscriber(subscriber).await.ok()??;
    let started = std::time::Instant::now();
    loop {
        let turns = store.turns(conversation.id).await.ok()?;
        let turn = turns.into_iter().rev().find(|t| t.role == Role::Agent)?;
        let staged = turn
            .actions
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|all| all.iter().any(|a| status(a) == "staged"));
        if !staged || started.elapsed() >= SETTLE {
            return Some(turn);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When the conversation's queued reply falls due, if one waits in the outbox.
async fn queued_reply(
    store: &dyn Store,
    conversation: crate::ids::ConversationId,
) -> Option<chrono::DateTime<chrono::Utc>> {
    store
        .outbox_rows()
        .await
        .ok()?
        .into_iter()
        .filter(|row| row.conversation_id == conversation && row.kind == OutboxKind::Reply)
        .filter(|row| matches!(row.status, OutboxStatus::Pending | OutboxStatus::Delivering))
        .map(|row| row.next_attempt_at)
        .min()
}

/// A recorded action's entry (an outbox payload nests it under `entry`).
fn entry(action: &Value) -> &Value {
    action.get("entry").unwrap_or(action)
}

fn status(action: &Value) -> &str {
    entry(action)["status"].as_str().unwrap_or_default()
}

/// One action as a sentence in `language`: what, on which configured id, and how it ended.
fn action_line(language: Language, action: &Value) -> String {
    let e = entry(action);
    let text = |key: &str| e[key].as_str().unwrap_or_default().to_owned();
    let (tool, id) = (text("tool"), text("id"));
    let fill = |key, args: &[&str]| words::fill(language, key, args);
    let what = match tool.as_str() {
        "set_field" => fill(Key::SimFieldSet, &[&id, &text("value")]),
        "send_flow" => fill(Key::SimFlowSent, &[&id]),
        "add_tag" => fill(Key::SimTagAdded, &[&id]),
        "remove_tag" => fill(Key::SimTagRemoved, &[&id]),
        "write_note" => fill(
            Key::SimNoteWritten,
            &[&id, &e["length"].as_u64().unwrap_or_default().to_string()],
        ),
        "schedule_nudge" => words::text(language, Key::SimNudgeScheduled).to_owned(),
        other => format!("{other} {id}").trim_end().to_owned(),
    };
    let how = match status(action) {
        "failed" => fill(Key::SimFailed, &[&text("error")]),
        "refused" => fill(Key::SimRefused, &[&text("reason")]),
        other => words::status(language, other),
    };
    format!("{what} ({how})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn simulate_shows_the_knowledge_ids_and_counts_a_turn_was_given() {
        let line = knowledge_line(&serde_json::json!({
            "offerings": ["tent-ridgeline-2", "stove-northwind-1"],
            "passages": ["returns#1"],
            "miss": false
        }));
        assert_eq!(
            line,
            "knowledge given: 2 offerings: tent-ridgeline-2, stove-northwind-1; 1 passages: returns#1"
        );
        let missed =
            knowledge_line(&serde_json::json!({"offerings": [], "passages": [], "miss": true}));
        assert_eq!(
            missed,
            "knowledge given: 0 offerings; 0 passages (its search found nothing)"
        );
    }

    #[test]
    fn simulate_names_each_action_and_how_it_ended() {
        let line = |v: Value| action_line(Language::En, &v);
        assert_eq!(
            line(
                json!({"tool": "set_field", "id": "studio_intent", "value": "prospect", "status": "performed"})
            ),
            "field studio_intent set to prospect (done)"
        );
        assert_eq!(
            line(json!({"entry": {"tool": "send_flow", "id": "wheel_guide", "status": "staged"}})),
            "flow wheel_guide sent (still to be done)"
        );
        assert_eq!(
            line(
                json!({"tool": "write_note", "id": "summary", "length": 42, "status": "discarded"})
            ),
            "note summary written (42 characters) (not done: the contact was handed to a person)"
        );
        assert_eq!(
            line(
                json!({"tool": "add_tag", "id": "gift", "status": "refused", "reason": "unknown_id"})
            ),
            "tag gift added (refused: unknown_id)"
        );
        let es = |v: Value| action_line(Language::Es, &v);
        assert_eq!(
            es(json!({"tool": "send_flow", "id": "wheel_guide", "status": "performed"})),
            "flujo wheel_guide enviado (hecho)"
        );
    }
}
