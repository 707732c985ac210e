//! Static settings from the environment (SYSTEM 5.2): every variable, its default, its rule.
//!
//! Owns `Settings` and `SettingsError`. Tenant files are separate (`config`); these values do
//! not reload. This file holds the variables and their parsing (`Settings::for_command`);
//! `reader` reads one variable, `needs` says which required variables a command uses, and
//! `problems` is the report of what failed.
//!
//! Invariants:
//! - Empty strings count as unset.
//! - Every variable is checked at start and every problem is reported at once, each naming the
//!   variable and the rule, never the value (values include secrets).
//! - Secrets (`MANYCHAT_SHARED_SECRET`, API keys, tokens, `DATABASE_URL`, which may embed a
//!   password) are held as [`Secret`], whose `Debug` prints `[redacted]`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::channel::Channel;
use crate::http::client_ip::TrustProxy;
use crate::http::server::ConnectionLimits;
use crate::ids::Secret;
use crate::model::ModelEnv;
use crate::model::pricing::{self, Price};

mod needs;
mod problems;
mod reader;
pub use needs::*;
pub use problems::*;
use reader::*;

/// Shortest accepted shared secret, in characters.
pub const MIN_SECRET_CHARS: usize = 16;
/// ManyChat's hard limit on a Dynamic Block request (C7).
pub const MANYCHAT_LIMIT_MS: u64 = 10_000;
/// 025: `NUDGE_POLL_MS`, the nudge worker's poll: 15 s by default; at least a second (each
/// pass is a query), at most ten minutes (a due follow-up should not wait longer).
pub const DEFAULT_NUDGE_POLL_MS: u64 = 15_000;
pub const MIN_NUDGE_POLL_MS: u64 = 1_000;
pub const MAX_NUDGE_POLL_MS: u64 = 600_000;
/// Largest `MANYCHAT_REPLY_GAP_MS`.
pub const MAX_REPLY_GAP_MS: u64 = 10_000;
/// Largest `RACE_DEADLINE_MS` / `MODEL_ABORT_MS` we accept (one hour): far beyond any sensible
/// value, and small enough that adding it to an instant can never overflow.
pub const MAX_DURATION_MS: u64 = 3_600_000;
/// Shortest and longest `OUTBOX_LEASE_MS`: renewed every quarter lease, so a shorter one would
/// mostly renew; a longer one leaves a crashed worker's rows waiting.
pub const MIN_OUTBOX_LEASE_MS: u64 = 2_000;
pub const MAX_OUTBOX_LEASE_MS: u64 = 300_000;
/// Largest `MAX_TURNS_IN_FLIGHT` (a semaphore size; far above what one process can serve).
pub const MAX_TURNS_IN_FLIGHT_LIMIT: u64 = 100_000;
/// Largest `HTTP_MAX_CONNECTIONS` / `HTTP_MAX_CONNECTIONS_PER_ADDRESS`.
pub const MAX_CONNECTIONS_LIMIT: u64 = 1_000_000;

/// Validated environment settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `AGENT_MODEL` (`provider:model`); required by `serve` only, see [`Settings::require_model`].
    pub agent_model: Option<String>,
    /// The model providers' variables: their keys and base URLs, `AGENT_MAX_OUTPUT_TOKENS`,
    /// `AGENT_REASONING_EFFORT` (whether the model takes it is checked when the model is
    /// resolved), `AGENT_TEMPERATURE` (`None` when unset, so a model of unknown capabilities is
    /// sent one only when the operator chose it; turns use [`Settings::temperature_or_default`])
    /// and `AGENT_PRICE_*` (the model's price when the built-in table has none, or to override it).
    pub model: ModelEnv,
    /// `MANYCHAT_SHARED_SECRET`: one or more, so a secret can be rotated without editing flows.
    pub manychat_shared_secrets: Vec<Secret>,
    pub manychat_api_token: Option<Secret>,
    pub manychat_api_base: String,
    /// 020 `MANYCHAT_MEDIA_BASE`: the file host contacts' media is detected on and fetched from
    /// (default ManyChat's; plain HTTP only on a loopback address).
    pub manychat_media_base: String,
    /// 020 `TRANSCRIPTION_MODEL` (`provider:model`); `None`: voice notes take the fallback.
    pub transcription_model: Option<String>,
    /// 020 `MEDIA_MAX_DURATION_SECONDS`, `MEDIA_MAX_AUDIO_SECONDS`, `MEDIA_MAX_DIMENSION`,
    /// `MEDIA_PROCESS_MEMORY_MB`, `MEDIA_PROCESS_TIMEOUT_MS`, `MEDIA_MAX_JOBS`.
    pub media_limits: crate::media::MediaLimits,
    /// `KNOWLEDGE_EMBEDDINGS`: the embedding model of the knowledge's semantic search
    /// (`openai:`, `gemini:` or `ollama:` and a model, with that provider's key and base URL);
    /// `None` (unset): full-text retrieval alone.
    pub knowledge_embeddings: Option<crate::model::embedding::EmbeddingSpec>,
    /// `INSIGHT_MODEL` (031): the analyst model (`provider:model`, the same registry as
    /// `AGENT_MODEL`); unset, no learning run.
    pub insight_model: Option<String>,
    /// The per-contact custom field a deferred reply is written to.
    pub manychat_reply_field: String,
    /// The tenant flow that renders the reply field; needed for deferred delivery.
    pub manychat_reply_flow_ns: Option<String>,
    /// The custom field holding the contact token (019).
    pub manychat_token_field: String,
    /// `MANYCHAT_DELIVERED_FIELD` and `MANYCHAT_DELIVERY_ID_FIELD`: the optional delivery
    /// handshake (`crate::outbox::handshake`). `None` (the default): a deferred reply's trigger
    /// that got no answer is sent again once, so a message may reach the contact twice.
    pub manychat_delivery_handshake: Option<crate::outbox::DeliveryHandshake>,
    pub contact_tokens_enforced: bool,
    pub manychat_reply_gap: Duration,
    /// `OUTBOX_LEASE_MS`: how long an outbox claim lasts unless the live worker renews it; a
    /// crashed worker's rows are taken again after it.
    pub outbox_lease: Duration,
    /// `OUTBOX_GIVE_UP_AFTER_MS`: how long a reply that keeps failing passingly is retried.
    pub outbox_give_up_after: Duration,
    /// `SHUTDOWN_DRAIN_MS`: how long the outbox worker still delivers due rows once the
    /// process is told to stop.
    pub shutdown_drain: Duration,
    /// 025 `NUDGE_POLL_MS`: how often the nudge worker looks for due follow-ups.
    pub nudge_poll: Duration,
    /// `PUBLIC_BASE_URL`, `https://`, without a trailing slash.
    pub public_base_url: String,
    pub channel: Channel,
    /// Measured from the request's arrival (SYSTEM 3.4).
    pub race_deadline: Duration,
    /// The safety net for a model call; always greater than `race_deadline`.
    pub model_abort: Duration,
    /// `DATABASE_URL`; a secret because a Postgres URL may carry a password.
    pub database_url: Secret,
    /// `DATABASE_POOL_SIZE`: PostgreSQL connections per process (a turn holds one only for its
    /// short queries, never across its model call).
    pub database_pool_size: u32,
    pub port: u16,
    /// `BIND_ADDRESS`: the address `serve` listens on; `127.0.0.1` behind a local reverse proxy.
    pub bind_address: std::net::IpAddr,
    pub trust_proxy: TrustProxy,
    pub config_dir: PathBuf,
    /// A valid `EnvFilter` directive.
    pub log_level: String,
    /// **Beyond:** turns allowed in flight before new ones are shed with the escalation copy.
    pub max_turns_in_flight: usize,
    /// `RETENTION_DAYS`: turns older than this many days lose their text (`None`: `off`).
    pub retention_days: Option<u32>,
    /// `HTTP_HEADER_TIMEOUT_MS`, `HTTP_IDLE_TIMEOUT_MS`, `HTTP_BODY_TIMEOUT_MS`,
    /// `HTTP_MAX_CONNECTIONS`, `HTTP_MAX_CONNECTIONS_PER_ADDRESS`.
    pub connections: ConnectionLimits,
    /// `METRICS_TOKEN`: when set, `GET /metrics` requires it as a bearer token. Unset, the
    /// route answers only on a loopback listener, or with `METRICS_OPEN`.
    pub metrics_token: Option<Secret>,
    /// `METRICS_OPEN`: serve `GET /metrics` without a token on any address (the operator
    /// guards it otherwise, e.g. a private network).
    pub metrics_open: bool,
    /// `RELEASE_TOKEN`: the bearer token of `POST /v1/channels/manychat/release`; unset, the
    /// route is off (404) and the `release` command is the way to hand a contact back.
    pub release_token: Option<Secret>,
    /// `CONSOLE_PASSWORD_HASH`: the owner's console password as an Argon2id PHC string (made
    /// by `manychat-agent console password`); unset, `/console` is off (404).
    pub console_password_hash: Option<crate::console::auth::PasswordHashSetting>,
}

/// `RETENTION_DAYS` when unset.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
/// Largest `RETENTION_DAYS` (a hundred years).
pub const MAX_RETENTION_DAYS: u32 = 36_500;
/// `DATABASE_URL` when unset.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/agent.db";

/// `RETENTION_DAYS` alone, for the commands that need nothing else (`retention run`).
pub fn retention_days_from_vars(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<u32>, SettingsError> {
    let mut env = Reader {
        lookup: &lookup,
        problems: Vec::new(),
    };
    let days = env.retention_days();
    match env.problems.is_empty() {
        true => Ok(days),
        false => Err(SettingsError {
            problems: env.problems,
        }),
    }
}
impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (tests pass a map), requiring the channel's variables
    /// ([`Needs::CHANNEL`]).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        Self::for_command(Needs::CHANNEL, lookup)
    }

    /// Reads settings through `lookup` for a command that `needs` what it names: a variable it
    /// needs and lacks is a problem reported with every other one; a variable it does not need
    /// is still checked when set, so a shared environment file is wrong in one place only.
    pub fn for_command(
        needs: Needs,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        let mut env = Reader {
            lookup: &lookup,
            problems: Vec::new(),
        };

        let agent_model = env.string("AGENT_MODEL");
        if let Some(model) = &agent_model
            && !model.contains(':')
        {
            env.problem("AGENT_MODEL", "must be provider:model, e.g. mock:demo");
        }
        let openai_api_key = env.string("OPENAI_API_KEY").map(Secret::new);
        let openai_base_url = env.base_url("OPENAI_BASE_URL", "https://api.openai.com/v1");
        let anthropic_api_key = env.string("ANTHROPIC_API_KEY").map(Secret::new);
        let anthropic_base_url = env.base_url("ANTHROPIC_BASE_URL", "https://api.anthropic.com");
        let google_api_key = env
            .string(crate::model::google::API_KEY_VAR)
            .map(Secret::new);
        let google_base_url =
            env.base_url("GOOGLE_BASE_URL", crate::model::google::DEFAULT_BASE_URL);
        let agent_reasoning_effort = env.reasoning_effort();
        let ollama_base_url = env.base_url("OLLAMA_BASE_URL", "http://localhost:11434");
        let agent_max_output_tokens =
            env.number("AGENT_MAX_OUTPUT_TOKENS", 400, 1, u64::from(u32::MAX));
        let agent_temperature = env.temperature();
        let agent_price = env.price();
        if needs.model {
            env.model_and_key(
                agent_model.as_deref(),
                openai_api_key.is_some(),
                anthropic_api_key.is_some(),
                google_api_key.is_some(),
            );
        }

        let manychat_shared_secrets = env.shared_secrets(needs.channel);
        let manychat_api_token = env.string("MANYCHAT_API_TOKEN").map(Secret::new);
        if needs.manychat_api && manychat_api_token.is_none() {
            env.problem(
                "MANYCHAT_API_TOKEN",
                "required, the ManyChat API key (ManyChat: Settings → API)",
            );
        }
        let manychat_api_base = env.base_url("MANYCHAT_API_BASE", "https://api.manychat.com");
        let manychat_media_base = env.or("MANYCHAT_MEDIA_BASE", crate::media::DEFAULT_MEDIA_BASE);
        if let Err(e) = crate::media::MediaHost::parse(&manychat_media_base) {
            env.problem("MANYCHAT_MEDIA_BASE", &e.to_string());
        }
        let transcription_model =
            env.model_spec("TRANSCRIPTION_MODEL", "openai:gpt-4o-mini-transcribe");
        let media_limits = env.media_limits();
        let insight_model = env.model_spec("INSIGHT_MODEL", "anthropic:claude-sonnet-4-5");
        let knowledge_embeddings =
            env.knowledge_embeddings(openai_api_key.is_some(), google_api_key.is_some());
        let manychat_reply_field = env.or("MANYCHAT_REPLY_FIELD", "ai_message");
        let manychat_reply_flow_ns = env.string("MANYCHAT_REPLY_FLOW_NS");
        if needs.reply_flow && manychat_reply_flow_ns.is_none() {
            env.problem(
                "MANYCHAT_REPLY_FLOW_NS",
                "required, the namespace of the flow that sends deferred replies",
            );
        }
        let manychat_token_field = env.or("MANYCHAT_TOKEN_FIELD", "ai_token");
        let manychat_delivery_handshake =
            env.delivery_handshake(&manychat_reply_field, &manychat_token_field);
        let contact_tokens_enforced = env.boolean("CONTACT_TOKENS_ENFORCED", true);
        let reply_gap_ms = env.number("MANYCHAT_REPLY_GAP_MS", 2000, 0, MAX_REPLY_GAP_MS);
        let nudge_poll_ms = env.number(
            "NUDGE_POLL_MS",
            DEFAULT_NUDGE_POLL_MS,
            MIN_NUDGE_POLL_MS,
            MAX_NUDGE_POLL_MS,
        );
        let outbox_lease_ms = env.number(
            "OUTBOX_LEASE_MS",
            10_000,
            MIN_OUTBOX_LEASE_MS,
            MAX_OUTBOX_LEASE_MS,
        );
        let shutdown_drain_ms = env.number("SHUTDOWN_DRAIN_MS", 10_000, 0, 120_000);
        // A minute at least; never past WhatsApp's 24-hour window.
        let outbox_give_up_after_ms = env.number(
            "OUTBOX_GIVE_UP_AFTER_MS",
            crate::outbox::DEFAULT_GIVE_UP_AFTER.as_millis() as u64,
            60_000,
            86_400_000,
        );

        let public_base_url = env.public_base_url(needs.channel);
        let channel = match env.string("CHANNEL") {
            None => Channel::default(),
            Some(raw) => raw
                .parse()
                .unwrap_or_else(|e: crate::channel::UnknownChannel| {
                    env.problem("CHANNEL", &e.to_string());
                    Channel::default()
                }),
        };

        let race_deadline_ms = env.number("RACE_DEADLINE_MS", 8000, 1, MAX_DURATION_MS);
        if race_deadline_ms >= MANYCHAT_LIMIT_MS {
            env.problem(
                "RACE_DEADLINE_MS",
                "must be below 10000 (ManyChat drops the request at 10 s)",
            );
        }
        let model_abort_ms = env.number("MODEL_ABORT_MS", 30_000, 1, MAX_DURATION_MS);
        if model_abort_ms <= race_deadline_ms {
            env.problem("MODEL_ABORT_MS", "must be greater than RACE_DEADLINE_MS");
        }

        let database_url = Secret::new(env.or("DATABASE_URL", "sqlite://data/agent.db"));
        if !crate::store::is_supported_url(database_url.expose()) {
            // The value is not echoed: a Postgres URL may carry a password.
            env.problem(
                "DATABASE_URL",
                "must start with sqlite:// (a file) or postgres:// (a server)",
            );
        } else if let Some(folder) = crate::store::missing_sqlite_folder(database_url.expose()) {
            env.problem(
                "DATABASE_URL",
                &format!(
                    "the folder {} does not exist (create it, or correct the path; only the \
                     default data/ is created)",
                    folder.display()
                ),
            );
        }
        let port = env.number("PORT", 3000, 0, u64::from(u16::MAX));
        let bind_address = match env.string("BIND_ADDRESS") {
            None => std::net::IpAddr::from([0, 0, 0, 0]),
            Some(raw) => raw.parse().unwrap_or_else(|_| {
                env.problem(
                    "BIND_ADDRESS",
                    "must be an IP address, e.g. 0.0.0.0 or 127.0.0.1",
                );
                std::net::IpAddr::from([0, 0, 0, 0])
            }),
        };
        let trust_proxy = match env.string("TRUST_PROXY") {
            None => TrustProxy::default(),
            Some(raw) => TrustProxy::parse(&raw).unwrap_or_else(|e| {
                env.problem("TRUST_PROXY", &e.to_string());
                TrustProxy::default()
            }),
        };
        let config_dir = PathBuf::from(env.or("CONFIG_DIR", "config"));
        let log_level = env.or("LOG_LEVEL", "info");
        if EnvFilter::try_new(&log_level).is_err() {
            env.problem(
                "LOG_LEVEL",
                "must be a tracing filter, e.g. info or info,manychat_agent=debug",
            );
        }
        let max_turns_in_flight =
            env.number("MAX_TURNS_IN_FLIGHT", 64, 1, MAX_TURNS_IN_FLIGHT_LIMIT);
        let database_pool_size = env.number(
            "DATABASE_POOL_SIZE",
            u64::from(crate::store::postgres::DEFAULT_POOL_SIZE),
            1,
            1_000,
        );
        let retention_days = env.retention_days();
        let connections = env.connection_limits();
        let metrics_token = env.own_token("METRICS_TOKEN", &manychat_shared_secrets);
        let metrics_open = env.boolean("METRICS_OPEN", false);
        let release_token = env.own_token("RELEASE_TOKEN", &manychat_shared_secrets);
        // A malformed hash is named, never shown.
        let console_password_hash = env.string("CONSOLE_PASSWORD_HASH").and_then(|raw| {
            crate::console::auth::PasswordHashSetting::parse(&raw)
                .map_err(|rule| env.problem("CONSOLE_PASSWORD_HASH", rule))
                .ok()
        });

        if !env.problems.is_empty() {
            return Err(SettingsError {
                problems: env.problems,
            });
        }
        Ok(Self {
            agent_model,
            model: ModelEnv {
                openai_api_key,
                openai_base_url,
                anthropic_api_key,
                anthropic_base_url,
                google_api_key,
                google_base_url,
                ollama_base_url,
                // The ranges checked above make these conversions exact.
                max_output_tokens: u32::try_from(agent_max_output_tokens).unwrap_or(400),
                reasoning_effort: agent_reasoning_effort,
                temperature: agent_temperature,
                price: agent_price,
            },
            manychat_shared_secrets,
            manychat_api_token,
            manychat_api_base,
            manychat_media_base,
            transcription_model,
            media_limits,
            insight_model,
            knowledge_embeddings,
            manychat_reply_field,
            manychat_reply_flow_ns,
            manychat_token_field,
            manychat_delivery_handshake,
            contact_tokens_enforced,
            manychat_reply_gap: Duration::from_millis(reply_gap_ms),
            outbox_lease: Duration::from_millis(outbox_lease_ms),
            outbox_give_up_after: Duration::from_millis(outbox_give_up_after_ms),
            shutdown_drain: Duration::from_millis(shutdown_drain_ms),
            nudge_poll: Duration::from_millis(nudge_poll_ms),
            public_base_url,
            channel,
            race_deadline: Duration::from_millis(race_deadline_ms),
            model_abort: Duration::from_millis(model_abort_ms),
            database_url,
            database_pool_size: u32::try_from(database_pool_size).unwrap_or(1_000),
            port: u16::try_from(port).unwrap_or(3000),
            bind_address,
            trust_proxy,
            config_dir,
            log_level,
            max_turns_in_flight: usize::try_from(max_turns_in_flight).unwrap_or(64),
            retention_days,
            connections,
            metrics_token,
            metrics_open,
            release_token,
            console_password_hash,
        })
    }

    /// The temperature turns ask for: `AGENT_TEMPERATURE`, or its default (0.3).
    pub fn temperature_or_default(&self) -> f32 {
        self.model
            .temperature
            .unwrap_or(ModelEnv::DEFAULT_TEMPERATURE)
    }

    /// `AGENT_MODEL`, for the commands that call a model (`serve`).
    pub fn require_model(&self) -> Result<&str, ModelRequired> {
        self.agent_model.as_deref().ok_or(ModelRequired)
    }
}

#[cfg(test)]
mod tests;
