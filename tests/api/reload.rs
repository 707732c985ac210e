//! SYSTEM 5.3: SIGHUP reloads the tenant config through the real app; an invalid set keeps the
//! old config in force.

use std::path::Path;
use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use serde_json::Value;

use crate::helpers::*;

pub async fn escalation_copy_served(app: &TestApp, subscriber: &str) -> String {
    // A keyword escalation answers without the model, with the copy in force.
    let keyword = app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = app.send(subscriber, &format!("I want a {keyword}")).await;
    block_texts(&body).remove(0)
}

/// `copy` as the escalation copy of `rules`, written to `rules_path`, and a SIGHUP: the reload
/// is applied between requests, and `subscriber` is served `copy` instead of `original`.
pub async fn sighup_applies_a_new_escalation_copy(
    app: &TestApp,
    (rules, rules_path): (&mut Value, &Path),
    subscriber: &str,
    original: &str,
    copy: &str,
) {
    rules["messages"]["escalation"] = Value::String(copy.into());
    std::fs::write(rules_path, rules.to_string()).unwrap();
    send_sighup();
    let mut served = escalation_copy_served(app, subscriber).await;
    let deadline = RealDeadline::start();
    while served == original && !deadline.passed() {
        real_pause().await;
        served = escalation_copy_served(app, subscriber).await;
    }
    assert_eq!(served, copy);
}

pub fn send_sighup() {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn system_5_3_sighup_swaps_a_valid_config_and_keeps_the_old_one_on_error() {
    let model = Arc::new(ScriptedModel::replies(Vec::<String>::new()));
    let mut options = AppOptions::new(model);
    options.reload_on_sighup = true;
    let app = spawn_app_with(options).await;
    let original = app.escalation_copy();
    assert_eq!(escalation_copy_served(&app, "4001").await, original);

    // An invalid set (escalation copy missing) is refused whole.
    let mut rules: Value = app.rules();
    let rules_path = app.config_dir.join("rules.json");
    rules["messages"]["escalation"] = Value::String(String::new());
    let settled = app.config.reloads_settled();
    std::fs::write(&rules_path, rules.to_string()).unwrap();
    send_sighup();
    // The refusal is awaited, not assumed: the copy is read only once a reload of the invalid
    // files has ended.
    until(async || app.config.reloads_settled() > settled).await;
    assert_eq!(escalation_copy_served(&app, "4002").await, original);

    // A valid set is swapped in.
    let copy = "A colleague will take it from here.";
    let edit = (&mut rules, rules_path.as_path());
    sighup_applies_a_new_escalation_copy(&app, edit, "4003", &original, copy).await;
}
