//! The rules of `plugins.json`, a read's answer and a write's arguments, as units.

use serde_json::{Value, json};

use super::*;
use crate::agent::prompt::plugin_lines as prompt_lines;
use crate::config::plugins::{self as config, PluginsConfig, validate};
use crate::config::{ConfigContext, load_dir};
use crate::fence::Fence;

fn example() -> Value {
    json!({
        "tools": [
            {
                "name": "seats_left",
                "kind": "read",
                "url": "https://ops.example.test/agent/seats-left",
                "secretEnv": "PLUGIN_OPS_SECRET",
                "description": "How many seats are left in a class.",
                "parameters": {"class": {"type": "enum", "values": ["wheel_basics", "handbuilding"]}},
                "result": {
                    "seats": {"type": "number", "integer": true, "min": 0},
                    "next_date": {"type": "text", "maxLength": 40, "optional": true}
                }
            },
            {
                "name": "create_lead",
                "kind": "write",
                "url": "https://crm.example.test/hooks/lead",
                "secretEnv": "PLUGIN_CRM_SECRET",
                "description": "Record the contact as a lead.",
                "parameters": {
                    "class": {"type": "enum", "values": ["wheel_basics", "handbuilding"]},
                    "summary": {"type": "note", "maxLength": 300}
                }
            }
        ]
    })
}

/// The demo tenant's folder with `plugins` as its `plugins.json`.
fn folder_with(plugins: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::config::examples::copy_demo_into(dir.path());
    std::fs::write(dir.path().join("plugins.json"), plugins).unwrap();
    dir
}

/// The (path, rule) issues of loading the demo tenant with `plugins`.
fn issues_of(plugins: &Value) -> Vec<(String, String)> {
    let dir = folder_with(&plugins.to_string());
    match load_dir(dir.path(), &ConfigContext::default()) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .issues()
            .iter()
            .inspect(|i| assert_eq!(i.file, "plugins.json"))
            .map(|i| (i.path.clone(), i.rule.clone()))
            .collect(),
    }
}

fn edited(edit: impl FnOnce(&mut Value)) -> Value {
    let mut value = example();
    edit(&mut value);
    value
}

/// The example with key `key` of tool `tool` set to `value`, and that key's JSON path.
fn tool_set(tool: usize, key: &str, value: Value) -> (Value, String) {
    let config = edited(|v| v["tools"][tool][key] = value);
    (config, format!("$.tools[{tool}].{key}"))
}

fn paths(issues: &[(String, String)]) -> Vec<&str> {
    issues.iter().map(|(p, _)| p.as_str()).collect()
}

#[test]
fn plugin_the_example_loads_and_an_absent_file_changes_nothing() {
    assert!(issues_of(&example()).is_empty());
    let dir = folder_with("{}");
    std::fs::remove_file(dir.path().join("plugins.json")).unwrap();
    let config = load_dir(dir.path(), &ConfigContext::default()).unwrap();
    assert!(config.plugins.is_none());
    assert!(prompt_lines(config.plugins.as_ref()).is_none());
    assert!(specs(config.plugins.as_ref(), true).is_empty());
}

#[test]
fn plugin_config_refuses_each_broken_rule_with_its_file_and_json_path() {
    let cases: Vec<(Value, String)> = vec![
        (
            edited(|v| v["tools"][0]["colour"] = json!(1)),
            "$.tools[0]".into(),
        ),
        tool_set(0, "name", json!("Seats")),
        tool_set(1, "name", json!("seats_left")),
        tool_set(0, "name", json!("get_contact")),
        tool_set(1, "name", json!("write_note")),
        tool_set(0, "url", json!("http://ops.example.test/x")),
        tool_set(0, "url", json!("ftp://x.test/")),
        tool_set(0, "secretEnv", json!("lower")),
        (
            edited(|v| {
                v["tools"][0]["parameters"]["text"] = json!({"type": "note", "maxLength": 10})
            }),
            "$.tools[0].parameters.text".into(),
        ),
        (
            edited(|v| {
                v["tools"][1]["parameters"]["q"] = json!({"type": "query", "maxLength": 10})
            }),
            "$.tools[1].parameters.q".into(),
        ),
        (
            edited(|v| {
                v["tools"][0]["parameters"]["q"] = json!({"type": "query", "maxLength": 10});
                v["tools"][0]["parameters"]["r"] = json!({"type": "query", "maxLength": 10});
            }),
            "$.tools[0].parameters.r".into(),
        ),
        tool_set(1, "result", json!({"ok": {"type": "boolean"}})),
        (
            edited(|v| {
                v["tools"][0].as_object_mut().unwrap().remove("result");
            }),
            "$.tools[0].result".into(),
        ),
        (
            edited(|v| v["tools"][1]["parameters"]["summary"]["maxLength"] = json!(501)),
            "$.tools[1].parameters.summary.maxLength".into(),
        ),
        (
            edited(|v| {
                v["tools"][0]["parameters"]["q"] = json!({"type": "query", "maxLength": 201})
            }),
            "$.tools[0].parameters.q.maxLength".into(),
        ),
        (
            edited(|v| v["tools"][0]["result"]["next_date"]["maxLength"] = json!(1001)),
            "$.tools[0].result.next_date.maxLength".into(),
        ),
        (
            edited(|v| {
                v["tools"][0]["result"]["dates"] =
                    json!({"type": "list", "maxItems": 6, "maxLength": 20})
            }),
            "$.tools[0].result.dates.maxItems".into(),
        ),
        (
            edited(|v| {
                v["tools"][0]["result"]["dates"] =
                    json!({"type": "list", "maxItems": 5, "maxLength": 201})
            }),
            "$.tools[0].result.dates.maxLength".into(),
        ),
        (
            edited(|v| v["tools"][0]["parameters"]["class"]["values"] = json!([])),
            "$.tools[0].parameters.class.values".into(),
        ),
        (
            edited(|v| {
                v["tools"][0]["parameters"]["class"]["values"] =
                    Value::Array((0..101).map(|i| json!(format!("v{i}"))).collect())
            }),
            "$.tools[0].parameters.class.values".into(),
        ),
        (
            edited(|v| {
                v["tools"][0]["parameters"]["n"] = json!({"type": "number", "min": 5, "max": 1})
            }),
            "$.tools[0].parameters.n.max".into(),
        ),
        (
            edited(|v| v["tools"][0]["parameters"]["class"]["extra"] = json!(true)),
            "$.tools[0].parameters.class".into(),
        ),
    ];
    for (config, path) in cases {
        let issues = issues_of(&config);
        assert!(
            paths(&issues).iter().any(|p| p.starts_with(&path)),
            "{path}: {issues:?}"
        );
    }
}

#[test]
fn plugin_config_issues_never_quote_a_value_from_the_file() {
    let issues = issues_of(&edited(|v| {
        v["tools"][0]["url"] = json!("http://secret-host.example.test/x");
        v["tools"][0]["name"] = json!("Bad Name Here");
    }));
    assert!(!issues.is_empty());
    for (_, rule) in issues {
        assert!(
            !rule.contains("secret-host") && !rule.contains("Bad Name"),
            "{rule}"
        );
    }
}

#[test]
fn plugin_http_is_allowed_on_a_loopback_address_only() {
    for url in [
        "http://127.0.0.1:9000/x",
        "http://localhost/x",
        "http://[::1]:8080/x",
    ] {
        assert_eq!(config::url_rule(url), None, "{url}");
    }
    for url in [
        "http://10.0.0.1/x",
        "http://example.test/x",
        "https://user:pw@x.test/",
    ] {
        assert!(config::url_rule(url).is_some(), "{url}");
    }
}

fn fields() -> std::collections::BTreeMap<String, config::ResultField> {
    let config: PluginsConfig = serde_json::from_value(json!({"tools": [{
        "name": "t", "kind": "read", "url": "https://x.test/", "secretEnv": "S",
        "description": "d",
        "result": {
            "seats": {"type": "number", "integer": true, "min": 0},
            "level": {"type": "enum", "values": ["low", "high"]},
            "open": {"type": "boolean", "optional": true},
            "note": {"type": "text", "maxLength": 5, "optional": true},
            "dates": {"type": "list", "maxItems": 2, "maxLength": 3, "optional": true}
        }
    }]}))
    .unwrap();
    assert!(validate("plugins.json", &config).is_empty());
    config.tools[0].result.clone().unwrap()
}

#[test]
fn plugin_a_result_keeps_declared_keys_cuts_text_and_lists_and_fences_them() {
    let fence = Fence::from_nonce("0123456789abcdef").unwrap();
    let body = json!({
        "seats": 3, "level": "low", "open": true, "note": "Saturday morning",
        "dates": ["March", "April", "May"], "extra": "dropped"
    });
    let view = result::check(&fields(), body.to_string().as_bytes(), &fence).unwrap();
    assert_eq!(view["available"], true);
    assert_eq!(view["seats"], 3);
    assert_eq!(view["level"], "low");
    assert_eq!(view["open"], true);
    assert!(view.get("extra").is_none() && view.get("note").is_none());
    assert_eq!(
        view["fenced"],
        format!(
            "{} {} {}",
            fence.open_marker(),
            json!({"dates": ["Mar", "Apr"], "note": "Satur"}),
            fence.close_marker()
        )
    );
}

#[test]
fn plugin_every_refusal_of_a_result_is_unavailable() {
    let fence = Fence::new();
    let refused = [
        json!({"seats": -1, "level": "low"}).to_string(),
        json!({"seats": 1.5, "level": "low"}).to_string(),
        json!({"seats": "3", "level": "low"}).to_string(),
        json!({"seats": 3, "level": "medium"}).to_string(),
        json!({"seats": 3}).to_string(),
        json!({"seats": 3, "level": "low", "open": "yes"}).to_string(),
        json!({"seats": 3, "level": "low", "dates": [1, 2]}).to_string(),
        json!([1, 2]).to_string(),
        "not json".to_owned(),
    ];
    for body in refused {
        assert!(
            result::check(&fields(), body.as_bytes(), &fence).is_err(),
            "{body}"
        );
    }
    // Over 2,000 characters once serialised.
    let mut many = std::collections::BTreeMap::new();
    for i in 0..4 {
        many.insert(
            format!("t{i}"),
            config::ResultField::Text {
                max_length: 1000,
                optional: false,
            },
        );
    }
    let long: serde_json::Map<String, Value> = (0..4)
        .map(|i| (format!("t{i}"), json!("x".repeat(600))))
        .collect();
    let refusal = result::check(&many, Value::Object(long).to_string().as_bytes(), &fence);
    assert!(refusal.unwrap_err().contains("2000"));
}

#[test]
fn plugin_a_write_records_enums_and_a_notes_length_never_its_text() {
    let config: PluginsConfig = serde_json::from_value(example()).unwrap();
    let tool = config.tool("create_lead").unwrap();
    let action = stage_write(
        tool,
        &json!({"class": "wheel_basics", "summary": "Call me on +1 415 555 0100 please"}),
    )
    .unwrap();
    let recorded = crate::actions::record(std::slice::from_ref(&action)).to_string();
    assert!(!recorded.contains("Call me"), "{recorded}");
    assert!(recorded.contains("\"length\""), "{recorded}");
    let crate::actions::Operation::Plugin { arguments, .. } = &action.operation else {
        panic!("a plugin operation");
    };
    assert!(
        !arguments["summary"].as_str().unwrap().contains("555"),
        "the note is cleaned like write_note text"
    );
    let refused = stage_write(tool, &json!({"class": "raku", "summary": "x"})).unwrap_err();
    assert_eq!(refused.reason, "unknown_value");
    let empty = stage_write(tool, &json!({"class": "wheel_basics", "summary": "   "})).unwrap_err();
    assert_eq!(empty.reason, "empty_note");
}

#[tokio::test]
async fn plugin_an_empty_query_answers_unavailable_without_a_call_and_still_counts() {
    let config: PluginsConfig = serde_json::from_value(json!({"tools": [{
        "name": "find_slot", "kind": "read", "url": "http://127.0.0.1:9/never",
        "secretEnv": "S", "description": "d",
        "parameters": {"q": {"type": "query", "maxLength": 50}},
        "result": {"slot": {"type": "text", "maxLength": 20}}
    }]}))
    .unwrap();
    let client = PluginClient::new(std::sync::Arc::new(|_| None));
    let (view, record) = read(
        &client,
        &config.tools[0],
        &crate::ids::SubscriberId::parse("123").unwrap(),
        uuid::Uuid::nil(),
        &json!({"q": "   "}),
        &Fence::new(),
    )
    .await
    .unwrap();
    assert_eq!(view, json!({"available": false}));
    assert!(!record.available);
}

#[test]
fn plugin_the_prompt_gains_lines_only_for_the_kinds_configured() {
    let config: PluginsConfig = serde_json::from_value(example()).unwrap();
    let both = prompt_lines(Some(&config)).unwrap();
    assert!(both.contains("outranks the catalog") && both.contains("staged"));
    let mut writes = config.clone();
    writes.tools.retain(|t| t.kind == ToolKind::Write);
    assert!(!prompt_lines(Some(&writes)).unwrap().contains("outranks"));
    assert!(prompt_lines(Some(&PluginsConfig { tools: vec![] })).is_none());
}

/// A reload that adds a tool whose secret is missing or malformed is refused like a bad config:
/// the config in force stays, and the refusal names the variable, never its value.
#[test]
fn plugin_a_reload_adding_a_tool_without_a_valid_secret_keeps_the_old_config() {
    let mut first = example();
    first["tools"].as_array_mut().unwrap().truncate(1);
    let dir = folder_with(&first.to_string());
    let read_secret = first["tools"][0]["secretEnv"].as_str().unwrap().to_owned();
    let added_secret = example()["tools"][1]["secretEnv"]
        .as_str()
        .unwrap()
        .to_owned();
    let valid = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let malformed = "not-a-secret-value-9431";
    for added in [None, Some(malformed)] {
        let (logs, _guard) = crate::observability::capture();
        let read = read_secret.clone();
        let secrets: sign::SecretLookup = std::sync::Arc::new(move |name: &str| match name {
            n if n == read => Some(valid.to_owned()),
            _ => added.map(str::to_owned),
        });
        let handle = crate::config::ConfigHandle::load(dir.path(), ConfigContext::default())
            .expect("the first set loads");
        handle.check_with(PluginClient::new(secrets).reload_check());
        let before = handle.snapshot();
        std::fs::write(dir.path().join("plugins.json"), example().to_string()).unwrap();

        let outcome = handle.reload();
        let crate::config::ReloadOutcome::Rejected(errors) = outcome else {
            panic!("a tool that cannot sign refuses the reload, got {outcome:?}");
        };
        let issue = &errors.issues()[0];
        assert_eq!(
            (issue.file.as_str(), issue.path.as_str()),
            ("plugins.json", "$.tools[1].secretEnv")
        );
        assert!(issue.rule.contains(&added_secret), "{}", issue.rule);
        assert_eq!(*handle.snapshot(), *before, "the old config stays in force");
        let text = logs.text();
        assert!(
            text.contains(&added_secret),
            "the refusal is logged: {text}"
        );
        assert!(!text.contains(malformed), "never the value: {text}");
        assert!(!text.contains(valid), "never a value: {text}");

        // Restored for the next case.
        std::fs::write(dir.path().join("plugins.json"), first.to_string()).unwrap();
    }
}
