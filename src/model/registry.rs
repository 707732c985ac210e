//! Resolves `AGENT_MODEL` (`provider:model`) to a `Model` (C2: the model is chosen at runtime).
//!
//! Invariants:
//! - The spec is split at the **first** colon only, so an Ollama tag keeps its own colon
//!   (`ollama:llama3.1:8b` → model `llama3.1:8b`).
//! - A provider that needs a key and has none is a `Config` error naming the variable; an
//!   unknown provider is a `Config` error listing the known ones. Both are found at start, never
//!   on a contact's turn.
//! - Secrets are held as `Secret`, so `ModelEnv`'s `Debug` never prints a key.
//! - The built provider knows what its model accepts (`capabilities`) and whether the operator
//!   set `AGENT_TEMPERATURE`; an operator's price (`AGENT_PRICE_*`) is registered for the model's
//!   id (`pricing::set_operator_price`).

use std::sync::Arc;

use super::demo::DemoModel;
use super::mock::SlowModel;
use super::pricing::{self, Price};
use super::reasoning::{self, Effort};
use super::{Model, ModelError, anthropic, capabilities, google, ollama, openai};
use crate::ids::Secret;

/// The providers `resolve` knows, as listed in its error.
pub const PROVIDERS: &[&str] = &["openai", "anthropic", "google", "ollama", "mock"];

/// The `mock:` models `resolve` knows.
pub const MOCKS: &[&str] = &["demo", "slow"];

/// The model-related environment (SYSTEM 5.2).
///
/// `max_output_tokens` and the temperature's value are copied by the agent into every
/// `ModelRequest`, so all providers get them from one place; `resolve` reads only whether a
/// temperature was set, which decides whether a model of unknown capabilities is sent one.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEnv {
    pub openai_api_key: Option<Secret>,
    pub openai_base_url: String,
    pub anthropic_api_key: Option<Secret>,
    pub anthropic_base_url: String,
    /// `GOOGLE_GENERATIVE_AI_API_KEY`.
    pub google_api_key: Option<Secret>,
    pub google_base_url: String,
    pub ollama_base_url: String,
    pub max_output_tokens: u32,
    /// `AGENT_REASONING_EFFORT`; `None` (unset) sends nothing.
    pub reasoning_effort: Option<Effort>,
    /// `AGENT_TEMPERATURE`; `None` when unset (the requests then carry
    /// [`ModelEnv::DEFAULT_TEMPERATURE`], sent only to models known to accept it).
    pub temperature: Option<f32>,
    /// `AGENT_PRICE_*`: the operator's price for the model, USD per million tokens.
    pub price: Option<Price>,
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
            None => None,
            Some(raw) => Some(
                raw.trim()
                    .parse::<f32>()
                    .ok()
                    .filter(|t| (0.0..=2.0).contains(t))
                    .ok_or_else(|| {
                        ModelError::Config("AGENT_TEMPERATURE must be a number from 0 to 2".into())
                    })?,
            ),
        };
        let reasoning_effort = match get(reasoning::VARIABLE) {
            None => None,
            Some(raw) => Some(Effort::parse(&raw).ok_or_else(|| {
                ModelError::Config(format!("{} {}", reasoning::VARIABLE, Effort::RULE))
            })?),
        };
        let price = pricing::operator_price_from(&lookup).map_err(|problems| {
            ModelError::Config(
                problems
                    .iter()
                    .map(|p| format!("{} {}", p.variable, p.rule))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        Ok(Self {
            openai_api_key: get("OPENAI_API_KEY").map(Secret::new),
            openai_base_url: get("OPENAI_BASE_URL").unwrap_or(defaults.openai_base_url),
            anthropic_api_key: get("ANTHROPIC_API_KEY").map(Secret::new),
            anthropic_base_url: get("ANTHROPIC_BASE_URL").unwrap_or(defaults.anthropic_base_url),
            google_api_key: get(google::API_KEY_VAR).map(Secret::new),
            google_base_url: get("GOOGLE_BASE_URL").unwrap_or(defaults.google_base_url),
            ollama_base_url: get("OLLAMA_BASE_URL").unwrap_or(defaults.ollama_base_url),
            max_output_tokens,
            reasoning_effort,
            temperature,
            price,
        })
    }

    /// The temperature the requests carry: `AGENT_TEMPERATURE`, or its default.
    pub fn temperature_or_default(&self) -> f32 {
        self.temperature.unwrap_or(Self::DEFAULT_TEMPERATURE)
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
            google_api_key: None,
            google_base_url: google::DEFAULT_BASE_URL.to_owned(),
            ollama_base_url: ollama::DEFAULT_BASE_URL.to_owned(),
            max_output_tokens: Self::DEFAULT_MAX_OUTPUT_TOKENS,
            reasoning_effort: None,
            temperature: None,
            price: None,
        }
    }
}

/// The model `spec` names (`AGENT_MODEL`), built from `env`. A reasoning effort the model does
/// not take is refused here, naming the model (`reasoning::check`), so `serve` refuses at start.
pub fn resolve(spec: &str, env: &ModelEnv) -> Result<Arc<dyn Model>, ModelError> {
    let model = build(spec, env)?;
    if let Some(effort) = env.reasoning_effort {
        reasoning::check(model.id(), effort, env.max_output_tokens)?;
    }
    if let Some(price) = env.price {
        pricing::set_operator_price(model.id(), price);
    }
    if env.temperature.is_some()
        && let Some((provider, name)) = model.id().split_once(':')
        && provider != "mock"
        && capabilities::of(provider, name).temperature == capabilities::Temperature::NotAccepted
    {
        tracing::warn!(
            model = model.id(),
            "AGENT_TEMPERATURE is not sent: this model accepts only its default temperature"
        );
    }
    Ok(model)
}

fn build(spec: &str, env: &ModelEnv) -> Result<Arc<dyn Model>, ModelError> {
    let spec = spec.trim();
    let operator_temperature = env.temperature.is_some();
    let effort = env.reasoning_effort;
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
            Ok(Arc::new(
                openai::OpenAiModel::new(model, key, &env.openai_base_url)?
                    .with_operator_temperature(operator_temperature)
                    .with_reasoning_effort(effort),
            ))
        }
        "anthropic" => {
            let key = require(&env.anthropic_api_key, "ANTHROPIC_API_KEY", provider)?;
            Ok(Arc::new(
                anthropic::AnthropicModel::new(model, key, &env.anthropic_base_url)?
                    .with_operator_temperature(operator_temperature)
                    .with_reasoning_effort(effort),
            ))
        }
        "google" => {
            let key = require(&env.google_api_key, google::API_KEY_VAR, provider)?;
            Ok(Arc::new(
                google::GoogleModel::new(model, key, &env.google_base_url)?
                    .with_operator_temperature(operator_temperature)
                    .with_reasoning_effort(effort),
            ))
        }
        "ollama" => Ok(Arc::new(
            ollama::OllamaModel::new(model, &env.ollama_base_url)?
                .with_operator_temperature(operator_temperature),
        )),
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;
    use crate::model::ToolChoice;
    use crate::model::test_support::{VALID_REPLY, answering_at, first_step, received_bodies};

    fn with_keys() -> ModelEnv {
        ModelEnv {
            openai_api_key: Some(Secret::new("sk-openai-test")),
            anthropic_api_key: Some(Secret::new("sk-ant-test")),
            google_api_key: Some(Secret::new("google-test-key")),
            ..ModelEnv::default()
        }
    }

    fn config_error(spec: &str, env: &ModelEnv) -> String {
        match resolve(spec, env) {
            Err(ModelError::Config(message)) => message,
            Err(other) => panic!("expected a config error, got {other:?}"),
            Ok(model) => panic!("expected a config error, got {}", model.id()),
        }
    }

    #[test]
    fn system_5_2_agent_model_resolves_each_provider_to_its_id() {
        let env = with_keys();
        for (spec, id) in [
            ("openai:gpt-4.1-mini", "openai:gpt-4.1-mini"),
            ("anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
            ("google:gemini-2.5-flash", "google:gemini-2.5-flash"),
            ("ollama:llama3.1:8b", "ollama:llama3.1:8b"),
            ("mock:demo", "mock:demo"),
            ("mock:slow", "mock:slow"),
        ] {
            let model = resolve(spec, &env).expect(spec);
            assert_eq!(model.id(), id);
        }
    }

    #[tokio::test]
    async fn system_5_2_ollama_spec_splits_at_the_first_colon_only() {
        let answer = json!({
            "message": {"role": "assistant", "content": VALID_REPLY},
            "done": true, "done_reason": "stop",
            "prompt_eval_count": 1, "eval_count": 1
        });
        let server = answering_at(("/api/chat", &[]), 200, answer).await;
        let env = ModelEnv {
            ollama_base_url: server.uri(),
            ..ModelEnv::default()
        };

        let model = resolve("ollama:llama3.1:8b", &env).expect("ollama");
        model
            .step(&first_step(ToolChoice::Auto))
            .await
            .expect("step");

        assert_eq!(
            received_bodies(&server).await[0]["model"],
            json!("llama3.1:8b")
        );
    }

    #[test]
    fn system_5_2_missing_api_key_is_a_config_error_naming_the_variable() {
        let env = ModelEnv::default();
        assert!(config_error("openai:gpt-4.1-mini", &env).contains("OPENAI_API_KEY"));
        assert!(config_error("anthropic:claude-haiku-4-5", &env).contains("ANTHROPIC_API_KEY"));
        assert!(
            config_error("google:gemini-2.5-flash", &env).contains("GOOGLE_GENERATIVE_AI_API_KEY")
        );
        // Ollama and the mocks need no key.
        assert!(resolve("ollama:llama3.1:8b", &env).is_ok());
        assert!(resolve("mock:demo", &env).is_ok());
    }

    #[test]
    fn system_5_2_unknown_provider_lists_the_known_ones_without_echoing_the_spec() {
        let message = config_error("sk-pasted-secret:gpt", &with_keys());
        for provider in PROVIDERS {
            assert!(message.contains(provider), "{message}");
        }
        assert!(!message.contains("sk-pasted-secret"));
    }

    #[test]
    fn system_5_2_malformed_specs_are_config_errors() {
        let env = with_keys();
        assert!(config_error("gpt-4.1-mini", &env).contains("provider:model"));
        assert!(config_error("openai:", &env).contains("no model"));
        let message = config_error("mock:fast", &env);
        assert!(message.contains("mock:demo") && message.contains("mock:slow"));
    }

    #[test]
    fn system_5_2_invalid_base_url_is_a_config_error_naming_the_variable() {
        let env = ModelEnv {
            openai_base_url: "api.example.test".into(),
            ..with_keys()
        };
        assert!(config_error("openai:gpt-4.1", &env).contains("OPENAI_BASE_URL"));
    }

    #[test]
    fn system_5_2_model_env_defaults_and_empty_values_count_as_unset() {
        let vars: HashMap<&str, &str> = HashMap::from([
            ("OPENAI_API_KEY", ""),
            ("OPENAI_BASE_URL", "  "),
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("AGENT_MAX_OUTPUT_TOKENS", "600"),
        ]);
        let env =
            ModelEnv::from_lookup(|name| vars.get(name).map(|v| v.to_string())).expect("valid");

        assert_eq!(env.openai_api_key, None);
        assert_eq!(env.openai_base_url, "https://api.openai.com/v1");
        assert_eq!(env.anthropic_api_key, Some(Secret::new("sk-ant-test")));
        assert_eq!(env.anthropic_base_url, "https://api.anthropic.com");
        assert_eq!(
            env.google_base_url,
            "https://generativelanguage.googleapis.com/v1beta"
        );
        assert_eq!(env.reasoning_effort, None);
        assert_eq!(env.ollama_base_url, "http://localhost:11434");
        assert_eq!(env.max_output_tokens, 600);
        assert_eq!(env.temperature, None);
        assert_eq!(env.temperature_or_default(), 0.3);
        assert_eq!(env.price, None);
    }

    #[test]
    fn system_5_2_invalid_numbers_are_refused_naming_the_variable() {
        for (name, value) in [
            ("AGENT_MAX_OUTPUT_TOKENS", "0"),
            ("AGENT_MAX_OUTPUT_TOKENS", "many"),
            ("AGENT_TEMPERATURE", "2.5"),
            ("AGENT_TEMPERATURE", "warm"),
            ("AGENT_PRICE_INPUT_PER_MTOK", "cheap"),
            ("AGENT_REASONING_EFFORT", "extreme"),
        ] {
            let err =
                ModelEnv::from_lookup(|n| (n == name).then(|| value.to_string())).expect_err(value);
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[tokio::test]
    async fn agent_temperature_reaches_an_unknown_model_only_when_set() {
        let answer = json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": VALID_REPLY}}]
        });
        let server = answering_at(("/v1/chat/completions", &[]), 200, answer).await;
        for (set, sent) in [(None, None), (Some(0.3), Some(json!(0.3)))] {
            let env = ModelEnv {
                openai_base_url: format!("{}/v1", server.uri()),
                temperature: set,
                ..with_keys()
            };
            let model = resolve("openai:compatible-local-model", &env).expect("resolve");
            model
                .step(&first_step(ToolChoice::Auto))
                .await
                .expect("step");
            let bodies = received_bodies(&server).await;
            assert_eq!(bodies.last().unwrap().get("temperature"), sent.as_ref());
        }
    }

    #[test]
    fn operator_price_is_registered_for_the_resolved_model() {
        let price = pricing::Price {
            input: 0.3,
            cached_input: 0.3,
            cache_write: 0.3,
            output: 0.9,
        };
        let env = ModelEnv {
            price: Some(price),
            ..with_keys()
        };
        let model = resolve("openai:registry-priced-model", &env).expect("resolve");
        assert_eq!(pricing::price_of(model.id()), Some(price));
        assert!(pricing::require_price(model.id(), 5.0).is_ok());
    }

    #[test]
    fn c5_model_env_debug_never_prints_a_key() {
        let printed = format!("{:?}", with_keys());
        assert!(!printed.contains("sk-openai-test") && !printed.contains("sk-ant-test"));
    }

    #[test]
    fn reasoning_effort_a_model_without_the_setting_is_refused_at_resolve_naming_it() {
        let env = ModelEnv {
            reasoning_effort: Some(Effort::Low),
            max_output_tokens: 4000,
            ..with_keys()
        };
        for spec in [
            "openai:gpt-4.1-mini",
            "anthropic:claude-3-5-haiku-20241022",
            "google:gemini-2.0-flash",
        ] {
            let message = config_error(spec, &env);
            assert!(
                message.contains(spec) && message.contains("AGENT_REASONING_EFFORT"),
                "{message}"
            );
        }
        for spec in [
            "openai:gpt-5-mini",
            "anthropic:claude-sonnet-4-5",
            "google:gemini-2.5-flash",
            "google:gemini-3-flash-preview",
        ] {
            assert!(resolve(spec, &env).is_ok(), "{spec}");
        }
    }

    #[test]
    fn model_env_reads_the_gemini_key_and_base_url_and_the_reasoning_effort_for_eval() {
        // `eval` builds its model from these variables, as `serve` does from Settings.
        let vars: HashMap<&str, &str> = HashMap::from([
            ("GOOGLE_GENERATIVE_AI_API_KEY", "google-test-key"),
            ("GOOGLE_BASE_URL", "https://gemini.example.test/v1beta/"),
            ("AGENT_REASONING_EFFORT", "Medium"),
        ]);
        let env =
            ModelEnv::from_lookup(|name| vars.get(name).map(|v| v.to_string())).expect("valid");
        assert_eq!(env.google_api_key, Some(Secret::new("google-test-key")));
        assert_eq!(env.reasoning_effort, Some(Effort::Medium));
        let model = resolve(
            "google:gemini-3-flash-preview",
            &ModelEnv {
                max_output_tokens: 400,
                ..env
            },
        )
        .expect("a thinking level fits any bound");
        assert_eq!(model.id(), "google:gemini-3-flash-preview");
    }
}
