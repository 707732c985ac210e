//! What a model call cost, in US dollars, for the daily cost cap (SYSTEM 4, pre-model checks).
//!
//! A small table of list prices per million tokens for a few well-known models. A model that is
//! not in the table (another provider's model, a local Ollama model, any `mock:`) costs 0: for
//! it the daily budget is enforced by its token cap alone.
//!
//! Matching: the id is `provider:model` as `Model::id` returns it, or a bare model name. The
//! provider, when given, must be the table's; the name must equal the table's or add only a date
//! snapshot suffix (`gpt-4.1-mini-2025-04-14`, `claude-haiku-4-5-20251001`), so that a different
//! model sharing a prefix (`gpt-4.1-nano`) is never priced as its sibling.

use super::Usage;

/// USD per million tokens.
struct Price {
    provider: &'static str,
    model: &'static str,
    input: f64,
    /// Input tokens served from the prompt cache.
    cached_input: f64,
    output: f64,
}

/// List prices as published by the providers (standard tier). Anthropic's cache writes cost
/// more than plain input; they are priced as plain input here, a small underestimate.
const PRICES: &[Price] = &[
    Price {
        provider: "openai",
        model: "gpt-4.1",
        input: 2.00,
        cached_input: 0.50,
        output: 8.00,
    },
    Price {
        provider: "openai",
        model: "gpt-4.1-mini",
        input: 0.40,
        cached_input: 0.10,
        output: 1.60,
    },
    Price {
        provider: "openai",
        model: "gpt-4o-mini",
        input: 0.15,
        cached_input: 0.075,
        output: 0.60,
    },
    Price {
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        input: 3.00,
        cached_input: 0.30,
        output: 15.00,
    },
    Price {
        provider: "anthropic",
        model: "claude-haiku-4-5",
        input: 1.00,
        cached_input: 0.10,
        output: 5.00,
    },
];

/// The cost of `usage` on `model_id`; 0 for a model the table does not know.
pub fn cost_usd(model_id: &str, usage: &Usage) -> f64 {
    let Some(price) = find(model_id) else {
        return 0.0;
    };
    // Cached tokens are a subset of input tokens; guard against a provider reporting more.
    let cached = usage.cached_tokens.min(usage.input_tokens);
    let uncached = usage.input_tokens - cached;
    (uncached as f64 * price.input
        + cached as f64 * price.cached_input
        + usage.output_tokens as f64 * price.output)
        / 1_000_000.0
}

fn find(model_id: &str) -> Option<&'static Price> {
    let (provider, name) = match model_id.split_once(':') {
        Some((provider, name)) => (Some(provider), name),
        None => (None, model_id),
    };
    PRICES.iter().find(|price| {
        provider.is_none_or(|p| p == price.provider)
            && name
                .strip_prefix(price.model)
                .is_some_and(is_snapshot_suffix)
    })
}

/// Empty, or `-` followed by a date: digits and dashes only.
fn is_snapshot_suffix(rest: &str) -> bool {
    rest.is_empty()
        || rest.strip_prefix('-').is_some_and(|date| {
            date.starts_with(|c: char| c.is_ascii_digit())
                && date.bytes().all(|b| b.is_ascii_digit() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
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
        assert!(close(
            cost_usd("anthropic:claude-haiku-4-5-20251001", &u),
            1.00
        ));
        assert_eq!(cost_usd("openai:gpt-4.1-nano", &u), 0.0);
    }

    #[test]
    fn pricing_unknown_models_mocks_and_other_providers_cost_nothing() {
        let u = usage(1_000_000, 0, 1_000_000);
        assert_eq!(cost_usd("mock:demo", &u), 0.0);
        assert_eq!(cost_usd("mock:slow", &u), 0.0);
        assert_eq!(cost_usd("ollama:llama3.1:8b", &u), 0.0);
        assert_eq!(cost_usd("ollama:gpt-4.1", &u), 0.0);
        assert_eq!(cost_usd("openai:some-future-model", &u), 0.0);
    }

    #[test]
    fn pricing_never_charges_more_cached_tokens_than_input_tokens() {
        let cost = cost_usd("openai:gpt-4.1", &usage(100, 500, 0));
        assert!(close(cost, 100.0 * 0.50 / 1_000_000.0), "{cost}");
    }
}
