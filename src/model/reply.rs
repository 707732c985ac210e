//! AgentReply: what the model's final step must return, its JSON Schema, and the parser that is
//! the first guardrail (SYSTEM 4, C3).
//!
//! Invariants:
//! - The schema is generated once from the Rust type by schemars and post-processed into the form
//!   OpenAI's strict structured outputs accept: every object has `additionalProperties: false` and
//!   lists every property as required; optional values are nullable (`["string","null"]`, an enum
//!   with `null`); no `$ref`, no `format`. The same schema is sent to every provider and used to
//!   validate every provider's output, so what reaches a contact has passed one definition.
//! - `parse_reply` accepts a value only if it parses as JSON, validates against that schema and
//!   has `escalation_reason` non-null exactly when `escalate` is true.
//! - Errors never quote model output: they carry JSON Schema keywords, instance paths and
//!   positions, because the output may repeat the contact's words (C5).

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::escalation::EscalationReason;

/// Most messages one reply may carry (SYSTEM 4).
pub const MAX_REPLY_MESSAGES: usize = 3;
/// Longest message, in characters (SYSTEM 4).
pub const MAX_MESSAGE_CHARS: usize = 1000;

/// The reply to the contact's message, or a handoff to a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "AgentReply")]
pub struct AgentReply {
    /// The text sent to the contact: 1 to 3 messages, each at most 1000 characters.
    pub messages: Vec<String>,
    /// True hands the conversation to a person; the server then sends the tenant's own
    /// escalation message instead of `messages`.
    pub escalate: bool,
    /// Why the conversation is handed to a person: non-null exactly when `escalate` is true.
    pub escalation_reason: Option<EscalationReason>,
    /// How sure the agent is that the reply is grounded in the catalog, from 0 to 1.
    pub confidence: f64,
    /// An optional question that moves the conversation on, sent as the last message.
    pub closing_question: Option<String>,
}

/// Why a model output is not an AgentReply. Never holds any part of the output itself.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    #[error("model output is empty")]
    Empty,
    #[error("model output is not JSON ({category} at line {line}, column {column})")]
    Json {
        category: &'static str,
        line: usize,
        column: usize,
    },
    #[error("model output violates the AgentReply schema: {}", .violations.join("; "))]
    Schema {
        /// One entry per violation: `<instance path>: <keyword>`, e.g. `/messages: maxItems`.
        violations: Vec<String>,
    },
}

/// The AgentReply JSON Schema in OpenAI strict form, built once per process.
pub fn agent_reply_schema() -> &'static std::sync::Arc<Value> {
    static SCHEMA: OnceLock<std::sync::Arc<Value>> = OnceLock::new();
    SCHEMA.get_or_init(|| std::sync::Arc::new(build_schema()))
}

/// The compiled validator for [`agent_reply_schema`]. The schema is a constant of this crate, so
/// failing to compile it is a programming error caught by the unit tests, not a runtime input.
fn validator() -> Option<&'static jsonschema::Validator> {
    static VALIDATOR: OnceLock<Option<jsonschema::Validator>> = OnceLock::new();
    VALIDATOR
        .get_or_init(|| jsonschema::validator_for(agent_reply_schema()).ok())
        .as_ref()
}

/// Parses and validates the model's final output (the first guardrail of SYSTEM 4).
pub fn parse_reply(text: &str) -> Result<AgentReply, ReplyError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ReplyError::Empty);
    }
    let value: Value = serde_json::from_str(trimmed).map_err(|e| ReplyError::Json {
        category: match e.classify() {
            serde_json::error::Category::Io => "io",
            serde_json::error::Category::Syntax => "syntax",
            serde_json::error::Category::Data => "data",
            serde_json::error::Category::Eof => "truncated",
        },
        line: e.line(),
        column: e.column(),
    })?;

    let Some(validator) = validator() else {
        // Unreachable while the unit tests pass; failing closed keeps it safe regardless.
        return Err(ReplyError::Schema {
            violations: vec!["schema could not be compiled".to_owned()],
        });
    };
    // The common case, a valid reply, asks only yes or no; the violations are listed when
    // there are some.
    let violations: Vec<String> = if validator.is_valid(&value) {
        Vec::new()
    } else {
        validator
            .iter_errors(&value)
            .map(|e| {
                let path = e.instance_path().as_str();
                let path = if path.is_empty() { "/" } else { path };
                format!("{path}: {}", e.kind().keyword())
            })
            .collect()
    };
    if !violations.is_empty() {
        return Err(ReplyError::Schema { violations });
    }

    let reply: AgentReply = serde_json::from_value(value).map_err(|_| ReplyError::Schema {
        violations: vec!["/: shape".to_owned()],
    })?;
    if reply.escalate != reply.escalation_reason.is_some() {
        return Err(ReplyError::Schema {
            violations: vec![
                "/escalation_reason: must be non-null exactly when escalate is true".to_owned(),
            ],
        });
    }
    Ok(reply)
}

/// Generates the schema with schemars, then rewrites it into strict form.
fn build_schema() -> Value {
    let generated = schemars::schema_for!(AgentReply);
    let mut root = generated.to_value();
    let defs = root
        .as_object_mut()
        .and_then(|o| o.remove("$defs"))
        .unwrap_or(Value::Null);
    if let Some(obj) = root.as_object_mut() {
        obj.remove("$schema");
    }
    strictify(&mut root, &defs);

    // Bounds schemars cannot express on these types without attributes that would also leak
    // into serde: set them here, where the whole wire contract is visible at once.
    if let Some(props) = root.get_mut("properties").and_then(Value::as_object_mut) {
        if let Some(messages) = props.get_mut("messages").and_then(Value::as_object_mut) {
            messages.insert("minItems".into(), Value::from(1));
            messages.insert("maxItems".into(), Value::from(MAX_REPLY_MESSAGES));
            if let Some(items) = messages.get_mut("items").and_then(Value::as_object_mut) {
                items.insert("maxLength".into(), Value::from(MAX_MESSAGE_CHARS));
            }
        }
        if let Some(confidence) = props.get_mut("confidence").and_then(Value::as_object_mut) {
            confidence.insert("minimum".into(), Value::from(0));
            confidence.insert("maximum".into(), Value::from(1));
        }
        if let Some(question) = props
            .get_mut("closing_question")
            .and_then(Value::as_object_mut)
        {
            question.insert("maxLength".into(), Value::from(MAX_MESSAGE_CHARS));
        }
    }
    root
}

/// Rewrites one schema node (recursively) into OpenAI strict form.
fn strictify(node: &mut Value, defs: &Value) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    inline_refs(obj, defs);
    collapse_nullable_any_of(obj);
    obj.remove("format");

    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for prop in props.values_mut() {
            strictify(prop, defs);
        }
    }
    if let Some(items) = obj.get_mut("items") {
        strictify(items, defs);
    }
    if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
        for branch in branches {
            strictify(branch, defs);
        }
    }

    let is_object = obj.get("type").and_then(Value::as_str) == Some("object");
    if is_object {
        let names: Vec<Value> = obj
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().map(Value::from).collect())
            .unwrap_or_default();
        obj.insert("required".into(), Value::Array(names));
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
}

/// Replaces a `$ref` into `$defs` with the definition itself, keeping the node's own keywords
/// (such as `description`).
fn inline_refs(obj: &mut Map<String, Value>, defs: &Value) {
    if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
        for branch in branches.iter_mut() {
            if let Some(b) = branch.as_object_mut() {
                inline_refs(b, defs);
            }
        }
    }
    let Some(Value::String(reference)) = obj.remove("$ref") else {
        return;
    };
    let name = reference.trim_start_matches("#/$defs/");
    if let Some(Value::Object(def)) = defs.get(name) {
        for (k, v) in def {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// `anyOf: [<enum or scalar>, {type: null}]` (how schemars spells `Option<T>` for a referenced
/// type) becomes one node whose `type` includes `"null"` and whose `enum`, if any, includes
/// `null`: the form OpenAI documents for strict nullable values.
fn collapse_nullable_any_of(obj: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = obj.get("anyOf") else {
        return;
    };
    let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
    if branches.len() != 2 || !branches.iter().any(is_null) {
        return;
    }
    let Some(Value::Object(inner)) = branches.iter().find(|b| !is_null(b)).cloned() else {
        return;
    };
    let Some(Value::String(kind)) = inner.get("type").cloned() else {
        return;
    };
    obj.remove("anyOf");
    for (k, v) in inner {
        if k != "title" {
            obj.entry(k).or_insert(v);
        }
    }
    obj.insert("type".into(), serde_json::json!([kind, "null"]));
    if let Some(Value::Array(values)) = obj.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> Value {
        json!({
            "messages": ["The Foundation Course is 450.00 USD."],
            "escalate": false,
            "escalation_reason": null,
            "confidence": 0.9,
            "closing_question": null
        })
    }

    fn parse_value(v: &Value) -> Result<AgentReply, ReplyError> {
        parse_reply(&v.to_string())
    }

    /// Walks every schema node and asserts OpenAI's strict rules on it.
    fn assert_strict(node: &Value, at: &str) {
        let Some(obj) = node.as_object() else { return };
        assert!(!obj.contains_key("$ref"), "{at}: $ref left");
        assert!(!obj.contains_key("format"), "{at}: format left");
        assert!(!obj.contains_key("allOf"), "{at}: allOf");
        assert!(!obj.contains_key("oneOf"), "{at}: oneOf");
        if obj.get("type").and_then(Value::as_str) == Some("object") {
            assert_eq!(
                obj.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{at}: additionalProperties"
            );
            let props: Vec<&String> = obj["properties"].as_object().unwrap().keys().collect();
            let required: Vec<&str> = obj["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            for p in props {
                assert!(required.contains(&p.as_str()), "{at}: {p} not required");
            }
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                assert_strict(v, &format!("{at}/{k}"));
            }
        }
        if let Some(items) = obj.get("items") {
            assert_strict(items, &format!("{at}/items"));
        }
    }

    #[test]
    fn system_4_schema_is_strict_compatible() {
        let schema = agent_reply_schema();
        assert_eq!(schema["type"], "object");
        assert!(schema.get("$defs").is_none());
        assert!(schema.get("anyOf").is_none(), "no anyOf at the root");
        assert_strict(schema, "");
        let props = &schema["properties"];
        assert_eq!(props["messages"]["minItems"], 1);
        assert_eq!(props["messages"]["maxItems"], 3);
        assert_eq!(props["messages"]["items"]["maxLength"], 1000);
        assert_eq!(props["confidence"]["minimum"], 0);
        assert_eq!(props["confidence"]["maximum"], 1);
        assert_eq!(props["closing_question"]["type"], json!(["string", "null"]));
        assert_eq!(
            props["escalation_reason"]["type"],
            json!(["string", "null"])
        );
        let reasons = props["escalation_reason"]["enum"].as_array().unwrap();
        for r in [
            json!("price_negotiation"),
            json!("complaint"),
            json!("out_of_scope"),
            json!("explicit_request"),
            json!("low_confidence"),
            json!("payment_reported"),
            Value::Null,
        ] {
            assert!(reasons.contains(&r), "enum lacks {r}");
        }
        assert_eq!(reasons.len(), 7);
    }

    #[test]
    fn system_4_valid_reply_parses() {
        let reply = parse_value(&valid()).unwrap();
        assert_eq!(reply.messages, vec!["The Foundation Course is 450.00 USD."]);
        assert!(!reply.escalate);
        assert_eq!(reply.confidence, 0.9);
    }

    #[test]
    fn system_4_escalating_reply_with_reason_parses() {
        let mut v = valid();
        v["escalate"] = json!(true);
        v["escalation_reason"] = json!("payment_reported");
        let reply = parse_value(&v).unwrap();
        assert_eq!(
            reply.escalation_reason,
            Some(EscalationReason::PaymentReported)
        );
    }

    /// A valid reply with `key` set to `value`.
    fn valid_with(key: &str, value: Value) -> Value {
        let mut v = valid();
        v[key] = value;
        v
    }

    fn schema_violations(v: &Value) -> Vec<String> {
        match parse_value(v) {
            Err(ReplyError::Schema { violations }) => violations,
            other => panic!("expected a schema error, got {other:?}"),
        }
    }

    #[test]
    fn system_4_schema_rejects_four_messages() {
        let v = valid_with("messages", json!(["a", "b", "c", "d"]));
        assert_eq!(schema_violations(&v), vec!["/messages: maxItems"]);
    }

    #[test]
    fn system_4_schema_rejects_zero_messages() {
        let v = valid_with("messages", json!([]));
        assert_eq!(schema_violations(&v), vec!["/messages: minItems"]);
    }

    #[test]
    fn system_4_schema_rejects_message_of_1001_chars() {
        let mut v = valid();
        v["messages"] = json!(["ok", "x".repeat(1001)]);
        assert_eq!(schema_violations(&v), vec!["/messages/1: maxLength"]);
        // Exactly 1000 is allowed.
        v["messages"] = json!(["x".repeat(1000)]);
        assert!(parse_value(&v).is_ok());
    }

    #[test]
    fn system_4_schema_rejects_confidence_1_5() {
        let mut v = valid();
        v["confidence"] = json!(1.5);
        assert_eq!(schema_violations(&v), vec!["/confidence: maximum"]);
        v["confidence"] = json!(-0.1);
        assert_eq!(schema_violations(&v), vec!["/confidence: minimum"]);
    }

    #[test]
    fn system_4_schema_rejects_unknown_key() {
        let violations = schema_violations(&valid_with("note", json!("Invented Person said hi")));
        assert_eq!(violations, vec!["/: additionalProperties"]);
        // The error never repeats the model's keys or values.
        let text = ReplyError::Schema { violations }.to_string();
        assert!(!text.contains("Invented Person"));
        assert!(!text.contains("note"));
    }

    #[test]
    fn system_4_schema_rejects_missing_key() {
        let mut v = valid();
        v.as_object_mut().unwrap().remove("closing_question");
        assert_eq!(schema_violations(&v), vec!["/: required"]);
    }

    #[test]
    fn system_4_reason_without_escalate_is_a_schema_failure() {
        let violations = schema_violations(&valid_with("escalation_reason", json!("complaint")));
        assert!(violations[0].starts_with("/escalation_reason"));
    }

    #[test]
    fn system_4_escalate_without_reason_is_a_schema_failure() {
        let violations = schema_violations(&valid_with("escalate", json!(true)));
        assert!(violations[0].starts_with("/escalation_reason"));
    }

    #[test]
    fn system_4_unknown_reason_is_rejected() {
        let mut v = valid();
        v["escalate"] = json!(true);
        v["escalation_reason"] = json!("bored");
        assert_eq!(schema_violations(&v), vec!["/escalation_reason: enum"]);
    }

    #[test]
    fn system_4_bad_json_is_an_error_without_quoting_output() {
        let err = parse_reply("{\"messages\": [\"Invented Person").unwrap_err();
        assert!(matches!(
            err,
            ReplyError::Json {
                category: "truncated",
                ..
            }
        ));
        assert!(!err.to_string().contains("Invented"));
        assert!(matches!(
            parse_reply("not json at all").unwrap_err(),
            ReplyError::Json { .. }
        ));
    }

    #[test]
    fn system_4_empty_output_is_an_error() {
        assert_eq!(parse_reply(""), Err(ReplyError::Empty));
        assert_eq!(parse_reply("  \n\t "), Err(ReplyError::Empty));
    }

    #[test]
    fn system_4_non_object_json_is_a_schema_failure() {
        assert!(matches!(
            parse_reply("[1,2]"),
            Err(ReplyError::Schema { .. })
        ));
        assert!(matches!(
            parse_reply("\"hello\""),
            Err(ReplyError::Schema { .. })
        ));
    }
}
