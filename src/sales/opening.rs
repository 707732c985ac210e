//! The opening flow (032 A, with 034's timing) and stage-tied flows (032 B): the flows the
//! server sends on its own, never the model's choice.
//!
//! The opening (`role: "opening"`) belongs to the **prospect turn**: the turn whose intent write
//! makes the contact a prospect. It goes at most once per contact: never to a contact who had
//! it, or who had a prospect turn already (one that escalated with no flow forfeits it: its
//! discarded `prospect` write stays on its record), and never to a contact who is a prospect by
//! the rollout rule alone (no write made them one). The store's claim on the conversation row
//! is the last word between turns racing to send it (`Store::claim_opening`).
//!
//! A stage-tied flow (`onStage`) goes when the model's accepted funnel write names exactly that
//! stage, after the same decision a flow the model names gets ([`super::flow_decision`]).

use serde_json::{Value, json};

use super::{FlowDecision, Intent, Known, Stage, TurnSales, flow_decision};
use crate::config::{FUNNEL_STAGES, FlowConfig, FlowRole, ToolsConfig};

/// The tenant's opening flow, if it has one.
pub fn opening_flow(tools: &ToolsConfig) -> Option<&FlowConfig> {
    tools
        .flows
        .iter()
        .find(|f| f.role == Some(FlowRole::Opening))
}

/// Whether a record entry spends the contact's opening: the opening itself (`origin:
/// "opening"`, whatever became of it), or a `prospect` write on the intent field `intent_id`
/// that the turn took (any status but `dropped_over_cap` or `refused`: that turn was the
/// prospect turn, whether its opening went or was forfeited).
pub fn spends_opening(entry: &Value, intent_id: Option<&str>) -> bool {
    let text = |key: &str| entry.get(key).and_then(Value::as_str);
    if text("origin") == Some("opening") {
        return true;
    }
    text("tool") == Some("set_field")
        && intent_id.is_some_and(|id| text("id") == Some(id))
        && text("value") == Some(Intent::Prospect.as_str())
        && !matches!(text("status"), Some("dropped_over_cap" | "refused"))
}

/// Whether an intent write of `value`, made when the turn knew `intent_now`, makes this the
/// prospect turn that queues the opening (034 § The opening waits for a prospect).
pub fn queues_opening(
    tools: &ToolsConfig,
    known: &Known,
    intent_now: Intent,
    value: Intent,
) -> bool {
    value == Intent::Prospect
        && intent_now != Intent::Prospect
        && known.intent != Intent::Prospect
        && !known.opening_spent
        && opening_flow(tools).is_some()
}

/// The `openingQueued` value of the intent write's result: the opening, named by its id and
/// the tenant's description of it, so the reply neither repeats nor greets over it.
pub fn queued_result(flow: &FlowConfig) -> Value {
    json!({"flow": flow.id, "description": flow.description})
}

/// The flow tied to `stage` (`onStage`), if it may go now: exactly that stage, and allowed by
/// the decision every flow gets (sent once, offering scoping). A flow that may not go is
/// silently not sent: the stage move never retries it.
pub fn tied_flow<'a>(
    tools: &'a ToolsConfig,
    sales: &TurnSales,
    stage: Stage,
) -> Option<&'a FlowConfig> {
    let name = FUNNEL_STAGES.get(stage)?;
    let flow = tools
        .flows
        .iter()
        .find(|f| f.on_stage.as_deref() == Some(*name))?;
    match flow_decision(tools, sales, flow, false) {
        FlowDecision::Allowed { .. } => Some(flow),
        FlowDecision::Refused(_) => None,
    }
}

/// What became of a stage-tied flow, as the funnel write's `set_field` result reports it (032 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TiedFlow {
    /// ManyChat accepted it during the turn.
    Sent,
    /// ManyChat refused it.
    Refused,
    /// Staged to follow the text (a nudge turn, an eval).
    Staged,
    /// Past the per-turn action limit: not sent, and the stage move will not retry it.
    Dropped,
}

impl TiedFlow {
    /// The key and value added to the `set_field` result.
    pub fn result(self, flow_id: &str) -> (&'static str, Value) {
        match self {
            TiedFlow::Sent => ("flowSent", json!(flow_id)),
            TiedFlow::Refused => ("flowRefused", json!(flow_id)),
            TiedFlow::Staged => ("flowStaged", json!(flow_id)),
            TiedFlow::Dropped => (
                "flowDropped",
                json!({"flow": flow_id, "reason": "action_limit"}),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::config::FieldConfig;

    fn flow(id: &str, role: Option<FlowRole>, on_stage: Option<&str>) -> FlowConfig {
        FlowConfig {
            id: id.into(),
            flow_ns: format!("content_{id}"),
            description: format!("The {id} flow."),
            role,
            repeatable: false,
            settle_seconds: None,
            on_stage: on_stage.map(str::to_owned),
            offering: None,
        }
    }

    fn tools() -> ToolsConfig {
        ToolsConfig {
            flows: vec![
                flow("welcome", Some(FlowRole::Opening), None),
                flow("gallery", None, Some("nurturing")),
                FlowConfig {
                    offering: Some("glaze-lab".into()),
                    ..flow("faq", None, Some("offered"))
                },
            ],
            fields: vec![FieldConfig {
                id: "intent".into(),
                field: "intent_field".into(),
                values: vec!["not_prospect".into(), "prospect".into()],
                description: "Intent.".into(),
                funnel: false,
                intent: true,
                offering: false,
            }],
            ..ToolsConfig::default()
        }
    }

    fn prospect_known() -> Known {
        Known {
            intent: Intent::Prospect,
            ..Known::default()
        }
    }

    #[test]
    fn spec_034_the_first_prospect_write_queues_the_opening_once_per_contact() {
        let tools = tools();
        let unknown = Known::default();
        assert!(queues_opening(
            &tools,
            &unknown,
            Intent::Unknown,
            Intent::Prospect
        ));
        let not_prospect = Known {
            intent: Intent::NotProspect,
            ..Known::default()
        };
        assert!(
            queues_opening(&tools, &not_prospect, Intent::NotProspect, Intent::Prospect),
            "a non-prospect who asks to buy gets it"
        );
        assert!(!queues_opening(
            &tools,
            &unknown,
            Intent::Unknown,
            Intent::NotProspect
        ));
        assert!(
            !queues_opening(&tools, &unknown, Intent::Prospect, Intent::Prospect),
            "a second write in the same turn"
        );
        assert!(
            !queues_opening(
                &tools,
                &prospect_known(),
                Intent::Prospect,
                Intent::Prospect
            ),
            "a prospect already (a performed write, or the rollout rule)"
        );
        let spent = Known {
            opening_spent: true,
            ..Known::default()
        };
        assert!(!queues_opening(
            &tools,
            &spent,
            Intent::Unknown,
            Intent::Prospect
        ));
        let without = ToolsConfig {
            flows: vec![],
            ..tools.clone()
        };
        assert!(!queues_opening(
            &without,
            &unknown,
            Intent::Unknown,
            Intent::Prospect
        ));
    }

    #[test]
    fn spec_034_an_earlier_prospect_turn_or_opening_entry_spends_the_opening() {
        let intent = Some("intent");
        for status in [
            "performed",
            "discarded",
            "failed",
            "staged",
            "dead_lettered",
        ] {
            let entry =
                json!({"tool": "set_field", "id": "intent", "value": "prospect", "status": status});
            assert!(spends_opening(&entry, intent), "{status}");
        }
        for status in ["dropped_over_cap", "refused"] {
            let untaken =
                json!({"tool": "set_field", "id": "intent", "value": "prospect", "status": status});
            assert!(!spends_opening(&untaken, intent), "{status}");
        }
        let not_prospect = json!({"tool": "set_field", "id": "intent", "value": "not_prospect", "status": "performed"});
        assert!(!spends_opening(&not_prospect, intent));
        let opening =
            json!({"tool": "send_flow", "id": "welcome", "origin": "opening", "status": "failed"});
        assert!(spends_opening(&opening, intent));
        assert!(!spends_opening(
            &json!({"tool": "send_flow", "id": "gallery", "status": "performed"}),
            intent
        ));
    }

    #[test]
    fn spec_032_verification_3_the_tied_flow_is_the_exact_stages_once_and_in_scope() {
        let tools = tools();
        let sales = TurnSales::new(prospect_known());
        let nurturing = crate::sales::stage_of("nurturing").unwrap();
        assert_eq!(
            tied_flow(&tools, &sales, nurturing).map(|f| f.id.as_str()),
            Some("gallery")
        );
        assert!(
            tied_flow(&tools, &sales, nurturing - 1).is_none(),
            "only the stage written"
        );
        let sent = TurnSales::new(Known {
            sent_flows: HashSet::from(["gallery".to_owned()]),
            ..prospect_known()
        });
        assert!(tied_flow(&tools, &sent, nurturing).is_none(), "sent once");
        let offered = crate::sales::stage_of("offered").unwrap();
        assert!(
            tied_flow(&tools, &sales, offered).is_none(),
            "another offering's"
        );
        let glaze = TurnSales::new(Known {
            offering: Some("glaze-lab".into()),
            ..prospect_known()
        });
        assert_eq!(
            tied_flow(&tools, &glaze, offered).map(|f| f.id.as_str()),
            Some("faq")
        );
    }

    #[test]
    fn spec_032_b_result_shapes() {
        assert_eq!(TiedFlow::Sent.result("g"), ("flowSent", json!("g")));
        assert_eq!(TiedFlow::Refused.result("g"), ("flowRefused", json!("g")));
        assert_eq!(TiedFlow::Staged.result("g"), ("flowStaged", json!("g")));
        assert_eq!(
            TiedFlow::Dropped.result("g"),
            (
                "flowDropped",
                json!({"flow": "g", "reason": "action_limit"})
            )
        );
    }
}
