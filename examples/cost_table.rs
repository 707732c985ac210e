//! The cost table of `docs/GOING-LIVE.md` ("Choosing a model, and what a conversation costs"),
//! computed from usage measured on the golden suites:
//!
//! ```text
//! cargo run --example cost_table
//! ```
//!
//! Every case of `evals/golden` and `evals/sales-demo` (the demo tenant) and `evals/tenant-cycle`
//! (its own tenant) runs through the agent as `manychat-agent eval --model mock:demo` runs it: the
//! same prompt, tools, output schema and steps a turn sends. Each model call's request is
//! counted with the `o200k_base` tokenizer (`manychat_agent::model::tokenizer`): its input (the
//! system text, tool definitions and output schema as JSON, the messages), the part of it a
//! prompt cache can serve (everything but the messages), and the answer's output. A case is one
//! turn; cases answered without the model (the scripted opening, an escalation keyword) cost
//! nothing and are left out of the per-turn mean. Each listed model is priced on the mean turn
//! with `manychat_agent::model::pricing`: cold (no prompt cache) and warm (every call's prefix
//! read from the cache at the cached rate, as in steady traffic; cache writes not counted).
//!
//! The input figures move by a few tokens from run to run: the contact's message is fenced with a
//! random nonce.
//!
//! Assumptions: tokens are counted with `o200k_base` for every provider (Claude and Gemini count
//! somewhat differently); the demo model's answers stand in for a real model's (a real model
//! writes longer replies and may take more steps); a conversation is 8 turns.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use manychat_agent::config::{ConfigContext, load_dir};
use manychat_agent::evals::{load_suite, runner};
use manychat_agent::model::{
    Model, ModelEnv, ModelError, ModelRequest, ModelResponse, Usage, pricing, tokenizer,
};

/// The models the table prices, in the order it lists them.
const MODELS: [&str; 9] = [
    "openai:gpt-5-nano",
    "openai:gpt-4o-mini",
    "openai:gpt-5-mini",
    "openai:gpt-4.1-mini",
    "google:gemini-2.5-flash",
    "openai:gpt-5.4-mini",
    "anthropic:claude-haiku-4-5",
    "openai:gpt-5.4",
    "anthropic:claude-sonnet-4-6",
];

/// Turns to a conversation.
const TURNS_PER_CONVERSATION: f64 = 8.0;

/// What the calls of one case used.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    calls: u64,
    input: u64,
    prefix: u64,
    output: u64,
}

/// `mock:demo`, its calls measured.
struct Measuring {
    inner: Arc<dyn Model>,
    seen: Mutex<Measured>,
}

#[async_trait]
impl Model for Measuring {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let response = self.inner.step(request).await?;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.calls += 1;
        seen.input += response.usage.input_tokens;
        seen.prefix += tokenizer::prefix_tokens(request);
        seen.output += response.usage.output_tokens;
        Ok(response)
    }
}

impl Measuring {
    fn take(&self) -> Measured {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let demo = manychat_agent::config::examples::shipped_examples();
    let cycle = root.join("tests/fixtures/tenant-cycle");
    let suites = [
        (demo.as_path(), "evals/golden"),
        (demo.as_path(), "evals/sales-demo"),
        (cycle.as_path(), "evals/tenant-cycle"),
    ];
    let env = ModelEnv::from_lookup(|_| None).expect("the default model settings");
    let model = Arc::new(Measuring {
        inner: manychat_agent::model::resolve("mock:demo", &env).expect("mock:demo"),
        seen: Mutex::default(),
    });
    let mut turns: Vec<Measured> = Vec::new();
    let mut without_model = 0;
    println!(
        "| suite | cases | model turns | calls per turn | input tokens per turn | of it, cacheable prefix | output tokens per turn |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (config_dir, suite) in suites {
        let context = ConfigContext {
            allow_examples: true,
            ..ConfigContext::default()
        };
        let config = Arc::new(load_dir(config_dir, &context).expect("the suite's tenant config"));
        let cases = load_suite(&root.join(suite)).expect("the suite");
        let mut measured = Vec::new();
        for case in &cases {
            runner::run_cases(
                std::slice::from_ref(case),
                config.clone(),
                model.clone(),
                &env,
            )
            .await;
            let case = model.take();
            if case.calls == 0 {
                without_model += 1;
            } else {
                measured.push(case);
            }
        }
        let mean = mean(&measured);
        println!(
            "| `{suite}` | {} | {} | {:.2} | {:.0} | {:.0} | {:.0} |",
            cases.len(),
            measured.len(),
            mean.0,
            mean.1,
            mean.2,
            mean.3
        );
        turns.extend(measured);
    }
    let (calls, input, prefix, output) = mean(&turns);
    println!(
        "| all | {} | {} | {calls:.2} | {input:.0} | {prefix:.0} | {output:.0} |\n",
        turns.len() + without_model,
        turns.len()
    );

    println!(
        "| `AGENT_MODEL` | USD per million input / cached input / output | US cents per turn, cold / warm cache | US cents per conversation, cold / warm | USD per 1,000 conversations, cold / warm |"
    );
    println!("|---|---|---|---|---|");
    let turn = |cached: f64| Usage {
        input_tokens: input.round() as u64,
        cached_tokens: cached.round() as u64,
        output_tokens: output.round() as u64,
        cache_write_tokens: 0,
    };
    for id in MODELS {
        let price = pricing::price_of(id).expect("a listed model");
        let cold = pricing::cost_usd(id, &turn(0.0)) * 100.0;
        let warm = pricing::cost_usd(id, &turn(prefix)) * 100.0;
        let conversation = |cents: f64| cents * TURNS_PER_CONVERSATION;
        println!(
            "| `{id}` | {} / {} / {} | {cold:.3} / {warm:.3} | {:.2} / {:.2} | {:.2} / {:.2} |",
            rate(price.input),
            rate(price.cached_input),
            rate(price.output),
            conversation(cold),
            conversation(warm),
            conversation(cold) * 10.0,
            conversation(warm) * 10.0,
        );
    }
}

/// The mean calls, input, prefix and output tokens per turn.
fn mean(turns: &[Measured]) -> (f64, f64, f64, f64) {
    let n = turns.len().max(1) as f64;
    let sum = |f: fn(&Measured) -> u64| turns.iter().map(f).sum::<u64>() as f64 / n;
    (
        sum(|t| t.calls),
        sum(|t| t.input),
        sum(|t| t.prefix),
        sum(|t| t.output),
    )
}

/// A rate per million tokens with two decimals, or three when the third is needed (0.005).
fn rate(usd: f64) -> String {
    let three = format!("{usd:.3}");
    match three.strip_suffix('0') {
        Some(two) => two.to_owned(),
        None => three,
    }
}
