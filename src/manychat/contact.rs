//! The contact as this service may see it: getInfo's subscriber reduced to tag names and custom
//! field name/value pairs (024 § get_contact returns a whitelist, never the subscriber).
//!
//! Invariants:
//! - The identifiers of ManyChat's subscriber record (name, phone, email, WhatsApp number,
//!   profile picture, last input text, ids, …) are never deserialized: the parser names only
//!   `tags` and `custom_fields`, and serde skips every other key unread. Nothing outside this
//!   module can obtain them from a [`ContactRecord`].
//! - Parsing is lenient (real payloads carry more keys than the Swagger and many are optional):
//!   a missing or null list is empty, an entry without a string name is skipped, and
//!   `custom_fields` is accepted both as getInfo's array and as the object keyed by field name
//!   that ManyChat's "Full Contact Data" uses.
//! - `Debug` prints tag names and field names but never field values: a value may be a note
//!   (the contact's words), the reply text or the contact token (C5).

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// What getInfo says about a contact, minus every identifier.
#[derive(Clone, PartialEq, Default)]
pub struct ContactRecord {
    /// The ManyChat names of the tags the contact has, in ManyChat's order.
    pub tags: Vec<String>,
    /// Each custom field's ManyChat name and its value as ManyChat typed it (string, number,
    /// boolean, date string; `null` when the field is unset).
    pub fields: Vec<(String, Value)>,
}

impl ContactRecord {
    /// Whether the contact has the tag. ManyChat tag names are matched exactly.
    pub fn has_tag(&self, name: &str) -> bool {
        self.tags.iter().any(|t| t == name)
    }

    /// The value of a custom field. ManyChat field names are not case-sensitive, so neither is
    /// this lookup.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

impl fmt::Debug for ContactRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct FieldNames<'a>(&'a [(String, Value)]);
        impl fmt::Debug for FieldNames<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map()
                    .entries(self.0.iter().map(|(n, v)| (n, value_kind(v))))
                    .finish()
            }
        }
        f.debug_struct("ContactRecord")
            .field("tags", &self.tags)
            .field("fields", &FieldNames(&self.fields))
            .finish()
    }
}

/// The JSON kind of a value, printed instead of the value.
fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Why getInfo's body is not a contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ContactParseError {
    #[error("getInfo body is not JSON")]
    NotJson,
    #[error("getInfo body has no data object")]
    NoData,
}

/// The part of getInfo's envelope we read; `status` is checked by the client.
#[derive(Deserialize)]
struct GetInfoBody {
    #[serde(default)]
    data: Option<RawSubscriber>,
}

/// The only two keys of the subscriber that are deserialized; the rest are skipped unread.
#[derive(Deserialize)]
struct RawSubscriber {
    #[serde(default)]
    tags: Value,
    #[serde(default)]
    custom_fields: Value,
}

/// Parses a getInfo response body (`{"status":"success","data":{…}}`) into a [`ContactRecord`].
pub fn parse_get_info(body: &[u8]) -> Result<ContactRecord, ContactParseError> {
    let parsed: GetInfoBody = serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            // Valid JSON of the wrong shape (data is not an object).
            ContactParseError::NoData
        } else {
            ContactParseError::NotJson
        }
    })?;
    let raw = parsed.data.ok_or(ContactParseError::NoData)?;
    Ok(ContactRecord {
        tags: tag_names(raw.tags),
        fields: field_pairs(raw.custom_fields),
    })
}

fn tag_names(tags: Value) -> Vec<String> {
    let Value::Array(entries) = tags else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|entry| match entry {
            Value::Object(mut tag) => match tag.remove("name") {
                Some(Value::String(name)) if !name.is_empty() => Some(name),
                _ => None,
            },
            Value::String(name) if !name.is_empty() => Some(name),
            _ => None,
        })
        .collect()
}

fn field_pairs(fields: Value) -> Vec<(String, Value)> {
    match fields {
        Value::Array(entries) => entries
            .into_iter()
            .filter_map(|entry| {
                let Value::Object(mut field) = entry else {
                    return None;
                };
                let Some(Value::String(name)) = field.remove("name") else {
                    return None;
                };
                if name.is_empty() {
                    return None;
                }
                Some((name, field.remove("value").unwrap_or(Value::Null)))
            })
            .collect(),
        Value::Object(map) => map
            .into_iter()
            .filter(|(name, _)| !name.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

/// A full getInfo body with invented identifiers, shaped like ManyChat's Subscriber with the
/// extra keys real payloads carry.
#[cfg(test)]
pub(crate) fn full_get_info_fixture() -> Value {
    serde_json::json!({
        "status": "success",
        "data": {
            "id": "7300001",
            "page_id": "4400001",
            "user_refs": [],
            "first_name": "Ferdinand",
            "last_name": "Quillfeather",
            "name": "Ferdinand Quillfeather",
            "gender": "male",
            "profile_pic": "https://cdn.example.test/pics/ferdinand-quillfeather.jpg",
            "locale": "en_US",
            "language": "English",
            "timezone": "UTC+01",
            "live_chat_url": "https://app.manychat.example/live/7300001",
            "last_input_text": "my card ends in 4242, call me",
            "optin_phone": true,
            "phone": "+15550199876",
            "optin_email": true,
            "email": "ferdinand.quillfeather@example.test",
            "subscribed": "2026-01-02T10:00:00+00:00",
            "last_interaction": null,
            "ig_last_interaction": null,
            "last_seen": "2026-01-03T10:00:00+00:00",
            "is_followup_enabled": true,
            "ig_username": "fquillfeather",
            "ig_id": 880001,
            "whatsapp_phone": "+15550123456",
            "optin_whatsapp": true,
            "custom_fields": [
                {"id": 1, "name": "experience", "type": "text", "description": "", "value": "none"},
                {"id": 2, "name": "sales_stage", "type": "text", "description": null, "value": "nurturing"},
                {"id": 3, "name": "age", "type": "number", "value": 41},
                {"id": 4, "name": "agent_note_goal", "type": "text", "value": null},
                {"id": 5, "type": "text", "value": "entry without a name is skipped"}
            ],
            "tags": [
                {"id": 11, "name": "interested_foundation"},
                {"id": 12, "name": "source-ad"},
                {"id": 13}
            ]
        }
    })
}

/// The invented identifiers of [`full_get_info_fixture`]: none may leave this module.
#[cfg(test)]
pub(crate) const INVENTED_IDENTIFIERS: [&str; 9] = [
    "Ferdinand",
    "Quillfeather",
    "+15550199876",
    "5550199876",
    "ferdinand.quillfeather@example.test",
    "+15550123456",
    "ferdinand-quillfeather.jpg",
    "4242",
    "7300001",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: &Value) -> ContactRecord {
        parse_get_info(value.to_string().as_bytes()).expect("fixture parses")
    }

    #[test]
    fn spec_024_verification_1_getinfo_is_reduced_to_tags_and_custom_fields() {
        let record = parse(&full_get_info_fixture());
        assert_eq!(record.tags, vec!["interested_foundation", "source-ad"]);
        assert_eq!(
            record.fields,
            vec![
                ("experience".to_owned(), json!("none")),
                ("sales_stage".to_owned(), json!("nurturing")),
                ("age".to_owned(), json!(41)),
                ("agent_note_goal".to_owned(), Value::Null),
            ]
        );
        assert_eq!(record.field("Sales_Stage"), Some(&json!("nurturing")));
        assert!(record.has_tag("source-ad"));
        assert!(!record.has_tag("Source-Ad"));
    }

    #[test]
    fn spec_024_verification_1_identifiers_never_leave_the_record() {
        let record = parse(&full_get_info_fixture());
        let debug = format!("{record:?}");
        let contents = format!("{:?} {:?}", record.tags, record.fields);
        for identifier in INVENTED_IDENTIFIERS {
            assert!(
                !debug.contains(identifier),
                "{identifier} in Debug: {debug}"
            );
            assert!(!contents.contains(identifier), "{identifier} in the record");
        }
    }

    #[test]
    fn c5_contact_record_debug_prints_field_names_not_values() {
        let record = ContactRecord {
            tags: vec!["vip".to_owned()],
            fields: vec![(
                "agent_note_goal".to_owned(),
                json!("wants to change careers"),
            )],
        };
        let debug = format!("{record:?}");
        assert!(debug.contains("agent_note_goal") && debug.contains("vip"));
        assert!(!debug.contains("careers"), "{debug}");
    }

    #[test]
    fn getinfo_parsing_is_lenient_about_missing_and_odd_keys() {
        let minimal = parse(&json!({"status": "success", "data": {}}));
        assert_eq!(minimal, ContactRecord::default());

        let nulls = parse(&json!({"data": {"tags": null, "custom_fields": null}}));
        assert_eq!(nulls, ContactRecord::default());

        let keyed = parse(&json!({"data": {
            "tags": ["plain-string-tag", 7, {"name": ""}],
            "custom_fields": {"experience": "some", "opted_in": true}
        }}));
        assert_eq!(keyed.tags, vec!["plain-string-tag"]);
        assert_eq!(keyed.field("experience"), Some(&json!("some")));
        assert_eq!(keyed.field("opted_in"), Some(&json!(true)));
    }

    #[test]
    fn getinfo_without_data_or_json_is_an_error() {
        assert_eq!(
            parse_get_info(br#"{"status":"success"}"#),
            Err(ContactParseError::NoData)
        );
        assert_eq!(
            parse_get_info(br#"{"status":"success","data":"nope"}"#),
            Err(ContactParseError::NoData)
        );
        assert_eq!(parse_get_info(b"<html>"), Err(ContactParseError::NotJson));
    }
}
