//! The turn's tools as the agent loop sees them ([`ToolHost`]): the specs offered, each call
//! answered (a read performed, a write staged), and the history note of what was performed.

use super::*;
use crate::fence::server_line;

#[async_trait]
impl ToolHost for TurnTools {
    /// The same specs on every step of the turn (set when the tools are built, from the
    /// snapshot's): a call a step may no longer make (a third read, a flow already sent) is
    /// refused, never taken out of the specs, so each step's request opens with the same bytes.
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs.clone()
    }

    async fn call(&mut self, call: &ToolCall) -> Value {
        if call.name == "get_contact" {
            return match &call.arguments {
                ToolArguments::Valid(_) => self.read().await,
                ToolArguments::Invalid { .. } => {
                    json!({"staged": false, "error": "invalid arguments"})
                }
            };
        }
        if call.name == SEARCH_TOOL {
            return match &call.arguments {
                ToolArguments::Valid(args) => self.search(args),
                ToolArguments::Invalid { .. } => {
                    json!({"available": false, "error": "invalid arguments"})
                }
            };
        }
        if let Some(result) = self.call_plugin(call).await {
            return result;
        }
        // 025: a nudge turn is not offered schedule_nudge; a model that calls it anyway stages
        // nothing, and the record says so.
        if call.name == specs::NUDGE_TOOL && !self.specs.iter().any(|s| s.name == call.name) {
            self.refused.push(format!("{} (not offered)", call.name));
            self.record_refusal(
                StagedAction::new(specs::NUDGE_TOOL, "", Operation::Cleared),
                "not_offered",
            );
            return json!({"staged": false, "error": "not offered"});
        }
        let resolved = match &call.arguments {
            ToolArguments::Valid(args) => self.resolve(&call.name, args).map(|a| (a, args)),
            ToolArguments::Invalid { .. } => {
                Err(Rejected::new("invalid_arguments", "invalid arguments"))
            }
        };
        match resolved {
            Ok((action, args)) if call.name == "send_flow" && self.sender.is_some() => {
                self.send_flow_now(args, action).await
            }
            Ok((action, args)) => {
                let named = self.offering_named(&call.name, args);
                let mut result = self.stage_for_sale(&call.name, args, action);
                // 032 B: an accepted funnel write sends the flow tied to its stage.
                self.send_tied_flow(&mut result).await;
                if let Some(position) = named {
                    self.give_offering(position, &mut result);
                }
                result
            }
            Err(rejected) => {
                let said = rejected.message.as_deref().unwrap_or(rejected.reason);
                // The record and the note name a write tool and a configured id only, never a
                // name the model chose.
                let known = WRITE_TOOLS.contains(&call.name.as_str());
                let tool = if known { call.name.as_str() } else { "unknown" };
                let named = if known {
                    call.name.as_str()
                } else {
                    "an unknown tool"
                };
                self.refused.push(format!("{named} ({said})"));
                let id = rejected.id.as_deref().unwrap_or_default();
                self.record_refusal(
                    StagedAction::new(tool, id, Operation::Cleared),
                    rejected.reason,
                );
                match rejected.message {
                    Some(message) => json!({"staged": false, "error": message}),
                    None => json!({"staged": false}),
                }
            }
        }
    }

    fn final_note(&self) -> Option<String> {
        if self.actions.is_empty()
            && self.refused.is_empty()
            && self.last_read.is_none()
            && self.sent.is_empty()
        {
            return None;
        }
        let staged: Vec<String> = self
            .actions
            .iter()
            // Follow-ons are the server's (027: an event is never shown to the model).
            .filter(|a| a.entry.status == ActionStatus::Staged && !a.follows)
            .map(|a| match &a.entry.value {
                Some(value) => format!("{} {}={}", a.entry.tool, a.entry.id, value),
                None => format!("{} {}", a.entry.tool, a.entry.id),
            })
            .collect();
        let list = |items: &[String]| {
            if items.is_empty() {
                "none".to_owned()
            } else {
                items.join(", ")
            }
        };
        let mut note = format!(
            "staged this turn (not yet performed): {}; refused: {}",
            list(&staged),
            list(&self.refused)
        );
        // 029: the reply follows the flows sent this turn; it neither repeats nor claims them.
        let sent = self.sent.snapshot();
        let flows = |accepted: bool| -> Vec<String> {
            sent.iter()
                .filter(|s| s.accepted == accepted)
                .map(|s| s.id.clone())
                .collect()
        };
        let (went, refused) = (flows(true), flows(false));
        if !went.is_empty() {
            note.push_str(&format!(
                "; flows sent (the contact receives them before your reply; do not repeat \
                 their content): {}",
                went.join(", ")
            ));
        }
        if !refused.is_empty() {
            note.push_str(&format!(
                "; flows ManyChat refused (they did not go out; do not say they did): {}",
                refused.join(", ")
            ));
        }
        if let Some(opening) = self.opening_pending() {
            note.push_str(&format!(
                "; the opening flow {opening} goes to the contact before your reply unless you \
                 escalate: do not greet, introduce yourself or repeat it"
            ));
        }
        // Server-written, yet it names configured ids and the server's own words: one line
        // without a marker, like the notices, before the read (whose notes are fenced) joins it.
        let mut note = server_line(&note);
        if let Some(read) = &self.last_read {
            // The read as the tool returned it: its notes are still inside the fence.
            note.push_str("; last contact read: ");
            note.push_str(&read.to_string());
        }
        Some(note)
    }
}
