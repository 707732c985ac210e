//! The golden evals (SYSTEM 9) from the command line: they pass with the mock model, `eval` refuses
//! to run without a model (naming the model first), and its help says so.

use std::collections::HashMap;

use crate::cli_helpers::*;
use crate::helpers::*;

#[tokio::test]
async fn system_9_golden_evals_pass_with_the_mock_model() {
    let env: HashMap<String, String> = [(
        "CONFIG_DIR".to_owned(),
        manychat_agent::config::examples::shipped_examples()
            .display()
            .to_string(),
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
fn eval_refuses_without_a_model_and_names_the_model_first() {
    let output = command(&["eval"])
        .env(
            "CONFIG_DIR",
            manychat_agent::config::examples::shipped_examples(),
        )
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(repo_path(""))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = stderr(&output);
    assert!(
        errors.contains("AGENT_MODEL") && errors.contains("--model mock:demo"),
        "{errors}"
    );
    assert!(stdout(&output).is_empty(), "no case ran on a silent mock");

    let output = command(&["eval", "--model", "mock:demo"])
        .env(
            "CONFIG_DIR",
            manychat_agent::config::examples::shipped_examples(),
        )
        .current_dir(repo_path(""))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines[0].starts_with("eval: model mock:demo (from --model), suite evals/golden, "),
        "{printed}"
    );
    assert_eq!(lines[1], "playbook: none (the no-playbook baseline)");
    assert!(
        lines[2].starts_with("eval record: none is written: a mock model's eval never counts"),
        "a mock's run says plainly that it records nothing: {printed}"
    );
    assert!(
        lines[3].starts_with("PASS "),
        "each case as it finishes: {printed}"
    );
    let cases = lines.iter().filter(|l| l.starts_with("PASS ")).count();
    assert!(
        printed.contains(&format!("{cases} cases: {cases} passed, 0 failed")),
        "{printed}"
    );
}

/// SYSTEM 9: `eval` never falls back to the mock in silence, and its help says so rather than
/// promising a default model.
#[test]
fn system_9_eval_help_says_a_run_without_a_model_is_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .args(["eval", "--help"])
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("refused"), "{help}");
    assert!(!help.contains("else mock:demo"), "{help}");
    // 031: the help says how a playbook version is evaluated and when a record is written.
    assert!(help.contains("PLAYBOOK_VERSION"), "{help}");
    assert!(help.contains("eval record"), "{help}");
}
