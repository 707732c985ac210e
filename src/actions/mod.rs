//! Performing staged actions, and the per-turn action record (012 § Every staged action is
//! recorded on its turn).
//!
//! An action has two halves. Its `ActionEntry` is what `turns.actions` records: configured ids
//! and values only, never a flow namespace, a ManyChat tag or field name, or note text (024:
//! a note is recorded by its length). Its `Operation` is what the server sends to ManyChat,
//! resolved from the tenant config when the action was staged; it travels in the outbox payload of
//! a deferred turn (server-side only) and is never recorded on the turn.
//!
//! Invariants: each action gets exactly one attempt, in staged order, through the shared
//! ManyChat client and its limiter; a failure is logged at warn with the tool, the configured id
//! and the ManyChat error kind, never retried (012 § A failed action is logged, never retried).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{ConversationId, SubscriberId};
use crate::manychat::ManyChatClient;

/// What became of an action (012's status table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    /// Not yet performed; waiting for the response or the outbox.
    Staged,
    /// ManyChat accepted the request.
    Performed,
    /// ManyChat rejected it; `error` holds the reason.
    Failed,
    /// The turn escalated.
    Discarded,
    /// Staged past the per-turn limit and never sent.
    DroppedOverCap,
    /// Its outbox row was dead-lettered, so it was never sent.
    DeadLettered,
}

/// One entry of `turns.actions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionEntry {
    /// `send_flow`, `add_tag`, `remove_tag`, `set_field`, `write_note`, or a record kind such as
    /// `send_event`.
    pub tool: String,
    /// The configured id (flow, tag, field or note id), never the ManyChat name.
    pub id: String,
    /// set_field: the configured value id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// write_note: the length written (the text itself is never recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<usize>,
    pub status: ActionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set on actions the server performed without the model calling a tool: `handoff`
    /// (escalation), `opening`, `stage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// The ManyChat request an action resolves to. Holds tenant-account names, so it is never
/// written to `turns.actions` or a log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    SendFlow { flow_ns: String },
    AddTag { tag: String },
    RemoveTag { tag: String },
    SetField { field: String, value: Value },
}

/// An action as staged: its record entry and the request that performs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedAction {
    pub entry: ActionEntry,
    pub operation: Operation,
}

impl StagedAction {
    pub fn new(tool: &str, id: &str, operation: Operation) -> Self {
        Self {
            entry: ActionEntry {
                tool: tool.to_owned(),
                id: id.to_owned(),
                value: None,
                length: None,
                status: ActionStatus::Staged,
                error: None,
                origin: None,
            },
            operation,
        }
    }

    pub fn with_origin(mut self, origin: &str) -> Self {
        self.entry.origin = Some(origin.to_owned());
        self
    }
}

/// The server's escalation actions (`rules.handoff`, SYSTEM 4 beyond): a tag and/or a flow,
/// recorded with `origin: "handoff"`.
pub fn handoff_actions(handoff: Option<&crate::config::Handoff>) -> Vec<StagedAction> {
    let Some(handoff) = handoff else {
        return Vec::new();
    };
    let mut actions = Vec::new();
    if let Some(tag) = &handoff.tag {
        actions.push(
            StagedAction::new("add_tag", "handoff", Operation::AddTag { tag: tag.clone() })
                .with_origin("handoff"),
        );
    }
    if let Some(flow_ns) = &handoff.flow_ns {
        actions.push(
            StagedAction::new(
                "send_flow",
                "handoff",
                Operation::SendFlow {
                    flow_ns: flow_ns.clone(),
                },
            )
            .with_origin("handoff"),
        );
    }
    actions
}

/// Performs every `staged` action once, in order, and updates its status. Actions in any other
/// status are left alone (a retried outbox row must not perform them again).
pub async fn perform_all(
    client: &ManyChatClient,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    actions: &mut [StagedAction],
) {
    for action in actions
        .iter_mut()
        .filter(|a| a.entry.status == ActionStatus::Staged)
    {
        let result = match &action.operation {
            Operation::SendFlow { flow_ns } => client.send_flow(subscriber, flow_ns).await,
            Operation::AddTag { tag } => client.add_tag(subscriber, tag).await,
            Operation::RemoveTag { tag } => client.remove_tag(subscriber, tag).await,
            Operation::SetField { field, value } => {
                client.set_field(subscriber, field, value).await
            }
        };
        match result {
            Ok(()) => action.entry.status = ActionStatus::Performed,
            Err(error) => {
                tracing::warn!(
                    conversation = %conversation,
                    tool = %action.entry.tool,
                    id = %action.entry.id,
                    error_kind = error.kind(),
                    error = %error,
                    "action failed; not retried"
                );
                action.entry.status = ActionStatus::Failed;
                action.entry.error = Some(error.to_string());
            }
        }
    }
}

/// Marks every still-staged action with `status` (discarded on escalation, dead_lettered with
/// its outbox row). Returns how many changed.
pub fn settle_staged(actions: &mut [StagedAction], status: ActionStatus) -> usize {
    let mut changed = 0;
    for action in actions
        .iter_mut()
        .filter(|a| a.entry.status == ActionStatus::Staged)
    {
        action.entry.status = status;
        changed += 1;
    }
    changed
}

/// The `turns.actions` JSON for a list of actions.
pub fn record(actions: &[StagedAction]) -> Value {
    Value::Array(
        actions
            .iter()
            .map(|a| serde_json::to_value(&a.entry).unwrap_or(Value::Null))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_012_record_holds_configured_ids_never_manychat_names() {
        let actions = vec![
            StagedAction::new(
                "send_flow",
                "intro_brochure",
                Operation::SendFlow {
                    flow_ns: "content20240101_000001".into(),
                },
            ),
            StagedAction::new(
                "add_tag",
                "interested",
                Operation::AddTag {
                    tag: "Interested In Course".into(),
                },
            ),
        ];
        let recorded = record(&actions).to_string();
        assert!(recorded.contains("intro_brochure"));
        assert!(!recorded.contains("content20240101_000001"));
        assert!(!recorded.contains("Interested In Course"));
        assert_eq!(
            record(&actions)[0],
            serde_json::json!({"tool":"send_flow","id":"intro_brochure","status":"staged"})
        );
    }

    #[test]
    fn settle_staged_changes_only_staged_entries() {
        let mut actions = vec![
            StagedAction::new("add_tag", "a", Operation::AddTag { tag: "a".into() }),
            StagedAction::new("add_tag", "b", Operation::AddTag { tag: "b".into() }),
        ];
        actions[0].entry.status = ActionStatus::Performed;
        assert_eq!(settle_staged(&mut actions, ActionStatus::Discarded), 1);
        assert_eq!(actions[0].entry.status, ActionStatus::Performed);
        assert_eq!(actions[1].entry.status, ActionStatus::Discarded);
    }
}
