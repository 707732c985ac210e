//! What the benches share: their options, a fake server on loopback, and the real app on the
//! demo tenant with every turn a real turn. Each bench includes it with `mod common;` and uses
//! the part it needs.

// A bench uses only some of these; the others are dead code in that bench's crate.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use manychat_agent::model::{Model, ModelResponse, StopReason, Usage};
use manychat_agent::settings::Settings;
use manychat_agent::startup::{Application, Overrides};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The shared secret the benches' clients sign with.
pub const SECRET: &str = "bench-secret-0123456789";

/// A numeric option from the environment (`BENCH_…`), or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs a bench's body to the end on a multi-threaded runtime, as the service runs.
pub fn run<F: std::future::Future>(bench: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench)
}

/// Serves `router` on a loopback port; returns its base URL (`http://127.0.0.1:…`).
pub async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    base
}

/// Copies the demo tenant (`config/*.example`) into `dir/config-{name}`; returns that folder.
/// Each message is its own turn (`burst.windowMs` 0): a bench of turns measures no waits for
/// more pieces (`benches/burst.rs` sets the window itself).
pub fn demo_tenant(dir: &Path, name: &str) -> PathBuf {
    let config = dir.join(format!("config-{name}"));
    std::fs::create_dir_all(&config).unwrap();
    for file in ["prompt.md", "catalog.json", "rules.json", "tools.json"] {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("config")
            .join(format!("{file}.example"));
        if from.exists() {
            std::fs::copy(from, config.join(file)).unwrap();
        }
    }
    edit_json(&config.join("rules.json"), |rules| {
        rules["burst"] = json!({"windowMs": 0});
    });
    config
}

/// The client address a contact's requests come from: one of its own, in 10.0.0.0/8, so that
/// no per-address limit is what is measured.
pub fn address_of(subscriber: usize) -> String {
    format!(
        "10.{}.{}.{}",
        (subscriber >> 16) & 255,
        (subscriber >> 8) & 255,
        subscriber & 255
    )
}

/// The benches' final reply, "Classes run on weekday evenings.", billed `usage`: what a
/// provider's client hands over, the reply's JSON text as one string.
pub fn final_reply(usage: Usage) -> ModelResponse {
    const REPLY_JSON: &str = r#"{"messages":["Classes run on weekday evenings."],"escalate":false,"escalation_reason":null,"confidence":0.9,"closing_question":null}"#;
    ModelResponse {
        tool_calls: Vec::new(),
        output: Some(REPLY_JSON.to_owned()),
        usage,
        stop: StopReason::Completed,
        echo: Default::default(),
    }
}

/// Each of `values` with one decimal and `unit`, comma-separated (a summary's rounds).
pub fn listed_rounds(values: &[f64], unit: &str) -> String {
    values
        .iter()
        .map(|v| format!("{v:.1}{unit}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rewrites a JSON file of a tenant's config.
pub fn edit_json(file: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(file, value.to_string()).unwrap();
}

/// Lifts a tenant's daily budget so that no measured turn escalates before the model.
pub fn lift_daily_budget(rules: &mut Value) {
    rules["budget"] = json!({"dailyTokenCap": 1_000_000_000_000u64, "dailyCostCapUsd": 1_000_000});
}

/// Starts the real app on the tenant in `config` and `database_url`, answered by `model`, its
/// workers driven by hand (none runs); returns its route URL.
pub async fn start_app(
    config: &Path,
    database_url: String,
    manychat_base: &str,
    model: Arc<dyn Model>,
    shutdown: &CancellationToken,
) -> String {
    start_app_with(config, database_url, manychat_base, model, shutdown, |_| {}).await
}

/// [`start_app`], with `edit` applied to the app's seams (e.g. the plugin tools' secrets).
pub async fn start_app_with(
    config: &Path,
    database_url: String,
    manychat_base: &str,
    model: Arc<dyn Model>,
    shutdown: &CancellationToken,
    edit: impl FnOnce(&mut Overrides),
) -> String {
    start_app_on(
        config,
        database_url,
        manychat_base,
        &[],
        Some(model),
        shutdown,
        edit,
    )
    .await
}

/// [`start_app_with`], with `extra` settings (e.g. `AGENT_MODEL` and a provider's base URL,
/// resolved as `serve` resolves them when `model` is `None`; an extra setting replaces the
/// benches' own of the same name).
pub async fn start_app_on(
    config: &Path,
    database_url: String,
    manychat_base: &str,
    extra: &[(&str, String)],
    model: Option<Arc<dyn Model>>,
    shutdown: &CancellationToken,
    edit: impl FnOnce(&mut Overrides),
) -> String {
    let vars = [
        ("MANYCHAT_SHARED_SECRET", SECRET.to_owned()),
        ("PUBLIC_BASE_URL", "https://bench.example.test".to_owned()),
        ("MANYCHAT_API_TOKEN", "1:bench".to_owned()),
        ("MANYCHAT_API_BASE", manychat_base.to_owned()),
        ("MANYCHAT_REPLY_FLOW_NS", "bench_reply_flow".to_owned()),
        ("CONFIG_DIR", config.display().to_string()),
        ("DATABASE_URL", database_url),
        ("MAX_TURNS_IN_FLIGHT", "1024".to_owned()),
        ("TRUST_PROXY", "loopback".to_owned()),
        ("CONTACT_TOKENS_ENFORCED", "false".to_owned()),
    ];
    let settings = Settings::from_vars(|name| {
        extra
            .iter()
            .chain(vars.iter())
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    // The listener `serve` binds (its backlog included).
    let listener = manychat_agent::startup::bind(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let mut overrides = Overrides {
        model,
        manual_worker: true,
        ..Overrides::default()
    };
    edit(&mut overrides);
    let app = Application::build(settings, listener, overrides)
        .await
        .unwrap();
    let url = format!(
        "http://127.0.0.1:{}/v1/channels/manychat/message",
        app.port()
    );
    let token = shutdown.clone();
    tokio::spawn(async move { app.run(token).await.unwrap() });
    url
}
