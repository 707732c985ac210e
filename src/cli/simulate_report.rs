//! What `simulate` prints after the reply: what the agent did, read back from the database
//! the service writes (the demo's SQLite file by default, `DATABASE_URL` otherwise), since the
//! response carries only the text. The fields it set, the flows it sent, the tags, a note's
//! length, the stored escalation reason, and a reply still to come through the outbox. Without
//! that database it says it cannot tell, and where it looked.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::ids::SubscriberId;
use crate::store::{OutboxKind, OutboxStatus, Role, Store, Turn};

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
    let store = match super::existing_store(env).await {
        Ok(store) => store,
        Err(error) => {
            return vec![format!(
                "(what the agent did is in the service's database, and this command cannot \
                 read {place}: {error}. Run simulate beside the service with its DATABASE_URL \
                 to see it.)"
            )];
        }
    };
    let mut lines = vec![format!("(what the agent did, read from {place}:)")];
    let Some(turn) = latest_agent_turn(store.as_ref(), subscriber).await else {
        lines.push("  no turn recorded for this contact yet".to_owned());
        return lines;
    };
    let entries: Vec<Value> = turn
        .actions
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if entries.is_empty() {
        lines.push("  no action in ManyChat".to_owned());
    }
    for entry in &entries {
        lines.push(format!("  {}", action_line(entry)));
    }
    if let Ok(Some(knowledge)) = store.turn_knowledge(turn.id).await {
        lines.push(format!("  {}", knowledge_line(&knowledge)));
    }
    if let Some(reason) = &turn.escalation_reason {
        lines.push(format!("  handed to a person, reason stored: {reason}"));
    }
    if let Some(due) = queued_reply(store.as_ref(), turn.conversation_id).await {
        lines.push(format!(
            "  a reply will follow through the outbox (ManyChat's reply flow), due {}",
            due.format("%H:%M:%S UTC")
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

/// One action as a sentence: what, on which configured id, and how it ended.
fn action_line(action: &Value) -> String {
    let e = entry(action);
    let text = |key: &str| e[key].as_str().unwrap_or_default().to_owned();
    let (tool, id) = (text("tool"), text("id"));
    let what = match tool.as_str() {
        "set_field" => format!("field {id} set to {}", text("value")),
        "send_flow" => format!("flow {id} sent"),
        "add_tag" => format!("tag {id} added"),
        "remove_tag" => format!("tag {id} removed"),
        "write_note" => format!(
            "note {id} written ({} characters)",
            e["length"].as_u64().unwrap_or_default()
        ),
        "schedule_nudge" => "a follow-up scheduled".to_owned(),
        other => format!("{other} {id}").trim_end().to_owned(),
    };
    let how = match status(action) {
        "performed" => "done".to_owned(),
        "staged" => "still to be done".to_owned(),
        "failed" => format!("failed: {}", text("error")),
        "refused" => format!("refused: {}", text("reason")),
        other => other.replace('_', " "),
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
        let line = |v: Value| action_line(&v);
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
            "note summary written (42 characters) (discarded)"
        );
        assert_eq!(
            line(
                json!({"tool": "add_tag", "id": "gift", "status": "refused", "reason": "unknown_id"})
            ),
            "tag gift added (refused: unknown_id)"
        );
    }
}
