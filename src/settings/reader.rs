//! Reading one variable and its rule: empty strings count as unset, and each problem is
//! collected instead of stopping, so every variable is checked in one run.

use super::*;

/// Reads variables and collects problems.
pub(super) struct Reader<'a> {
    pub(super) lookup: &'a dyn Fn(&str) -> Option<String>,
    pub(super) problems: Vec<SettingProblem>,
}

impl Reader<'_> {
    pub(super) fn problem(&mut self, variable: &'static str, rule: &str) {
        self.problems.push(SettingProblem {
            variable,
            rule: rule.to_owned(),
        });
    }

    /// The trimmed value, `None` when unset or blank.
    pub(super) fn string(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// A model named `provider:model` (both parts non-empty), `None` when unset; the rule
    /// gives `example`.
    pub(super) fn model_spec(&mut self, name: &'static str, example: &str) -> Option<String> {
        let spec = self.string(name)?;
        let named = spec
            .split_once(':')
            .is_some_and(|(p, m)| !p.is_empty() && !m.is_empty());
        if !named {
            self.problem(name, &format!("must be provider:model, e.g. {example}"));
        }
        Some(spec)
    }

    /// `KNOWLEDGE_EMBEDDINGS`: one of the documented forms, with its provider's key set (the
    /// value is never echoed: a mistyped spec may hold a pasted key).
    pub(super) fn knowledge_embeddings(
        &mut self,
        openai_key: bool,
        google_key: bool,
    ) -> Option<crate::model::embedding::EmbeddingSpec> {
        const NAME: &str = "KNOWLEDGE_EMBEDDINGS";
        let raw = self.string(NAME)?;
        let spec = crate::model::embedding::EmbeddingSpec::parse(&raw)
            .map_err(|rule| self.problem(NAME, &rule))
            .ok()?;
        match spec.provider {
            "openai" if !openai_key => self.problem(
                "OPENAI_API_KEY",
                "required when KNOWLEDGE_EMBEDDINGS's provider is openai",
            ),
            "gemini" if !google_key => self.problem(
                crate::model::google::API_KEY_VAR,
                "required when KNOWLEDGE_EMBEDDINGS's provider is gemini",
            ),
            _ => {}
        }
        Some(spec)
    }

    pub(super) fn or(&self, name: &str, default: &str) -> String {
        self.string(name).unwrap_or_else(|| default.to_owned())
    }

    /// A whole number in `min..=max`; the rule names the range.
    pub(super) fn number(&mut self, name: &'static str, default: u64, min: u64, max: u64) -> u64 {
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

    pub(super) fn boolean(&mut self, name: &'static str, default: bool) -> bool {
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

    /// `None` when unset: unset and set-to-the-default are told apart.
    pub(super) fn temperature(&mut self) -> Option<f32> {
        let raw = self.string("AGENT_TEMPERATURE")?;
        match raw.parse::<f32>() {
            Ok(t) if t.is_finite() && (0.0..=2.0).contains(&t) => Some(t),
            _ => {
                self.problem("AGENT_TEMPERATURE", "must be a number from 0 to 2");
                None
            }
        }
    }

    /// `AGENT_REASONING_EFFORT`: one of its levels, or unset.
    pub(super) fn reasoning_effort(&mut self) -> Option<crate::model::reasoning::Effort> {
        use crate::model::reasoning::{Effort, VARIABLE};
        let raw = self.string(VARIABLE)?;
        let effort = Effort::parse(&raw);
        if effort.is_none() {
            self.problem(VARIABLE, Effort::RULE);
        }
        effort
    }

    /// The operator's model price (`AGENT_PRICE_*`); each problem names its variable.
    pub(super) fn price(&mut self) -> Option<Price> {
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
    pub(super) fn model_and_key(
        &mut self,
        spec: Option<&str>,
        openai_key: bool,
        anthropic_key: bool,
        google_key: bool,
    ) {
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
            "google" if !google_key => self.problem(
                crate::model::google::API_KEY_VAR,
                "required when AGENT_MODEL's provider is google",
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
    pub(super) fn base_url(&mut self, name: &'static str, default: &str) -> String {
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

    pub(super) fn public_base_url(&mut self, required: bool) -> String {
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
    pub(super) fn retention_days(&mut self) -> Option<u32> {
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

    pub(super) fn connection_limits(&mut self) -> ConnectionLimits {
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

    /// 020's media limits (`MEDIA_*`), each within its range.
    pub(super) fn media_limits(&mut self) -> crate::media::MediaLimits {
        use crate::media::limits::*;
        let max_duration = self.number(
            "MEDIA_MAX_DURATION_SECONDS",
            DEFAULT_MAX_DURATION_SECONDS,
            1,
            MAX_MEDIA_SECONDS,
        );
        let max_audio = self.number(
            "MEDIA_MAX_AUDIO_SECONDS",
            DEFAULT_MAX_AUDIO_SECONDS,
            1,
            MAX_MEDIA_SECONDS,
        );
        let max_dimension = self.number(
            "MEDIA_MAX_DIMENSION",
            u64::from(DEFAULT_MAX_DIMENSION),
            16,
            u64::from(MAX_DIMENSION),
        );
        let memory_mb = self.number(
            "MEDIA_PROCESS_MEMORY_MB",
            DEFAULT_PROCESS_MEMORY_MB,
            MIN_PROCESS_MEMORY_MB,
            MAX_PROCESS_MEMORY_MB,
        );
        let timeout_ms = self.number(
            "MEDIA_PROCESS_TIMEOUT_MS",
            DEFAULT_PROCESS_TIMEOUT_MS,
            100,
            MAX_DURATION_MS,
        );
        let max_jobs = self.number("MEDIA_MAX_JOBS", DEFAULT_MAX_JOBS as u64, 1, MAX_JOBS);
        // The ranges checked above make these conversions exact.
        MediaLimits {
            max_duration: Duration::from_secs(max_duration),
            max_audio: Duration::from_secs(max_audio),
            max_dimension: u32::try_from(max_dimension).unwrap_or(DEFAULT_MAX_DIMENSION),
            process_memory: memory_mb * 1024 * 1024,
            process_time: Duration::from_millis(timeout_ms),
            max_jobs: usize::try_from(max_jobs).unwrap_or(DEFAULT_MAX_JOBS),
        }
    }

    /// A bearer token of its own (`METRICS_TOKEN`, `RELEASE_TOKEN`): at least
    /// [`MIN_SECRET_CHARS`], no whitespace, and none of `shared` (the secret pasted into every
    /// Dynamic Block must not also open another surface).
    pub(super) fn own_token(&mut self, name: &'static str, shared: &[Secret]) -> Option<Secret> {
        let token = self.string(name)?;
        if token.chars().count() < MIN_SECRET_CHARS || token.contains(char::is_whitespace) {
            self.problem(
                name,
                &format!("must be at least {MIN_SECRET_CHARS} characters, without whitespace"),
            );
        }
        if shared.iter().any(|s| s.expose() == token) {
            self.problem(
                name,
                "must differ from every MANYCHAT_SHARED_SECRET (it opens another surface)",
            );
        }
        Some(Secret::new(token))
    }

    pub(super) fn shared_secrets(&mut self, required: bool) -> Vec<Secret> {
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

    /// `MANYCHAT_DELIVERED_FIELD` (unset: no handshake) and `MANYCHAT_DELIVERY_ID_FIELD`
    /// (default `ai_delivery_id`): two fields of their own, apart from the reply and token
    /// fields (ManyChat's field names are not case-sensitive), or a write of one would replace
    /// the other.
    pub(super) fn delivery_handshake(
        &mut self,
        reply_field: &str,
        token_field: &str,
    ) -> Option<crate::outbox::DeliveryHandshake> {
        const DELIVERED: &str = "MANYCHAT_DELIVERED_FIELD";
        const ID: &str = "MANYCHAT_DELIVERY_ID_FIELD";
        let id_field = self.string(ID);
        let Some(delivered_field) = self.string(DELIVERED) else {
            if id_field.is_some() {
                self.problem(
                    ID,
                    "is used only with MANYCHAT_DELIVERED_FIELD: set that too, or unset this",
                );
            }
            return None;
        };
        let delivery_id_field = id_field
            .unwrap_or_else(|| crate::outbox::handshake::DEFAULT_DELIVERY_ID_FIELD.to_owned());
        let taken = [
            ("MANYCHAT_REPLY_FIELD", reply_field),
            ("MANYCHAT_TOKEN_FIELD", token_field),
        ];
        for (variable, field) in [(DELIVERED, &delivered_field), (ID, &delivery_id_field)] {
            if let Some((other, _)) = taken.iter().find(|(_, t)| t.eq_ignore_ascii_case(field)) {
                self.problem(variable, &format!("must name a field other than {other}'s"));
            }
        }
        if delivered_field.eq_ignore_ascii_case(&delivery_id_field) {
            self.problem(
                DELIVERED,
                "must name a field other than MANYCHAT_DELIVERY_ID_FIELD's (the reply flow copies \
                 the id field into the delivered field)",
            );
        }
        Some(crate::outbox::DeliveryHandshake {
            delivered_field,
            delivery_id_field,
        })
    }
}
