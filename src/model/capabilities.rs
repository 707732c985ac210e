//! What each model family accepts on the wire: the registry the providers consult
//! before they write a request, so that a model is never sent a field its API refuses.
//!
//! One entry per family, matched on the model name (`gpt-5.4-mini`, `claude-haiku-4-5`, an
//! Ollama tag). A name no entry knows gets [`Capabilities::unknown`]: the safe default, which
//! sends nothing the operator did not ask for.
//!
//! Sources (read 2026-12-01), written here in our own words:
//! - OpenAI reasoning models (the GPT-5 family, o-series) accept only their default
//!   `temperature`; any other value is a 400. Chat Completions' `max_completion_tokens` is the
//!   token bound for every model (`max_tokens` is deprecated and refused by reasoning models).
//!   OpenAI API reference, "Create chat completion" (`temperature`, `max_completion_tokens`);
//!   reasoning guide.
//! - OpenAI Structured Outputs (`response_format: json_schema`) exist on `gpt-4o-mini`,
//!   `gpt-4o-2024-08-06` and later; not on `gpt-4o-2024-05-13`, GPT-4 Turbo, GPT-3.5, `o1-mini`
//!   or `o1-preview`. Structured Outputs guide, "Supported models". Its schema bounds are not
//!   supported for fine-tuned (`ft:`) models: same guide, "Supported properties".
//! - Anthropic: `temperature` ranges 0–1 (Messages API reference); from Claude Opus 4.7 on the
//!   sampling parameters are no longer accepted (Opus 4.7 and Opus 5.5 migration guides).
//!   Structured outputs (`output_config.format`) are available from the 4.5 generation on
//!   (Structured outputs guide, note at the top); older models answer 400.
//! - Ollama: `options.temperature` is accepted by every model; `format` takes a JSON schema
//!   (docs/api.md, "Generate a chat completion").
//! - Reasoning effort (`AGENT_REASONING_EFFORT`, read 2026-12-01): OpenAI `reasoning_effort` on
//!   reasoning models only (API reference, "Create chat completion": `minimal` on the original
//!   GPT-5 models, low/medium/high on the o-series and GPT-5.1 on); Anthropic extended thinking
//!   (`thinking.budget_tokens`, from Claude 3.7 Sonnet on) and adaptive thinking with
//!   `output_config.effort` on the adaptive models (SDK `ThinkingConfigParam`,
//!   `OutputConfigParam`; extended thinking guide); Gemini `thinkingConfig` (SDK `ThinkingConfig`;
//!   Gemini API thinking guide: `thinkingBudget` on 2.5, `thinkingLevel` on 3 and later, the Pro
//!   models low and high only). Models without thinking take none.
//! - Google Gemini: `temperature` 0–2 (SDK `GenerationConfig`); Gemini 3 and later are best left
//!   at their default (thinking guide), so they get one only when the operator set it.
//!   `responseJsonSchema` from Gemini 2.5 on; 2.0 and 1.5 answer in JSON mode only.

use super::effort::Effort;

/// How a model takes a sampling temperature.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Temperature {
    /// Any value up to `max`: the deployment's temperature (`AGENT_TEMPERATURE` or its default)
    /// is sent, clamped to the range.
    Accepts { max: f32 },
    /// Nothing is known about the model: a temperature is sent only when the operator set
    /// `AGENT_TEMPERATURE`, clamped to `max`.
    OperatorOnly { max: f32 },
    /// Only the model's own default is accepted: no temperature is ever sent.
    NotAccepted,
}

/// What a model family accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    pub temperature: Temperature,
    /// The provider's structured output (OpenAI `response_format: json_schema`, Anthropic
    /// `output_config.format`, Ollama `format`). Without it the request asks for JSON in the
    /// prompt only, and the local AgentReply validation is the only check.
    pub structured_output: bool,
    /// Whether the provider's structured output accepts the bounds of its documented subset
    /// (OpenAI: not on fine-tuned models).
    pub schema_bounds: bool,
    /// Image input (020): a contact's image or a video's frames go only to a model with it.
    pub vision: bool,
    /// A reasoning model (thinks before answering; bills those tokens as output).
    pub reasoning: bool,
    /// How the model takes `AGENT_REASONING_EFFORT` (`reasoning`), if at all.
    pub reasoning_effort: EffortControl,
}

/// How a model takes a reasoning effort on the wire (`AGENT_REASONING_EFFORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffortControl {
    /// No such setting: `serve` refuses at start when the variable is set.
    NotAccepted,
    /// OpenAI Chat Completions `reasoning_effort`, with the levels the model takes.
    OpenAi(&'static [Effort]),
    /// Anthropic extended thinking: `thinking: {type: enabled, budget_tokens}`.
    AnthropicBudget,
    /// Anthropic adaptive thinking: `thinking: {type: adaptive}` and `output_config.effort`.
    AnthropicAdaptive,
    /// Gemini 2.5: `generationConfig.thinkingConfig.thinkingBudget`.
    GeminiBudget,
    /// Gemini 3 and later: `generationConfig.thinkingConfig.thinkingLevel`, with the levels the
    /// model takes.
    GeminiLevel(&'static [Effort]),
}

impl Capabilities {
    /// The safe default for a model the registry does not know.
    pub const fn unknown(max_temperature: f32) -> Self {
        Self {
            temperature: Temperature::OperatorOnly {
                max: max_temperature,
            },
            structured_output: true,
            schema_bounds: true,
            vision: false,
            reasoning: false,
            reasoning_effort: EffortControl::NotAccepted,
        }
    }

    /// The temperature to put on the wire for a request that asks for `requested`; `None`
    /// leaves the field out. `operator_set` is whether `AGENT_TEMPERATURE` was set.
    pub fn wire_temperature(&self, requested: f32, operator_set: bool) -> Option<f32> {
        match self.temperature {
            Temperature::Accepts { max } => Some(requested.clamp(0.0, max)),
            Temperature::OperatorOnly { max } => operator_set.then(|| requested.clamp(0.0, max)),
            Temperature::NotAccepted => None,
        }
    }
}

/// One family: the model names it covers and what they accept.
struct Family {
    /// Names equal to one of these, or continuing it with `-`, `.` or `:`, belong to the family.
    prefixes: &'static [&'static str],
    capabilities: Capabilities,
}

const fn family(
    prefixes: &'static [&'static str],
    temperature: Temperature,
    structured_output: bool,
    vision: bool,
    reasoning: bool,
) -> Family {
    Family {
        prefixes,
        capabilities: Capabilities {
            temperature,
            structured_output,
            schema_bounds: true,
            vision,
            reasoning,
            reasoning_effort: EffortControl::NotAccepted,
        },
    }
}

impl Family {
    /// The family with its reasoning-effort control.
    const fn effort(self, control: EffortControl) -> Family {
        Family {
            prefixes: self.prefixes,
            capabilities: Capabilities {
                reasoning_effort: control,
                ..self.capabilities
            },
        }
    }
}

const OPENAI_MAX_TEMPERATURE: f32 = 2.0;
const ANTHROPIC_MAX_TEMPERATURE: f32 = 1.0;
const OPENAI_TEMPERATURE: Temperature = Temperature::Accepts {
    max: OPENAI_MAX_TEMPERATURE,
};
const ANTHROPIC_TEMPERATURE: Temperature = Temperature::Accepts {
    max: ANTHROPIC_MAX_TEMPERATURE,
};

/// OpenAI's families, most specific first (the first match wins).
const OPENAI: &[Family] = &[
    // GPT-5.1 and later take `reasoning_effort` none, low, medium, high (and xhigh from 5.2);
    // `minimal` was the original GPT-5's alone.
    family(
        &[
            "gpt-5.1", "gpt-5.2", "gpt-5.3", "gpt-5.4", "gpt-5.5", "gpt-5.6", "gpt-5.7", "gpt-5.8",
            "gpt-5.9",
        ],
        Temperature::NotAccepted,
        true,
        true,
        true,
    )
    .effort(EffortControl::OpenAi(LOW_TO_HIGH)),
    // Every GPT-5 model (5, 5.1 … 5.6, mini, nano, pro, chat-latest) reasons.
    family(&["gpt-5"], Temperature::NotAccepted, true, true, true)
        .effort(EffortControl::OpenAi(Effort::ALL)),
    family(
        &["o1-mini", "o1-preview"],
        Temperature::NotAccepted,
        false,
        false,
        true,
    ),
    family(&["o3-mini"], Temperature::NotAccepted, true, false, true)
        .effort(EffortControl::OpenAi(LOW_TO_HIGH)),
    family(
        &["o1", "o3", "o4-mini", "codex-mini"],
        Temperature::NotAccepted,
        true,
        true,
        true,
    )
    .effort(EffortControl::OpenAi(LOW_TO_HIGH)),
    family(&["gpt-4.1"], OPENAI_TEMPERATURE, true, true, false),
    family(
        &["gpt-4o-2024-05-13", "chatgpt-4o-latest"],
        OPENAI_TEMPERATURE,
        false,
        true,
        false,
    ),
    family(&["gpt-4o"], OPENAI_TEMPERATURE, true, true, false),
    family(
        &["gpt-4-turbo", "gpt-4", "gpt-3.5-turbo"],
        OPENAI_TEMPERATURE,
        false,
        false,
        false,
    ),
];

/// The reasoning levels of the models that take no `minimal`.
const LOW_TO_HIGH: &[Effort] = &[Effort::Low, Effort::Medium, Effort::High];

/// Anthropic's families, most specific first.
const ANTHROPIC: &[Family] = &[
    // Sampling parameters removed from Opus 4.7 on; every later model thinks adaptively.
    family(
        &[
            "claude-opus-4-7",
            "claude-opus-4-8",
            "claude-opus-5",
            "claude-sonnet-5",
            "claude-haiku-5",
            "claude-fable",
            "claude-mythos",
        ],
        Temperature::NotAccepted,
        true,
        true,
        true,
    )
    .effort(EffortControl::AnthropicAdaptive),
    family(
        &[
            "claude-opus-4-5",
            "claude-opus-4-6",
            "claude-sonnet-4-5",
            "claude-sonnet-4-6",
            "claude-haiku-4-5",
        ],
        ANTHROPIC_TEMPERATURE,
        true,
        true,
        false,
    )
    .effort(EffortControl::AnthropicBudget),
    // Before structured outputs; extended thinking from Claude 3.7 Sonnet on.
    family(
        &[
            "claude-opus-4-1",
            "claude-opus-4",
            "claude-sonnet-4",
            "claude-3-7-sonnet",
        ],
        ANTHROPIC_TEMPERATURE,
        false,
        true,
        false,
    )
    .effort(EffortControl::AnthropicBudget),
    family(
        &["claude-3-5-sonnet", "claude-3-opus"],
        ANTHROPIC_TEMPERATURE,
        false,
        true,
        false,
    ),
    family(
        &["claude-3-5-haiku", "claude-3-haiku"],
        ANTHROPIC_TEMPERATURE,
        false,
        false,
        false,
    ),
];

const GOOGLE_MAX_TEMPERATURE: f32 = 2.0;

/// Google's Gemini families, most specific first. Every Gemini model takes images.
const GOOGLE: &[Family] = &[
    // Gemini 3 and later: `thinkingLevel`; Google recommends their default temperature (1.0),
    // so one is sent only when the operator set it. The Pro models take low and high only.
    family(
        &[
            "gemini-3-pro",
            "gemini-3.1-pro",
            "gemini-3.5-pro",
            "gemini-4-pro",
        ],
        Temperature::OperatorOnly {
            max: GOOGLE_MAX_TEMPERATURE,
        },
        true,
        true,
        true,
    )
    .effort(EffortControl::GeminiLevel(LOW_AND_HIGH)),
    family(
        &["gemini-3", "gemini-4", "gemini-5"],
        Temperature::OperatorOnly {
            max: GOOGLE_MAX_TEMPERATURE,
        },
        true,
        true,
        true,
    )
    .effort(EffortControl::GeminiLevel(Effort::ALL)),
    // Gemini 2.5: `thinkingBudget`.
    family(
        &["gemini-2.5"],
        Temperature::Accepts {
            max: GOOGLE_MAX_TEMPERATURE,
        },
        true,
        true,
        true,
    )
    .effort(EffortControl::GeminiBudget),
    // Before thinking and JSON-Schema structured output: JSON mode only.
    family(
        &["gemini-2.0", "gemini-1.5"],
        Temperature::Accepts {
            max: GOOGLE_MAX_TEMPERATURE,
        },
        false,
        true,
        false,
    ),
];

const LOW_AND_HIGH: &[Effort] = &[Effort::Low, Effort::High];

/// Ollama's model families that take images (020), as its library lists them (`vision` tag).
const OLLAMA_VISION: &[&str] = &[
    "llava",
    "llava-llama3",
    "llava-phi3",
    "bakllava",
    "llama3.2-vision",
    "llama4",
    "gemma3",
    "qwen2.5vl",
    "minicpm-v",
    "moondream",
    "granite3.2-vision",
    "mistral-small3.1",
];

/// What `model` accepts on `provider` (`openai`, `anthropic`, `google`, `ollama`).
pub fn of(provider: &str, model: &str) -> Capabilities {
    match provider {
        "openai" => {
            // A fine-tuned model is `ft:<base>:<org>…`: it keeps its base's family, without
            // schema bounds.
            match model.strip_prefix("ft:") {
                Some(rest) => {
                    let base = rest.split(':').next().unwrap_or(rest);
                    Capabilities {
                        schema_bounds: false,
                        ..lookup(OPENAI, base, OPENAI_MAX_TEMPERATURE)
                    }
                }
                None => lookup(OPENAI, model, OPENAI_MAX_TEMPERATURE),
            }
        }
        "anthropic" => lookup(ANTHROPIC, model, ANTHROPIC_MAX_TEMPERATURE),
        // The API also takes `models/<name>`.
        "google" => lookup(
            GOOGLE,
            model.strip_prefix("models/").unwrap_or(model),
            GOOGLE_MAX_TEMPERATURE,
        ),
        "ollama" => Capabilities {
            temperature: OPENAI_TEMPERATURE,
            vision: OLLAMA_VISION.iter().any(|p| belongs(model, p)),
            ..Capabilities::unknown(OPENAI_MAX_TEMPERATURE)
        },
        _ => Capabilities::unknown(OPENAI_MAX_TEMPERATURE),
    }
}

fn lookup(families: &[Family], model: &str, max_temperature: f32) -> Capabilities {
    families
        .iter()
        .find(|f| f.prefixes.iter().any(|p| belongs(model, p)))
        .map(|f| f.capabilities)
        .unwrap_or(Capabilities::unknown(max_temperature))
}

/// `model` is `prefix` itself or a variant of it (`prefix-…`, `prefix.…`, `prefix:…`).
fn belongs(model: &str, prefix: &str) -> bool {
    model
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_020_ollama_vision_follows_the_model_family() {
        assert!(of("ollama", "llava:13b").vision);
        assert!(of("ollama", "llama3.2-vision:11b").vision);
        assert!(of("ollama", "gemma3:4b").vision);
        assert!(!of("ollama", "llama3.1:8b").vision);
        assert!(!of("ollama", "llama3.2:3b").vision);
    }

    #[test]
    fn openai_reasoning_models_never_get_a_temperature() {
        for model in [
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.4-mini",
            "gpt-5.5",
            "gpt-5.6-sol",
            "gpt-5-2025-08-07",
            "o3",
            "o4-mini",
            "o1",
        ] {
            let caps = of("openai", model);
            assert_eq!(caps.temperature, Temperature::NotAccepted, "{model}");
            assert_eq!(caps.wire_temperature(0.3, true), None, "{model}");
            assert!(caps.reasoning, "{model}");
        }
    }

    #[test]
    fn openai_chat_models_take_the_deployment_temperature() {
        for model in [
            "gpt-4.1",
            "gpt-4.1-mini-2025-04-14",
            "gpt-4o-mini",
            "gpt-4o",
        ] {
            let caps = of("openai", model);
            assert_eq!(caps.wire_temperature(0.3, false), Some(0.3), "{model}");
            assert!(caps.structured_output && caps.schema_bounds, "{model}");
        }
    }

    #[test]
    fn unknown_models_send_a_temperature_only_when_the_operator_set_one() {
        for (provider, model, max) in [
            ("openai", "some-future-model", 2.0),
            ("openai", "gpt-50", 2.0),
            ("anthropic", "claude-future-9", 1.0),
        ] {
            let caps = of(provider, model);
            assert_eq!(caps, Capabilities::unknown(max), "{model}");
            assert_eq!(caps.wire_temperature(0.3, false), None, "{model}");
            assert_eq!(caps.wire_temperature(1.5, true), Some(1.5f32.min(max)));
        }
    }

    #[test]
    fn anthropic_families_split_at_4_5_and_4_7() {
        let sonnet = of("anthropic", "claude-sonnet-4-5-20250929");
        assert_eq!(sonnet.wire_temperature(1.5, false), Some(1.0));
        assert!(sonnet.structured_output);
        let opus = of("anthropic", "claude-opus-5-5");
        assert_eq!(opus.wire_temperature(0.3, true), None);
        assert!(opus.structured_output);
        // claude-opus-4 is older than claude-opus-4-5 despite the shared prefix.
        let old = of("anthropic", "claude-opus-4-20250514");
        assert!(!old.structured_output);
        assert!(of("anthropic", "claude-opus-4-5").structured_output);
        assert!(!of("anthropic", "claude-3-5-haiku-20241022").structured_output);
    }

    #[test]
    fn fine_tuned_openai_models_keep_their_family_without_schema_bounds() {
        let caps = of("openai", "ft:gpt-4.1-mini-2025-04-14:acme::abc123");
        assert!(!caps.schema_bounds);
        assert_eq!(caps.temperature, OPENAI_TEMPERATURE);
        assert!(!of("openai", "ft:gpt-5-mini:acme::x").schema_bounds);
    }

    #[test]
    fn ollama_models_accept_the_deployment_temperature_and_format() {
        let caps = of("ollama", "llama3.1:8b");
        assert_eq!(caps.wire_temperature(0.3, false), Some(0.3));
        assert!(caps.structured_output);
    }

    #[test]
    fn structured_output_support_follows_the_documented_model_list() {
        assert!(!of("openai", "gpt-4o-2024-05-13").structured_output);
        assert!(of("openai", "gpt-4o-2024-08-06").structured_output);
        assert!(!of("openai", "o1-mini").structured_output);
        assert!(!of("openai", "gpt-3.5-turbo").structured_output);
    }
}
