//! One AgentReply schema, a wire copy per provider.
//!
//! The agent keeps one JSON Schema for the reply, with every bound the reply needs (1–3
//! messages, 1000 characters each, a confidence from 0 to 1), and validates every provider's
//! output against it after parsing (`reply::parse_reply`, schemars + jsonschema). What a
//! provider *receives* is the part of that schema its structured output documents; one function
//! per provider produces it, and the tests check each copy against an allow-list of keywords
//! written from that provider's documentation.
//!
//! A bound a provider cannot take is not lost: it is named in the node's `description`, so the
//! model still reads it, and the local validation enforces it.

use serde_json::{Map, Value};

/// Keywords that give a schema its shape, documented by OpenAI's strict mode and Anthropic's
/// structured outputs alike.
const STRUCTURE: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "title",
];

/// OpenAI strict mode's bounds: Structured Outputs guide, "Supported schemas" → "Supported
/// properties" (strings: `pattern`, `format`; numbers: `multipleOf`, `maximum`,
/// `exclusiveMaximum`, `minimum`, `exclusiveMinimum`; arrays: `minItems`, `maxItems`). Not for
/// fine-tuned models (same section). `minLength`/`maxLength` are not in the list.
pub const OPENAI_BOUNDS: &[&str] = &[
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];

/// The string formats Anthropic's structured outputs accept: Structured outputs guide, "JSON
/// Schema limitations" → "Supported features".
pub const ANTHROPIC_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The schema OpenAI receives in `response_format.json_schema.schema` (strict). The local
/// schema is already in strict form (every property required, `additionalProperties: false`,
/// optional values nullable); this keeps the documented subset and, when `bounds` is false
/// (fine-tuned models), no bounds at all.
pub fn for_openai(schema: &Value, bounds: bool) -> Value {
    let mut wire = schema.clone();
    retain(&mut wire, &|keyword, _value| {
        STRUCTURE.contains(&keyword) || (bounds && OPENAI_BOUNDS.contains(&keyword))
    });
    wire
}

/// The schema Anthropic receives in `output_config.format.schema`. Anthropic documents no
/// numeric constraints, no string length constraints, and `minItems` of 0 or 1 only; a
/// nullable value is written as `anyOf` with a `null` branch (its SDK's transform accepts a
/// single `type` per node).
pub fn for_anthropic(schema: &Value) -> Value {
    single_typed_retaining(schema, &|keyword, value| match keyword {
        "format" => value
            .as_str()
            .is_some_and(|f| ANTHROPIC_FORMATS.contains(&f)),
        "minItems" => matches!(value.as_u64(), Some(0 | 1)),
        "additionalProperties" => value == &Value::Bool(false),
        _ => STRUCTURE.contains(&keyword),
    })
}

/// The JSON Schema keywords Gemini's `generationConfig.responseJsonSchema` takes: Gemini API
/// reference, `GenerationConfig.response_json_schema` ("only the following properties are
/// supported"): `$id`, `$defs`, `$ref`, `$anchor`, `type`, `format`, `title`, `description`,
/// `enum` (strings and numbers), `items`, `prefixItems`, `minItems`, `maxItems`, `minimum`,
/// `maximum`, `anyOf`, `oneOf`, `properties`, `additionalProperties`, `required`, and the
/// non-standard `propertyOrdering`. No string lengths, no `const`, no `pattern`.
pub const GOOGLE_KEYWORDS: &[&str] = &[
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
];

/// The schema Gemini receives in `generationConfig.responseJsonSchema`: the documented keyword
/// list above, one `type` per node (a nullable value as `anyOf` with a `null` branch, as the
/// reference lists no type arrays), an `enum` of strings or numbers only.
pub fn for_google(schema: &Value) -> Value {
    single_typed_retaining(schema, &|keyword, value| match keyword {
        "enum" => value
            .as_array()
            .is_some_and(|values| values.iter().all(|v| v.is_string() || v.is_number())),
        _ => GOOGLE_KEYWORDS.contains(&keyword),
    })
}

/// The schema Ollama receives in `format`. Ollama documents `format` as "a JSON schema" with
/// no subset (docs/api.md, "Generate a chat completion"): it turns the schema into a grammar
/// and constrains every token to it, bounds included. The local schema goes as it is.
pub fn for_ollama(schema: &Value) -> Value {
    schema.clone()
}

/// Keeps, in every schema node, the keywords `keep` accepts; the others are named in the
/// node's description. Recurses through `properties`, `items`, `anyOf` and `$defs`.
/// `schema` with one `type` per node (a nullable value as `anyOf` with a `null` branch) and
/// only the keywords `keep` accepts.
fn single_typed_retaining(schema: &Value, keep: &dyn Fn(&str, &Value) -> bool) -> Value {
    let mut wire = schema.clone();
    nullable_type_lists_to_any_of(&mut wire);
    retain(&mut wire, keep);
    wire
}

fn retain(node: &mut Value, keep: &dyn Fn(&str, &Value) -> bool) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for prop in props.values_mut() {
            retain(prop, keep);
        }
    }
    if let Some(Value::Object(defs)) = obj.get_mut("$defs") {
        for def in defs.values_mut() {
            retain(def, keep);
        }
    }
    if let Some(items) = obj.get_mut("items") {
        retain(items, keep);
    }
    if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
        for branch in branches {
            retain(branch, keep);
        }
    }
    let dropped: Vec<String> = obj
        .iter()
        .filter(|(k, v)| !keep(k, v))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    obj.retain(|k, v| keep(k, v));
    if !dropped.is_empty() {
        let note = format!("Limits: {}.", dropped.join(", "));
        let description = match obj.get("description").and_then(Value::as_str) {
            Some(text) => format!("{text} {note}"),
            None => note,
        };
        obj.insert("description".into(), Value::String(description));
    }
}

/// `{"type": [T, "null"], …}` becomes `{"anyOf": [{"type": T, …}, {"type": "null"}]}`; the
/// description stays on the outer node, an enum loses its `null` (the null branch carries it).
fn nullable_type_lists_to_any_of(node: &mut Value) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(children)) = obj.get_mut(key) {
            for child in children.values_mut() {
                nullable_type_lists_to_any_of(child);
            }
        }
    }
    if let Some(items) = obj.get_mut("items") {
        nullable_type_lists_to_any_of(items);
    }
    if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
        for branch in branches {
            nullable_type_lists_to_any_of(branch);
        }
    }
    let Some(Value::Array(types)) = obj.get("type") else {
        return;
    };
    let others: Vec<Value> = types
        .iter()
        .filter(|t| t.as_str() != Some("null"))
        .cloned()
        .collect();
    if others.len() != 1 || others.len() == types.len() {
        return;
    }
    let mut inner = Map::new();
    let description = obj.remove("description");
    let title = obj.remove("title");
    obj.remove("type");
    for (k, v) in std::mem::take(obj) {
        inner.insert(k, v);
    }
    inner.insert("type".into(), others[0].clone());
    if let Some(Value::Array(values)) = inner.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(description) = description {
        obj.insert("description".into(), description);
    }
    if let Some(title) = title {
        obj.insert("title".into(), title);
    }
    obj.insert(
        "anyOf".into(),
        Value::Array(vec![
            Value::Object(inner),
            serde_json::json!({"type": "null"}),
        ]),
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::conformance::{anthropic, google, openai, schema_keywords as all_keywords};
    use crate::model::reply::{agent_reply_schema, parse_reply};

    /// Anthropic's allow-list, written from its Structured outputs guide (see
    /// `conformance::anthropic::schema_keyword_allowed` for the source of each keyword).
    fn anthropic_allows(keyword: &str, value: &Value) -> bool {
        anthropic::schema_keyword_allowed(keyword, value)
    }

    /// OpenAI's strict allow-list, written from its Structured Outputs guide, "Supported
    /// schemas" (see `conformance::openai::strict_keyword_allowed`); no bounds when `bounds` is
    /// false (fine-tuned models).
    fn openai_allows(keyword: &str, value: &Value, bounds: bool) -> bool {
        openai::strict_keyword_allowed(keyword, value)
            && (bounds || !OPENAI_BOUNDS.contains(&keyword))
    }

    #[test]
    fn anthropic_wire_schema_has_no_numeric_or_length_bounds() {
        let wire = for_anthropic(agent_reply_schema());
        for (keyword, value) in all_keywords(&wire) {
            assert!(
                anthropic_allows(&keyword, &value),
                "Anthropic refuses {keyword}: {value}"
            );
        }
        // The nullable values are anyOf with a null branch, one type per node.
        for (keyword, value) in all_keywords(&wire) {
            if keyword == "type" {
                assert!(value.is_string(), "type list left: {value}");
            }
        }
        let reason = &wire["properties"]["escalation_reason"]["anyOf"];
        assert_eq!(reason[1], json!({"type": "null"}));
        assert_eq!(reason[0]["type"], json!("string"));
        assert!(!reason[0]["enum"].as_array().unwrap().contains(&Value::Null));
        // The dropped bounds are named for the model.
        let messages = wire["properties"]["messages"]["description"]
            .as_str()
            .unwrap();
        assert!(messages.contains("maxItems 3"), "{messages}");
        assert_eq!(wire["properties"]["messages"]["minItems"], json!(1));
    }

    #[test]
    fn openai_wire_schema_is_the_documented_strict_subset() {
        let wire = for_openai(agent_reply_schema(), true);
        for (keyword, value) in all_keywords(&wire) {
            assert!(
                openai_allows(&keyword, &value, true),
                "not in OpenAI's strict subset: {keyword}: {value}"
            );
        }
        // Strict mode: every object lists all its properties as required, no extra keys.
        fn check_objects(node: &Value) {
            if node["type"] == json!("object") {
                let props: Vec<&String> = node["properties"].as_object().unwrap().keys().collect();
                let required = node["required"].as_array().unwrap();
                assert_eq!(props.len(), required.len());
                assert_eq!(node["additionalProperties"], json!(false));
            }
            for child in node["properties"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
            {
                check_objects(child);
            }
        }
        check_objects(&wire);
        assert!(wire.get("anyOf").is_none(), "no anyOf at the root");
        // Documented bounds stay; maxLength is named in the description instead.
        assert_eq!(wire["properties"]["messages"]["maxItems"], json!(3));
        assert_eq!(wire["properties"]["confidence"]["maximum"], json!(1));
        assert!(
            wire["properties"]["messages"]["items"]
                .get("maxLength")
                .is_none()
        );
    }

    #[test]
    fn openai_fine_tuned_wire_schema_carries_no_bounds() {
        let wire = for_openai(agent_reply_schema(), false);
        for (keyword, value) in all_keywords(&wire) {
            assert!(openai_allows(&keyword, &value, false), "{keyword}: {value}");
        }
    }

    #[test]
    fn bounds_dropped_from_the_wire_are_still_enforced_locally() {
        // What Anthropic's copy no longer says, the local schema still refuses.
        for (reply, keyword) in [
            (
                r#"{"messages":["a","b","c","d"],"escalate":false,"escalation_reason":null,"confidence":0.9,"closing_question":null}"#,
                "maxItems",
            ),
            (
                r#"{"messages":["a"],"escalate":false,"escalation_reason":null,"confidence":1.5,"closing_question":null}"#,
                "maximum",
            ),
        ] {
            let err = parse_reply(reply).expect_err(keyword);
            assert!(err.to_string().contains(keyword), "{err}");
        }
        let long = "x".repeat(1001);
        let reply = format!(
            r#"{{"messages":["{long}"],"escalate":false,"escalation_reason":null,"confidence":0.5,"closing_question":null}}"#
        );
        assert!(
            parse_reply(&reply)
                .unwrap_err()
                .to_string()
                .contains("maxLength")
        );
    }

    #[test]
    fn anthropic_and_google_wire_schemas_still_accept_every_valid_reply_shape() {
        // The wire copies are relaxations: replies valid locally are valid on the wire.
        for wire in [
            for_anthropic(agent_reply_schema()),
            for_google(agent_reply_schema()),
        ] {
            let validator = jsonschema::validator_for(&wire).expect("wire schema compiles");
            for reply in [
                json!({"messages": ["Hi"], "escalate": false, "escalation_reason": null,
                       "confidence": 0.9, "closing_question": null}),
                json!({"messages": ["Hi"], "escalate": true, "escalation_reason": "complaint",
                       "confidence": 0.2, "closing_question": "Anything else?"}),
            ] {
                assert!(validator.is_valid(&reply), "{reply}");
            }
        }
    }

    #[test]
    fn ollama_wire_schema_is_the_local_schema() {
        assert_eq!(&for_ollama(agent_reply_schema()), &**agent_reply_schema());
    }

    #[test]
    fn google_wire_schema_is_the_documented_json_schema_subset_and_keeps_its_bounds() {
        let wire = for_google(agent_reply_schema());
        for (keyword, value) in all_keywords(&wire) {
            assert!(
                google::schema_keyword_allowed(&keyword, &value),
                "Gemini refuses {keyword}: {value}"
            );
        }
        // Gemini takes array and number bounds; string lengths are named for the model.
        assert_eq!(wire["properties"]["messages"]["maxItems"], json!(3));
        assert_eq!(wire["properties"]["confidence"]["maximum"], json!(1));
        let item = &wire["properties"]["messages"]["items"];
        assert!(item.get("maxLength").is_none());
        assert!(
            item["description"]
                .as_str()
                .unwrap()
                .contains("maxLength 1000")
        );
        let reason = &wire["properties"]["escalation_reason"]["anyOf"];
        assert_eq!(reason[1], json!({"type": "null"}));
    }
}
