//! Resolves `AGENT_MODEL` (`provider:model`) to a `Model` (C2: the model is chosen at runtime).
//!
//! Invariants:
//! - The spec is split at the **first** colon only, so an Ollama tag keeps its own colon
//!   (`ollama:llama3.1:8b` → model `llama3.1:8b`).
//! - A provider that needs a key and has none is a `Config` error naming the variable; an
//!   unknown provider is a `Config` error listing the known ones. Both are found at start, never
//!   on a contact's turn.
//! - Secrets are held as `Secret`, so `ModelEnv`'s `Debug` never prints a key.

use std::sync::Arc;

use super::demo::DemoModel;
use super::mock::SlowModel;
use super::{Model, ModelError, anthropic, ollama, openai};
use crate::ids::Secret;

/// The providers `resolve` knows, as listed in its error.
pub const PROVIDERS: &[&str] = &["openai", "anthropic", "ollama", "mock"];

/// The `mock:` models `resolve` knows.
pub const MOCKS: &[&str] = &["demo", "slow"];

/// The model-related environment (SYSTEM 5.2).
///
/// `max_output_tokens` and `temperature` are not used by `resolve`: the agent copies them into
/// every `ModelRequest`, so all providers get them from one place.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEnv {
    pub openai_api_key: Option<Secret>,
    pub openai_base_url: String,
    pub anthropic_api_key: Option<Secret>,
    pub anthropic_base_url: String,
    pub ollama_base_url: String,
    pub max_output_tokens: u32,
    pub temperature: f32,
}

impl ModelEnv {
    /// `AGENT_MAX_OUTPUT_TOKENS`'s default.
    pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 400;
    /// `AGENT_TEMPERATURE`'s default.
    pub const DEFAULT_TEMPERATURE: f32 = 0.3;

    /// Reads the variables through `lookup` (e.g. `|name| std::env::var(name).ok()`). Empty
    /// values count as unset; an invalid value is a `Config` error naming its variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let defaults = Self::default();
        let max_output_tokens = match get("AGENT_MAX_OUTPUT_TOKENS") {
            None => defaults.max_output_tokens,
            Some(raw) => raw
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    ModelError::Config("AGENT_MAX_OUTPUT_TOKENS must be a positive integer".into())
                })?,
        };
        let temperature = match get("AGENT_TEMPERATURE") {
            None => defaults.temperature,
            Some(raw) => raw
                .trim()
                .parse::<f32>()
                .ok()
                .filter(|t| (0.0..=2.0).contains(t))
                .ok_or_else(|| {
                    ModelError::Config("AGENT_TEMPERATURE must be a number from 0 to 2".into())
                })?,
        };
        Ok(Self {
            openai_api_key: get("OPENAI_API_KEY").map(Secret::new),
            openai_base_url: get("OPENAI_BASE_URL").unwrap_or(defaults.openai_base_url),
            anthropic_api_key: get("ANTHROPIC_API_KEY").map(Secret::new),
            anthropic_base_url: get("ANTHROPIC_BASE_URL").unwrap_or(defaults.anthropic_base_url),
            ollama_base_url: get("OLLAMA_BASE_URL").unwrap_or(defaults.ollama_base_url),
            max_output_tokens,
            temperature,
        })
    }
}

impl Default for ModelEnv {
    /// No keys; every other value at its documented default.
    fn default() -> Self {
        Self {
            openai_api_key: None,
            openai_base_url: openai::DEFAULT_BASE_URL.to_owned(),
            anthropic_api_key: None,
            anthropic_base_url: anthropic::DEFAULT_BASE_URL.to_owned(),
            ollama_base_url: ollama::DEFAULT_BASE_URL.to_owned(),
            max_output_tokens: Self::DEFAULT_MAX_OUTPUT_TOKENS,
            temperature: Self::DEFAULT_TEMPERATURE,
        }
    }
}

/// The model `spec` names (`AGENT_MODEL`), built from `env`.
pub fn resolve(spec: &str, env: &ModelEnv) -> Result<Arc<dyn Model>, ModelError> {
    let spec = spec.trim();
    let Some((provider, model)) = spec.split_once(':') else {
        return Err(ModelError::Config(
            "AGENT_MODEL must be provider:model, e.g. openai:gpt-4.1-mini".into(),
        ));
    };
    if model.is_empty() {
        return Err(ModelError::Config(
            "AGENT_MODEL names no model after the provider".into(),
        ));
    }
    match provider {
        "openai" => {
            let key = require(&env.openai_api_key, "OPENAI_API_KEY", provider)?;
            Ok(Arc::new(openai::OpenAiModel::new(
                model,
                key,
                &env.openai_base_url,
            )?))
        }
        "anthropic" => {
            let key = require(&env.anthropic_api_key, "ANTHROPIC_API_KEY", provider)?;
            Ok(Arc::new(anthropic::AnthropicModel::new(
                model,
                key,
                &env.anthropic_base_url,
            )?))
        }
        "ollama" => Ok(Arc::new(ollama::OllamaModel::new(
            model,
            &env.ollama_base_url,
        )?)),
        "mock" => match model {
            "demo" => Ok(Arc::new(DemoModel::new())),
            "slow" => Ok(Arc::new(SlowModel::new())),
            _ => Err(ModelError::Config(format!(
                "AGENT_MODEL names an unknown mock model; known: {}",
                MOCKS
                    .iter()
                    .map(|m| format!("mock:{m}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
        // The unknown provider is not echoed: a mistyped spec may hold a pasted key.
        _ => Err(ModelError::Config(format!(
            "AGENT_MODEL names an unknown provider; known: {}",
            PROVIDERS.join(", ")
        ))),
    }
}

fn require<'a>(
    key: &'a Option<Secret>,
    variable: &str,
    provider: &str,
) -> Result<&'a Secret, ModelError> {
    key.as_ref().ok_or_else(|| {
        ModelError::Config(format!(
            "{variable} is required when AGENT_MODEL uses the {provider} provider"
        ))
    })
}
