//! Static settings from the environment (SYSTEM 5.2): every variable, its default, its rule.
//!
//! Owns `Settings` and `SettingsError`. Tenant files are separate (`config`); these values do
//! not reload.
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
use crate::model::pricing::{self, Price};

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
    pub openai_api_key: Option<Secret>,
    pub openai_base_url: String,
    pub anthropic_api_key: Option<Secret>,
    pub anthropic_base_url: String,
    pub ollama_base_url: String,
    pub agent_max_output_tokens: u32,
    /// `AGENT_TEMPERATURE`; `None` when unset, so that a model whose capabilities are unknown is
    /// sent a temperature only when the operator chose one. Turns use
    /// [`Settings::temperature_or_default`].
    pub agent_temperature: Option<f32>,
    /// `AGENT_PRICE_INPUT_PER_MTOK`, `AGENT_PRICE_OUTPUT_PER_MTOK` and optionally
    /// `AGENT_PRICE_CACHED_INPUT_PER_MTOK`: the model's price when the built-in table has none
    /// (or to override it), USD per million tokens.
    pub agent_price: Option<Price>,
    /// `MANYCHAT_SHARED_SECRET`: one or more, so a secret can be rotated without editing flows.
    pub manychat_shared_secrets: Vec<Secret>,
    pub manychat_api_token: Option<Secret>,
    pub manychat_api_base: String,
    /// 020 `MANYCHAT_MEDIA_BASE`: the file host contacts' media is detected on and fetched from
    /// (default ManyChat's; plain HTTP only on a loopback address).
    pub manychat_media_base: String,
    /// 020 `TRANSCRIPTION_MODEL` (`provider:model`); `None`: voice notes take the fallback.
    pub transcription_model: Option<String>,
    /// The per-contact custom field a deferred reply is written to.
    pub manychat_reply_field: String,
    /// The tenant flow that renders the reply field; needed for deferred delivery.
    pub manychat_reply_flow_ns: Option<String>,
    /// The custom field holding the contact token (019).
    pub manychat_token_field: String,
    pub contact_tokens_enforced: bool,
    pub manychat_reply_gap: Duration,
    /// `OUTBOX_LEASE_MS`: how long an outbox claim lasts unless the live worker renews it; a
    /// crashed worker's rows are taken again after it.
    pub outbox_lease: Duration,
    /// `OUTBOX_GIVE_UP_AFTER_MS`: how long a reply that keeps failing passingly is retried.
    pub outbox_give_up_after: Duration,
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
    /// `HTTP_MAX_CONNECTIONS`, `HTTP_MAX_CONNECTIONS_PER_ADDRESS` (issue 13 item 7).
    pub connections: ConnectionLimits,
    /// `METRICS_TOKEN`: when set, `GET /metrics` requires it as a bearer token.
    pub metrics_token: Option<Secret>,
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

/// One variable that failed its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingProblem {
    pub variable: &'static str,
    pub rule: String,
}

impl fmt::Display for SettingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.variable, self.rule)
    }
}

/// Every problem found in the environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SettingsError {
    pub problems: Vec<SettingProblem>,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid environment:")?;
        for problem in &self.problems {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

impl SettingsError {
    /// The problem reported for `variable`, if any.
    pub fn problem(&self, variable: &str) -> Option<&SettingProblem> {
        self.problems.iter().find(|p| p.variable == variable)
    }
}

/// Which of the variables that have no default a command needs. Each command asks only for
/// what it uses, and every problem (missing or invalid) is reported in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Answers ManyChat's requests: `MANYCHAT_SHARED_SECRET` and `PUBLIC_BASE_URL`.
    pub channel: bool,
    /// Calls a model: `AGENT_MODEL`, and the key of the provider it names.
    pub model: bool,
    /// Calls ManyChat's API: `MANYCHAT_API_TOKEN`.
    pub manychat_api: bool,
    /// Delivers deferred replies: `MANYCHAT_REPLY_FLOW_NS`.
    pub reply_flow: bool,
}

impl Needs {
    /// `serve`: everything.
    pub const SERVE: Self = Self {
        channel: true,
        model: true,
        manychat_api: true,
        reply_flow: true,
    };
    /// `worker`: delivers the outbox; answers no request and calls no model.
    pub const WORKER: Self = Self {
        channel: false,
        model: false,
        manychat_api: true,
        reply_flow: true,
    };
    /// `tokens backfill`: writes tokens to ManyChat.
    pub const TOKENS_BACKFILL: Self = Self {
        channel: false,
        model: false,
        manychat_api: true,
        reply_flow: false,
    };
    /// `tokens backfill --check`: reads the database only.
    pub const DATABASE_ONLY: Self = Self {
        channel: false,
        model: false,
        manychat_api: false,
        reply_flow: false,
    };
    /// What [`Settings::from_vars`] requires: the channel's two (the tests' and the demo's
    /// apps supply the rest, or a model of their own).
    pub const CHANNEL: Self = Self {
        channel: true,
        model: false,
        manychat_api: false,
        reply_flow: false,
    };
}

/// `AGENT_MODEL` is missing where a model is needed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AGENT_MODEL: required (provider:model, e.g. mock:demo)")]
pub struct ModelRequired;

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
        let transcription_model = env.string("TRANSCRIPTION_MODEL");
        if let Some(spec) = &transcription_model
            && !spec
                .split_once(':')
                .is_some_and(|(p, m)| !p.is_empty() && !m.is_empty())
        {
            env.problem(
                "TRANSCRIPTION_MODEL",
                "must be provider:model, e.g. openai:gpt-4o-mini-transcribe",
            );
        }
        let manychat_reply_field = env.or("MANYCHAT_REPLY_FIELD", "ai_message");
        let manychat_reply_flow_ns = env.string("MANYCHAT_REPLY_FLOW_NS");
        if needs.reply_flow && manychat_reply_flow_ns.is_none() {
            env.problem(
                "MANYCHAT_REPLY_FLOW_NS",
                "required, the namespace of the flow that sends deferred replies",
            );
        }
        let manychat_token_field = env.or("MANYCHAT_TOKEN_FIELD", "ai_token");
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
        let metrics_token = env.metrics_token();

        if !env.problems.is_empty() {
            return Err(SettingsError {
                problems: env.problems,
            });
        }
        Ok(Self {
            agent_model,
            openai_api_key,
            openai_base_url,
            anthropic_api_key,
            anthropic_base_url,
            ollama_base_url,
            // The ranges checked above make these conversions exact.
            agent_max_output_tokens: u32::try_from(agent_max_output_tokens).unwrap_or(400),
            agent_temperature,
            agent_price,
            manychat_shared_secrets,
            manychat_api_token,
            manychat_api_base,
            manychat_media_base,
            transcription_model,
            manychat_reply_field,
            manychat_reply_flow_ns,
            manychat_token_field,
            contact_tokens_enforced,
            manychat_reply_gap: Duration::from_millis(reply_gap_ms),
            outbox_lease: Duration::from_millis(outbox_lease_ms),
            outbox_give_up_after: Duration::from_millis(outbox_give_up_after_ms),
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
        })
    }

    /// The temperature turns ask for: `AGENT_TEMPERATURE`, or its default (0.3).
    pub fn temperature_or_default(&self) -> f32 {
        self.agent_temperature
            .unwrap_or(crate::model::ModelEnv::DEFAULT_TEMPERATURE)
    }

    /// `AGENT_MODEL`, for the commands that call a model (`serve`).
    pub fn require_model(&self) -> Result<&str, ModelRequired> {
        self.agent_model.as_deref().ok_or(ModelRequired)
    }
}

/// Reads variables and collects problems.
struct Reader<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<SettingProblem>,
}

impl Reader<'_> {
    fn problem(&mut self, variable: &'static str, rule: &str) {
        self.problems.push(SettingProblem {
            variable,
            rule: rule.to_owned(),
        });
    }

    /// The trimmed value, `None` when unset or blank.
    fn string(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    fn or(&self, name: &str, default: &str) -> String {
        self.string(name).unwrap_or_else(|| default.to_owned())
    }

    /// A whole number in `min..=max`; the rule names the range.
    fn number(&mut self, name: &'static str, default: u64, min: u64, max: u64) -> u64 {
        let Some(raw) = self.string(name) else {
            return default;
        };
        match raw.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.problem(name, &format!("must be a whole number from {min} to {max}"));
                default
            }
        }
    }

    fn boolean(&mut self, name: &'static str, default: bool) -> bool {
        match self.string(name).map(|v| v.to_ascii_lowercase()).as_deref() {
            None => default,
            Some("true" | "1") => true,
            Some("false" | "0") => false,
            Some(_) => {
                self.problem(name, "must be true, false, 1 or 0");
                default
            }
        }
    }

    /// `None` when unset: unset and set-to-the-default are told apart (issue 20).
    fn temperature(&mut self) -> Option<f32> {
        let raw = self.string("AGENT_TEMPERATURE")?;
        match raw.parse::<f32>() {
            Ok(t) if t.is_finite() && (0.0..=2.0).contains(&t) => Some(t),
            _ => {
                self.problem("AGENT_TEMPERATURE", "must be a number from 0 to 2");
                None
            }
        }
    }

    /// The operator's model price (`AGENT_PRICE_*`); each problem names its variable.
    fn price(&mut self) -> Option<Price> {
        match pricing::operator_price_from(|name| (self.lookup)(name)) {
            Ok(price) => price,
            Err(problems) => {
                for p in problems {
                    self.problem(p.variable, &p.rule);
                }
                None
            }
        }
    }

    /// `AGENT_MODEL` for a command that calls a model: present, a known provider (and mock),
    /// and the provider's key set. Found here, with every other problem, rather than when the
    /// model is built after the database has been opened.
    fn model_and_key(&mut self, spec: Option<&str>, openai_key: bool, anthropic_key: bool) {
        use crate::model::registry::{MOCKS, PROVIDERS};
        const NAME: &str = "AGENT_MODEL";
        let Some(spec) = spec else {
            self.problem(
                NAME,
                "required, provider:model, e.g. openai:gpt-4.1-mini or mock:demo",
            );
            return;
        };
        // A spec without a colon was reported by the caller.
        let Some((provider, model)) = spec.split_once(':') else {
            return;
        };
        if model.is_empty() {
            self.problem(NAME, "names no model after the provider");
            return;
        }
        // The provider is not echoed: a mistyped spec may hold a pasted key.
        match provider {
            "openai" if !openai_key => self.problem(
                "OPENAI_API_KEY",
                "required when AGENT_MODEL's provider is openai",
            ),
            "anthropic" if !anthropic_key => self.problem(
                "ANTHROPIC_API_KEY",
                "required when AGENT_MODEL's provider is anthropic",
            ),
            "mock" if !MOCKS.contains(&model) => {
                let known: Vec<String> = MOCKS.iter().map(|m| format!("mock:{m}")).collect();
                self.problem(
                    NAME,
                    &format!("names an unknown mock model; known: {}", known.join(", ")),
                );
            }
            known if PROVIDERS.contains(&known) => {}
            _ => self.problem(
                NAME,
                &format!("names an unknown provider; known: {}", PROVIDERS.join(", ")),
            ),
        }
    }

    /// An http(s) base URL, stored without a trailing slash.
    fn base_url(&mut self, name: &'static str, default: &str) -> String {
        let value = self.or(name, default);
        match reqwest::Url::parse(&value) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {
                value.trim_end_matches('/').to_owned()
            }
            _ => {
                self.problem(name, "must be an http:// or https:// URL");
                default.to_owned()
            }
        }
    }

    fn public_base_url(&mut self, required: bool) -> String {
        const NAME: &str = "PUBLIC_BASE_URL";
        let Some(value) = self.string(NAME) else {
            if required {
                self.problem(NAME, "required, an https:// URL");
            }
            return String::new();
        };
        match reqwest::Url::parse(&value) {
            Ok(url) if url.scheme() == "https" && url.has_host() => {
                if url.query().is_some() || url.fragment().is_some() {
                    self.problem(NAME, "must not carry a query or fragment");
                }
                value.trim_end_matches('/').to_owned()
            }
            _ => {
                self.problem(
                    NAME,
                    "must be an https:// URL (ManyChat calls only HTTPS, and TLS is the only replay protection)",
                );
                String::new()
            }
        }
    }

    /// `RETENTION_DAYS`: a whole number of days, or `off`. Zero is refused rather than read as
    /// either "keep nothing" or "off": the operator says which.
    fn retention_days(&mut self) -> Option<u32> {
        const NAME: &str = "RETENTION_DAYS";
        let Some(raw) = self.string(NAME) else {
            return Some(DEFAULT_RETENTION_DAYS);
        };
        if raw.eq_ignore_ascii_case("off") {
            return None;
        }
        match raw.parse::<u32>() {
            Ok(days) if (1..=MAX_RETENTION_DAYS).contains(&days) => Some(days),
            _ => {
                self.problem(
                    NAME,
                    &format!(
                        "must be a whole number of days from 1 to {MAX_RETENTION_DAYS}, or off"
                    ),
                );
                Some(DEFAULT_RETENTION_DAYS)
            }
        }
    }

    fn connection_limits(&mut self) -> ConnectionLimits {
        let defaults = ConnectionLimits::default();
        let mut millis = |name: &'static str, default: Duration| {
            let ms = u64::try_from(default.as_millis()).unwrap_or(MAX_DURATION_MS);
            Duration::from_millis(self.number(name, ms, 1, MAX_DURATION_MS))
        };
        let header_timeout = millis("HTTP_HEADER_TIMEOUT_MS", defaults.header_timeout);
        let idle_timeout = millis("HTTP_IDLE_TIMEOUT_MS", defaults.idle_timeout);
        let body_timeout = millis("HTTP_BODY_TIMEOUT_MS", defaults.body_timeout);
        let max_connections = self.number(
            "HTTP_MAX_CONNECTIONS",
            defaults.max_connections as u64,
            1,
            MAX_CONNECTIONS_LIMIT,
        );
        let max_connections_per_address = self.number(
            "HTTP_MAX_CONNECTIONS_PER_ADDRESS",
            defaults.max_connections_per_address as u64,
            1,
            MAX_CONNECTIONS_LIMIT,
        );
        if max_connections_per_address > max_connections {
            self.problem(
                "HTTP_MAX_CONNECTIONS_PER_ADDRESS",
                "must not exceed HTTP_MAX_CONNECTIONS",
            );
        }
        // The ranges checked above make these conversions exact.
        ConnectionLimits {
            header_timeout,
            idle_timeout,
            body_timeout,
            max_connections: usize::try_from(max_connections).unwrap_or(defaults.max_connections),
            max_connections_per_address: usize::try_from(max_connections_per_address)
                .unwrap_or(defaults.max_connections_per_address),
        }
    }

    fn metrics_token(&mut self) -> Option<Secret> {
        const NAME: &str = "METRICS_TOKEN";
        let token = self.string(NAME)?;
        if token.chars().count() < MIN_SECRET_CHARS || token.contains(char::is_whitespace) {
            self.problem(
                NAME,
                &format!("must be at least {MIN_SECRET_CHARS} characters, without whitespace"),
            );
        }
        Some(Secret::new(token))
    }

    fn shared_secrets(&mut self, required: bool) -> Vec<Secret> {
        const NAME: &str = "MANYCHAT_SHARED_SECRET";
        let Some(raw) = self.string(NAME) else {
            if required {
                self.problem(NAME, "required, one or more comma-separated secrets");
            }
            return Vec::new();
        };
        let secrets: Vec<&str> = raw.split(',').map(str::trim).collect();
        let short = secrets
            .iter()
            .filter(|s| s.chars().count() < MIN_SECRET_CHARS)
            .count();
        if short > 0 {
            self.problem(
                NAME,
                &format!(
                    "each comma-separated secret must be at least {MIN_SECRET_CHARS} characters ({short} too short or empty)"
                ),
            );
        }
        if secrets.iter().any(|s| s.contains(char::is_whitespace)) {
            self.problem(NAME, "a secret must not contain whitespace");
        }
        secrets.into_iter().map(Secret::new).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const SECRET_A: &str = "fixture-secret-aaaaaaaa";
    const SECRET_B: &str = "fixture-secret-bbbbbbbb";

    fn base() -> HashMap<&'static str, String> {
        HashMap::from([
            ("MANYCHAT_SHARED_SECRET", SECRET_A.to_owned()),
            ("PUBLIC_BASE_URL", "https://agent.example.test".to_owned()),
        ])
    }

    fn load(vars: &HashMap<&'static str, String>) -> Result<Settings, SettingsError> {
        Settings::from_vars(|name| vars.get(name).cloned())
    }

    fn with(pairs: &[(&'static str, &str)]) -> HashMap<&'static str, String> {
        let mut vars = base();
        for (k, v) in pairs {
            vars.insert(k, (*v).to_owned());
        }
        vars
    }

    fn problem(pairs: &[(&'static str, &str)], variable: &str) -> SettingProblem {
        let err = load(&with(pairs)).expect_err("should be refused");
        err.problem(variable)
            .cloned()
            .unwrap_or_else(|| panic!("no problem for {variable}: {err}"))
    }

    #[test]
    fn system_5_2_defaults_apply_when_unset() {
        let s = load(&base()).unwrap();
        assert_eq!(s.agent_model, None);
        assert_eq!(s.openai_base_url, "https://api.openai.com/v1");
        assert_eq!(s.anthropic_base_url, "https://api.anthropic.com");
        assert_eq!(s.ollama_base_url, "http://localhost:11434");
        assert_eq!(s.agent_max_output_tokens, 400);
        assert_eq!(s.agent_temperature, None);
        assert!((s.temperature_or_default() - 0.3).abs() < f32::EPSILON);
        assert_eq!(s.agent_price, None);
        assert_eq!(s.manychat_shared_secrets, vec![Secret::new(SECRET_A)]);
        assert_eq!(s.manychat_api_token, None);
        assert_eq!(s.manychat_api_base, "https://api.manychat.com");
        assert_eq!(s.manychat_reply_field, "ai_message");
        assert_eq!(s.manychat_reply_flow_ns, None);
        assert_eq!(s.manychat_token_field, "ai_token");
        assert!(s.contact_tokens_enforced);
        assert_eq!(s.manychat_reply_gap, Duration::from_millis(2000));
        assert_eq!(s.public_base_url, "https://agent.example.test");
        assert_eq!(s.channel, Channel::Whatsapp);
        assert_eq!(s.race_deadline, Duration::from_millis(8000));
        assert_eq!(s.model_abort, Duration::from_millis(30_000));
        assert_eq!(s.database_url.expose(), "sqlite://data/agent.db");
        assert_eq!(s.port, 3000);
        assert_eq!(s.bind_address.to_string(), "0.0.0.0");
        assert!(s.trust_proxy.is_empty());
        assert_eq!(s.config_dir, PathBuf::from("config"));
        assert_eq!(s.log_level, "info");
        assert_eq!(s.max_turns_in_flight, 64);
    }

    #[test]
    fn system_5_2_every_variable_is_read() {
        let s = load(&with(&[
            ("AGENT_MODEL", "openai:gpt-4.1-mini"),
            ("OPENAI_API_KEY", "sk-fixture"),
            ("OPENAI_BASE_URL", "https://llm.example.test/v1/"),
            ("ANTHROPIC_API_KEY", "ak-fixture"),
            ("ANTHROPIC_BASE_URL", "https://anthropic.example.test"),
            ("OLLAMA_BASE_URL", "http://ollama.example.test:11434"),
            ("AGENT_MAX_OUTPUT_TOKENS", "800"),
            ("AGENT_TEMPERATURE", "0"),
            ("AGENT_PRICE_INPUT_PER_MTOK", "0.5"),
            ("AGENT_PRICE_OUTPUT_PER_MTOK", "2"),
            ("AGENT_PRICE_CACHED_INPUT_PER_MTOK", "0.05"),
            ("MANYCHAT_SHARED_SECRET", &format!("{SECRET_A}, {SECRET_B}")),
            ("MANYCHAT_API_TOKEN", "mc-fixture-token"),
            ("MANYCHAT_API_BASE", "https://manychat.example.test"),
            ("MANYCHAT_REPLY_FIELD", "reply_text"),
            ("MANYCHAT_REPLY_FLOW_NS", "content20250101000000_000001"),
            ("MANYCHAT_TOKEN_FIELD", "contact_key"),
            ("CONTACT_TOKENS_ENFORCED", "0"),
            ("MANYCHAT_REPLY_GAP_MS", "10000"),
            ("PUBLIC_BASE_URL", "https://agent.example.test/"),
            ("CHANNEL", "telegram"),
            ("RACE_DEADLINE_MS", "7000"),
            ("MODEL_ABORT_MS", "7001"),
            ("DATABASE_URL", "postgres://agent@db.example.test/agent"),
            ("PORT", "8080"),
            ("TRUST_PROXY", "loopback,10.0.0.0/8"),
            ("CONFIG_DIR", "/etc/agent"),
            ("LOG_LEVEL", "info,manychat_agent=debug"),
            ("MAX_TURNS_IN_FLIGHT", "8"),
        ]))
        .unwrap();
        assert_eq!(s.require_model(), Ok("openai:gpt-4.1-mini"));
        assert_eq!(s.openai_api_key, Some(Secret::new("sk-fixture")));
        assert_eq!(s.openai_base_url, "https://llm.example.test/v1");
        assert_eq!(s.anthropic_api_key, Some(Secret::new("ak-fixture")));
        assert_eq!(s.anthropic_base_url, "https://anthropic.example.test");
        assert_eq!(s.ollama_base_url, "http://ollama.example.test:11434");
        assert_eq!(s.agent_max_output_tokens, 800);
        assert_eq!(s.agent_temperature, Some(0.0));
        assert_eq!(
            s.agent_price,
            Some(Price {
                input: 0.5,
                cached_input: 0.05,
                output: 2.0
            })
        );
        assert_eq!(
            s.manychat_shared_secrets,
            vec![Secret::new(SECRET_A), Secret::new(SECRET_B)]
        );
        assert_eq!(s.manychat_api_token, Some(Secret::new("mc-fixture-token")));
        assert_eq!(s.manychat_api_base, "https://manychat.example.test");
        assert_eq!(s.manychat_reply_field, "reply_text");
        assert_eq!(
            s.manychat_reply_flow_ns.as_deref(),
            Some("content20250101000000_000001")
        );
        assert_eq!(s.manychat_token_field, "contact_key");
        assert!(!s.contact_tokens_enforced);
        assert_eq!(s.manychat_reply_gap, Duration::from_secs(10));
        assert_eq!(s.public_base_url, "https://agent.example.test");
        assert_eq!(s.channel, Channel::Telegram);
        assert_eq!(s.race_deadline, Duration::from_millis(7000));
        assert_eq!(s.model_abort, Duration::from_millis(7001));
        assert_eq!(
            s.database_url.expose(),
            "postgres://agent@db.example.test/agent"
        );
        assert_eq!(s.port, 8080);
        assert!(s.trust_proxy.is_trusted("10.2.3.4".parse().unwrap()));
        assert_eq!(s.config_dir, PathBuf::from("/etc/agent"));
        assert_eq!(s.log_level, "info,manychat_agent=debug");
        assert_eq!(s.max_turns_in_flight, 8);
    }

    #[test]
    fn system_5_2_empty_strings_count_as_unset() {
        let s = load(&with(&[
            ("AGENT_MODEL", ""),
            ("PORT", ""),
            ("CHANNEL", "  "),
            ("MANYCHAT_API_TOKEN", ""),
            ("LOG_LEVEL", ""),
            ("TRUST_PROXY", ""),
        ]))
        .unwrap();
        assert_eq!(s.agent_model, None);
        assert_eq!(s.port, 3000);
        assert_eq!(s.channel, Channel::Whatsapp);
        assert_eq!(s.manychat_api_token, None);
        assert_eq!(s.log_level, "info");

        let err = load(&with(&[
            ("MANYCHAT_SHARED_SECRET", ""),
            ("PUBLIC_BASE_URL", ""),
        ]))
        .unwrap_err();
        assert!(err.problem("MANYCHAT_SHARED_SECRET").is_some());
        assert!(err.problem("PUBLIC_BASE_URL").is_some());
    }

    #[test]
    fn system_5_2_shared_secret_is_required() {
        let mut vars = base();
        vars.remove("MANYCHAT_SHARED_SECRET");
        let err = load(&vars).unwrap_err();
        assert_eq!(
            err.problem("MANYCHAT_SHARED_SECRET").unwrap().rule,
            "required, one or more comma-separated secrets"
        );
    }

    #[test]
    fn system_5_2_each_shared_secret_has_at_least_16_characters() {
        let fifteen = "a".repeat(15);
        for value in [
            fifteen.clone(),
            format!("{SECRET_A},{fifteen}"),
            format!("{SECRET_A},"),
        ] {
            let p = problem(
                &[("MANYCHAT_SHARED_SECRET", &value)],
                "MANYCHAT_SHARED_SECRET",
            );
            assert!(p.rule.contains("at least 16 characters"), "{}", p.rule);
            assert!(!p.to_string().contains("aaaa"), "value leaked: {p}");
        }
        let sixteen = "b".repeat(16);
        let s = load(&with(&[("MANYCHAT_SHARED_SECRET", &sixteen)])).unwrap();
        assert_eq!(s.manychat_shared_secrets.len(), 1);
    }

    #[test]
    fn system_5_2_public_base_url_is_required_and_https() {
        let mut vars = base();
        vars.remove("PUBLIC_BASE_URL");
        assert!(
            load(&vars)
                .unwrap_err()
                .problem("PUBLIC_BASE_URL")
                .is_some()
        );
        for bad in [
            "http://agent.example.test",
            "agent.example.test",
            "https://",
            "ftp://x",
        ] {
            let p = problem(&[("PUBLIC_BASE_URL", bad)], "PUBLIC_BASE_URL");
            assert!(p.rule.contains("https://"), "{bad}: {p}");
        }
        let s = load(&with(&[(
            "PUBLIC_BASE_URL",
            "https://agent.example.test/base//",
        )]))
        .unwrap();
        assert_eq!(s.public_base_url, "https://agent.example.test/base");
    }

    #[test]
    fn system_5_2_model_abort_must_exceed_race_deadline() {
        for (deadline, abort) in [("8000", "8000"), ("8000", "7999")] {
            let p = problem(
                &[("RACE_DEADLINE_MS", deadline), ("MODEL_ABORT_MS", abort)],
                "MODEL_ABORT_MS",
            );
            assert_eq!(p.rule, "must be greater than RACE_DEADLINE_MS");
        }
        // The default abort (30000) against a custom deadline is checked too.
        assert!(load(&with(&[("RACE_DEADLINE_MS", "9000")])).is_ok());
        assert!(
            load(&with(&[("MODEL_ABORT_MS", "5000")]))
                .unwrap_err()
                .problem("MODEL_ABORT_MS")
                .is_some()
        );
    }

    #[test]
    fn system_5_2_race_deadline_stays_under_manychats_ten_seconds() {
        problem(&[("RACE_DEADLINE_MS", "10000")], "RACE_DEADLINE_MS");
        problem(&[("RACE_DEADLINE_MS", "0")], "RACE_DEADLINE_MS");
    }

    #[test]
    fn spec_025_nudge_poll_defaults_to_15_seconds_within_its_bounds() {
        let s = load(&with(&[])).unwrap();
        assert_eq!(s.nudge_poll, Duration::from_secs(15));
        let s = load(&with(&[("NUDGE_POLL_MS", "1000")])).unwrap();
        assert_eq!(s.nudge_poll, Duration::from_secs(1));
        problem(&[("NUDGE_POLL_MS", "999")], "NUDGE_POLL_MS");
        problem(&[("NUDGE_POLL_MS", "600001")], "NUDGE_POLL_MS");
    }

    #[test]
    fn system_5_2_reply_gap_is_at_most_10000() {
        let p = problem(
            &[("MANYCHAT_REPLY_GAP_MS", "10001")],
            "MANYCHAT_REPLY_GAP_MS",
        );
        assert_eq!(p.rule, "must be a whole number from 0 to 10000");
        let s = load(&with(&[("MANYCHAT_REPLY_GAP_MS", "0")])).unwrap();
        assert_eq!(s.manychat_reply_gap, Duration::ZERO);
    }

    #[test]
    fn fault_outbox_give_up_after_defaults_to_six_hours_and_is_bounded() {
        assert_eq!(
            load(&base()).unwrap().outbox_give_up_after,
            Duration::from_secs(6 * 3600)
        );
        let s = load(&with(&[("OUTBOX_GIVE_UP_AFTER_MS", "600000")])).unwrap();
        assert_eq!(s.outbox_give_up_after, Duration::from_secs(600));
        problem(
            &[("OUTBOX_GIVE_UP_AFTER_MS", "59999")],
            "OUTBOX_GIVE_UP_AFTER_MS",
        );
        problem(
            &[("OUTBOX_GIVE_UP_AFTER_MS", "86400001")],
            "OUTBOX_GIVE_UP_AFTER_MS",
        );
    }

    #[test]
    fn issue_13_item_4_outbox_lease_is_seconds_and_bounded() {
        assert_eq!(load(&base()).unwrap().outbox_lease, Duration::from_secs(10));
        let s = load(&with(&[("OUTBOX_LEASE_MS", "3000")])).unwrap();
        assert_eq!(s.outbox_lease, Duration::from_secs(3));
        let p = problem(&[("OUTBOX_LEASE_MS", "1999")], "OUTBOX_LEASE_MS");
        assert_eq!(p.rule, "must be a whole number from 2000 to 300000");
        problem(&[("OUTBOX_LEASE_MS", "300001")], "OUTBOX_LEASE_MS");
    }

    #[test]
    fn system_5_2_channel_is_one_of_four() {
        for (raw, channel) in [
            ("whatsapp", Channel::Whatsapp),
            ("instagram", Channel::Instagram),
            ("messenger", Channel::Messenger),
            ("telegram", Channel::Telegram),
        ] {
            assert_eq!(load(&with(&[("CHANNEL", raw)])).unwrap().channel, channel);
        }
        let p = problem(&[("CHANNEL", "sms")], "CHANNEL");
        assert_eq!(
            p.rule,
            "must be one of whatsapp, instagram, messenger, telegram"
        );
    }

    #[test]
    fn system_5_2_numbers_must_parse() {
        for variable in [
            "AGENT_MAX_OUTPUT_TOKENS",
            "MANYCHAT_REPLY_GAP_MS",
            "RACE_DEADLINE_MS",
            "MODEL_ABORT_MS",
            "MAX_TURNS_IN_FLIGHT",
            "PORT",
        ] {
            for bad in ["abc", "-1", "1.5"] {
                problem(&[(variable, bad)], variable);
            }
        }
        problem(&[("AGENT_TEMPERATURE", "warm")], "AGENT_TEMPERATURE");
        problem(&[("AGENT_TEMPERATURE", "NaN")], "AGENT_TEMPERATURE");
    }

    #[test]
    fn issue_13_price_variables_are_validated_with_every_other_problem() {
        let err = load(&with(&[
            ("AGENT_PRICE_INPUT_PER_MTOK", "cheap"),
            ("AGENT_PRICE_CACHED_INPUT_PER_MTOK", "0.1"),
            ("PORT", "x"),
        ]))
        .unwrap_err();
        for variable in [
            "AGENT_PRICE_INPUT_PER_MTOK",
            "AGENT_PRICE_OUTPUT_PER_MTOK",
            "PORT",
        ] {
            assert!(err.problem(variable).is_some(), "{variable}: {err}");
        }
        assert!(
            err.problem("AGENT_PRICE_OUTPUT_PER_MTOK")
                .unwrap()
                .rule
                .contains("AGENT_PRICE_INPUT_PER_MTOK")
        );
        problem(
            &[
                ("AGENT_PRICE_INPUT_PER_MTOK", "1"),
                ("AGENT_PRICE_OUTPUT_PER_MTOK", "-2"),
            ],
            "AGENT_PRICE_OUTPUT_PER_MTOK",
        );
    }

    #[test]
    fn issue_20_unset_temperature_is_told_apart_from_one_set_to_the_default() {
        assert_eq!(load(&base()).unwrap().agent_temperature, None);
        let s = load(&with(&[("AGENT_TEMPERATURE", "0.3")])).unwrap();
        assert_eq!(s.agent_temperature, Some(0.3));
    }

    #[test]
    fn system_5_2_port_is_a_u16() {
        problem(&[("PORT", "65536")], "PORT");
        assert_eq!(load(&with(&[("PORT", "65535")])).unwrap().port, 65535);
        assert_eq!(load(&with(&[("PORT", "0")])).unwrap().port, 0);
    }

    #[test]
    fn system_5_2_max_turns_in_flight_is_at_least_one() {
        let p = problem(&[("MAX_TURNS_IN_FLIGHT", "0")], "MAX_TURNS_IN_FLIGHT");
        assert_eq!(p.rule, "must be a whole number from 1 to 100000");
    }

    #[test]
    fn system_5_2_durations_are_bounded_so_deadlines_cannot_overflow() {
        problem(&[("MODEL_ABORT_MS", "3600001")], "MODEL_ABORT_MS");
        problem(
            &[("MODEL_ABORT_MS", "18446744073709551615")],
            "MODEL_ABORT_MS",
        );
    }

    #[test]
    fn system_5_2_log_level_must_be_a_valid_filter() {
        problem(&[("LOG_LEVEL", "loud=[")], "LOG_LEVEL");
        for ok in ["debug", "warn,manychat_agent=trace"] {
            assert!(load(&with(&[("LOG_LEVEL", ok)])).is_ok(), "{ok}");
        }
    }

    #[test]
    fn system_5_2_trust_proxy_must_parse() {
        let p = problem(&[("TRUST_PROXY", "loopback,anything")], "TRUST_PROXY");
        assert!(p.rule.contains("entry 2"), "{p}");
    }

    #[test]
    fn system_5_2_contact_tokens_enforced_is_boolean() {
        for (raw, expected) in [("true", true), ("1", true), ("false", false), ("0", false)] {
            let s = load(&with(&[("CONTACT_TOKENS_ENFORCED", raw)])).unwrap();
            assert_eq!(s.contact_tokens_enforced, expected, "{raw}");
        }
        problem(
            &[("CONTACT_TOKENS_ENFORCED", "yes")],
            "CONTACT_TOKENS_ENFORCED",
        );
    }

    #[test]
    fn system_5_2_agent_model_is_optional_until_required() {
        let s = load(&base()).unwrap();
        assert_eq!(s.require_model(), Err(ModelRequired));
        assert_eq!(
            ModelRequired.to_string(),
            "AGENT_MODEL: required (provider:model, e.g. mock:demo)"
        );
        let s = load(&with(&[("AGENT_MODEL", "ollama:llama3.1:8b")])).unwrap();
        assert_eq!(s.require_model(), Ok("ollama:llama3.1:8b"));
        problem(&[("AGENT_MODEL", "gpt")], "AGENT_MODEL");
    }

    #[test]
    fn system_5_2_base_urls_must_be_http() {
        problem(&[("OPENAI_BASE_URL", "not a url")], "OPENAI_BASE_URL");
        problem(
            &[("MANYCHAT_API_BASE", "ftp://x.example.test")],
            "MANYCHAT_API_BASE",
        );
    }

    #[test]
    fn spec_020_media_base_and_transcription_model() {
        let s = load(&base()).unwrap();
        assert_eq!(s.manychat_media_base, crate::media::DEFAULT_MEDIA_BASE);
        assert_eq!(s.transcription_model, None);
        let s = load(&with(&[
            ("MANYCHAT_MEDIA_BASE", "http://127.0.0.1:4010"),
            ("TRANSCRIPTION_MODEL", "openai:gpt-4o-mini-transcribe"),
        ]))
        .unwrap();
        assert_eq!(s.manychat_media_base, "http://127.0.0.1:4010");
        assert_eq!(
            s.transcription_model.as_deref(),
            Some("openai:gpt-4o-mini-transcribe")
        );
        // Plain HTTP only on loopback, like a test's or the demo's file host.
        problem(
            &[("MANYCHAT_MEDIA_BASE", "http://files.example.test")],
            "MANYCHAT_MEDIA_BASE",
        );
        problem(&[("TRANSCRIPTION_MODEL", "whisper")], "TRANSCRIPTION_MODEL");
    }

    #[test]
    fn issue_13_item_10_retention_days_defaults_to_90_and_accepts_off() {
        assert_eq!(load(&base()).unwrap().retention_days, Some(90));
        for (raw, expected) in [
            ("30", Some(30)),
            ("off", None),
            ("OFF", None),
            ("1", Some(1)),
        ] {
            let s = load(&with(&[("RETENTION_DAYS", raw)])).unwrap();
            assert_eq!(s.retention_days, expected, "{raw}");
        }
        for raw in ["0", "-1", "2.5", "forever", "36501"] {
            let p = problem(&[("RETENTION_DAYS", raw)], "RETENTION_DAYS");
            assert_eq!(
                p.rule, "must be a whole number of days from 1 to 36500, or off",
                "{raw}"
            );
        }
        // Reported with every other problem, and alone for the commands that need only it.
        let err = load(&HashMap::from([("RETENTION_DAYS", "0".to_owned())])).unwrap_err();
        assert!(err.problem("RETENTION_DAYS").is_some());
        assert!(err.problem("PUBLIC_BASE_URL").is_some());
        assert_eq!(retention_days_from_vars(|_| None), Ok(Some(90)));
        assert!(retention_days_from_vars(|_| Some("0".to_owned())).is_err());
    }

    #[test]
    fn system_5_2_all_problems_are_reported_at_once() {
        let vars = HashMap::from([
            ("PORT", "x".to_owned()),
            ("CHANNEL", "sms".to_owned()),
            ("MODEL_ABORT_MS", "100".to_owned()),
        ]);
        let err = load(&vars).unwrap_err();
        let names: Vec<&str> = err.problems.iter().map(|p| p.variable).collect();
        for expected in [
            "MANYCHAT_SHARED_SECRET",
            "PUBLIC_BASE_URL",
            "CHANNEL",
            "MODEL_ABORT_MS",
            "PORT",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        let text = err.to_string();
        assert!(text.starts_with("invalid environment:"), "{text}");
        assert!(text.contains("\n  PORT: "), "{text}");
    }

    #[test]
    fn issue_19_item_2_a_sqlite_folder_that_does_not_exist_is_reported_at_start() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let missing = dir.path().join("no-such-folder");
        let url = format!("sqlite://{}/agent.db", missing.display());
        let p = problem(&[("DATABASE_URL", &url)], "DATABASE_URL");
        assert!(p.rule.contains("does not exist"), "{p}");
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        assert!(load(&with(&[("DATABASE_URL", &url)])).is_ok());
        // The default folder is created by the store, so it is no problem here.
        assert!(load(&with(&[("DATABASE_URL", "sqlite://data/agent.db")])).is_ok());
    }

    #[test]
    fn issue_13_item_7_connection_limits_have_defaults_and_are_read_and_checked() {
        let s = load(&base()).unwrap();
        assert_eq!(s.connections, ConnectionLimits::default());
        assert_eq!(s.connections.header_timeout, Duration::from_secs(10));
        assert_eq!(s.connections.idle_timeout, Duration::from_secs(75));
        assert_eq!(s.connections.body_timeout, Duration::from_secs(10));
        assert_eq!(s.connections.max_connections, 1024);
        assert_eq!(s.connections.max_connections_per_address, 256);
        let s = load(&with(&[
            ("HTTP_HEADER_TIMEOUT_MS", "2000"),
            ("HTTP_IDLE_TIMEOUT_MS", "90000"),
            ("HTTP_BODY_TIMEOUT_MS", "3000"),
            ("HTTP_MAX_CONNECTIONS", "50"),
            ("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "50"),
        ]))
        .unwrap();
        assert_eq!(
            s.connections,
            ConnectionLimits {
                header_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(90),
                body_timeout: Duration::from_secs(3),
                max_connections: 50,
                max_connections_per_address: 50,
            }
        );
        // Every problem at once, each naming its variable.
        let err = load(&with(&[
            ("HTTP_HEADER_TIMEOUT_MS", "0"),
            ("HTTP_IDLE_TIMEOUT_MS", "soon"),
            ("HTTP_BODY_TIMEOUT_MS", "3600001"),
            ("HTTP_MAX_CONNECTIONS", "10"),
            ("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "11"),
        ]))
        .unwrap_err();
        for variable in [
            "HTTP_HEADER_TIMEOUT_MS",
            "HTTP_IDLE_TIMEOUT_MS",
            "HTTP_BODY_TIMEOUT_MS",
            "HTTP_MAX_CONNECTIONS_PER_ADDRESS",
        ] {
            assert!(err.problem(variable).is_some(), "{variable}: {err}");
        }
        assert_eq!(
            err.problem("HTTP_MAX_CONNECTIONS_PER_ADDRESS")
                .unwrap()
                .rule,
            "must not exceed HTTP_MAX_CONNECTIONS"
        );
        problem(&[("HTTP_MAX_CONNECTIONS", "0")], "HTTP_MAX_CONNECTIONS");
    }

    #[test]
    fn issue_13_item_9_metrics_token_is_optional_and_long_enough() {
        assert_eq!(load(&base()).unwrap().metrics_token, None);
        let s = load(&with(&[("METRICS_TOKEN", "metrics-token-0123456789")])).unwrap();
        assert_eq!(
            s.metrics_token,
            Some(Secret::new("metrics-token-0123456789"))
        );
        assert!(!format!("{s:?}").contains("metrics-token"));
        let p = problem(&[("METRICS_TOKEN", "short")], "METRICS_TOKEN");
        assert!(!p.to_string().contains("short"), "value leaked: {p}");
    }

    #[test]
    fn c5_settings_debug_redacts_secrets() {
        let s = load(&with(&[
            ("OPENAI_API_KEY", "sk-fixture-visible"),
            ("MANYCHAT_API_TOKEN", "mc-fixture-visible"),
            (
                "DATABASE_URL",
                "postgres://agent:pw-fixture-visible@db.example.test/agent",
            ),
        ]))
        .unwrap();
        let printed = format!("{s:?}");
        assert!(!printed.contains("fixture-visible"), "{printed}");
        assert!(!printed.contains(SECRET_A), "{printed}");
        assert!(printed.contains("[redacted]"));
    }
}
