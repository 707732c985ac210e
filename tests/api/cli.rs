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

/// `serve` with nothing set names every missing variable in one run.
#[test]
fn issue_19_item_1_serve_with_nothing_set_lists_every_problem_at_once() {
    let empty = tempfile::tempdir().unwrap();
    let output = binary()
        .arg("serve")
        .env_clear()
        .current_dir(empty.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    for variable in [
        "MANYCHAT_SHARED_SECRET",
        "PUBLIC_BASE_URL",
        "MANYCHAT_REPLY_FLOW_NS",
        "MANYCHAT_API_TOKEN",
        "AGENT_MODEL",
    ] {
        assert!(
            errors.contains(variable),
            "{variable} missing from:\n{errors}"
        );
    }
    // The tenant config's problem is in the same run.
    assert!(errors.contains("CONFIG_DIR"), "{errors}");

    // A bad DATABASE_URL scheme and a provider without its key, in the same run too; the
    // password in the URL is not echoed.
    let output = binary()
        .arg("serve")
        .env_clear()
        .current_dir(empty.path())
        .env("AGENT_MODEL", "openai:gpt-4.1-mini")
        .env(
            "DATABASE_URL",
            "mysql://agent:pw-fixture-hidden@db.example.test/agent",
        )
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    for variable in ["OPENAI_API_KEY", "DATABASE_URL", "MANYCHAT_SHARED_SECRET"] {
        assert!(
            errors.contains(variable),
            "{variable} missing from:\n{errors}"
        );
    }
    assert!(!errors.contains("pw-fixture-hidden"), "{errors}");
}

/// `worker` and `tokens backfill --check` ask only for what they use.
#[test]
fn issue_19_item_1_commands_require_only_the_variables_they_use() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_tenant(&repo_path("config"), &config);
    let database = format!("sqlite://{}/agent.db", dir.path().display());

    let output = binary()
        .arg("worker")
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", &database)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    for needed in ["MANYCHAT_API_TOKEN", "MANYCHAT_REPLY_FLOW_NS"] {
        assert!(errors.contains(needed), "{needed} missing from:\n{errors}");
    }
    for unused in ["MANYCHAT_SHARED_SECRET", "PUBLIC_BASE_URL", "AGENT_MODEL"] {
        assert!(
            !errors.contains(unused),
            "worker asked for {unused}:\n{errors}"
        );
    }

    let output = binary()
        .args(["tokens", "backfill", "--check"])
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", &database)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("0 recent contacts have no token"),
        "{output:?}"
    );
}

/// A busy port is named, with what to do about it.
#[test]
fn issue_19_item_2_a_busy_port_is_named() {
    let busy = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_tenant(&repo_path("config"), &config);
    let output = binary()
        .arg("serve")
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/agent.db", dir.path().display()),
        )
        .env("MANYCHAT_SHARED_SECRET", "fixture-secret-aaaaaaaa")
        .env("PUBLIC_BASE_URL", "https://agent.example.test")
        .env("MANYCHAT_API_TOKEN", "mc-fixture-token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content20260101000000_000900")
        .env("AGENT_MODEL", "mock:demo")
        .env("PORT", port.to_string())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(
        errors.contains(&format!("port {port} is already in use")),
        "{errors}"
    );
}

/// `config check` without MANYCHAT_REPLY_FLOW_NS says which check it could not make.
#[test]
fn issue_19_item_3_config_check_says_the_reply_flow_check_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    copy_tenant(&repo_path("config"), dir.path());
    let output = binary()
        .args(["config", "check"])
        .env_clear()
        .env("CONFIG_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("valid"), "{printed}");
    assert!(printed.contains("not checked"), "{printed}");
    assert!(printed.contains("MANYCHAT_REPLY_FLOW_NS"), "{printed}");

    let output = binary()
        .args(["config", "check"])
        .env_clear()
        .env("CONFIG_DIR", dir.path())
        .env("MANYCHAT_REPLY_FLOW_NS", "content20260101000000_000900")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stdout).contains("not checked"));
}
