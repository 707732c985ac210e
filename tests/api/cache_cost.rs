//! The prompt cache's cost: what `config check --env` says of an operator price (`AGENT_PRICE_*`)
//! that charges cache reads as input, and a turn's cache reads and writes, recorded and charged.

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

/// A turn whose model call read 6,000 input tokens from the prompt cache and wrote 3,000 to it
/// records both counts, and its cost and the day's spend charge each part at its own rate
/// (claude-sonnet-4-5: input 3.00, cache reads 0.30, writes 3.75, output 15.00 USD per million).
#[tokio::test]
async fn cost_a_turns_cache_reads_and_writes_are_recorded_and_charged_as_billed() {
    use manychat_agent::model::Usage;
    use manychat_agent::model::mock::{ScriptedModel, reply};

    let mut answer = reply(reply_json("The Foundation Course is 450.00 USD."));
    answer.usage = Usage {
        input_tokens: 10_000,
        output_tokens: 500,
        cached_tokens: 6_000,
        cache_write_tokens: 3_000,
    };
    let model = ScriptedModel::new(vec![Ok(answer)]).with_id("anthropic:claude-sonnet-4-5");
    let app = spawn_app(std::sync::Arc::new(model)).await;

    let (status, _) = app.send("3401", "How much is the course?").await;

    assert_eq!(status, 200);
    let turns = app.turns("3401").await;
    let agent = &turns[1];
    assert_eq!(agent.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(
        (
            agent.input_tokens,
            agent.cached_tokens,
            agent.cache_write_tokens
        ),
        (10_000, 6_000, 3_000)
    );
    let billed = (1_000.0 * 3.00 + 6_000.0 * 0.30 + 3_000.0 * 3.75 + 500.0 * 15.00) / 1e6;
    assert!(
        (agent.cost_usd - billed).abs() < 1e-12,
        "{}",
        agent.cost_usd
    );
    let spent = app
        .store
        .budget(agent.created_at.date_naive())
        .await
        .unwrap();
    assert!((spent.cost_usd - billed).abs() < 1e-12, "{spent:?}");
    assert_eq!(spent.tokens, 10_500);
}
