//! A plugin tool's parameters: the JSON Schema the model is given (built from the config, enums
//! from it, C3), and the check of what the model sent before anything is called or staged.
//!
//! Invariants: every declared parameter is required and no other key is accepted; an enum takes
//! only a configured value; a number is whole when `integer` and within `min`/`max`; a note or a
//! query is cleaned like `write_note` text (identifier shapes removed, cut at a word) and never
//! recorded, only its length.

use serde_json::{Map, Value, json};

use crate::actions::NoteText;
use crate::config::plugins::{Parameter, PluginTool, ToolKind};
use crate::model::ToolSpec;

/// The spec the model is given for `tool`.
pub fn spec(tool: &PluginTool) -> ToolSpec {
    let mut properties = Map::new();
    for (key, parameter) in &tool.parameters {
        properties.insert(key.clone(), parameter_schema(parameter));
    }
    let required: Vec<&String> = tool.parameters.keys().collect();
    let description = match tool.kind {
        ToolKind::Read => format!(
            "{} (The business's live data: performed now; the answer comes back to you.)",
            tool.description
        ),
        ToolKind::Write => format!(
            "{} (Staged: performed after your reply, unless you escalate.)",
            tool.description
        ),
    };
    ToolSpec {
        name: tool.name.clone(),
        description,
        parameters: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        }),
    }
}

fn parameter_schema(parameter: &Parameter) -> Value {
    match parameter {
        Parameter::Enum { values } => json!({"type": "string", "enum": values}),
        Parameter::Number { integer, min, max } => {
            let kind = if *integer { "integer" } else { "number" };
            let bounds = match (min, max) {
                (Some(min), Some(max)) => format!("from {min} to {max}"),
                (Some(min), None) => format!("{min} or more"),
                (None, Some(max)) => format!("{max} or less"),
                (None, None) => String::new(),
            };
            if bounds.is_empty() {
                json!({"type": kind})
            } else {
                json!({"type": kind, "description": bounds})
            }
        }
        Parameter::Boolean {} => json!({"type": "boolean"}),
        Parameter::Note { max_length } => json!({
            "type": "string",
            "description": format!("A short note, at most {max_length} characters; never the contact's phone, email or other identifiers."),
        }),
        Parameter::Query { max_length } => json!({
            "type": "string",
            "description": format!("What to look up, at most {max_length} characters; never the contact's phone, email or other identifiers."),
        }),
    }
}

/// Arguments that passed the check.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// What the endpoint receives (notes and queries cleaned).
    pub sent: Map<String, Value>,
    /// What the record may hold: enum, number and boolean arguments, and each note as
    /// `{"length": n}`, never its text.
    pub recorded: Map<String, Value>,
    /// A query left empty by cleaning: no call is made (`{available: false}`).
    pub empty_query: bool,
}

/// Why the arguments were refused: the record's reason and what the model is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub reason: &'static str,
    pub message: String,
}

impl Refused {
    fn new(reason: &'static str, message: String) -> Self {
        Self { reason, message }
    }
}

/// Checks the model's arguments for `tool` against its parameters.
pub fn check(tool: &PluginTool, args: &Value) -> Result<Checked, Refused> {
    let Some(given) = args.as_object() else {
        return Err(Refused::new(
            "invalid_arguments",
            "invalid arguments".into(),
        ));
    };
    if given.keys().any(|k| !tool.parameters.contains_key(k)) {
        // The key is the model's (a contact may have steered it): it is never quoted, to the
        // model, the record or the server's note; the declared ones are named instead.
        let declared: Vec<&str> = tool.parameters.keys().map(String::as_str).collect();
        return Err(Refused::new(
            "invalid_arguments",
            format!(
                "an unknown parameter (the parameters of {} are: {})",
                tool.name,
                declared.join(", ")
            ),
        ));
    }
    let mut checked = Checked {
        sent: Map::new(),
        recorded: Map::new(),
        empty_query: false,
    };
    for (key, parameter) in &tool.parameters {
        let Some(value) = given.get(key).filter(|v| !v.is_null()) else {
            return Err(Refused::new(
                "missing_argument",
                format!("{key} is required"),
            ));
        };
        let wrong = |what: &str| Refused::new("invalid_arguments", format!("{key} must be {what}"));
        match parameter {
            Parameter::Enum { values } => {
                let text = value.as_str().ok_or_else(|| wrong("a string"))?;
                if !values.iter().any(|v| v == text) {
                    return Err(Refused::new(
                        "unknown_value",
                        format!("{key} is not one of its values"),
                    ));
                }
                checked.sent.insert(key.clone(), value.clone());
                checked.recorded.insert(key.clone(), value.clone());
            }
            Parameter::Number { integer, min, max } => {
                let number = value.as_f64().ok_or_else(|| wrong("a number"))?;
                if *integer && number.fract() != 0.0 {
                    return Err(wrong("a whole number"));
                }
                if min.is_some_and(|m| number < m) || max.is_some_and(|m| number > m) {
                    return Err(wrong("within its bounds"));
                }
                checked.sent.insert(key.clone(), value.clone());
                checked.recorded.insert(key.clone(), value.clone());
            }
            Parameter::Boolean {} => {
                let flag = value.as_bool().ok_or_else(|| wrong("true or false"))?;
                checked.sent.insert(key.clone(), Value::Bool(flag));
                checked.recorded.insert(key.clone(), Value::Bool(flag));
            }
            Parameter::Note { max_length } => {
                let raw = value.as_str().ok_or_else(|| wrong("a string"))?;
                let Some(text) = NoteText::clean(raw, *max_length as usize) else {
                    return Err(Refused::new("empty_note", format!("{key} is empty")));
                };
                checked
                    .recorded
                    .insert(key.clone(), json!({"length": text.chars()}));
                checked
                    .sent
                    .insert(key.clone(), Value::String(text.as_str().to_owned()));
            }
            Parameter::Query { max_length } => {
                let raw = value.as_str().ok_or_else(|| wrong("a string"))?;
                match NoteText::clean(raw, *max_length as usize) {
                    Some(text) => {
                        checked
                            .sent
                            .insert(key.clone(), Value::String(text.as_str().to_owned()));
                    }
                    None => checked.empty_query = true,
                }
            }
        }
    }
    Ok(checked)
}
