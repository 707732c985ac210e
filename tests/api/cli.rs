//! The command line (SYSTEM 5.4) and the golden evals (SYSTEM 9), run as a user runs them.

use std::collections::HashMap;
use std::process::Command;

use crate::helpers::*;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
}

#[tokio::test]
async fn system_9_golden_evals_pass_with_the_mock_model() {
    let env: HashMap<String, String> = [(
        "CONFIG_DIR".to_owned(),
        repo_path("config").display().to_string(),
    )]
    .into();
    let report =
        manychat_agent::evals::runner::run(&env, &repo_path("evals/golden"), Some("mock:demo"))
            .await
            .expect("suite runs");
    assert!(report.results.len() >= 30);
    assert_eq!(report.failed(), 0, "{report}");
}

#[test]
fn system_5_4_config_check_prints_every_error_with_file_path_and_rule() {
    let dir = tempfile::tempdir().unwrap();
    copy_tenant(&repo_path("config"), dir.path());
    let tools = dir.path().join("tools.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tools).unwrap()).unwrap();
    value["flows"][0]["flowNs"] = serde_json::json!("content_reply_flow_0001");
    value["notes"][0]["maxLength"] = serde_json::json!(900);
    std::fs::write(&tools, value.to_string()).unwrap();

    let output = binary()
        .args(["config", "check"])
        .env_clear()
        .env("CONFIG_DIR", dir.path())
        .env("MANYCHAT_REPLY_FLOW_NS", "content_reply_flow_0001")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains("tools.json: $.flows[0].flowNs"), "{errors}");
    assert!(
        errors.contains("tools.json: $.notes[0].maxLength"),
        "{errors}"
    );

    copy_tenant(&repo_path("config"), dir.path());
    let output = binary()
        .args(["config", "check"])
        .env_clear()
        .env("CONFIG_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[test]
fn system_5_2_serve_refuses_to_start_naming_the_variable() {
    let output = binary()
        .arg("serve")
        .env_clear()
        .env("MANYCHAT_SHARED_SECRET", "zq9-tiny")
        .env("PUBLIC_BASE_URL", "http://insecure.example.test")
        .env("RACE_DEADLINE_MS", "9000")
        .env("MODEL_ABORT_MS", "8000")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    for variable in [
        "MANYCHAT_SHARED_SECRET",
        "PUBLIC_BASE_URL",
        "MODEL_ABORT_MS",
    ] {
        assert!(errors.contains(variable), "{variable} named in {errors}");
    }
    assert!(!errors.contains("zq9-tiny"), "a secret is never echoed");
}

/// Issue 13, item 6: a model with no known price under a USD cap would never be capped, so
/// `serve` refuses to start, naming the model and the price variables that fix it.
#[test]
fn issue_13_serve_refuses_an_unpriced_model_under_a_usd_cap_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_tenant(&repo_path("config"), &config);
    let output = binary()
        .arg("serve")
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("MANYCHAT_SHARED_SECRET", "fixture-secret-aaaaaaaa")
        .env("PUBLIC_BASE_URL", "https://agent.example.test")
        .env("MANYCHAT_API_TOKEN", "123:test-token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content_reply_flow_9999")
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("agent.db").display()),
        )
        .env("PORT", "0")
        .env("AGENT_MODEL", "openai:gpt-unlisted-test")
        .env("OPENAI_API_KEY", "sk-fixture")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = String::from_utf8_lossy(&output.stderr);
    for part in [
        "openai:gpt-unlisted-test",
        "budget.dailyCostCapUsd",
        "AGENT_PRICE_INPUT_PER_MTOK",
        "AGENT_PRICE_OUTPUT_PER_MTOK",
    ] {
        assert!(errors.contains(part), "{part} missing: {errors}");
    }
}
