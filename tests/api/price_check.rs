//! `config check --env` and the operator's model price (`AGENT_PRICE_*`): what it says about
//! how the prompt cache's tokens will be charged.

use std::process::{Command, Output};

use crate::helpers::*;

/// `config check --env` for `openai:cli-test-unlisted-model` priced by the operator at 2 USD
/// input and 8 USD output per million tokens, with `cached` as its cached rate if given, in an
/// environment `serve` would accept.
fn check_with_price(cached: Option<&str>) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    let mut env: Vec<(&str, String)> = vec![
        ("CONFIG_DIR", config.display().to_string()),
        (
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("agent.db").display()),
        ),
        ("AGENT_MODEL", "openai:cli-test-unlisted-model".into()),
        ("OPENAI_API_KEY", "sk-cli-test".into()),
        ("AGENT_PRICE_INPUT_PER_MTOK", "2".into()),
        ("AGENT_PRICE_OUTPUT_PER_MTOK", "8".into()),
        ("MANYCHAT_SHARED_SECRET", SECRET.into()),
        ("PUBLIC_BASE_URL", "https://agent.example.test".into()),
        ("MANYCHAT_API_TOKEN", "123:test-token".into()),
        ("MANYCHAT_REPLY_FLOW_NS", "content20250101_reply".into()),
        ("PORT", "0".into()),
    ];
    if let Some(cached) = cached {
        env.push(("AGENT_PRICE_CACHED_INPUT_PER_MTOK", cached.into()));
    }
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .args(["config", "check", "--env"])
        .env_clear()
        .envs(env.iter().map(|(n, v)| (*n, v.as_str())))
        .output()
        .unwrap()
}

/// An operator price without a cached rate charges cache reads at the input rate: the check
/// passes and says so in one line naming the model and the variable to set; with the cached
/// rate given it says nothing of it.
#[test]
fn cost_config_check_says_when_an_operator_price_charges_cache_reads_as_input() {
    let output = check_with_price(None);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let noted: Vec<&str> = out
        .lines()
        .filter(|line| line.contains("charged at the full input rate"))
        .collect();
    assert_eq!(noted.len(), 1, "{out}");
    assert!(
        noted[0].contains("openai:cli-test-unlisted-model")
            && noted[0].contains("AGENT_PRICE_CACHED_INPUT_PER_MTOK"),
        "{out}"
    );

    let output = check_with_price(Some("0.5"));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("full input rate"),
        "{output:?}"
    );
}
