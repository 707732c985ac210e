use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::config::{FieldConfig, FlowConfig, TagConfig, TenantConfig, ToolsConfig};

fn config(tools: ToolsConfig) -> Arc<TenantConfig> {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let context = crate::config::ConfigContext {
        allow_examples: true,
        ..Default::default()
    };
    let mut config = crate::config::load_dir(&examples, &context).expect("demo tenant loads");
    config.tools = Some(tools);
    Arc::new(config)
}

fn flow(id: &str) -> FlowConfig {
    FlowConfig {
        id: id.into(),
        flow_ns: format!("content_{id}_ns"),
        description: format!("The {id} flow."),
        role: None,
        repeatable: false,
        settle_seconds: None,
        on_stage: None,
        offering: None,
    }
}

fn demo_tools() -> ToolsConfig {
    ToolsConfig {
        flows: vec![flow("brochure"), flow("video")],
        tags: (0..10)
            .map(|n| TagConfig {
                id: format!("tag_{n}"),
                tag: format!("ManyChat Tag {n}"),
                description: "A tag.".into(),
            })
            .collect(),
        fields: vec![FieldConfig {
            id: "shift".into(),
            field: "Preferred Shift Field".into(),
            values: vec!["morning".into(), "evening".into()],
            description: "Which shift suits them.".into(),
            funnel: false,
            intent: false,
            offering: false,
        }],
        ..ToolsConfig::default()
    }
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: format!("call_{name}"),
        name: name.into(),
        arguments: ToolArguments::Valid(arguments),
    }
}

fn spec<'a>(specs: &'a [ToolSpec], name: &str) -> &'a ToolSpec {
    specs.iter().find(|s| s.name == name).expect("tool offered")
}

#[test]
fn spec_012_verification_1_parameter_schema_rejects_an_unconfigured_id() {
    let specs = build_specs(&demo_tools(), true);
    let cases = [
        (
            "send_flow",
            json!({"flow": "brochure", "contactAsked": false}),
            json!({"flow": "price_list", "contactAsked": false}),
        ),
        ("add_tag", json!({"tag": "tag_1"}), json!({"tag": "vip"})),
        ("remove_tag", json!({"tag": "tag_1"}), json!({"tag": "vip"})),
        (
            "set_field",
            json!({"field": "shift", "value": "evening"}),
            json!({"field": "shift", "value": "night"}),
        ),
    ];
    for (name, good, bad) in cases {
        let validator = jsonschema::validator_for(&spec(&specs, name).parameters).unwrap();
        assert!(validator.is_valid(&good), "{name} accepts {good}");
        assert!(!validator.is_valid(&bad), "{name} rejects {bad}");
    }
}

#[test]
fn spec_012_verification_1_a_tool_with_an_empty_list_is_not_offered() {
    let tools = ToolsConfig {
        flows: vec![flow("brochure")],
        ..ToolsConfig::default()
    };
    let names: Vec<String> = build_specs(&tools, true)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["send_flow"]);
    assert!(build_specs(&ToolsConfig::default(), true).is_empty());
}

#[test]
fn spec_012_the_model_sees_ids_and_descriptions_never_manychat_names() {
    let rendered = serde_json::to_string(&build_specs(&demo_tools(), true)).unwrap();
    assert!(rendered.contains("brochure") && rendered.contains("The brochure flow."));
    for hidden in [
        "content_brochure_ns",
        "ManyChat Tag",
        "Preferred Shift Field",
    ] {
        assert!(!rendered.contains(hidden), "spec leaks {hidden}");
    }
}

#[test]
fn spec_023_link_sent_is_not_in_the_models_enum() {
    let mut tools = demo_tools();
    tools.fields.push(FieldConfig {
        id: "funnel".into(),
        field: "funnel".into(),
        values: crate::config::FUNNEL_STAGES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        description: "Stage.".into(),
        funnel: true,
        intent: false,
        offering: false,
    });
    let specs = build_specs(&tools, true);
    let values = &spec(&specs, "set_field").parameters["properties"]["value"]["enum"];
    assert!(!values.as_array().unwrap().contains(&json!("link_sent")));
}

#[tokio::test]
async fn spec_012_verification_2_execute_stages_and_returns_staged_true() {
    let mut tools = TurnTools::without_reads(config(demo_tools()));
    let result = tools
        .call(&call(
            "send_flow",
            json!({"flow": "brochure", "contactAsked": true}),
        ))
        .await;
    assert_eq!(result, json!({"staged": true}));
    let actions = tools.into_actions();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].entry.status, ActionStatus::Staged);
    assert_eq!(
        actions[0].operation,
        Operation::SendFlow {
            flow_ns: "content_brochure_ns".into()
        }
    );
}

#[tokio::test]
async fn spec_012_verification_4_ninth_action_is_dropped_over_the_cap() {
    let mut tools = TurnTools::without_reads(config(demo_tools()));
    for n in 0..8 {
        let result = tools
            .call(&call("add_tag", json!({"tag": format!("tag_{n}")})))
            .await;
        assert_eq!(result, json!({"staged": true}));
    }
    let ninth = tools.call(&call("add_tag", json!({"tag": "tag_8"}))).await;
    assert_eq!(ninth["staged"], json!(false));
    let actions = tools.into_actions();
    assert_eq!(actions.len(), 9);
    assert_eq!(actions[8].entry.status, ActionStatus::DroppedOverCap);
    assert!(
        actions[..8]
            .iter()
            .all(|a| a.entry.status == ActionStatus::Staged)
    );
}

#[tokio::test]
async fn spec_012_identical_actions_are_staged_once_in_the_models_order() {
    let mut tools = TurnTools::without_reads(config(demo_tools()));
    tools.call(&call("add_tag", json!({"tag": "tag_2"}))).await;
    tools
        .call(&call(
            "set_field",
            json!({"field": "shift", "value": "evening"}),
        ))
        .await;
    tools.call(&call("add_tag", json!({"tag": "tag_2"}))).await;
    tools.call(&call("add_tag", json!({"tag": "tag_1"}))).await;
    let ids: Vec<String> = tools
        .into_actions()
        .into_iter()
        .map(|a| a.entry.id)
        .collect();
    assert_eq!(ids, vec!["tag_2", "shift", "tag_1"]);
}

#[tokio::test]
async fn spec_012_set_field_value_must_belong_to_its_field() {
    let mut tools = TurnTools::without_reads(config(demo_tools()));
    let result = tools
        .call(&call(
            "set_field",
            json!({"field": "shift", "value": "tag_1"}),
        ))
        .await;
    assert_eq!(result["staged"], json!(false));
    let result = tools
        .call(&call(
            "send_flow",
            json!({"flow": "not_configured", "contactAsked": false}),
        ))
        .await;
    assert_eq!(result["staged"], json!(false));
    assert!(tools.final_note().unwrap().contains("refused"));
    assert!(tools.into_actions().is_empty());
}
