//! Knowledge at scale through the real app: an invented 3,000-offering Spanish shop, answered
//! from what each turn retrieves; the turn's record holds the ids it was given, `/metrics`
//! counts them, and no request lists the catalog.

use std::path::Path;
use std::sync::Arc;

use manychat_agent::knowledge::fixtures::spanish_catalog;
use manychat_agent::knowledge::format_price;
use manychat_agent::model::Model;
use manychat_agent::model::demo::DemoModel;
use manychat_agent::model::mock::RecordingModel;
use serde_json::Value;

use crate::helpers::*;

/// The demo tenant around the invented Spanish catalog: its offering field's values left to
/// the catalog (`tools.json` need not list them) and no flow tied to an offering.
fn large_spanish_tenant(dir: &Path) {
    let catalog = spanish_catalog(3000, 7);
    std::fs::write(
        dir.join("catalog.json"),
        serde_json::to_string(&catalog).unwrap(),
    )
    .unwrap();
    let path = dir.join("tools.json");
    let mut tools: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for field in tools["fields"].as_array_mut().unwrap() {
        if field["offering"] == true {
            field.as_object_mut().unwrap().remove("values");
        }
    }
    for flow in tools["flows"].as_array_mut().unwrap() {
        flow.as_object_mut().unwrap().remove("offering");
    }
    std::fs::write(&path, tools.to_string()).unwrap();
}

fn model_input_tokens(request: &manychat_agent::model::ModelRequest) -> u64 {
    manychat_agent::model::tokenizer::request_tokens(request)
}

#[tokio::test]
async fn knowledge_large_catalog_turn_answers_a_deep_offering_and_records_what_it_was_given() {
    let recording = Arc::new(RecordingModel::new(Arc::new(DemoModel::new())));
    let model: Arc<dyn Model> = recording.clone();
    let app = spawn_app_with(AppOptions::new(model).edit(large_spanish_tenant)).await;
    let catalog = spanish_catalog(3000, 7);
    let deep = &catalog.offerings[2718];
    let price = format_price(deep.price.amount, &deep.price.currency);

    let (status, body) = app
        .send("7301", &format!("Hola, ¿cuánto cuesta la {}?", deep.name))
        .await;
    assert_eq!(status, 200);
    let said = block_texts(&body).join(" ");
    assert!(said.contains(&price), "the price {price} is said: {said}");

    // The request: no offering listed in the prefix or the tools, the retrieved one in the
    // turn's own message, and a first step far under the 6,000-token goal.
    let first = recording.requests().remove(0);
    assert!(!first.system.contains("- offering "));
    let tools = serde_json::to_string(&first.tools).unwrap();
    for o in [&catalog.offerings[0], deep, &catalog.offerings[2999]] {
        assert!(
            !first.system.contains(&o.id) && !tools.contains(&o.id),
            "{}",
            o.id
        );
    }
    assert!(tools.contains("search_catalog"));
    let tokens = model_input_tokens(&first);
    assert!(tokens <= 6_000, "first-step request tokens {tokens}");

    // The record holds the ids it was given (never text), and /metrics counts them.
    app.settle().await;
    let turns = app.turns("7301").await;
    let agent = turns
        .iter()
        .rev()
        .find(|t| t.role == manychat_agent::store::Role::Agent)
        .unwrap();
    let given = app
        .store
        .turn_knowledge(agent.id)
        .await
        .unwrap()
        .expect("knowledge recorded");
    assert_eq!(given["offerings"][0], deep.id.as_str(), "{given}");
    assert_eq!(given["miss"], false);
    assert!(!given.to_string().contains(&deep.name), "ids only");
    let metrics = app.metrics_text().await;
    assert!(
        metrics.lines().any(|l| l
            .starts_with("manychat_agent_knowledge_retrieved_total{kind=\"offering\"}")
            && !l.ends_with(" 0")),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn knowledge_a_turn_that_retrieves_nothing_is_counted_as_a_miss_and_escalates() {
    let app =
        spawn_app_with(AppOptions::new(Arc::new(DemoModel::new())).edit(large_spanish_tenant))
            .await;
    let (status, body) = app.send("7302", "¿Reparan motocicletas?").await;
    assert_eq!(status, 200);
    assert_eq!(
        block_texts(&body),
        vec![app.escalation_copy()],
        "it does not guess"
    );
    app.settle().await;
    let metrics = app.metrics_text().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("manychat_agent_knowledge_misses_total 1")),
        "{metrics}"
    );
    app.stop().await;
}
