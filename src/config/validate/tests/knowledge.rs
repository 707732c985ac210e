//! The knowledge rules: the offering field's values left to the catalog, the index's language.

use super::*;

/// Knowledge at scale: the offering field may leave its values to the catalog (a catalog of
/// thousands need not be listed twice); any other field still lists at least one value.
#[test]
fn knowledge_offering_field_may_omit_its_values_other_fields_may_not() {
    let (catalog, _, mut tools) = demo();
    let at = tools.fields.iter().position(|f| f.offering).unwrap();
    tools.fields[at].values.clear();
    assert_eq!(tool_issues(&tools, &catalog), []);
    let other = tools
        .fields
        .iter()
        .position(|f| !f.offering && !f.funnel && !f.intent)
        .unwrap();
    tools.fields[other].values.clear();
    assert_eq!(
        tool_issues(&tools, &catalog),
        [issue(
            &format!("$.fields[{other}].values"),
            "must list at least one value"
        )]
    );
}

/// The knowledge threshold's language is one the index stems for.
#[test]
fn knowledge_rules_language_must_be_en_es_or_pt() {
    let (catalog, mut rules, tools) = demo();
    rules.knowledge.language = Some("es".into());
    assert!(load_issues(&catalog, &rules, &tools).is_empty());
    rules.knowledge.language = Some("fr".into());
    let issues = load_issues(&catalog, &rules, &tools);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "$.knowledge.language");
}
