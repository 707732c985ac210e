//! What a model call cost, in US dollars, for the daily cost cap (SYSTEM 4, pre-model checks).
//!
//! A model's price comes from, in order:
//! 1. the operator: `AGENT_PRICE_INPUT_PER_MTOK`, `AGENT_PRICE_OUTPUT_PER_MTOK` and optionally
//!    `AGENT_PRICE_CACHED_INPUT_PER_MTOK` (USD per million tokens; without it cache reads cost
//!    the input rate, and [`price_note`] says so), registered for the resolved model when the
//!    registry builds it ([`set_operator_price`], which gives it its provider's cache-write rate);
//! 2. the list prices below, for the current models of OpenAI, Anthropic and Google;
//! 3. providers that bill nothing per token: every `mock:` model, and Ollama (the operator's own
//!    hardware).
//!
//! A call's cost ([`cost_usd`]) charges four parts of its usage, each at its rate: the input
//! neither read from nor written to the prompt cache, the cache reads, the cache writes, and the
//! output.
//!
//! A model with none of these has no price, and `serve` refuses to start with it while a USD
//! cap is configured ([`require_price`]): a cap it could never reach would
//! silently not cap.
//!
//! Matching: the id is `provider:model` as `Model::id` returns it, or a bare model name. The
//! provider, when given, must be the table's; the name must equal the table's or add only a date
//! snapshot suffix (`gpt-4.1-mini-2025-04-14`, `claude-haiku-4-5-20251001`), so that a different
//! model sharing a prefix (`gpt-4.1-nano`, `claude-opus-4-5` next to `claude-opus-4`) is never
//! priced as its sibling.

use std::sync::RwLock;

use super::{ModelError, Usage};

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens neither read from nor written to the prompt cache.
    pub input: f64,
    /// Input tokens served from the prompt cache.
    pub cached_input: f64,
    /// Input tokens written to the prompt cache (Anthropic bills them above the input rate;
    /// OpenAI and Gemini do not bill writes apart, so theirs is the input rate).
    pub cache_write: f64,
    pub output: f64,
}

impl Price {
    const FREE: Price = Price {
        input: 0.0,
        cached_input: 0.0,
        cache_write: 0.0,
        output: 0.0,
    };
}

/// Anthropic's 5-minute cache write, as a multiple of the input rate (the only lifetime the
/// requests ask for: `cache_control: {"type": "ephemeral"}` without a `ttl`).
pub const ANTHROPIC_CACHE_WRITE_FACTOR: f64 = 1.25;

/// What writing a token to `provider`'s prompt cache costs, given its input rate.
fn cache_write_rate(provider: &str, input: f64) -> f64 {
    if provider == "anthropic" {
        input * ANTHROPIC_CACHE_WRITE_FACTOR
    } else {
        input
    }
}

/// The operator's price variables (USD per million tokens).
pub const PRICE_INPUT_VAR: &str = "AGENT_PRICE_INPUT_PER_MTOK";
pub const PRICE_OUTPUT_VAR: &str = "AGENT_PRICE_OUTPUT_PER_MTOK";
pub const PRICE_CACHED_INPUT_VAR: &str = "AGENT_PRICE_CACHED_INPUT_PER_MTOK";

/// Largest price per million tokens we accept: far above any list price, small enough that a
/// typo of several orders of magnitude is caught.
const MAX_PRICE_PER_MTOK: f64 = 10_000.0;

struct Listed {
    provider: &'static str,
    model: &'static str,
    price: Price,
}

/// An OpenAI or Gemini row: cache writes are not billed apart, so they cost the input rate.
const fn listed(
    provider: &'static str,
    model: &'static str,
    input: f64,
    cached_input: f64,
    output: f64,
) -> Listed {
    Listed {
        provider,
        model,
        price: Price {
            input,
            cached_input,
            cache_write: input,
            output,
        },
    }
}

/// An Anthropic row: 5-minute cache writes at 1.25× the input rate.
const fn claude(model: &'static str, input: f64, cached_input: f64, output: f64) -> Listed {
    Listed {
        provider: "anthropic",
        model,
        price: Price {
            input,
            cached_input,
            cache_write: input * ANTHROPIC_CACHE_WRITE_FACTOR,
            output,
        },
    }
}

/// List prices, standard tier, USD per million tokens: input, cached input, output (the
/// cache-write rate follows from the provider: [`listed`], [`claude`]).
///
/// Where these come from, read on 2026-12-01, and how sure we are (rates change; an operator
/// whose rates differ, or who wants certainty, sets the `AGENT_PRICE_*` variables):
/// - OpenAI: the API pricing page (openai.com/api/pricing), "Standard" rates for context under
///   270K tokens. Only some rows were read from that page itself: the gpt-5.4/5.5 rates come
///   from third-party articles quoting it, and the gpt-4.x, gpt-5/5.1 and o-series rates are
///   the long-standing list prices, not re-read. Models listed in OpenAI's OpenAPI spec
///   (`ModelIdsShared`) without a rate we could confirm (the `gpt-5.6-*` tiers, `gpt-5.2`,
///   fine-tuned models) are left out and need the operator's price. Prompt caching is automatic
///   and carries no fee of its own (prompt caching guide): a cache write costs the input rate.
/// - Anthropic: platform.claude.com/docs/en/about-claude/pricing and each model's overview page;
///   "Cache Hits & Refreshes" is the cached input rate. Opus 4.x and earlier were read from the
///   pricing page; the 5.x and Fable rows from the models' pages as quoted in search results,
///   some cache-read rates from third-party changelogs. Cache writes are priced at 1.25× input,
///   the pricing page's "5m cache writes" column (the requests never ask for the 1-hour cache,
///   which bills 2×). Claude Haiku 5.5 is priced by prompt length; its band for prompts up to 100K tokens is used (a
///   turn's prompt is far below it).
/// - Google: the Gemini Developer API pricing page (ai.google.dev/gemini-api/docs/pricing), paid
///   tier, text input, prompts up to 200K tokens, as quoted by third-party price lists that cite
///   it; output includes thinking tokens (Gemini bills them as output). Cached input is priced
///   at a tenth of input, the context-caching discount those lists give; it was not read per
///   model. Implicit caching bills no write (caching guide: the savings are passed on when a
///   request hits), so a cache write costs the input rate. `-preview` names are listed as their
///   own rows (a preview is not a date snapshot).
const PRICES: &[Listed] = &[
    listed("openai", "gpt-5.5", 5.00, 0.50, 30.00),
    listed("openai", "gpt-5.4", 2.50, 0.25, 15.00),
    listed("openai", "gpt-5.4-mini", 0.75, 0.075, 4.50),
    listed("openai", "gpt-5.4-nano", 0.20, 0.02, 1.25),
    listed("openai", "gpt-5.1", 1.25, 0.125, 10.00),
    listed("openai", "gpt-5", 1.25, 0.125, 10.00),
    listed("openai", "gpt-5-mini", 0.25, 0.025, 2.00),
    listed("openai", "gpt-5-nano", 0.05, 0.005, 0.40),
    listed("openai", "gpt-4.1", 2.00, 0.50, 8.00),
    listed("openai", "gpt-4.1-mini", 0.40, 0.10, 1.60),
    listed("openai", "gpt-4.1-nano", 0.10, 0.025, 0.40),
    listed("openai", "gpt-4o", 2.50, 1.25, 10.00),
    listed("openai", "gpt-4o-mini", 0.15, 0.075, 0.60),
    listed("openai", "o3", 2.00, 0.50, 8.00),
    listed("openai", "o4-mini", 1.10, 0.275, 4.40),
    claude("claude-fable-5-1", 10.00, 0.25, 50.00),
    claude("claude-opus-5-5", 4.00, 0.20, 20.00),
    claude("claude-sonnet-5-5", 2.00, 0.10, 10.00),
    claude("claude-haiku-5-5", 0.10, 0.01, 0.50),
    claude("claude-opus-5", 5.00, 0.50, 25.00),
    claude("claude-sonnet-5", 2.00, 0.20, 10.00),
    claude("claude-opus-4-8", 5.00, 0.50, 25.00),
    claude("claude-opus-4-7", 5.00, 0.50, 25.00),
    claude("claude-opus-4-6", 5.00, 0.50, 25.00),
    claude("claude-opus-4-5", 5.00, 0.50, 25.00),
    claude("claude-sonnet-4-6", 3.00, 0.30, 15.00),
    claude("claude-sonnet-4-5", 3.00, 0.30, 15.00),
    claude("claude-haiku-4-5", 1.00, 0.10, 5.00),
    claude("claude-opus-4-1", 15.00, 1.50, 75.00),
    claude("claude-opus-4", 15.00, 1.50, 75.00),
    claude("claude-sonnet-4", 3.00, 0.30, 15.00),
    claude("claude-3-5-haiku", 0.80, 0.08, 4.00),
    listed("google", "gemini-3.5-flash", 1.50, 0.15, 9.00),
    listed("google", "gemini-3.1-pro", 2.00, 0.20, 12.00),
    listed("google", "gemini-3.1-pro-preview", 2.00, 0.20, 12.00),
    listed("google", "gemini-3.1-flash-lite", 0.25, 0.025, 1.50),
    listed("google", "gemini-3.1-flash-lite-preview", 0.25, 0.025, 1.50),
    listed("google", "gemini-3-flash", 0.50, 0.05, 3.00),
    listed("google", "gemini-3-flash-preview", 0.50, 0.05, 3.00),
    listed("google", "gemini-2.5-pro", 1.25, 0.125, 10.00),
    listed("google", "gemini-2.5-flash", 0.30, 0.03, 2.50),
    listed("google", "gemini-2.5-flash-lite", 0.10, 0.01, 0.40),
];

/// Providers that bill nothing per token.
const FREE_PROVIDERS: &[&str] = &["mock", "ollama"];

/// Prices the operator gave, by model id. Written at start by the registry (one model per
/// process in production; tests use distinct ids), read on every charge.
static OPERATOR_PRICES: RwLock<Vec<(String, Price)>> = RwLock::new(Vec::new());

/// Registers the operator's price for `model_id`; it wins over the list price. Its cache-write
/// rate is the provider's: 1.25× input on Anthropic (5-minute cache), the input rate elsewhere.
pub fn set_operator_price(model_id: &str, mut price: Price) {
    let provider = model_id.split_once(':').map_or("", |(p, _)| p);
    price.cache_write = cache_write_rate(provider, price.input);
    let mut prices = OPERATOR_PRICES
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    prices.retain(|(id, _)| id != model_id);
    prices.push((model_id.to_owned(), price));
}

/// The operator's price for `model_id`, if one was registered.
fn operator_price(model_id: &str) -> Option<Price> {
    OPERATOR_PRICES
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .iter()
        .find(|(id, _)| id == model_id)
        .map(|(_, price)| *price)
}

/// The price of `model_id`, or `None` when nothing prices it.
pub fn price_of(model_id: &str) -> Option<Price> {
    operator_price(model_id)
        .or_else(|| listed_price(model_id))
        .or_else(|| {
            let provider = model_id.split_once(':').map(|(p, _)| p);
            provider
                .is_some_and(|p| FREE_PROVIDERS.contains(&p))
                .then_some(Price::FREE)
        })
}

/// The cost of `usage` on `model_id`; 0 for a model nothing prices (`serve` refuses such a
/// model while a USD cap is set, see [`require_price`]). Each part of the input is charged at its
/// own rate: uncached input, cache reads, cache writes; then the output.
pub fn cost_usd(model_id: &str, usage: &Usage) -> f64 {
    let Some(price) = price_of(model_id) else {
        return 0.0;
    };
    // Cache reads and writes are parts of the input; a provider reporting more than its input
    // is held to it (reads first), never charged for tokens it did not bill.
    let cached = usage.cached_tokens.min(usage.input_tokens);
    let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
    let uncached = usage.input_tokens - cached - written;
    (uncached as f64 * price.input
        + cached as f64 * price.cached_input
        + written as f64 * price.cache_write
        + usage.output_tokens as f64 * price.output)
        / 1_000_000.0
}

/// The most a call of `input_tokens` and `output_tokens` can cost on `model_id`: every input
/// token at the dearer of the input and cache-write rates (a cold cache writes the whole
/// prefix), every output token at the output rate. The daily budget reserves this before a call.
pub fn worst_case_usd(model_id: &str, input_tokens: u64, output_tokens: u64) -> f64 {
    let Some(price) = price_of(model_id) else {
        return 0.0;
    };
    (input_tokens as f64 * price.input.max(price.cache_write) + output_tokens as f64 * price.output)
        / 1_000_000.0
}

/// What an operator should know about `model_id`'s price before serving (`config check --env`
/// prints it): an operator price whose cached rate is its input rate charges cache reads at
/// the full input rate, an overestimate of what the provider bills.
pub fn price_note(model_id: &str) -> Option<String> {
    let price = operator_price(model_id)?;
    (price.input > 0.0 && price.cached_input >= price.input).then(|| {
        format!(
            "price: cached input tokens of {model_id} are charged at the full input rate \
             ({PRICE_INPUT_VAR}); set {PRICE_CACHED_INPUT_VAR} to the provider's cached rate \
             to count them as billed"
        )
    })
}

/// Refuses a model with no known price while a USD cap is configured: the
/// cap would never be reached, so the budget would silently not cap. The error names the model
/// and the two fixes.
pub fn require_price(model_id: &str, daily_cost_cap_usd: f64) -> Result<(), ModelError> {
    let capped = daily_cost_cap_usd.is_finite() && daily_cost_cap_usd > 0.0;
    if !capped || price_of(model_id).is_some() {
        return Ok(());
    }
    Err(ModelError::Config(format!(
        "AGENT_MODEL {model_id} has no known price, so budget.dailyCostCapUsd \
         ({daily_cost_cap_usd} USD) could never stop it. Give its price in USD per million \
         tokens with {PRICE_INPUT_VAR} and {PRICE_OUTPUT_VAR} (and optionally \
         {PRICE_CACHED_INPUT_VAR}), or choose a model from the price table (see README, \"Models\")"
    )))
}

/// One price variable that failed its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceProblem {
    pub variable: &'static str,
    pub rule: String,
}

/// Reads the operator's price through `lookup` (blank counts as unset). `Ok(None)` when no price
/// variable is set. Every problem is returned at once, each naming its variable.
pub fn operator_price_from(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<Price>, Vec<PriceProblem>> {
    let get = |name: &str| {
        lookup(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let mut problems = Vec::new();
    let mut read = |variable: &'static str| -> Option<f64> {
        let raw = get(variable)?;
        match raw.parse::<f64>() {
            Ok(n) if n.is_finite() && (0.0..=MAX_PRICE_PER_MTOK).contains(&n) => Some(n),
            _ => {
                problems.push(PriceProblem {
                    variable,
                    rule: format!(
                        "must be a price in USD per million tokens, from 0 to {MAX_PRICE_PER_MTOK}"
                    ),
                });
                None
            }
        }
    };
    let input = read(PRICE_INPUT_VAR);
    let output = read(PRICE_OUTPUT_VAR);
    let cached = read(PRICE_CACHED_INPUT_VAR);
    let set = |name| get(name).is_some();
    let any_set = set(PRICE_INPUT_VAR) || set(PRICE_OUTPUT_VAR) || set(PRICE_CACHED_INPUT_VAR);
    if any_set {
        for (variable, present) in [
            (PRICE_INPUT_VAR, set(PRICE_INPUT_VAR)),
            (PRICE_OUTPUT_VAR, set(PRICE_OUTPUT_VAR)),
        ] {
            if !present {
                problems.push(PriceProblem {
                    variable,
                    rule: format!(
                        "required when any AGENT_PRICE_* variable is set ({PRICE_INPUT_VAR} and \
                         {PRICE_OUTPUT_VAR} give the price together)"
                    ),
                });
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(match (input, output) {
        (Some(input), Some(output)) => Some(Price {
            input,
            // Without a cache rate, cached tokens cost what input costs: never an undercharge.
            cached_input: cached.unwrap_or(input),
            // The provider's write rate is set when the price is registered for its model.
            cache_write: input,
            output,
        }),
        _ => None,
    })
}

fn listed_price(model_id: &str) -> Option<Price> {
    let (provider, name) = match model_id.split_once(':') {
        Some((provider, name)) => (Some(provider), name),
        None => (None, model_id),
    };
    PRICES
        .iter()
        .find(|listed| {
            provider.is_none_or(|p| p == listed.provider)
                && name
                    .strip_prefix(listed.model)
                    .is_some_and(is_snapshot_suffix)
        })
        .map(|listed| listed.price)
}

/// Empty, or a date snapshot: `-YYYYMMDD` (Anthropic) or `-YYYY-MM-DD` (OpenAI). Nothing else,
/// so `claude-opus-4-5` is not read as a snapshot of `claude-opus-4`.
fn is_snapshot_suffix(rest: &str) -> bool {
    let Some(date) = rest.strip_prefix('-') else {
        return rest.is_empty();
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if digits(date, 8) {
        return true;
    }
    let parts: Vec<&str> = date.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
            cache_write_tokens: 0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn pricing_charges_uncached_cached_and_output_tokens_at_their_rates() {
        // 800k uncached × 0.40 + 200k cached × 0.10 + 100k output × 1.60 = 0.32 + 0.02 + 0.16.
        let cost = cost_usd("openai:gpt-4.1-mini", &usage(1_000_000, 200_000, 100_000));
        assert!(close(cost, 0.50), "{cost}");
        let cost = cost_usd("anthropic:claude-sonnet-4-5", &usage(10_000, 0, 1_000));
        assert!(close(cost, 0.03 + 0.015), "{cost}");
    }

    #[test]
    fn pricing_tells_siblings_apart_and_accepts_dated_snapshots() {
        let u = usage(1_000_000, 0, 0);
        assert!(close(cost_usd("openai:gpt-4.1", &u), 2.00));
        assert!(close(cost_usd("openai:gpt-4.1-mini", &u), 0.40));
        assert!(close(cost_usd("gpt-4.1-mini-2025-04-14", &u), 0.40));
        assert!(close(cost_usd("openai:gpt-4.1-nano", &u), 0.10));
        assert!(close(
            cost_usd("anthropic:claude-haiku-4-5-20251001", &u),
            1.00
        ));
        // A version suffix is not a date: claude-opus-4-5 is not claude-opus-4.
        assert!(close(cost_usd("anthropic:claude-opus-4-5", &u), 5.00));
        assert!(close(
            cost_usd("anthropic:claude-opus-4-20250514", &u),
            15.00
        ));
        assert!(close(cost_usd("anthropic:claude-opus-5-5", &u), 4.00));
        assert!(close(cost_usd("openai:gpt-5.4-mini-2026-03-17", &u), 0.75));
        assert_eq!(price_of("openai:gpt-4.1-nano-x"), None);
    }

    #[test]
    fn price_table_covers_the_current_models_of_each_provider() {
        for id in [
            "openai:gpt-5.5",
            "openai:gpt-5.4",
            "openai:gpt-5.4-mini",
            "openai:gpt-5.4-nano",
            "openai:gpt-5-mini",
            "openai:gpt-4.1-mini",
            "openai:o4-mini",
            "anthropic:claude-opus-5-5",
            "anthropic:claude-sonnet-5-5",
            "anthropic:claude-haiku-5-5",
            "anthropic:claude-fable-5-1",
            "anthropic:claude-sonnet-4-6",
            "anthropic:claude-haiku-4-5",
            "google:gemini-3.5-flash",
            "google:gemini-3-flash-preview",
            "google:gemini-3.1-pro-preview",
            "google:gemini-2.5-flash",
            "google:gemini-2.5-flash-lite",
            "ollama:llama3.1:8b",
        ] {
            assert!(price_of(id).is_some(), "{id} has no price");
        }
    }

    #[test]
    fn pricing_mocks_and_ollama_are_free_and_unknown_models_have_no_price() {
        let u = usage(1_000_000, 0, 1_000_000);
        assert_eq!(cost_usd("mock:demo", &u), 0.0);
        assert_eq!(cost_usd("mock:slow", &u), 0.0);
        assert_eq!(price_of("mock:scripted"), Some(Price::FREE));
        assert_eq!(price_of("ollama:llama3.1:8b"), Some(Price::FREE));
        // Ollama serves its own models: a listed name there is still free.
        assert_eq!(price_of("ollama:gpt-4.1"), Some(Price::FREE));
        assert_eq!(price_of("openai:some-future-model"), None);
        assert_eq!(price_of("anthropic:claude-future-9"), None);
    }

    #[test]
    fn pricing_never_charges_more_cached_tokens_than_input_tokens() {
        let cost = cost_usd("openai:gpt-4.1", &usage(100, 500, 0));
        assert!(close(cost, 100.0 * 0.50 / 1_000_000.0), "{cost}");
    }

    #[test]
    fn unpriced_model_with_a_usd_cap_is_refused_naming_the_model_and_the_fix() {
        let err = require_price("openai:pricing-test-unlisted", 5.0).expect_err("refused");
        let text = err.to_string();
        for part in [
            "openai:pricing-test-unlisted",
            "budget.dailyCostCapUsd",
            PRICE_INPUT_VAR,
            PRICE_OUTPUT_VAR,
            "price table",
        ] {
            assert!(text.contains(part), "{part} missing: {text}");
        }
        assert!(require_price("openai:gpt-5.4-mini", 5.0).is_ok());
        assert!(require_price("mock:demo", 5.0).is_ok());
        assert!(require_price("ollama:llama3.1:8b", 5.0).is_ok());
        // Without a cap there is nothing to enforce.
        assert!(require_price("openai:pricing-test-unlisted", 0.0).is_ok());
    }

    #[test]
    fn operator_price_prices_an_unlisted_model_and_wins_over_the_table() {
        let id = "openai:pricing-test-operator";
        assert!(require_price(id, 5.0).is_err());
        set_operator_price(
            id,
            Price {
                input: 1.0,
                cached_input: 0.5,
                cache_write: 1.0,
                output: 2.0,
            },
        );
        assert!(require_price(id, 5.0).is_ok());
        let cost = cost_usd(id, &usage(1_000_000, 500_000, 1_000_000));
        assert!(close(cost, 0.5 + 0.25 + 2.0), "{cost}");
        assert_eq!(
            price_note(id),
            None,
            "a cached rate below input needs no note"
        );
    }

    #[test]
    fn cost_cache_writes_are_billed_at_1_25x_on_anthropic_and_at_the_input_rate_elsewhere() {
        let written = Usage {
            input_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
            ..Usage::default()
        };
        assert!(close(
            cost_usd("anthropic:claude-sonnet-4-5", &written),
            3.75
        ));
        assert!(close(
            cost_usd("anthropic:claude-haiku-4-5", &written),
            1.25
        ));
        assert!(close(
            cost_usd("anthropic:claude-opus-4-1", &written),
            18.75
        ));
        assert!(close(cost_usd("openai:gpt-4.1-mini", &written), 0.40));
        assert!(close(cost_usd("google:gemini-2.5-flash", &written), 0.30));
        for listed in PRICES {
            let factor = if listed.provider == "anthropic" {
                1.25
            } else {
                1.0
            };
            assert!(
                close(listed.price.cache_write, listed.price.input * factor),
                "{}",
                listed.model
            );
            assert!(
                listed.price.cached_input < listed.price.input,
                "{}: a cache read is cheaper than input",
                listed.model
            );
        }
    }

    #[test]
    fn cost_charges_uncached_input_cache_reads_cache_writes_and_output_each_at_its_rate() {
        // claude-sonnet-4-5: input 3.00, reads 0.30, writes 3.75, output 15.00 per million.
        let usage = Usage {
            input_tokens: 10_000,
            cached_tokens: 6_000,
            cache_write_tokens: 3_000,
            output_tokens: 500,
        };
        let expected = (1_000.0 * 3.00 + 6_000.0 * 0.30 + 3_000.0 * 3.75 + 500.0 * 15.00) / 1e6;
        let cost = cost_usd("anthropic:claude-sonnet-4-5", &usage);
        assert!(close(cost, expected), "{cost} != {expected}");
    }

    #[test]
    fn cost_never_charges_reads_and_writes_beyond_the_input_they_are_part_of() {
        // 800 read + 500 written of 1,000 input: the writes are held to the 200 left.
        let usage = Usage {
            input_tokens: 1_000,
            cached_tokens: 800,
            cache_write_tokens: 500,
            output_tokens: 0,
        };
        let cost = cost_usd("anthropic:claude-sonnet-4-5", &usage);
        assert!(close(cost, (800.0 * 0.30 + 200.0 * 3.75) / 1e6), "{cost}");
    }

    #[test]
    fn cost_worst_case_prices_input_at_the_dearer_of_input_and_cache_write() {
        let anthropic = worst_case_usd("anthropic:claude-sonnet-4-5", 1_000_000, 1_000_000);
        assert!(close(anthropic, 3.75 + 15.00), "{anthropic}");
        let openai = worst_case_usd("openai:gpt-4.1-mini", 1_000_000, 1_000_000);
        assert!(close(openai, 0.40 + 1.60), "{openai}");
        assert_eq!(worst_case_usd("openai:pricing-test-unpriced", 1, 1), 0.0);
    }

    #[test]
    fn operator_price_takes_its_providers_cache_write_rate_and_without_a_cached_rate_is_noted() {
        let read = |pairs: &'static [(&'static str, &'static str)]| {
            operator_price_from(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            })
            .unwrap()
            .unwrap()
        };
        let without_cached = read(&[(PRICE_INPUT_VAR, "2"), (PRICE_OUTPUT_VAR, "8")]);
        set_operator_price("anthropic:pricing-test-claude", without_cached);
        set_operator_price("openai:pricing-test-compatible", without_cached);
        let claude = price_of("anthropic:pricing-test-claude").unwrap();
        assert!(close(claude.cache_write, 2.5), "{claude:?}");
        assert!(close(claude.cached_input, 2.0), "cached priced as input");
        let compatible = price_of("openai:pricing-test-compatible").unwrap();
        assert!(close(compatible.cache_write, 2.0), "{compatible:?}");
        let note = price_note("openai:pricing-test-compatible").expect("a note");
        assert!(
            note.contains("openai:pricing-test-compatible")
                && note.contains(PRICE_CACHED_INPUT_VAR)
                && !note.contains('\n'),
            "{note}"
        );
        // A listed model's cached rate is the provider's: nothing to say.
        assert_eq!(price_note("openai:gpt-4.1-mini"), None);
    }

    #[test]
    fn operator_price_variables_are_read_together_and_validated() {
        let read = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            operator_price_from(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        };
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(
            read(&[(PRICE_INPUT_VAR, "0.5"), (PRICE_OUTPUT_VAR, " 2 ")]),
            Ok(Some(Price {
                input: 0.5,
                cached_input: 0.5,
                cache_write: 0.5,
                output: 2.0
            }))
        );
        assert_eq!(
            read(&[
                (PRICE_INPUT_VAR, "0.5"),
                (PRICE_OUTPUT_VAR, "2"),
                (PRICE_CACHED_INPUT_VAR, "0.05")
            ])
            .unwrap()
            .unwrap()
            .cached_input,
            0.05
        );
        let problems = read(&[(PRICE_INPUT_VAR, "cheap"), (PRICE_CACHED_INPUT_VAR, "-1")])
            .expect_err("refused");
        let variables: Vec<&str> = problems.iter().map(|p| p.variable).collect();
        assert_eq!(
            variables,
            vec![PRICE_INPUT_VAR, PRICE_CACHED_INPUT_VAR, PRICE_OUTPUT_VAR]
        );
        assert!(read(&[(PRICE_OUTPUT_VAR, "NaN"), (PRICE_INPUT_VAR, "1")]).is_err());
    }

    #[test]
    fn pricing_charges_gemini_thinking_tokens_at_the_output_rate() {
        // Usage's output counts thoughts (google::parse_response adds them): 1M at 2.50.
        let cost = cost_usd(
            "google:gemini-2.5-flash",
            &usage(1_000_000, 1_000_000, 1_000_000),
        );
        assert!(close(cost, 0.03 + 2.50), "{cost}");
        // The lite model is not its sibling.
        assert!(close(
            cost_usd("google:gemini-2.5-flash-lite", &usage(1_000_000, 0, 0)),
            0.10
        ));
    }
}
