//! The commands of SYSTEM 5.4, as library functions `main` calls. Every command first loads and
//! validates the tenant config and refuses to run on an invalid one.
//!
//! `serve`, `worker`, `demo` (its banner says what it relaxes), `config check`, `config upgrade`,
//! `eval`, `simulate`, `tokens backfill`, `forget`, `retention run`, `report` and
//! `manychat check` (every name the config and environment rely on, against the account), and
//! `catalog import` (a shop's product CSV into `catalog.json`).
//! `handoff` tells `simulate` why a reply was the handoff copy, from the stored turn and counters.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::ConfigHandle;
use crate::manychat::ManyChatClient;
use crate::metrics::Metrics;
use crate::observability::{self, LogFormat};
use crate::settings::{Needs, Settings};
use crate::startup::{self, Application, Overrides};
use crate::store::Store;

mod catalog_import;
mod config;
mod config_used;
mod console_password;
mod demo_banner;
mod eval;
mod handoff;
pub mod insights;
mod manychat_check;
mod release;
mod simulate_report;

pub use catalog_import::{ImportArgs, catalog_import};
pub use config::{config_check, config_check_env, config_upgrade};
pub use console_password::console_password;
pub use eval::eval;
pub use manychat_check::{demo_sandbox_account, manychat_check};
pub use release::release;

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

/// Whether a command works on the demo's data: `DATABASE_URL` unset names the demo's
/// `data/agent.db`. Such a command reads the tenant config by the demo's rule (each absent file's
/// `.example` stands in, config/README.md "How files are found"): the demo wrote that data under
/// that config.
fn on_demo_database(env: &HashMap<String, String>) -> bool {
    env_value(env, "DATABASE_URL").is_none()
}

/// How the tenant config is checked against the environment, read straight from it.
fn context(env: &HashMap<String, String>) -> crate::config::ConfigContext {
    crate::config::ConfigContext {
        reply_flow_ns: env_value(env, "MANYCHAT_REPLY_FLOW_NS"),
        reply_field: env_value(env, "MANYCHAT_REPLY_FIELD").unwrap_or_else(|| "ai_message".into()),
        token_field: env_value(env, "MANYCHAT_TOKEN_FIELD").unwrap_or_else(|| "ai_token".into()),
        handshake_fields: manychat_check::handshake_of(env)
            .map(|h| vec![h.delivered_field, h.delivery_id_field])
            .unwrap_or_default(),
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
    let retention_days = settings.retention_days;
    let model = settings.agent_model.clone().unwrap_or_default();
    let config_dir = settings.config_dir.display().to_string();
    let weekly = insights::weekly_parts(&settings)?;
    let app = Application::build(settings, listener, overrides).await?;
    let _retention = spawn_retention(app.store(), retention_days);
    let _learning = insights::spawn_weekly(weekly, app.store(), app.config())?;
    tracing::info!(
        version = crate::VERSION,
        port = app.port(),
        model = %model,
        backend = app.store().backend(),
        config_dir = %config_dir,
        "serving"
    );
    if model.starts_with("mock:") {
        tracing::warn!(
            model = %model,
            "no real model answers: AGENT_MODEL is the offline mock, whose replies are canned \
             (set AGENT_MODEL to a provider's model before contacts write in)"
        );
    }
    run_until_terminated(app).await
}

/// Runs retention hourly (the first pass a minute after start) until the guard drops.
fn spawn_retention(store: Arc<dyn Store>, days: Option<u32>) -> tokio_util::sync::DropGuard {
    let stop = CancellationToken::new();
    tokio::spawn(crate::retention::run_periodically(
        store,
        Clock::system(),
        days,
        stop.clone(),
    ));
    stop.drop_guard()
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

/// `manychat-agent worker`: the outbox worker and, for a tenant with a `nudge` section (025),
/// the nudge worker, without HTTP. Follow-ups are model turns, so such a tenant's worker needs
/// `AGENT_MODEL` (and its provider's key) as `serve` does.
pub async fn worker(env: &HashMap<String, String>) -> CliResult {
    let nudges = tenant_has_nudges(env);
    let needs = Needs {
        model: nudges,
        ..Needs::WORKER
    };
    let settings = settings_for(env, needs)?;
    observability::init(&settings.log_level, LogFormat::Json)?;
    let context = startup::config_context(&settings, false);
    // Kept: a dead-lettered reply hands its contact off per `rules.handoff`.
    let config = std::sync::Arc::new(ConfigHandle::load(&settings.config_dir, context)?);
    let reply_flow_ns = settings
        .manychat_reply_flow_ns
        .clone()
        .ok_or_else(|| CliError::new("MANYCHAT_REPLY_FLOW_NS is required"))?;
    let token = settings
        .manychat_api_token
        .clone()
        .ok_or_else(|| CliError::new("MANYCHAT_API_TOKEN is required"))?;
    let store = crate::store::connect(settings.database_url.expose()).await?;
    let _retention = spawn_retention(store.clone(), settings.retention_days);
    let _learning = insights::spawn_weekly(
        insights::weekly_parts(&settings)?,
        store.clone(),
        config.clone(),
    )?;
    let client = ManyChatClient::new(
        &settings.manychat_api_base,
        &token,
        startup::manychat_limiter(&store, Clock::system()),
    )?;
    let clock = Clock::system();
    let metrics = std::sync::Arc::new(Metrics::default());
    // 031: follow-ups are prompted with the active playbook, refreshed every minute.
    let playbook =
        crate::learning::playbook::PlaybookCache::load(store.as_ref(), &config.snapshot()).await;
    let nudge_worker = match nudges {
        true => {
            let spec = settings.require_model().map_err(CliError::new)?;
            let model = crate::model::resolve(spec, &settings.model)?;
            // A USD cap the follow-ups are never priced against would not cap.
            crate::model::pricing::require_price(
                model.id(),
                config.snapshot().rules.budget.daily_cost_cap_usd,
            )
            .map_err(CliError::new)?;
            Some(startup::nudge_worker(
                &settings,
                store.clone(),
                model,
                client.clone(),
                config.clone(),
                clock,
                metrics.clone(),
                // This process runs no inbound turn: its follow-ups share only each other's.
                crate::turn::TurnsShared::default().with_playbook(playbook.clone()),
            ))
        }
        false => None,
    };
    let refresh = (store.clone(), config.clone());
    let worker = startup::outbox_worker(
        &settings,
        store,
        client,
        reply_flow_ns,
        clock,
        metrics,
        config.clone(),
    )
    .with_plugins(plugins_client(env, &config)?);
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        startup::termination_signal().await;
        trigger.cancel();
    });
    if nudge_worker.is_some() {
        playbook.spawn(refresh.0, refresh.1, shutdown.clone());
    }
    match nudge_worker {
        Some(nudges) => {
            tracing::info!(
                poll_ms = settings.nudge_poll.as_millis() as u64,
                "nudge worker running"
            );
            tokio::join!(worker.run(shutdown.clone()), nudges.run(shutdown));
        }
        None => worker.run(shutdown).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the tenant's `tools.json` has a `nudge` section (025), read before the settings so
/// that the worker asks for a model only when it will run follow-ups. A config that does not
/// load says nothing here: it is reported in full when the command loads it.
fn tenant_has_nudges(env: &HashMap<String, String>) -> bool {
    crate::config::load_dir(Path::new(&config_dir(env)), &context(env))
        .ok()
        .and_then(|config| config.tools)
        .is_some_and(|tools| tools.nudge.is_some())
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
        // 020: voice notes are transcribed offline by the built-in fake.
        ("TRANSCRIPTION_MODEL", "mock:demo".into()),
    ];
    let generated_secret = (!is_set(&vars, "MANYCHAT_SHARED_SECRET")).then(random_secret);
    // The owner's console, on the loopback: a password made for this run unless one is set.
    let console_password = (!is_set(&vars, "CONSOLE_PASSWORD_HASH")).then(random_secret);
    if let Some(password) = &console_password {
        vars.insert(
            "CONSOLE_PASSWORD_HASH".to_owned(),
            crate::console::auth::PasswordHashSetting::make(password)
                .as_str()
                .to_owned(),
        );
    }
    if let Some(secret) = &generated_secret {
        defaults.push(("MANYCHAT_SHARED_SECRET", secret.clone()));
    }
    // What the banner says the demo relaxes: only the defaults it applied.
    let mut relaxed: Vec<&str> = Vec::new();
    for (name, value) in defaults {
        if !is_set(&vars, name) {
            vars.insert(name.to_owned(), value);
            relaxed.push(name);
        }
    }
    let shutdown = CancellationToken::new();
    let sandbox = if is_set(&vars, "MANYCHAT_API_TOKEN") {
        None
    } else {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let sandbox = crate::manychat::sandbox::spawn_with_account(
            listener,
            shutdown.clone(),
            demo_sandbox_account(&vars),
        )
        .await?;
        vars.insert(
            "MANYCHAT_API_TOKEN".into(),
            crate::manychat::sandbox::DEMO_TOKEN.into(),
        );
        vars.insert("MANYCHAT_API_BASE".into(), sandbox.base_url.clone());
        // 020: the sandbox is the file host too, serving a demo voice note.
        if !is_set(&vars, "MANYCHAT_MEDIA_BASE") {
            vars.insert("MANYCHAT_MEDIA_BASE".into(), sandbox.base_url.clone());
        }
        Some(sandbox)
    };
    let settings = settings_from(&vars)?;
    observability::init(&settings.log_level, LogFormat::Pretty)?;
    // Like `serve`, a busy port is named with what to do about it.
    let listener =
        startup::bind(std::net::SocketAddr::from(([127, 0, 0, 1], settings.port))).await?;
    let overrides = Overrides {
        allow_example_config: true,
        reload_on_sighup: true,
        ..Overrides::default()
    };
    let port = listener.local_addr()?.port();
    let database = sqlite_path(settings.database_url.expose()).map(str::to_owned);
    let retention_days = settings.retention_days;
    let app = Application::build(settings, listener, overrides).await?;
    let _retention = spawn_retention(app.store(), retention_days);
    let secret = generated_secret
        .clone()
        .or_else(|| vars.get("MANYCHAT_SHARED_SECRET").map(|s| first_secret(s)))
        .unwrap_or_default();
    let banner = demo_banner::DemoBanner {
        config: config_used::line(
            Path::new(&config_dir(&vars)),
            &crate::config::ConfigContext {
                allow_examples: true,
                ..context(&vars)
            },
        ),
        port,
        sandbox: sandbox.as_ref().map(|s| s.base_url.clone()),
        relaxed,
        secret,
        secret_generated: generated_secret.is_some(),
        subscriber: random_subscriber(),
        database,
        turn_cap: {
            let rules = &app.config().snapshot().rules;
            (rules.max_turns_per_conversation, rules.idle_reset_hours)
        },
        question: demo_banner::question_about(&app.config().snapshot().catalog),
        console_password,
        offline_language: crate::model::demo::prompt_language(&app.config().snapshot().prompt),
    };
    println!("\n{banner}");
    let result = run_until_terminated(app).await;
    shutdown.cancel();
    result
}

/// A random 15-digit contact id, for a contact never seen before.
fn random_subscriber() -> String {
    use rand::Rng;
    rand::rng()
        .random_range(100_000_000_000_000u64..1_000_000_000_000_000)
        .to_string()
}

/// The file a `sqlite:` `DATABASE_URL` names (`None` for Postgres or an in-memory database).
fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .filter(|path| *path != ":memory:" && !path.is_empty())
}

fn random_secret() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn first_secret(list: &str) -> String {
    list.split(',').next().unwrap_or_default().trim().to_owned()
}

/// The plugin tools' secrets, read from `env`.
fn plugin_secrets(env: &HashMap<String, String>) -> crate::plugins::sign::SecretLookup {
    let vars = Arc::new(env.clone());
    Arc::new(move |name| vars.get(name).cloned())
}

/// The plugin tools' client; refuses when a configured tool's secret is missing or malformed.
fn plugins_client(
    env: &HashMap<String, String>,
    config: &ConfigHandle,
) -> Result<crate::plugins::PluginClient, CliError> {
    let client = crate::plugins::PluginClient::new(plugin_secrets(env));
    let problems = client.secret_problems(config.snapshot().plugins.as_ref());
    match problems.is_empty() {
        true => Ok(client),
        false => Err(CliError::new(format!(
            "plugin secrets: {}",
            problems.join("; ")
        ))),
    }
}

/// `manychat-agent plugin new`: a skeleton entry in `plugins.json` (`crate::plugins::commands`).
pub fn plugin_new(
    env: &HashMap<String, String>,
    name: &str,
    kind: crate::plugins::ToolKind,
    url: Option<&str>,
) -> CliResult {
    let dir = config_dir(env);
    let guide = crate::plugins::commands::new_tool(Path::new(&dir), name, kind, url)
        .map_err(CliError::new)?;
    println!("{guide}");
    Ok(ExitCode::SUCCESS)
}

/// `manychat-agent plugin try`: one signed call of a plugin tool now, on the config as
/// `config check` loads it and the secrets in the environment.
pub async fn plugin_try(
    env: &HashMap<String, String>,
    name: &str,
    subscriber: &str,
    args: &[String],
    yes: bool,
) -> CliResult {
    let config = crate::config::load_dir(Path::new(&config_dir(env)), &context(env))?;
    let tried = crate::plugins::commands::try_tool(
        config.plugins.as_ref(),
        plugin_secrets(env),
        name,
        subscriber,
        args,
        yes,
    )
    .await
    .map_err(CliError::new)?;
    println!("{}", tried.printed);
    if tried.answered {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("error: the endpoint did not answer as the tool needs (see above)");
    Ok(ExitCode::FAILURE)
}

/// The ManyChat client a one-off command writes with: `MANYCHAT_API_TOKEN` is required, and its
/// calls draw on the store's shared rate budget, as the service's do.
pub(crate) fn required_manychat_client(
    settings: &Settings,
    store: &Arc<dyn Store>,
    clock: Clock,
) -> Result<ManyChatClient, CliError> {
    let token = settings
        .manychat_api_token
        .as_ref()
        .ok_or_else(|| CliError::new("MANYCHAT_API_TOKEN is required"))?;
    Ok(ManyChatClient::new(
        &settings.manychat_api_base,
        token,
        startup::manychat_limiter(store, clock),
    )?)
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
    config_used::print(&settings.config_dir, &context);
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
    let client = required_manychat_client(&settings, &store, clock)?;
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

/// `manychat-agent simulate "text"`: posts a message as ManyChat would and prints the reply.
/// Without `--subscriber` it writes as a new contact each run. When the reply hands the contact
/// to a person and the service's database is at hand (the demo's SQLite file), it says why.
pub async fn simulate(
    env: &HashMap<String, String>,
    text: &str,
    url: Option<&str>,
    subscriber: Option<&str>,
) -> CliResult {
    let secret = env
        .get("MANYCHAT_SHARED_SECRET")
        .map(|s| first_secret(s))
        .filter(|s| !s.is_empty())
        .ok_or_else(|| CliError::new("MANYCHAT_SHARED_SECRET is required to simulate"))?;
    let subscriber = match subscriber {
        Some(raw) => parse_subscriber(raw)?,
        None => {
            let fresh = random_subscriber();
            println!("(a new contact: pass --subscriber {fresh} to continue this conversation)");
            parse_subscriber(&fresh)?
        }
    };
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
        .json(&serde_json::json!({"subscriber_id": subscriber.as_str(), "text": text}))
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
    let held = match messages.is_empty() {
        true => handoff::held(env, &subscriber).await,
        false => None,
    };
    match &held {
        Some(lines) => lines.iter().for_each(|line| println!("{line}")),
        None if messages.is_empty() => {
            println!("(silent response: the reply will arrive through the outbox)")
        }
        None => {}
    }
    for message in messages {
        println!("{}", message["text"].as_str().unwrap_or_default());
    }
    if let Some(why) = handoff::explain(env, &subscriber).await {
        println!("({why})");
    }
    for line in simulate_report::describe(env, &subscriber).await {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_subscriber(raw: &str) -> Result<crate::ids::SubscriberId, CliError> {
    crate::ids::SubscriberId::parse(raw).map_err(|e| {
        CliError::new(format!(
            "{e}: a ManyChat subscriber id is the contact's digits"
        ))
    })
}

/// The store `DATABASE_URL` names, for the commands that read or change what a running service
/// stored. A SQLite file that does not exist is an error rather than a new empty database.
pub(crate) async fn existing_store(
    env: &HashMap<String, String>,
) -> Result<Arc<dyn Store>, CliError> {
    let url = env
        .get("DATABASE_URL")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .unwrap_or(crate::settings::DEFAULT_DATABASE_URL);
    if let Some(path) = sqlite_path(url)
        && !Path::new(path).is_file()
    {
        return Err(CliError::new(format!(
            "DATABASE_URL: no SQLite database at {path}"
        )));
    }
    Ok(crate::store::connect(url).await?)
}

/// `manychat-agent forget <subscriber_id>`: erases one contact, every row about it in
/// one transaction, and prints what each table lost (counts only). A contact not found is said
/// so and is not an error: erasing twice is safe.
pub async fn forget(env: &HashMap<String, String>, subscriber: &str) -> CliResult {
    let subscriber = parse_subscriber(subscriber)?;
    let store = existing_store(env).await?;
    // On Postgres a turn of this contact running on a replica finishes before the erasure.
    let _turns_wait = match store.conversation_by_subscriber(&subscriber).await? {
        Some(conversation) => Some(store.lock_conversation(conversation.id).await?),
        None => None,
    };
    let forgotten = store.forget_contact(&subscriber).await?;
    let mut counts: Vec<String> = forgotten
        .deleted
        .iter()
        .map(|(table, rows)| format!("{table} {rows}"))
        .collect();
    if forgotten.proposals > 0 {
        counts.push(format!("insight_proposals {}", forgotten.proposals));
    }
    match (forgotten.found(), forgotten.conversation_id) {
        (false, _) => println!(
            "contact not found: nothing is stored for this subscriber id \
             (never seen, or already forgotten)"
        ),
        (true, Some(id)) => println!(
            "forgot conversation {id}; rows deleted: {}",
            counts.join(", ")
        ),
        (true, None) => println!("forgot the contact; rows deleted: {}", counts.join(", ")),
    }
    Ok(ExitCode::SUCCESS)
}

/// `manychat-agent retention run`: one retention pass now (`serve` and `worker` run one hourly).
pub async fn retention_run(env: &HashMap<String, String>) -> CliResult {
    let days = crate::settings::retention_days_from_vars(|name| env.get(name).cloned())?;
    let Some(days) = days else {
        println!("retention is off (RETENTION_DAYS=off): nothing cleared");
        return Ok(ExitCode::SUCCESS);
    };
    let store = existing_store(env).await?;
    let cleared = crate::retention::run_once(store.as_ref(), days, Clock::system().now()).await?;
    println!(
        "older than {days} days: text cleared from {} turns, {} settled outbox rows deleted",
        cleared.turns, cleared.outbox_rows
    );
    Ok(ExitCode::SUCCESS)
}

/// The report's sales ids from the tenant config in `CONFIG_DIR` (examples allowed: only ids
/// are read). A config that does not load is said on stderr; the report goes on without the
/// sales measures, listed as not measured.
fn report_tenant(env: &HashMap<String, String>) -> Option<crate::config::TenantConfig> {
    let context = crate::config::ConfigContext {
        allow_examples: true,
        ..context(env)
    };
    let dir = config_dir(env);
    config_used::print(Path::new(&dir), &context);
    match crate::config::load_dir(Path::new(&dir), &context) {
        Ok(config) => Some(config),
        Err(errors) => {
            eprintln!(
                "warning: the tenant config in {dir} did not load ({} problem(s); \
                 `manychat-agent config check` lists them): the report has no sales measures",
                errors.issues().len()
            );
            None
        }
    }
}

/// `manychat-agent report`: the last `weeks` ISO weeks' measures, printed or written
/// to `out`. Aggregates only: no subscriber, text or note is read.
pub async fn report(
    env: &HashMap<String, String>,
    weeks: u32,
    format: crate::report::render::Format,
    out: Option<&Path>,
) -> CliResult {
    if weeks == 0 {
        return Err(CliError::new("--weeks must be at least 1"));
    }
    let store = existing_store(env).await?;
    let tenant = report_tenant(env);
    let sales = tenant.as_ref().map(crate::sales::sales_keys);
    let mut report =
        crate::report::build(store.as_ref(), weeks, Clock::system().now(), sales.as_ref()).await?;
    // The owner's language, English when the config did not load.
    let language = tenant
        .as_ref()
        .map(|t| t.rules.owner_language)
        .unwrap_or_default();
    report.business = tenant.map(|t| t.catalog.business_name);
    let text = crate::report::render::render(&report, format, language);
    match out {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| {
                CliError::new(format!(
                    "cannot write the report to {}: {e}",
                    path.display()
                ))
            })?;
            if report.is_empty() {
                println!("{}", crate::report::render::NO_TURNS);
            }
            println!("report written to {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
