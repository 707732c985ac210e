//! The agent's tools, built from `tools.json` for one turn (spec 012).
//!
//! Each tool's parameters are enums of configured ids (strict JSON Schema), so the model can
//! only name what the tenant configured; a tool whose list is empty is not offered. The model
//! sees ids and descriptions, never a flow namespace, tag or field name. No tool takes a
//! subscriber: a `TurnTools` belongs to one turn and its actions land on that turn's contact.
//!
//! `execute` stages: it records an action and answers `{"staged": true}`; no ManyChat request is
//! made during the model call. At most `MAX_ACTIONS` actions per turn (the next answers
//! `{"staged": false}` and is recorded `dropped_over_cap`); identical actions are staged once;
//! actions keep the model's order.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::actions::{ActionStatus, Operation, StagedAction};
use crate::agent::ToolHost;
use crate::config::{FieldConfig, FlowRole, TenantConfig, ToolsConfig};
use crate::model::{ToolArguments, ToolCall, ToolSpec};

/// 024 § The loop grows: at most eight actions per turn.
pub const MAX_ACTIONS: usize = 8;

/// The funnel stage only the server writes (023): never in the model's enum.
const SERVER_ONLY_STAGE: &str = "link_sent";

/// The tools of one turn, and what they staged.
pub struct TurnTools {
    config: Arc<TenantConfig>,
    specs: Vec<ToolSpec>,
    actions: Vec<StagedAction>,
    refused: Vec<String>,
}

impl TurnTools {
    pub fn new(config: Arc<TenantConfig>) -> Self {
        let specs = config.tools.as_ref().map(build_specs).unwrap_or_default();
        Self {
            config,
            specs,
            actions: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Whether any tool is offered this turn (012: `turns.actions` is null otherwise).
    pub fn offered(&self) -> bool {
        !self.specs.is_empty()
    }

    /// Every action the model staged, in its order, including those dropped over the cap.
    pub fn into_actions(self) -> Vec<StagedAction> {
        self.actions
    }

    fn tools(&self) -> Option<&ToolsConfig> {
        self.config.tools.as_ref()
    }

    /// Resolves a call to the action it stages, or a refusal the model is told about.
    fn resolve(&self, name: &str, args: &Value) -> Result<StagedAction, String> {
        let tools = self.tools().ok_or("no tools are configured")?;
        let arg = |key: &str| args.get(key).and_then(Value::as_str);
        match name {
            "send_flow" => {
                let id = arg("flow").ok_or("flow is required")?;
                let flow = tools
                    .flows
                    .iter()
                    .find(|f| f.id == id && f.role != Some(FlowRole::Opening))
                    .ok_or("unknown flow id")?;
                Ok(StagedAction::new(
                    "send_flow",
                    &flow.id,
                    Operation::SendFlow {
                        flow_ns: flow.flow_ns.clone(),
                    },
                ))
            }
            "add_tag" | "remove_tag" => {
                let id = arg("tag").ok_or("tag is required")?;
                let tag = tools
                    .tags
                    .iter()
                    .find(|t| t.id == id)
                    .ok_or("unknown tag id")?;
                let operation = if name == "add_tag" {
                    Operation::AddTag {
                        tag: tag.tag.clone(),
                    }
                } else {
                    Operation::RemoveTag {
                        tag: tag.tag.clone(),
                    }
                };
                Ok(StagedAction::new(name, &tag.id, operation))
            }
            "set_field" => {
                let id = arg("field").ok_or("field is required")?;
                let value = arg("value").ok_or("value is required")?;
                let field = tools
                    .fields
                    .iter()
                    .find(|f| f.id == id)
                    .ok_or("unknown field id")?;
                if !model_values(field).any(|v| v == value) {
                    return Err(format!("value is not one of {}'s values", field.id));
                }
                let mut action = StagedAction::new(
                    "set_field",
                    &field.id,
                    Operation::SetField {
                        field: field.field.clone(),
                        value: Value::String(value.to_owned()),
                    },
                );
                action.entry.value = Some(value.to_owned());
                Ok(action)
            }
            _ => Err("unknown tool".into()),
        }
    }

    fn stage(&mut self, action: StagedAction) -> Value {
        let same = |a: &StagedAction| {
            a.entry.tool == action.entry.tool
                && a.entry.id == action.entry.id
                && a.entry.value == action.entry.value
                && a.entry.status != ActionStatus::DroppedOverCap
        };
        if self.actions.iter().any(same) {
            return json!({"staged": true});
        }
        let counted = self
            .actions
            .iter()
            .filter(|a| a.entry.status != ActionStatus::DroppedOverCap)
            .count();
        if counted >= MAX_ACTIONS {
            let mut dropped = action;
            dropped.entry.status = ActionStatus::DroppedOverCap;
            self.refused.push(format!(
                "{} {} (over the {MAX_ACTIONS}-action limit)",
                dropped.entry.tool, dropped.entry.id
            ));
            self.actions.push(dropped);
            return json!({"staged": false, "reason": "action_limit"});
        }
        self.actions.push(action);
        json!({"staged": true})
    }
}

#[async_trait]
impl ToolHost for TurnTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    async fn call(&mut self, call: &ToolCall) -> Value {
        let args = match &call.arguments {
            ToolArguments::Valid(args) => args,
            ToolArguments::Invalid { .. } => {
                return json!({"staged": false, "error": "invalid arguments"});
            }
        };
        match self.resolve(&call.name, args) {
            Ok(action) => self.stage(action),
            Err(reason) => {
                self.refused.push(format!("{} ({reason})", call.name));
                json!({"staged": false, "error": reason})
            }
        }
    }

    fn final_note(&self) -> Option<String> {
        if self.actions.is_empty() && self.refused.is_empty() {
            return None;
        }
        let staged: Vec<String> = self
            .actions
            .iter()
            .filter(|a| a.entry.status == ActionStatus::Staged)
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
        Some(format!(
            "staged this turn (not yet performed): {}; refused: {}",
            list(&staged),
            list(&self.refused)
        ))
    }
}

/// A field's values as the model may set them: the funnel's server-only stage is left out.
fn model_values(field: &FieldConfig) -> impl Iterator<Item = &str> {
    field
        .values
        .iter()
        .map(String::as_str)
        .filter(move |v| !(field.funnel && *v == SERVER_ONLY_STAGE))
}

fn described(items: impl Iterator<Item = (String, String)>) -> String {
    items
        .map(|(id, description)| format!("- {id}: {description}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn strict_object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// The tool specs a config offers (012 § Six tools; get_contact and write_note come with 024).
pub fn build_specs(tools: &ToolsConfig) -> Vec<ToolSpec> {
    let mut specs = Vec::new();
    let flows: Vec<_> = tools
        .flows
        .iter()
        .filter(|f| f.role != Some(FlowRole::Opening))
        .collect();
    if !flows.is_empty() {
        let ids: Vec<&str> = flows.iter().map(|f| f.id.as_str()).collect();
        specs.push(ToolSpec {
            name: "send_flow".into(),
            description: format!(
                "Send one of the business's prepared flows to the contact, after your reply. \
                 Say what you are sending; never claim it has arrived. Flows:\n{}",
                described(flows.iter().map(|f| (f.id.clone(), f.description.clone())))
            ),
            parameters: strict_object(
                json!({
                    "flow": {"type": "string", "enum": ids},
                    "contactAsked": {
                        "type": "boolean",
                        "description": "true only when this turn's message asked for it"
                    }
                }),
                &["flow", "contactAsked"],
            ),
        });
    }
    if !tools.tags.is_empty() {
        let ids: Vec<&str> = tools.tags.iter().map(|t| t.id.as_str()).collect();
        let list = described(
            tools
                .tags
                .iter()
                .map(|t| (t.id.clone(), t.description.clone())),
        );
        for (name, verb) in [("add_tag", "Add"), ("remove_tag", "Remove")] {
            specs.push(ToolSpec {
                name: name.into(),
                description: format!("{verb} a tag on the contact. Tags:\n{list}"),
                parameters: strict_object(
                    json!({"tag": {"type": "string", "enum": ids}}),
                    &["tag"],
                ),
            });
        }
    }
    if !tools.fields.is_empty() {
        let ids: Vec<&str> = tools.fields.iter().map(|f| f.id.as_str()).collect();
        let mut values: Vec<&str> = tools.fields.iter().flat_map(model_values).collect();
        values.sort_unstable();
        values.dedup();
        let list = described(tools.fields.iter().map(|f| {
            let allowed: Vec<&str> = model_values(f).collect();
            (
                f.id.clone(),
                format!("{} Values: {}.", f.description, allowed.join(", ")),
            )
        }));
        specs.push(ToolSpec {
            name: "set_field".into(),
            description: format!(
                "Record one of the listed values in a field of the contact's record. Use only a \
                 value listed for that field. Fields:\n{list}"
            ),
            parameters: strict_object(
                json!({
                    "field": {"type": "string", "enum": ids},
                    "value": {"type": "string", "enum": values}
                }),
                &["field", "value"],
            ),
        });
    }
    specs
}

#[cfg(test)]
mod tests;
