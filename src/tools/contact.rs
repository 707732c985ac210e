//! The get_contact result (024 § get_contact returns a whitelist, never the subscriber): a
//! [`ContactRecord`] reduced to what `tools.json` lists as readable, named by configured ids.
//!
//! Invariants:
//! - Only configured ids and configured values appear outside the fence: `tags` lists the
//!   configured `tags[].id` and `readable.tags[].id` whose ManyChat tag the contact has; `fields`
//!   maps each configured field and `readable.fields[]` to one of its configured values, or
//!   `"other"` for anything else (a flow may have filled it from the contact's typing). Unset
//!   (absent, null or empty) values are omitted.
//! - Note texts are the contact's words at one remove, so they come back inside the turn's fence
//!   (C4), as one JSON object on one fenced line, cleaned like a note being written.
//! - ManyChat names (tags, fields) and the subscriber's identifiers never appear: the record
//!   holds no identifiers, and no ManyChat name is copied into the result.

use serde_json::{Map, Value, json};

use crate::config::{FieldConfig, MAX_NOTE_LENGTH, ToolsConfig};
use crate::fence::Fence;
use crate::manychat::ContactRecord;

use crate::actions::NoteText;

/// What a field value outside the configured values is returned as.
pub const OTHER_VALUE: &str = "other";

/// Whether the config gives get_contact anything to return: without a readable item the tool is
/// not offered, as a tool with an empty list is not (012).
pub fn anything_readable(tools: &ToolsConfig) -> bool {
    !(tools.tags.is_empty()
        && tools.fields.is_empty()
        && tools.readable.tags.is_empty()
        && tools.readable.fields.is_empty()
        && tools.notes.is_empty())
}

/// The tool result of a successful read.
pub fn contact_view(tools: &ToolsConfig, record: &ContactRecord, fence: &Fence) -> Value {
    contact_view_with(tools, &|_| false, record, fence)
}

/// [`contact_view`] where the offering field's values are the catalog's ids when `tools.json`
/// leaves them out (`in_catalog` says whether an id is one).
pub fn contact_view_with(
    tools: &ToolsConfig,
    in_catalog: &dyn Fn(&str) -> bool,
    record: &ContactRecord,
    fence: &Fence,
) -> Value {
    let tags: Vec<&str> = tools
        .tags
        .iter()
        .chain(&tools.readable.tags)
        .filter(|t| record.has_tag(&t.tag))
        .map(|t| t.id.as_str())
        .collect();

    let mut fields = Map::new();
    for field in tools.fields.iter().chain(&tools.readable.fields) {
        if let Some(value) = record
            .field(&field.field)
            .and_then(|v| configured_value(field, in_catalog, v))
        {
            fields.insert(field.id.clone(), Value::String(value));
        }
    }

    let mut view = json!({"available": true, "tags": tags, "fields": fields});
    if !tools.notes.is_empty() {
        let mut notes = Map::new();
        for note in &tools.notes {
            let text = record
                .field(&note.field)
                .and_then(Value::as_str)
                .and_then(|t| NoteText::clean(t, MAX_NOTE_LENGTH as usize));
            if let Some(text) = text {
                notes.insert(note.id.clone(), Value::String(text.as_str().to_owned()));
            }
        }
        // `Value`'s Display is compact JSON: one line, newlines escaped.
        view["notes"] = Value::String(fence.wrap_inline(&Value::Object(notes).to_string()));
    }
    view
}

/// The configured value id a ManyChat value stands for, `"other"` when it is none of them, or
/// `None` when the field is unset.
fn configured_value(
    field: &FieldConfig,
    in_catalog: &dyn Fn(&str) -> bool,
    value: &Value,
) -> Option<String> {
    let text = match value {
        Value::Null => return None,
        Value::String(s) if s.trim().is_empty() => return None,
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(_) | Value::Object(_) => return Some(OTHER_VALUE.to_owned()),
    };
    let catalog_valued = field.offering && field.values.is_empty();
    Some(
        if field.values.contains(&text) || (catalog_valued && in_catalog(&text)) {
            text
        } else {
            OTHER_VALUE.to_owned()
        },
    )
}
