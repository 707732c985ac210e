use super::*;
use crate::config::load::load_dir;
use crate::config::tenant::{NoteConfig, NudgeConfig, NudgeDelay, WindowClosingConfig};
use std::path::Path;

mod knowledge;

fn example<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(format!("{name}.example"));
    let text = std::fs::read_to_string(path).expect("example exists");
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("example parses");
    // The editors' key, which the load sets aside before the strict parse.
    value.as_object_mut().map(|file| file.remove("$schema"));
    serde_json::from_value(value).expect("example parses")
}

fn demo() -> (Catalog, Rules, ToolsConfig) {
    (
        example("catalog.json"),
        example("rules.json"),
        example("tools.json"),
    )
}

fn ctx() -> ConfigContext {
    ConfigContext {
        reply_flow_ns: Some("content20260101000000_000900".to_owned()),
        ..ConfigContext::default()
    }
}

/// Loads the demo folder with these three files through [`load_dir`], as the service does
/// at start, and returns every issue (none when the set loads).
fn load_issues(catalog: &Catalog, rules: &Rules, tools: &ToolsConfig) -> Vec<ConfigIssue> {
    let dir = tempfile::tempdir().expect("temp dir");
    let examples = crate::config::examples::shipped_examples();
    std::fs::copy(
        examples.join("prompt.md.example"),
        dir.path().join("prompt.md"),
    )
    .expect("copy prompt");
    let write = |name: &str, json: String| {
        std::fs::write(dir.path().join(name), json).expect("write fixture");
    };
    write(
        "catalog.json",
        serde_json::to_string_pretty(catalog).expect("json"),
    );
    write(
        "rules.json",
        serde_json::to_string_pretty(rules).expect("json"),
    );
    write(
        "tools.json",
        serde_json::to_string_pretty(tools).expect("json"),
    );
    match load_dir(dir.path(), &ctx()) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.0,
    }
}

/// The issues a load reports for this `tools.json` beside the demo catalog and rules.
fn tool_issues(tools: &ToolsConfig, catalog: &Catalog) -> Vec<(String, String)> {
    let (_, rules, _) = demo();
    load_issues(catalog, &rules, tools)
        .into_iter()
        .map(|i| {
            assert_eq!(i.file, "tools.json", "{i}");
            (i.path, i.rule)
        })
        .collect()
}

fn issue(path: &str, rule: &str) -> (String, String) {
    (path.to_owned(), rule.to_owned())
}

fn field(id: &str, name: &str, values: &[&str]) -> FieldConfig {
    FieldConfig {
        id: id.to_owned(),
        field: name.to_owned(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
        description: "Invented field for a test.".to_owned(),
        funnel: false,
        intent: false,
        offering: false,
    }
}

fn note(id: &str, name: &str) -> NoteConfig {
    NoteConfig {
        id: id.to_owned(),
        field: name.to_owned(),
        max_length: 200,
        never_rendered: true,
        on_escalation: false,
        description: "Invented note for a test.".to_owned(),
    }
}

#[test]
fn system_5_1_demo_tenant_has_no_issues() {
    let (catalog, rules, tools) = demo();
    assert_eq!(super::catalog("catalog.json", &catalog), []);
    assert_eq!(super::rules("rules.json", &rules, &ctx()), []);
    assert_eq!(tool_issues(&tools, &catalog), []);
}

#[test]
fn spec_012_verification_7_reply_flow_collision_fails_at_load() {
    let (catalog, _, mut tools) = demo();
    tools.flows[1].flow_ns = "content20260101000000_000900".to_owned();
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue("$.flows[1].flowNs", REPLY_FLOW_RULE)]
    );
}

#[test]
fn spec_012_verification_7_reply_field_collision_fails_at_load() {
    let (catalog, _, mut tools) = demo();
    tools.fields[3].field = "ai_message".to_owned();
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue("$.fields[3].field", REPLY_FIELD_RULE)]
    );
}

#[test]
fn spec_012_token_field_collision_fails_at_load() {
    let (catalog, _, mut tools) = demo();
    tools
        .readable
        .fields
        .push(field("came_via", "AI_Token", &["ad"]));
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue("$.readable.fields[0].field", TOKEN_FIELD_RULE)]
    );
}

#[test]
fn spec_012_reply_collisions_follow_the_configured_env_names() {
    let (catalog, _, mut tools) = demo();
    tools.fields[3].field = "ai_message".to_owned();
    let ctx = ConfigContext {
        reply_field: "deferred_reply".to_owned(),
        ..ctx()
    };
    assert_eq!(super::tools("tools.json", &tools, Some(&catalog), &ctx), []);
    assert_eq!(
        super::tools("tools.json", &tools, Some(&catalog), &super::tests::ctx()).len(),
        1
    );
}

#[test]
fn system_4_handoff_flow_equal_to_reply_flow_fails_at_load() {
    let (_, mut rules, _) = demo();
    let handoff = rules.handoff.get_or_insert_with(Default::default);
    handoff.flow_ns = Some("content20260101000000_000900".to_owned());
    let (catalog, _, tools) = demo();
    let issues = load_issues(&catalog, &rules, &tools);
    assert_eq!(
        issues,
        [ConfigIssue::new(
            "rules.json",
            "$.handoff.flowNs",
            REPLY_FLOW_RULE
        )]
    );
}

#[test]
fn handoff_hold_hours_past_a_week_fails_at_load_and_zero_to_168_pass() {
    for (hours, refused) in [(0, false), (24, false), (168, false), (169, true)] {
        let (catalog, mut rules, tools) = demo();
        rules
            .handoff
            .get_or_insert_with(Default::default)
            .hold_hours = hours;
        let issues = load_issues(&catalog, &rules, &tools);
        let expected = refused.then(|| {
            ConfigIssue::new(
                "rules.json",
                "$.handoff.holdHours",
                "must be between 0 and 168 hours",
            )
        });
        assert_eq!(issues, expected.into_iter().collect::<Vec<_>>(), "{hours}");
    }
}

#[test]
fn hours_without_escalation_closed_fails_at_load_naming_the_path() {
    let (catalog, mut rules, tools) = demo();
    rules.hours = Some(crate::config::Hours {
        timezone: "Europe/Madrid".to_owned(),
        weekly: [("mon".to_owned(), vec!["09:00-18:00".to_owned()])].into(),
        closed: vec![],
    });
    let issues = load_issues(&catalog, &rules, &tools);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "$.messages.escalationClosed");
    rules.messages.escalation_closed = Some("We are closed; a person replies when we open.".into());
    assert_eq!(load_issues(&catalog, &rules, &tools), []);
    rules.hours.as_mut().unwrap().timezone = "Nowhere/City".into();
    let issues = load_issues(&catalog, &rules, &tools);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "$.hours.timezone");
    assert_eq!(issues[0].file, "rules.json");
}

#[test]
fn handoff_hold_hours_defaults_to_a_day() {
    let handoff: crate::config::Handoff = serde_json::from_str(r#"{"tag": "t"}"#).unwrap();
    assert_eq!(handoff.hold_hours, 24);
    assert_eq!(crate::config::Handoff::default().hold_hours, 24);
    let negative = serde_json::from_str::<crate::config::Handoff>(r#"{"holdHours": -1}"#);
    assert!(negative.is_err(), "a negative hold is refused");
}

#[test]
fn spec_024_verification_5_note_without_never_rendered_fails() {
    let (catalog, _, mut tools) = demo();
    tools.notes[0].never_rendered = false;
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].0, "$.notes[0].neverRendered");
}

#[test]
fn spec_024_verification_5_max_length_over_500_fails() {
    let (catalog, _, mut tools) = demo();
    tools.notes[1].max_length = 501;
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue("$.notes[1].maxLength", "must be between 1 and 500")]
    );
    tools.notes[1].max_length = 500;
    assert_eq!(tool_issues(&tools, &catalog), []);
    tools.notes[1].max_length = 0;
    assert_eq!(tool_issues(&tools, &catalog).len(), 1);
}

#[test]
fn spec_024_verification_5_colliding_note_field_fails() {
    let (catalog, _, tools) = demo();
    let enum_field = tools.fields[0].field.clone();

    let mut with_enum = tools.clone();
    with_enum.notes[0].field = enum_field;
    assert_eq!(
        tool_issues(&with_enum, &catalog),
        [issue(
            "$.notes[0].field",
            "must not equal any fields[].field or readable.fields[].field"
        )]
    );

    let mut with_note = tools.clone();
    with_note.notes[1].field = with_note.notes[0].field.clone();
    assert_eq!(
        tool_issues(&with_note, &catalog),
        [issue(
            "$.notes[1].field",
            "must not equal another note's field"
        )]
    );

    let mut with_readable = tools.clone();
    with_readable
        .readable
        .fields
        .push(field("source", "lead_source", &["ad"]));
    with_readable.notes[0].field = "lead_source".to_owned();
    assert_eq!(tool_issues(&with_readable, &catalog).len(), 1);

    let mut with_reply = tools;
    with_reply.notes[0].field = "ai_message".to_owned();
    assert_eq!(
        tool_issues(&with_reply, &catalog),
        [issue("$.notes[0].field", REPLY_FIELD_RULE)]
    );
}

#[test]
fn system_5_1_ids_must_match_the_id_pattern() {
    let (catalog, _, mut tools) = demo();
    tools.flows[0].id = "Brochure One".to_owned();
    tools.fields[3].values[0] = "Beginner".to_owned();
    assert_eq!(
        tool_issues(&tools, &catalog),
        [
            issue("$.flows[0].id", ID_RULE),
            issue("$.fields[3].values[0]", ID_RULE)
        ]
    );
}

#[test]
fn spec_024_duplicate_ids_across_lists_fail() {
    let (catalog, _, mut tools) = demo();
    tools.flows[1].id = tools.flows[0].id.clone();
    let tag_id = tools.tags[0].id.clone();
    tools.readable.tags[0].id = tag_id;
    tools.notes[0].id = tools.fields[0].id.clone();
    let paths: Vec<String> = tool_issues(&tools, &catalog)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        paths,
        ["$.flows[1].id", "$.readable.tags[0].id", "$.notes[0].id"]
    );
}

#[test]
fn system_5_1_duplicate_offering_and_payment_option_ids_fail() {
    let (mut catalog, _, _) = demo();
    catalog.offerings[2].id = catalog.offerings[0].id.clone();
    catalog.payment_options[1].id = catalog.payment_options[0].id.clone();
    let paths: Vec<String> = super::catalog("catalog.json", &catalog)
        .into_iter()
        .map(|i| i.path)
        .collect();
    assert_eq!(paths, ["$.offerings[2].id", "$.paymentOptions[1].id"]);
}

#[test]
fn system_5_1_duplicate_field_values_fail() {
    let (catalog, _, mut tools) = demo();
    let first = tools.fields[3].values[0].clone();
    tools.fields[3].values.push(first);
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(issues[0].0.starts_with("$.fields[3].values["));
}

#[test]
fn spec_023_funnel_values_must_be_the_six_stages_in_order() {
    let (catalog, _, mut tools) = demo();
    let funnel = tools
        .fields
        .iter()
        .position(|f| f.funnel)
        .expect("demo funnel");
    tools.fields[funnel].values.swap(1, 2);
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue(
            &format!("$.fields[{funnel}].values"),
            "a funnel field's values must be exactly new, qualifying, nurturing, offered, prepared, link_sent in that order"
        )]
    );
}

#[test]
fn spec_034_intent_values_are_exact_and_required_by_funnel_and_opening() {
    let (catalog, _, mut tools) = demo();
    let intent = tools
        .fields
        .iter()
        .position(|f| f.intent)
        .expect("demo intent");
    tools.fields[intent].values.reverse();
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].0, format!("$.fields[{intent}].values"));

    tools.fields.remove(intent);
    tools.flows[0].role = Some(FlowRole::Opening);
    tools.flows[0].offering = None;
    let paths: Vec<String> = tool_issues(&tools, &catalog)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let funnel = tools
        .fields
        .iter()
        .position(|f| f.funnel)
        .expect("demo funnel");
    assert_eq!(
        paths,
        [
            "$.flows[0].role".to_owned(),
            format!("$.fields[{funnel}].funnel")
        ]
    );
}

#[test]
fn system_5_1_at_most_one_of_each_role_and_flag() {
    let (catalog, _, mut tools) = demo();
    let link = tools
        .flows
        .iter()
        .position(|f| f.role == Some(FlowRole::PaymentLink))
        .expect("demo payment link");
    let mut second = tools.flows[link].clone();
    second.id = "second_link".to_owned();
    tools.flows.push(second);
    let mut intent = tools
        .fields
        .iter()
        .find(|f| f.intent)
        .cloned()
        .expect("intent");
    intent.id = "second_intent".to_owned();
    tools.fields.push(intent);
    let issues = tool_issues(&tools, &catalog);
    let last_flow = tools.flows.len() - 1;
    let last_field = tools.fields.len() - 1;
    assert_eq!(
        issues,
        [
            issue(
                &format!("$.flows[{last_flow}].role"),
                "at most one flow may have role payment_link"
            ),
            issue(
                &format!("$.fields[{last_field}].intent"),
                "at most one field may be the intent field"
            ),
        ]
    );
}

#[test]
fn spec_028_offering_field_values_equal_catalog_ids() {
    let (catalog, _, mut tools) = demo();
    let at = tools
        .fields
        .iter()
        .position(|f| f.offering)
        .expect("demo offering");
    let dropped = tools.fields[at].values.pop().unwrap();
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue(
            &format!("$.fields[{at}].values"),
            &format!(
                "an offering field's values must be exactly the catalog's offering ids \
                 (missing {dropped})"
            )
        )]
    );
    tools.fields[at].values.push("pottery-weekend".into());
    tools.fields[at].values.push(dropped.clone());
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue(
            &format!("$.fields[{at}].values"),
            "an offering field's values must be exactly the catalog's offering ids \
             (not in the catalog: pottery-weekend)"
        )]
    );
    tools.fields[at].values.pop();
    tools.fields[at].values.pop();
    tools.fields[at].values.push(dropped);
    tools.fields[at].values = catalog
        .offerings
        .iter()
        .rev()
        .map(|o| o.id.clone())
        .collect();
    assert_eq!(tool_issues(&tools, &catalog), [], "order does not matter");
}

#[test]
fn spec_028_flow_offering_must_be_a_catalog_offering() {
    let (catalog, _, mut tools) = demo();
    tools.flows[0].offering = Some("no-such-course".to_owned());
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue(
            "$.flows[0].offering",
            "`no-such-course` is not an offering id in the catalog"
        )]
    );
}

#[test]
fn spec_032_on_stage_and_event_stage_must_be_funnel_stages() {
    let (catalog, _, mut tools) = demo();
    tools.flows[0].on_stage = Some("interested".to_owned());
    tools.events.push(crate::config::tenant::EventConfig {
        id: "lead".to_owned(),
        stage: "nurturing".to_owned(),
        flow_ns: "content20260101000000_000950".to_owned(),
    });
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].0, "$.flows[0].onStage");

    tools.fields.retain(|f| !f.funnel);
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(
        issues,
        [
            issue("$.flows[0].onStage", "requires a funnel field in fields[]"),
            issue("$.events[0].stage", "requires a funnel field in fields[]"),
        ]
    );
}

/// 023 verification 2, 027 verification 1, 028 verification 1, 032 verification 1 and 034
/// verification 1: each load rule of SALES 12a, one broken at a time on the demo tenant.
#[test]
fn spec_023_027_028_032_034_verification_1_each_sales_load_rule_fails_naming_its_path() {
    use crate::config::tenant::EventConfig;
    let event = |id: &str, stage: &str, ns: &str| EventConfig {
        id: id.to_owned(),
        stage: stage.to_owned(),
        flow_ns: ns.to_owned(),
    };
    type Edit = Box<dyn Fn(&mut ToolsConfig)>;
    let position = |tools: &ToolsConfig, f: fn(&FieldConfig) -> bool| {
        tools.fields.iter().position(f).expect("demo field")
    };
    // The demo's field that `flag` picks, changed by `change`.
    let on_field = |flag: fn(&FieldConfig) -> bool, change: fn(&mut FieldConfig)| -> Edit {
        Box::new(move |t: &mut ToolsConfig| {
            let at = position(t, flag);
            change(&mut t.fields[at]);
        })
    };
    // A copy of the demo's field that `flag` picks, under the id and field `id`, added.
    let second_field = |flag: fn(&FieldConfig) -> bool, id: &'static str| -> Edit {
        Box::new(move |t: &mut ToolsConfig| {
            let mut second = t.fields[position(t, flag)].clone();
            second.id = id.into();
            second.field = id.into();
            t.fields.push(second);
        })
    };
    // The demo's events replaced by `list` (id, stage, flowNs).
    let events = |list: &'static [(&'static str, &'static str, &'static str)]| -> Edit {
        Box::new(move |t: &mut ToolsConfig| {
            t.events = list
                .iter()
                .map(|(id, stage, ns)| event(id, stage, ns))
                .collect();
        })
    };
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "023: two funnel fields",
            second_field(|f| f.funnel, "second_funnel"),
            ".funnel",
            "at most one field may be the funnel",
        ),
        (
            "023: two payment links",
            Box::new(|t: &mut ToolsConfig| {
                let mut second = t
                    .flows
                    .iter()
                    .find(|f| f.role == Some(FlowRole::PaymentLink))
                    .unwrap()
                    .clone();
                second.id = "second_link".into();
                second.flow_ns = "content20260101000000_000990".into();
                t.flows.push(second);
            }),
            ".role",
            "at most one flow may have role payment_link",
        ),
        (
            "027: two events on one stage",
            events(&[
                ("a", "nurturing", "content20260101000000_000901"),
                ("b", "nurturing", "content20260101000000_000902"),
            ]),
            "$.events[1].stage",
            "at most one event per stage",
        ),
        (
            "027: an event on new",
            events(&[("a", "new", "content20260101000000_000901")]),
            "$.events[0].stage",
            "must not be new",
        ),
        (
            "027: an event flowNs equal to a flow's",
            Box::new(move |t: &mut ToolsConfig| {
                let ns = t.flows[0].flow_ns.clone();
                t.events = vec![event("a", "nurturing", &ns)];
            }),
            "$.events[0].flowNs",
            "must not equal any flows[].flowNs",
        ),
        (
            "027: an event flowNs equal to the reply flow",
            events(&[("a", "nurturing", "content20260101000000_000900")]),
            "$.events[0].flowNs",
            "reply",
        ),
        (
            "027: two events on one flowNs",
            events(&[
                ("a", "nurturing", "content20260101000000_000901"),
                ("b", "offered", "content20260101000000_000901"),
            ]),
            "$.events[1].flowNs",
            "another event's flowNs",
        ),
        (
            "027: events without a funnel field",
            Box::new(move |t: &mut ToolsConfig| {
                t.fields.retain(|f| !f.funnel);
                t.events = vec![event("a", "nurturing", "content20260101000000_000901")];
            }),
            "$.events[0].stage",
            "requires a funnel field",
        ),
        (
            "028: two offering fields",
            second_field(|f| f.offering, "second_offering"),
            ".offering",
            "at most one field may be the offering field",
        ),
        (
            "028: a field both funnel and offering",
            on_field(|f| f.offering, |f| f.funnel = true),
            "$.fields",
            "only one of funnel, intent and offering",
        ),
        (
            "028: a flow offering with no offering field",
            Box::new(move |t: &mut ToolsConfig| {
                for f in &mut t.fields {
                    f.offering = false;
                }
            }),
            ".offering",
            "requires an offering field",
        ),
        (
            "028: an offering on the payment link",
            Box::new(|t: &mut ToolsConfig| {
                let link = t
                    .flows
                    .iter_mut()
                    .find(|f| f.role == Some(FlowRole::PaymentLink))
                    .unwrap();
                link.offering = Some("glaze-lab".into());
            }),
            ".offering",
            "serve every offering",
        ),
        (
            "032: an opening that is repeatable",
            Box::new(|t: &mut ToolsConfig| {
                t.flows[0].role = Some(FlowRole::Opening);
                t.flows[0].offering = None;
                t.flows[0].repeatable = true;
            }),
            ".repeatable",
            "cannot be repeatable",
        ),
        (
            "032: an onStage of link_sent",
            Box::new(|t: &mut ToolsConfig| {
                t.flows[0].on_stage = Some("link_sent".into());
            }),
            "$.flows[0].onStage",
            "must not be new or link_sent",
        ),
        (
            "032: two flows on one onStage",
            Box::new(|t: &mut ToolsConfig| {
                t.flows[0].on_stage = Some("nurturing".into());
                t.flows[1].on_stage = Some("nurturing".into());
            }),
            "$.flows[1].onStage",
            "at most one flow may be tied to a stage",
        ),
        (
            "032: a funnel without prepared",
            on_field(|f| f.funnel, |f| f.values.retain(|v| v != "prepared")),
            ".values",
            "a funnel field's values must be exactly",
        ),
        (
            "034: a funnel field without an intent field",
            Box::new(|t: &mut ToolsConfig| {
                t.fields.retain(|f| !f.intent);
            }),
            ".funnel",
            "requires an intent field",
        ),
        (
            "034: intent values out of order",
            on_field(|f| f.intent, |f| f.values.reverse()),
            ".values",
            "an intent field's values must be exactly",
        ),
        (
            "034: a field both intent and funnel",
            on_field(|f| f.intent, |f| f.funnel = true),
            "$.fields",
            "only one of funnel, intent and offering",
        ),
        (
            "025: humanActiveTag equal to a tag",
            Box::new(|t: &mut ToolsConfig| {
                t.nudge = Some(crate::config::tenant::NudgeConfig {
                    delays: vec![],
                    human_active_tag: Some(t.tags[0].tag.clone()),
                });
            }),
            "$.nudge.humanActiveTag",
            "must not equal any tags[].tag",
        ),
    ];
    for (what, edit, path, rule) in cases {
        let (catalog, _, mut tools) = demo();
        edit(&mut tools);
        let issues = tool_issues(&tools, &catalog);
        assert!(
            issues
                .iter()
                .any(|(p, m)| p.contains(path) && m.contains(rule)),
            "{what}: {issues:?}"
        );
    }
}

#[test]
fn spec_030_settle_seconds_over_30_fails() {
    let (catalog, _, mut tools) = demo();
    tools.flows[0].settle_seconds = Some(30);
    assert_eq!(tool_issues(&tools, &catalog), []);
    tools.flows[0].settle_seconds = Some(31);
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue(
            "$.flows[0].settleSeconds",
            "must be between 0 and 30"
        )]
    );
}

#[test]
fn spec_031_window_closing_verification_1_its_flow_is_checked_like_a_flow_and_is_none_of_flows() {
    let (catalog, _, mut tools) = demo();
    let with = |tools: &mut ToolsConfig, ns: &str| {
        tools.window_closing = Some(WindowClosingConfig {
            flow_ns: ns.to_owned(),
        });
    };
    with(&mut tools, "content20260101000000_000955");
    assert!(
        tool_issues(&tools, &catalog).is_empty(),
        "a distinct flow loads"
    );
    let flow = tools.flows[0].flow_ns.clone();
    for (ns, rule) in [
        (flow.as_str(), "must not equal any flows[].flowNs"),
        ("content20260101000000_000900", "reply"),
        ("  ", "must not be empty"),
    ] {
        with(&mut tools, ns);
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{ns:?}: {issues:?}");
        assert_eq!(issues[0].0, "$.windowClosing.flowNs");
        assert!(issues[0].1.contains(rule), "{ns:?}: {issues:?}");
    }
}

#[test]
fn spec_025_nudge_delays_are_bounded_and_unique() {
    let (catalog, _, mut tools) = demo();
    let delay = |id: &str, minutes| NudgeDelay {
        id: id.to_owned(),
        minutes,
    };
    tools.nudge = Some(NudgeConfig {
        delays: vec![
            delay("soon", 60),
            delay("soon", 1380),
            delay("never", 0),
            delay("too_late", 1381),
        ],
        human_active_tag: None,
    });
    let paths: Vec<String> = tool_issues(&tools, &catalog)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        paths,
        [
            "$.nudge.delays[1].id",
            "$.nudge.delays[2].minutes",
            "$.nudge.delays[3].minutes"
        ]
    );
}

#[test]
fn spec_027_duplicate_event_ids_fail() {
    let (catalog, _, mut tools) = demo();
    for (stage, flow_ns) in [
        ("offered", "content20260101000000_000951"),
        ("link_sent", "content20260101000000_000952"),
    ] {
        tools.events.push(crate::config::tenant::EventConfig {
            id: "checkout".to_owned(),
            stage: stage.to_owned(),
            flow_ns: flow_ns.to_owned(),
        });
    }
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].0, "$.events[1].id");
}

#[test]
fn system_5_1_readable_fields_cannot_carry_write_flags() {
    let (catalog, _, mut tools) = demo();
    let mut readable = field("came_via", "came_via", &["ad", "referral"]);
    readable.funnel = true;
    tools.readable.fields.push(readable);
    let issues = tool_issues(&tools, &catalog);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].0, "$.readable.fields[0]");
}

#[test]
fn system_5_1_catalog_rules() {
    let (mut catalog, _, _) = demo();
    catalog.business_name = " ".to_owned();
    catalog.currency = "usd".to_owned();
    for offering in &mut catalog.offerings {
        offering.price.currency = "usd".to_owned();
    }
    catalog.offerings[0].price.amount = -1;
    catalog.offerings[1].duration_hours = Some(0.0);
    catalog.offerings[2].url = Some("http://example.com/x".to_owned());
    let paths: Vec<String> = super::catalog("catalog.json", &catalog)
        .into_iter()
        .map(|i| i.path)
        .collect();
    assert_eq!(
        paths,
        [
            "$.businessName",
            "$.currency",
            "$.offerings[0].price.amount",
            "$.offerings[1].durationHours",
            "$.offerings[2].url",
        ]
    );
}

#[test]
fn system_5_1_catalog_needs_offerings_and_matching_price_currency() {
    let (mut catalog, _, _) = demo();
    catalog.offerings[1].price.currency = "EUR".to_owned();
    assert_eq!(
        super::catalog("catalog.json", &catalog),
        [ConfigIssue::new(
            "catalog.json",
            "$.offerings[1].price.currency",
            "must equal the catalog's currency"
        )]
    );
    catalog.offerings.clear();
    assert_eq!(
        super::catalog("catalog.json", &catalog),
        [ConfigIssue::new(
            "catalog.json",
            "$.offerings",
            "must list at least one offering"
        )]
    );
}

#[test]
fn system_5_1_rules_bounds_are_checked() {
    let (_, mut rules, _) = demo();
    rules.messages.escalation = String::new();
    rules.confidence_threshold = 1.5;
    rules.max_turns_per_conversation = 0;
    rules.idle_reset_hours = 0;
    rules.history_days = 0;
    rules.budget.daily_token_cap = 0;
    rules.budget.daily_cost_cap_usd = 0.0;
    rules.rate_limit.turns_per_subscriber_per_hour = 0;
    rules.escalation_keywords.push("  ".to_owned());
    if let Some(trigger) = rules.opening_trigger.as_mut() {
        trigger.keywords.push(String::new());
        trigger.message = String::new();
    }
    let paths: Vec<String> = super::rules("rules.json", &rules, &ctx())
        .into_iter()
        .map(|i| i.path)
        .collect();
    let keyword = rules.escalation_keywords.len() - 1;
    let trigger_kw = rules
        .opening_trigger
        .as_ref()
        .map_or(0, |t| t.keywords.len() - 1);
    assert_eq!(
        paths,
        [
            "$.messages.escalation".to_owned(),
            "$.confidenceThreshold".to_owned(),
            "$.maxTurnsPerConversation".to_owned(),
            "$.idleResetHours".to_owned(),
            "$.historyDays".to_owned(),
            "$.rateLimit.turnsPerSubscriberPerHour".to_owned(),
            "$.budget.dailyTokenCap".to_owned(),
            "$.budget.dailyCostCapUsd".to_owned(),
            format!("$.escalationKeywords[{keyword}]"),
            format!("$.openingTrigger.keywords[{trigger_kw}]"),
            "$.openingTrigger.message".to_owned(),
        ]
    );
}

#[test]
fn system_5_1_a_file_with_three_problems_gives_three_issues() {
    let (catalog, _, mut tools) = demo();
    tools.flows[0].id = "Not An Id".to_owned();
    tools.notes[0].never_rendered = false;
    tools.fields[0].field = "ai_token".to_owned();
    let (_, rules, _) = demo();
    let issues = load_issues(&catalog, &rules, &tools);
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "$.flows[0].id",
            "$.fields[0].field",
            "$.notes[0].neverRendered"
        ]
    );
    assert!(issues.iter().all(|i| i.file == "tools.json"));
}

#[test]
fn system_5_1_note_with_a_fresh_field_is_accepted() {
    let (catalog, _, mut tools) = demo();
    tools
        .notes
        .push(note("objections", "agent_note_objections"));
    assert_eq!(tool_issues(&tools, &catalog), []);
}

#[test]
fn budget_contact_the_per_contact_share_is_positive_and_within_the_tenants_cap() {
    let (_, mut rules, _) = demo();
    rules.budget.daily_token_cap = 1000;
    for (share, expected) in [
        (Some(0), Some("must be greater than zero")),
        (Some(1001), Some("must not exceed budget.dailyTokenCap")),
        (Some(1000), None),
        (None, None),
    ] {
        rules.budget.per_contact_daily_token_cap = share;
        let issues = super::rules("rules.json", &rules, &ctx());
        let expected: Vec<ConfigIssue> = expected
            .map(|rule| ConfigIssue::new("rules.json", "$.budget.perContactDailyTokenCap", rule))
            .into_iter()
            .collect();
        assert_eq!(issues, expected, "{share:?}");
    }
}

#[test]
fn burst_window_is_between_0_and_3000_ms() {
    let (_, mut rules, _) = demo();
    rules.burst.window_ms = Burst::MAX_WINDOW_MS;
    assert!(super::rules("rules.json", &rules, &ctx()).is_empty());
    rules.burst.window_ms = 3001;
    let issues = super::rules("rules.json", &rules, &ctx());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "$.burst.windowMs");
    assert_eq!(issues[0].file, "rules.json");
    assert!(issues[0].rule.contains("between 0 and 3000"), "{issues:?}");
}
