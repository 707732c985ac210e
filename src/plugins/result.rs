//! A read tool's answer, checked against its declared `result` before the model sees it.
//!
//! Invariants: undeclared keys are dropped; text is cut to `maxLength`, a list to `maxItems` of
//! `maxLength` each; a type failure, a missing required key, a body that is not a JSON object,
//! or a view over [`MAX_VIEW_CHARS`] once serialised is refused (the model gets
//! `{"available": false}`). Text and list values are the endpoint's words, so they come back
//! inside the turn's fence, as one JSON object on one fenced line under [`FENCED_KEY`];
//! numbers, booleans and enum values (checked against the config) are outside it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::config::plugins::ResultField;
use crate::fence::Fence;

/// The most characters a checked answer may take once serialised.
pub const MAX_VIEW_CHARS: usize = 2000;

/// Where the fenced (text and list) values go in the model's view.
pub const FENCED_KEY: &str = "fenced";

/// Why an answer was refused (for `plugin try` and the log; never a value from the answer).
pub type Refusal = String;

/// The model's view of a 2xx answer's `body`, or why it was refused.
pub fn check(
    fields: &BTreeMap<String, ResultField>,
    body: &[u8],
    fence: &Fence,
) -> Result<Value, Refusal> {
    let parsed: Value =
        serde_json::from_slice(body).map_err(|_| "the answer is not JSON".to_owned())?;
    let Value::Object(answer) = parsed else {
        return Err("the answer is not a JSON object".into());
    };
    let mut plain = Map::new();
    let mut fenced = Map::new();
    for (key, field) in fields {
        let Some(value) = answer.get(key).filter(|v| !v.is_null()) else {
            if field.optional() {
                continue;
            }
            return Err(format!("the required key {key} is missing"));
        };
        let checked = checked_value(field, value)
            .ok_or_else(|| format!("{key} is not what its result type declares"))?;
        if field.fenced() {
            fenced.insert(key.clone(), checked);
        } else {
            plain.insert(key.clone(), checked);
        }
    }
    let mut view = Map::new();
    view.insert("available".into(), Value::Bool(true));
    view.extend(plain);
    if !fenced.is_empty() {
        // `Value`'s Display is compact JSON: one line, newlines escaped.
        let line = fence.wrap_inline(&Value::Object(fenced).to_string());
        view.insert(FENCED_KEY.into(), Value::String(line));
    }
    let view = Value::Object(view);
    if view.to_string().chars().count() > MAX_VIEW_CHARS {
        return Err(format!(
            "the checked answer is over {MAX_VIEW_CHARS} characters"
        ));
    }
    Ok(view)
}

/// `{"available": false}`: what the model gets when a read gives nothing usable.
pub fn unavailable() -> Value {
    json!({"available": false})
}

fn checked_value(field: &ResultField, value: &Value) -> Option<Value> {
    match field {
        ResultField::Enum { values, .. } => {
            let text = value.as_str()?;
            values.iter().any(|v| v == text).then(|| value.clone())
        }
        ResultField::Number {
            integer, min, max, ..
        } => {
            let number = value.as_f64()?;
            let whole = !*integer || number.fract() == 0.0;
            let within = !min.is_some_and(|m| number < m) && !max.is_some_and(|m| number > m);
            (whole && within).then(|| value.clone())
        }
        ResultField::Boolean { .. } => value.as_bool().map(Value::Bool),
        ResultField::Text { max_length, .. } => {
            Some(Value::String(cut(value.as_str()?, *max_length as usize)))
        }
        ResultField::List {
            max_items,
            max_length,
            ..
        } => {
            let items = value.as_array()?;
            let mut kept = Vec::new();
            for item in items {
                let text = item.as_str()?;
                if kept.len() < *max_items as usize {
                    kept.push(Value::String(cut(text, *max_length as usize)));
                }
            }
            Some(Value::Array(kept))
        }
    }
}

/// `text` cut to at most `max` characters.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}
