//! What a ManyChat account holds that the wiring depends on: its flows, tags and custom fields,
//! read through the page API (`GET /fb/page/getFlows`, `/fb/page/getTags`,
//! `/fb/page/getCustomFields`), and the check of a deployment's names against it
//! (`manychat-agent manychat check`).
//!
//! Invariants:
//! - Parsing is lenient: unknown keys are ignored and an entry without a name is skipped, since
//!   real payloads carry more than ManyChat's schema says.
//! - The check only reads; it reports every problem at once, one line each, naming where the
//!   name is configured, the name, and what to do.
//! - Custom field names are compared without regard to case (ManyChat's `field_name` is not
//!   case-sensitive); flow namespaces and tag names exactly.

use serde_json::Value;

/// A flow of the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountFlow {
    /// The namespace `sendFlow` takes (`content20250301000000_200001`).
    pub ns: String,
    pub name: String,
}

/// A custom field of the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountField {
    pub name: String,
    /// ManyChat's type: `text`, `number`, `date`, `datetime` or `boolean`.
    pub kind: String,
}

/// The account's flows, tags and custom fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Account {
    pub flows: Vec<AccountFlow>,
    pub tags: Vec<String>,
    pub fields: Vec<AccountField>,
}

/// getFlows' `data`: `{"flows": [{"ns", "name", "folder_id"}], "folders": […]}`.
pub(crate) fn parse_flows(data: &Value) -> Option<Vec<AccountFlow>> {
    let flows = data.get("flows")?.as_array()?;
    Some(
        flows
            .iter()
            .filter_map(|flow| {
                Some(AccountFlow {
                    ns: flow.get("ns")?.as_str()?.to_owned(),
                    name: flow
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                })
            })
            .collect(),
    )
}

/// getTags' `data`: `[{"id", "name"}]`.
pub(crate) fn parse_tags(data: &Value) -> Option<Vec<String>> {
    Some(
        data.as_array()?
            .iter()
            .filter_map(|tag| Some(tag.get("name")?.as_str()?.to_owned()))
            .collect(),
    )
}

/// getCustomFields' `data`: `[{"id", "name", "type", "description"}]`.
pub(crate) fn parse_fields(data: &Value) -> Option<Vec<AccountField>> {
    Some(
        data.as_array()?
            .iter()
            .filter_map(|field| {
                Some(AccountField {
                    name: field.get("name")?.as_str()?.to_owned(),
                    kind: field
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                })
            })
            .collect(),
    )
}

/// A name the deployment relies on, and where it is configured (`tools.json: $.flows[0].flowNs`,
/// `MANYCHAT_REPLY_FIELD`, …), for the problem line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub place: String,
    pub name: String,
}

impl Named {
    pub fn new(place: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            place: place.into(),
            name: name.into(),
        }
    }
}

/// Every flow, tag and custom field a deployment names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wiring {
    pub flows: Vec<Named>,
    pub tags: Vec<Named>,
    /// Fields written with text (the reply, the token, notes, configured values): must exist
    /// and be Text fields.
    pub text_fields: Vec<Named>,
    /// Fields only read: must exist, of any type.
    pub read_fields: Vec<Named>,
}

/// One line per name the account lacks or holds with the wrong type; empty when all is well.
pub fn problems(account: &Account, wiring: &Wiring) -> Vec<String> {
    let mut problems = Vec::new();
    for flow in &wiring.flows {
        if !account.flows.iter().any(|f| f.ns == flow.name) {
            problems.push(format!(
                "{}: flow \"{}\" is not in the ManyChat account (a flow is named by its \
                 namespace, content…)",
                flow.place, flow.name
            ));
        }
    }
    for tag in &wiring.tags {
        if account.tags.contains(&tag.name) {
            continue;
        }
        let near = account
            .tags
            .iter()
            .find(|t| t.eq_ignore_ascii_case(&tag.name));
        problems.push(match near {
            Some(near) => format!(
                "{}: tag \"{}\" is not in the ManyChat account; it has \"{near}\" (tag names \
                 are compared exactly)",
                tag.place, tag.name
            ),
            None => format!(
                "{}: tag \"{}\" is not in the ManyChat account (create it in ManyChat)",
                tag.place, tag.name
            ),
        });
    }
    let field = |name: &str| {
        account
            .fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    };
    for wanted in &wiring.text_fields {
        match field(&wanted.name) {
            None => problems.push(format!(
                "{}: custom field \"{}\" is not in the ManyChat account (create it as a Text field)",
                wanted.place, wanted.name
            )),
            Some(found) if !found.kind.eq_ignore_ascii_case("text") => problems.push(format!(
                "{}: custom field \"{}\" is a {} field; it must be a Text field",
                wanted.place, wanted.name, found.kind
            )),
            Some(_) => {}
        }
    }
    for wanted in &wiring.read_fields {
        if field(&wanted.name).is_none() {
            problems.push(format!(
                "{}: custom field \"{}\" is not in the ManyChat account",
                wanted.place, wanted.name
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn account() -> Account {
        Account {
            flows: parse_flows(&json!({"flows": [
                {"ns": "content20250301000000_200001", "name": "Guide", "folder_id": 0},
                {"name": "no namespace"}
            ], "folders": []}))
            .expect("flows"),
            tags: parse_tags(&json!([{"id": 1, "name": "needs-reply"}, {"id": 2}])).expect("tags"),
            fields: parse_fields(&json!([
                {"id": 1, "name": "ai_message", "type": "text", "description": ""},
                {"id": 2, "name": "AI_Token", "type": "text", "description": ""},
                {"id": 3, "name": "seats", "type": "number", "description": ""}
            ]))
            .expect("fields"),
        }
    }

    #[test]
    fn page_api_data_is_read_leniently() {
        let account = account();
        assert_eq!(account.flows.len(), 1, "an entry without ns is skipped");
        assert_eq!(account.tags, vec!["needs-reply"]);
        assert_eq!(account.fields[2].kind, "number");
        assert_eq!(parse_tags(&json!({"not": "a list"})), None);
    }

    #[test]
    fn every_missing_or_mistyped_name_is_one_line() {
        let wiring = Wiring {
            flows: vec![
                Named::new("MANYCHAT_REPLY_FLOW_NS", "content_missing"),
                Named::new(
                    "tools.json: $.flows[0].flowNs",
                    "content20250301000000_200001",
                ),
            ],
            tags: vec![
                Named::new("rules.json: $.handoff.tag", "Needs-Reply"),
                Named::new("tools.json: $.tags[0].tag", "needs-reply"),
            ],
            text_fields: vec![
                Named::new("MANYCHAT_REPLY_FIELD", "ai_message"),
                Named::new("MANYCHAT_TOKEN_FIELD", "ai_token"),
                Named::new("tools.json: $.fields[0].field", "seats"),
                Named::new("tools.json: $.notes[0].field", "summary"),
            ],
            read_fields: vec![Named::new(
                "tools.json: $.readable.fields[0].field",
                "absent",
            )],
        };
        let problems = problems(&account(), &wiring);
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].starts_with("MANYCHAT_REPLY_FLOW_NS: flow \"content_missing\""));
        assert!(
            problems[1].contains("it has \"needs-reply\""),
            "{}",
            problems[1]
        );
        assert!(problems[2].contains("is a number field; it must be a Text field"));
        assert!(problems[3].contains("\"summary\" is not in the ManyChat account"));
        assert!(problems[4].starts_with("tools.json: $.readable.fields[0].field"));
    }
}
