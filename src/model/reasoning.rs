//! `AGENT_REASONING_EFFORT`: how hard a thinking model thinks before it answers, one setting for
//! every provider.
//!
//! Invariants:
//! - Unset sends nothing: each model thinks (or not) as its provider defaults.
//! - Set, it goes to each provider as that provider documents it (the model's
//!   [`capabilities::EffortControl`]): OpenAI `reasoning_effort`; Anthropic extended thinking with
//!   a `budget_tokens` ([`thinking_budget`]), or adaptive thinking with `output_config.effort` on
//!   the models that think adaptively; Gemini `thinkingConfig.thinkingBudget` (2.5) or
//!   `thinkingConfig.thinkingLevel` (3 and later).
//! - A model that takes no such setting, or not this level, or whose thinking budget does not fit
//!   `AGENT_MAX_OUTPUT_TOKENS` with room for the reply, is refused when the model is resolved, so
//!   `serve` refuses at start naming the model ([`check`]), never on a contact's turn.
//! - Thinking tokens are billed as output tokens by every provider; `Usage::output_tokens` counts
//!   them, so the budget and the price table charge them.

use super::ModelError;
use super::capabilities::{self, EffortControl};
pub use super::effort::Effort;

/// The variable's name.
pub const VARIABLE: &str = "AGENT_REASONING_EFFORT";

/// Thinking budget in tokens per level, where a provider takes a budget (Anthropic
/// `budget_tokens`, Gemini 2.5 `thinkingBudget`). Anthropic's minimum is 1024 (SDK
/// `ThinkingConfigEnabledParam.budget_tokens`: "Must be ≥1024 and less than `max_tokens`").
const BUDGETS: [(Effort, u32); 4] = [
    (Effort::Minimal, 1024),
    (Effort::Low, 2048),
    (Effort::Medium, 4096),
    (Effort::High, 8192),
];

/// Output tokens kept free for the reply itself beside the thinking budget: the default bound of
/// a reply (`AGENT_MAX_OUTPUT_TOKENS`'s default).
pub const REPLY_ROOM: u32 = super::ModelEnv::DEFAULT_MAX_OUTPUT_TOKENS;

/// The thinking budget of `effort`.
pub fn thinking_budget(effort: Effort) -> u32 {
    BUDGETS
        .iter()
        .find(|(level, _)| *level == effort)
        .map(|(_, budget)| *budget)
        .unwrap_or(1024)
}

/// Refuses `effort` for `model_id` (`provider:model`) when the model takes no such setting, not
/// this level, or a thinking budget that does not fit `max_output_tokens` with [`REPLY_ROOM`]
/// left for the reply. The error names the model, the variable and the fix.
pub fn check(model_id: &str, effort: Effort, max_output_tokens: u32) -> Result<(), ModelError> {
    let Some((provider, name)) = model_id.split_once(':') else {
        return Ok(());
    };
    if provider == "mock" {
        return Ok(());
    }
    let control = capabilities::of(provider, name).reasoning_effort;
    let levels = match control {
        EffortControl::NotAccepted => {
            return Err(ModelError::Config(format!(
                "{VARIABLE} is set, but AGENT_MODEL {model_id} takes no reasoning setting (it is \
                 not a thinking model, or the service does not know it as one): unset {VARIABLE} \
                 or choose a thinking model (see README, \"Models\")"
            )));
        }
        EffortControl::OpenAi(levels) | EffortControl::GeminiLevel(levels) => levels,
        EffortControl::AnthropicAdaptive => ADAPTIVE_LEVELS,
        EffortControl::AnthropicBudget | EffortControl::GeminiBudget => Effort::ALL,
    };
    if !levels.contains(&effort) {
        let accepted: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
        return Err(ModelError::Config(format!(
            "{VARIABLE}={} is not a level AGENT_MODEL {model_id} takes; it takes {}",
            effort.as_str(),
            accepted.join(", ")
        )));
    }
    if matches!(
        control,
        EffortControl::AnthropicBudget | EffortControl::GeminiBudget
    ) {
        let budget = thinking_budget(effort);
        let needed = budget + REPLY_ROOM;
        if max_output_tokens < needed {
            return Err(ModelError::Config(format!(
                "{VARIABLE}={} gives AGENT_MODEL {model_id} a thinking budget of {budget} tokens, \
                 which must fit inside AGENT_MAX_OUTPUT_TOKENS ({max_output_tokens}) with \
                 {REPLY_ROOM} left for the reply: set AGENT_MAX_OUTPUT_TOKENS to at least \
                 {needed}, or lower {VARIABLE}",
                effort.as_str()
            )));
        }
    }
    Ok(())
}

/// Anthropic's adaptive thinking takes `output_config.effort` low, medium or high (SDK
/// `OutputConfigParam.effort`; `xhigh` and `max` are not our levels, and there is no minimal).
const ADAPTIVE_LEVELS: &[Effort] = &[Effort::Low, Effort::Medium, Effort::High];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_effort_levels_parse_case_insensitively_and_nothing_else() {
        assert_eq!(Effort::parse(" High "), Some(Effort::High));
        assert_eq!(Effort::parse("minimal"), Some(Effort::Minimal));
        assert_eq!(Effort::parse("none"), None);
        assert_eq!(Effort::parse("xhigh"), None);
    }

    #[test]
    fn reasoning_effort_is_refused_for_a_model_that_takes_no_such_setting_naming_it() {
        for id in [
            "openai:gpt-4.1-mini",
            "anthropic:claude-3-5-haiku-20241022",
            "google:gemini-2.0-flash",
            "ollama:llama3.1:8b",
            "openai:some-future-model",
        ] {
            let err = check(id, Effort::Low, 20_000).expect_err(id).to_string();
            assert!(err.contains(id) && err.contains(VARIABLE), "{err}");
        }
        assert!(check("mock:demo", Effort::High, 400).is_ok());
    }

    #[test]
    fn reasoning_effort_is_refused_for_a_level_the_model_does_not_take() {
        // gpt-5.1 and later dropped `minimal`; the o-series never had it.
        assert!(check("openai:gpt-5-mini", Effort::Minimal, 400).is_ok());
        let err = check("openai:gpt-5.4-mini", Effort::Minimal, 400).expect_err("minimal");
        assert!(err.to_string().contains("low, medium, high"), "{err}");
        assert!(check("openai:o4-mini", Effort::Minimal, 400).is_err());
        assert!(check("anthropic:claude-opus-5-5", Effort::Minimal, 400).is_err());
        assert!(check("anthropic:claude-opus-5-5", Effort::High, 400).is_ok());
    }

    #[test]
    fn reasoning_effort_thinking_budget_must_fit_the_output_bound_with_room_for_the_reply() {
        let err = check("anthropic:claude-sonnet-4-5", Effort::Medium, 400)
            .expect_err("does not fit")
            .to_string();
        assert!(
            err.contains("AGENT_MAX_OUTPUT_TOKENS") && err.contains(&(4096 + 400).to_string()),
            "{err}"
        );
        assert!(check("anthropic:claude-sonnet-4-5", Effort::Medium, 4496).is_ok());
        assert!(check("google:gemini-2.5-flash", Effort::Minimal, 1424).is_ok());
        assert!(check("google:gemini-2.5-flash", Effort::Minimal, 1423).is_err());
        // A thinking level is not a budget: it fits any bound.
        assert!(check("google:gemini-3-flash-preview", Effort::High, 400).is_ok());
    }
}
