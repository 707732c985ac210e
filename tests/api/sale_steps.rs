//! The model calls a whole sale costs (012: several calls per step, the reply beside writes that
//! only stage), through the HTTP route, the fake ManyChat and the real store, answered by
//! `mock:demo`: the eight messages of `benches/sales/` (the sales the `sale_cost` bench prices).

use std::sync::Arc;

use manychat_agent::model::demo::DemoModel;
use manychat_agent::model::mock::RecordingModel;
use manychat_agent::model::{Message, ModelRequest};
use serde_json::Value;

use crate::helpers::*;

fn sale(name: &str) -> Vec<String> {
    std::fs::read_to_string(repo_path(&format!("benches/sales/{name}.txt")))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// One message of the sale: the model's requests for it, the reply's texts and the turn's
/// recorded actions.
struct Answered {
    requests: Vec<ModelRequest>,
    texts: String,
    actions: Vec<Value>,
}

/// Runs the sale `name` on `tenant` (`None`: the demo tenant) as one contact.
async fn run_sale(tenant: Option<&str>, name: &str) -> Vec<Answered> {
    let model = Arc::new(RecordingModel::new(Arc::new(DemoModel::new())));
    let mut options = AppOptions::new(model.clone());
    if let Some(tenant) = tenant {
        options = options.with_tenant(repo_path(tenant));
    }
    let app = spawn_app_with(options).await;
    let mut answered = Vec::new();
    for text in sale(name) {
        let before = model.calls();
        let (status, body) = app.send("5557001", &text).await;
        assert_eq!(status, 200, "{body}");
        app.settle().await;
        let actions = crate::selling::agent_turn(&app, "5557001")
            .await
            .actions
            .and_then(|a| a.as_array().cloned())
            .unwrap_or_default();
        answered.push(Answered {
            requests: model.requests()[before..].to_vec(),
            texts: block_texts(&body).join(" | "),
            actions,
        });
    }
    app.stop().await;
    answered
}

/// Whether the message's turn recorded `tool` on `id` (with `value`) as performed.
fn performed(a: &Answered, tool: &str, id: &str, value: Option<&str>) -> bool {
    a.actions.iter().any(|e| {
        e["tool"] == tool
            && e["id"] == id
            && value.is_none_or(|v| e["value"] == v)
            && e["status"] == "performed"
    })
}

fn sent_a_flow(a: &Answered) -> bool {
    a.actions.iter().any(|e| e["tool"] == "send_flow")
}

fn assert_sale_within_eleven_calls(sale: &[Answered], intent: &str) {
    let per_message: Vec<usize> = sale.iter().map(|a| a.requests.len()).collect();
    let total: usize = per_message.iter().sum();
    assert!(total <= 11, "{total} model calls ({per_message:?})");
    for (n, a) in sale.iter().enumerate() {
        assert!(!a.texts.is_empty(), "message {n} is answered");
        // A turn that sent no flow answered beside its writes: one call.
        if !sent_a_flow(a) {
            assert_eq!(
                a.requests.len(),
                1,
                "message {n}: {:?} -> {}",
                a.actions,
                a.texts
            );
        }
    }
    // The writes made beside the answer were performed, not lost.
    assert!(
        performed(&sale[1], "set_field", intent, Some("prospect")),
        "{:?}",
        sale[1].actions
    );
    assert!(
        performed(&sale[1], "set_field", "funnel_stage", Some("qualifying")),
        "{:?}",
        sale[1].actions
    );
    assert!(
        sale.last().unwrap().texts.contains("payment link"),
        "the sale ends with the link: {}",
        sale.last().unwrap().texts
    );
    // Steps with a flow replayed its call and result: the answer followed what was sent.
    for a in sale.iter().filter(|a| sent_a_flow(a)) {
        let last = a.requests.last().unwrap();
        assert!(
            last.messages
                .iter()
                .any(|m| matches!(m, Message::ToolResults { .. })),
            "the flow's result reached the model"
        );
    }
}

#[tokio::test]
async fn spec_012_the_demo_tenants_sale_takes_at_most_eleven_model_calls() {
    let sale = run_sale(None, "riverside-clay").await;
    assert_sale_within_eleven_calls(&sale, "intent");
    // The course was recorded beside its answer (message 3, "would the wheel course suit me?").
    assert!(
        performed(&sale[2], "set_field", "course", Some("wheel-basics")),
        "{:?}",
        sale[2].actions
    );
}

#[tokio::test]
async fn spec_012_the_second_verticals_sale_takes_at_most_eleven_model_calls() {
    let sale = run_sale(Some("tests/fixtures/tenant-cycle"), "cycle-workshop").await;
    assert_sale_within_eleven_calls(&sale, "intent");
    assert!(
        performed(&sale[2], "set_field", "service", Some("tune-up")),
        "{:?}",
        sale[2].actions
    );
}
