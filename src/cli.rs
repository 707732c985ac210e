//! The commands of SYSTEM 5.4, as library functions `main` calls. Every command first loads and
//! validates the tenant config and refuses to run on an invalid one.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::ConfigHandle;
use crate::manychat::{ManyChatClient, ManyChatLimiter};
use crate::metrics::Metrics;
use crate::observability::{self, LogFormat};
use crate::outbox::{OutboxWorker, WorkerSettings};
use crate::settings::{Needs, Settings};
use crate::startup::{self, Application, Overrides};

/// A command's failure, printed by `main` as `error: …`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(String);

impl CliError {
    fn new(message: impl std::fmt::Display) -> Self {
        Self(message.to_string())
    }
}

macro_rules! cli_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self { Self(e.to_string()) }
        }
    )*};
}
cli_error_from!(
    crate::settings::SettingsError,
    crate::startup::StartupError,
    crate::config::ConfigErrors,
    crate::store::StoreError,
    crate::manychat::ManyChatError,
    crate::model::ModelError,
    std::io::Error,
    crate::observability::InitError,
    crate::evals::EvalError
);

type CliResult = Result<ExitCode, CliError>;

fn settings_from(env: &HashMap<String, String>) -> Result<Settings, CliError> {
    Ok(Settings::from_vars(|name| env.get(name).cloned())?)
}

/// The settings for a command that `needs` what it names. On failure the error lists every
/// environment problem and, since the tenant config is checked next anyway, every config
/// issue too: one run shows everything to fix.
fn settings_for(env: &HashMap<String, String>, needs: Needs) -> Result<Settings, CliError> {
    Settings::for_command(needs, |name| env.get(name).cloned()).map_err(|problems| {
        let mut message = problems.to_string();
        if let Err(issues) = crate::config::load_dir(Path::new(&config_dir(env)), &context(env)) {
            message.push_str(&format!("\ntenant config is invalid:\n{issues}"));
        }
        CliError(message)
    })
}

/// `CONFIG_DIR`, read the way `Settings` reads it, for when the settings did not load.
fn config_dir(env: &HashMap<String, String>) -> String {
    env_value(env, "CONFIG_DIR").unwrap_or_else(|| "config".into())
}

/// A variable, empty counting as unset.
fn env_value(env: &HashMap<String, String>, name: &str) -> Option<String> {
    env.get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// How the tenant config is checked against the environment, read straight from it.
fn context(env: &HashMap<String, String>) -> crate::config::ConfigContext {
    crate::config::ConfigContext {
        reply_flow_ns: env_value(env, "MANYCHAT_REPLY_FLOW_NS"),
        reply_field: env_value(env, "MANYCHAT_REPLY_FIELD").unwrap_or_else(|| "ai_message".into()),
        token_field: env_value(env, "MANYCHAT_TOKEN_FIELD").unwrap_or_else(|| "ai_token".into()),
        allow_examples: false,
    }
}

/// `manychat-agent serve`: HTTP and the workers in one process. Never falls back to the
/// sandbox: without `MANYCHAT_API_TOKEN` it refuses to start.
pub async fn serve(env: &HashMap<String, String>) -> CliResult {
    let settings = settings_for(env, Needs::SERVE)?;
    observability::init(&settings.log_level, LogFormat::Json)?;
    let address = std::net::SocketAddr::new(settings.bind_address, settings.port);
    let listener = startup::bind(address).await?;
    let overrides = Overrides {
        reload_on_sighup: true,
        ..Overrides::default()
    };
    let app = Application::build(settings, listener, overrides).await?;
    tracing::info!(port = app.port(), "serving");
    run_until_terminated(app).await
}

async fn run_until_terminated(app: Application) -> CliResult {
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        startup::termination_signal().await;
        tracing::info!("termination signal received");
        trigger.cancel();
    });
    app.run(shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// `manychat-agent worker`: the outbox worker alone.
pub async fn worker(env: &HashMap<String, String>) -> CliResult {
    let settings = settings_for(env, Needs::WORKER)?;
    observability::init(&settings.log_level, LogFormat::Json)?;
    let context = startup::config_context(&settings, false);
    ConfigHandle::load(&settings.config_dir, context)?;
    let reply_flow_ns = settings
        .manychat_reply_flow_ns
        .clone()
        .ok_or_else(|| CliError::new("MANYCHAT_REPLY_FLOW_NS is required"))?;
    let token = settings
        .manychat_api_token
        .clone()
        .ok_or_else(|| CliError::new("MANYCHAT_API_TOKEN is required"))?;
    let store = crate::store::connect(settings.database_url.expose()).await?;
    let client = ManyChatClient::new(&settings.manychat_api_base, &token, ManyChatLimiter::new())?;
    let worker = OutboxWorker::new(
        store,
        client,
        Clock::system(),
        WorkerSettings::new(
            settings.manychat_reply_field.clone(),
            reply_flow_ns,
            settings.manychat_reply_gap,
        )
        .with_token_field(settings.manychat_token_field.clone()),
        std::sync::Arc::new(Metrics::default()),
    );
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        startup::termination_signal().await;
        trigger.cancel();
    });
    worker.run(shutdown).await;
    Ok(ExitCode::SUCCESS)
}

/// `manychat-agent demo`: the embedded default (SYSTEM 5.5). Each part switches to the real
/// thing when its variable is set.
pub async fn demo(env: &HashMap<String, String>) -> CliResult {
    let mut vars = env.clone();
    let is_set = |vars: &HashMap<String, String>, name: &str| {
        vars.get(name).is_some_and(|v| !v.trim().is_empty())
    };
    let mut defaults: Vec<(&str, String)> = vec![
        ("AGENT_MODEL", "mock:demo".into()),
        ("PUBLIC_BASE_URL", "https://demo.invalid".into()),
        ("CONTACT_TOKENS_ENFORCED", "false".into()),
        ("MANYCHAT_REPLY_FLOW_NS", "demo_reply_flow".into()),
    ];
    let generated_secret = (!is_set(&vars, "MANYCHAT_SHARED_SECRET")).then(random_secret);
    if let Some(secret) = &generated_secret {
        defaults.push(("MANYCHAT_SHARED_SECRET", secret.clone()));
    }
    for (name, value) in defaults {
        if !is_set(&vars, name) {
            vars.insert(name.to_owned(), value);
        }
    }
    let shutdown = CancellationToken::new();
    let sandbox = if is_set(&vars, "MANYCHAT_API_TOKEN") {
        None
    } else {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let sandbox = crate::manychat::sandbox::spawn(listener, shutdown.clone()).await?;
        vars.insert("MANYCHAT_API_TOKEN".into(), "sandbox:demo".into());
        vars.insert("MANYCHAT_API_BASE".into(), sandbox.base_url.clone());
        Some(sandbox)
    };
    let settings = settings_from(&vars)?;
    observability::init(&settings.log_level, LogFormat::Pretty)?;
    let listener = TcpListener::bind(format!("127.0.0.1:{}", settings.port)).await?;
    let overrides = Overrides {
        allow_example_config: true,
        reload_on_sighup: true,
        ..Overrides::default()
    };
    let port = listener.local_addr()?.port();
    let app = Application::build(settings, listener, overrides).await?;
    println!();
    println!("manychat-agent demo is running on http://127.0.0.1:{port}");
    if let Some(sandbox) = &sandbox {
        println!(
            "ManyChat calls go to a local sandbox at {} (printed below as [sandbox] lines).",
            sandbox.base_url
        );
    }
    let secret = generated_secret
        .or_else(|| vars.get("MANYCHAT_SHARED_SECRET").map(|s| first_secret(s)))
        .unwrap_or_default();
    println!("Shared secret (shown once): {secret}");
    println!("Try it:");
    println!(
        "  curl -s http://127.0.0.1:{port}/v1/channels/manychat/message \\\n    -H 'Authorization: Bearer {secret}' -H 'Content-Type: application/json' \\\n    -d '{{\"subscriber_id\":\"1000001\",\"text\":\"How much are your courses?\"}}'"
    );
    println!();
    let result = run_until_terminated(app).await;
    shutdown.cancel();
    result
}

fn random_secret() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn first_secret(list: &str) -> String {
    list.split(',').next().unwrap_or_default().trim().to_owned()
}

/// `manychat-agent config upgrade` (042): renames the pre-offering keys of the tenant's files in
/// place (`courses`, `enrollmentUrl`, a field's or flow's `course`, `learning.enrolledTag`),
/// then says whether the result loads. A second run changes nothing; `prompt.md` is never read.
pub fn config_upgrade(env: &HashMap<String, String>) -> CliResult {
    let dir = config_dir(env);
    let done = match crate::config::upgrade::upgrade_dir(Path::new(&dir)) {
        Ok(done) => done,
        Err(error) => {
            eprintln!("{error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if done.is_empty() {
        println!("{dir}: nothing to upgrade");
    }
    for file in &done {
        for renamed in &file.renamed {
            println!("{}: renamed {renamed}", file.path.display());
        }
        for kept in &file.kept {
            println!(
                "{}: left {kept} in place: the object already has the new key (remove one by hand)",
                file.path.display()
            );
        }
    }
    config_check(env)
}

/// `manychat-agent config check`: every error at once, file, JSON path and rule. Without
/// `MANYCHAT_REPLY_FLOW_NS` it says that the check against the reply flow was skipped.
pub fn config_check(env: &HashMap<String, String>) -> CliResult {
    let dir = config_dir(env);
    let context = context(env);
    let skipped = context.reply_flow_ns.is_none().then_some(
        "not checked: that no configured flow is the reply flow (MANYCHAT_REPLY_FLOW_NS is not set)",
    );
    match crate::config::load_dir(Path::new(&dir), &context) {
        Ok(config) => {
            let tools = config.tools.as_ref().map_or(0, |t| {
                t.flows.len() + t.tags.len() + t.fields.len() + t.notes.len()
            });
            println!(
                "{dir}: valid ({} offerings, {tools} tool entries)",
                config.catalog.offerings.len()
            );
            if let Some(skipped) = skipped {
                println!("{skipped}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            eprintln!("{errors}");
            if let Some(skipped) = skipped {
                eprintln!("{skipped}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `manychat-agent tokens backfill [--check]` (019): issues a token to every contact active in
/// the last 30 days that has none, writing each to ManyChat (a failed write is queued for the
/// outbox worker of `serve` or `worker`). Idempotent: a second run finds nobody lacking a token.
/// With `check`, writes nothing: prints how many contacts lack a token and exits 1 if any, 0 if
/// none.
pub async fn tokens_backfill(env: &HashMap<String, String>, check: bool) -> CliResult {
    let needs = if check {
        Needs::DATABASE_ONLY
    } else {
        Needs::TOKENS_BACKFILL
    };
    let settings = settings_for(env, needs)?;
    let context = startup::config_context(&settings, false);
    ConfigHandle::load(&settings.config_dir, context)?;
    let store = crate::store::connect(settings.database_url.expose()).await?;
    let clock = Clock::system();
    if check {
        // The check makes no ManyChat request, so it needs no API token.
        let lacking = crate::tokens::lacking(store.as_ref(), clock.now())
            .await
            .map_err(|e| CliError::new(e.to_string()))?
            .len();
        println!("{lacking} recent contacts have no token");
        return Ok(if lacking == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    observability::init(&settings.log_level, LogFormat::Json)?;
    let api_token = settings
        .manychat_api_token
        .clone()
        .ok_or_else(|| CliError::new("MANYCHAT_API_TOKEN is required"))?;
    let client = ManyChatClient::new(
        &settings.manychat_api_base,
        &api_token,
        ManyChatLimiter::new(),
    )?;
    let service = crate::tokens::TokenService::new(
        store,
        client,
        settings.manychat_token_field.clone(),
        clock,
    );
    let report = service
        .backfill()
        .await
        .map_err(|e| CliError::new(e.to_string()))?;
    println!(
        "issued {} tokens: {} written, {} queued for the outbox worker",
        report.issued, report.written, report.queued
    );
    Ok(ExitCode::SUCCESS)
}

/// `manychat-agent eval`: runs a golden suite; non-zero exit on any failure.
pub async fn eval(env: &HashMap<String, String>, suite: &Path, model: Option<&str>) -> CliResult {
    let report = crate::evals::runner::run(env, suite, model).await?;
    println!("{report}");
    Ok(if report.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `manychat-agent simulate "text"`: posts a message as ManyChat would and prints the reply.
pub async fn simulate(
    env: &HashMap<String, String>,
    text: &str,
    url: Option<&str>,
    subscriber: &str,
) -> CliResult {
    let secret = env
        .get("MANYCHAT_SHARED_SECRET")
        .map(|s| first_secret(s))
        .filter(|s| !s.is_empty())
        .ok_or_else(|| CliError::new("MANYCHAT_SHARED_SECRET is required to simulate"))?;
    let base = match url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!(
            "http://127.0.0.1:{}",
            env.get("PORT").map_or("3000", |p| p.as_str())
        ),
    };
    let response = reqwest::Client::new()
        .post(format!("{base}{}", crate::http::MESSAGE_PATH))
        .bearer_auth(secret)
        .json(&serde_json::json!({"subscriber_id": subscriber, "text": text}))
        .send()
        .await
        .map_err(|e| CliError::new(format!("request failed: {e}")))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| CliError::new(format!("response is not JSON: {e}")))?;
    if !status.is_success() {
        println!("HTTP {status}: {body}");
        return Ok(ExitCode::FAILURE);
    }
    let messages = body["content"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if messages.is_empty() {
        println!("(silent response: the reply will arrive through the outbox)");
    }
    for message in messages {
        println!("{}", message["text"].as_str().unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}
