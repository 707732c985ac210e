//! The intent gate (034): the server withholds the sale until the model records `prospect`.

use super::Refusal;
use crate::config::{FieldConfig, ToolsConfig};

/// The contact's intent as the server knows it: one way, unknown → not_prospect → prospect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Intent {
    #[default]
    Unknown,
    NotProspect,
    Prospect,
}

impl Intent {
    pub fn from_value(value: &str) -> Option<Self> {
        match value {
            "not_prospect" => Some(Intent::NotProspect),
            "prospect" => Some(Intent::Prospect),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Unknown => "unknown",
            Intent::NotProspect => "not_prospect",
            Intent::Prospect => "prospect",
        }
    }
}

/// What a write touches, as far as the gate cares.
#[derive(Debug, Clone, Copy)]
pub enum Gated<'a> {
    /// `set_field` on a field.
    Field(&'a FieldConfig),
    /// `write_note`: never gated (034).
    Note,
    /// `send_flow`, `add_tag`, `remove_tag`, `schedule_nudge`: gated.
    Other,
}

/// 034's gate: before `prospect` only the intent field and notes may be written. A tenant with
/// no intent field has no gate (it does not sell). Fails closed: every other write is refused.
pub fn gate(tools: &ToolsConfig, intent: Intent, write: Gated<'_>) -> Result<(), Refusal> {
    if intent == Intent::Prospect || super::intent_field(tools).is_none() {
        return Ok(());
    }
    match write {
        Gated::Note => Ok(()),
        Gated::Field(field) if field.intent => Ok(()),
        Gated::Field(_) | Gated::Other => Err(Refusal::NotProspect),
    }
}

/// An intent write from `current`: one way, `prospect` final (a write leaving it is refused).
pub fn intent_write(current: Intent, value: Intent) -> Result<Intent, Refusal> {
    match (current, value) {
        (Intent::Prospect, Intent::Prospect) => Ok(Intent::Prospect),
        (Intent::Prospect, _) => Err(Refusal::ProspectFinal),
        (_, value) => Ok(value),
    }
}
