//! What one sale costs in model calls, input tokens and money, measured, not asserted: the eight
//! messages of a sale (`benches/sales/*.txt`), each 300 ms after the previous reply (so that the
//! turn's actions, performed after its response, are on record for the next), sent by two
//! contacts one after the other through
//! the real HTTP turn path (SQLite, a fake ManyChat that accepts everything), answered by
//! `mock:demo` behind a wrapper that keeps every request. Two verticals: the demo tenant
//! (`config/*.example`, a pottery studio) and the bicycle workshop of `tests/fixtures/tenant-cycle`.
//!
//! How the figures are counted:
//! - Each request is written as each provider would receive it, by the provider's own body
//!   builder (OpenAI Chat Completions for `gpt-4.1-mini`, Anthropic Messages for
//!   `claude-haiku-4-5`, Gemini `generateContent` for `gemini-2.5-flash`). Its top-level fields
//!   are then written as JSON text in the order the provider reads its prompt, the order its
//!   prefix cache follows: the tools, then the system prompt (Anthropic's `system`, Gemini's
//!   `systemInstruction`; OpenAI's is the first message), the answer's schema where it is a
//!   field (OpenAI's `response_format`), then the conversation, and last the settings (model,
//!   limits, tool choice, sorted by name). The wire's own JSON has its keys sorted by name,
//!   which puts the conversation before the system prompt; the text is the same either way.
//!   Its tokens are that whole text counted with `o200k_base` (`model::tokenizer::count`), JSON
//!   syntax included: a provider counts its own encoding of the content, so the figures are a
//!   like-for-like reference, not any provider's bill.
//! - Output tokens are the answer's text and its calls' names and arguments, counted the same way.
//! - The shared prefix of a request is the longest common byte prefix of its JSON text with the
//!   contact's previous request (same contact, the step before, across turns), and with the other
//!   contact's request at the same step; its tokens are that common text counted alone.
//! - Cost per sale (one contact's eight messages) at `model::pricing`'s list rates: cold, nothing
//!   cached, every input token at the input rate; warm, each request's larger shared prefix (the
//!   contact's previous request, or the other contact's at the same step) at the cached input
//!   rate. Providers' cache minimums (e.g. 1,024 tokens) and cache-write surcharges are not
//!   applied: the warm figure is what a perfect prefix cache would save.
//!
//! The bench measures whatever the code sends, so a change to the prompt's layout or to the
//! loop shows up here as it is.
//!
//! Run: `cargo bench --bench sale_cost`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use manychat_agent::ids::Secret;
use manychat_agent::model::anthropic::AnthropicModel;
use manychat_agent::model::demo::DemoModel;
use manychat_agent::model::google::GoogleModel;
use manychat_agent::model::mock::RecordingModel;
use manychat_agent::model::openai::OpenAiModel;
use manychat_agent::model::{
    ModelRequest, ModelResponse, ToolArguments, Usage, pricing, tokenizer,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::*;

/// How long a contact waits after a reply before its next message (real time).
const CONTACT_PAUSE: std::time::Duration = std::time::Duration::from_millis(300);

/// A sale: its name, the tenant it runs on and its messages.
struct Sale {
    name: &'static str,
    tenant: PathBuf,
    messages: Vec<String>,
}

fn sales() -> Vec<Sale> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let messages = |name: &str| -> Vec<String> {
        std::fs::read_to_string(repo.join(format!("benches/sales/{name}.txt")))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect()
    };
    vec![
        Sale {
            name: "riverside-clay (demo tenant)",
            tenant: repo.join("config"),
            messages: messages("riverside-clay"),
        },
        Sale {
            name: "cycle-workshop (second vertical)",
            tenant: repo.join("tests/fixtures/tenant-cycle"),
            messages: messages("cycle-workshop"),
        },
    ]
}

/// Copies a tenant (`*.example` or plain files) into `dir/config-{name}`, each message its own
/// turn and the daily budget lifted.
fn tenant_copy(from: &Path, dir: &Path, name: &str) -> PathBuf {
    let config = dir.join(format!("config-{name}"));
    std::fs::create_dir_all(&config).unwrap();
    for file in ["prompt.md", "catalog.json", "rules.json", "tools.json"] {
        for candidate in [format!("{file}.example"), file.to_owned()] {
            if from.join(&candidate).exists() {
                std::fs::copy(from.join(&candidate), config.join(file)).unwrap();
                break;
            }
        }
    }
    edit_json(&config.join("rules.json"), |rules| {
        rules["burst"] = json!({"windowMs": 0});
        lift_daily_budget(rules);
    });
    config
}

/// One contact's steps: every request with its answer, and the calls each message took.
struct Contact {
    steps: Vec<(ModelRequest, Option<ModelResponse>)>,
    per_message: Vec<usize>,
}

async fn run_sale(sale: &Sale, dir: &Path, index: usize) -> [Contact; 2] {
    let manychat =
        serve(Router::new().fallback(|| async { axum::Json(json!({"status": "success"})) })).await;
    let config = tenant_copy(&sale.tenant, dir, &index.to_string());
    let model = Arc::new(RecordingModel::new(Arc::new(DemoModel::new())));
    let shutdown = CancellationToken::new();
    let database = format!(
        "sqlite://{}",
        dir.join(format!("sale-{index}.db")).display()
    );
    let url = start_app(&config, database, &manychat, model.clone(), &shutdown).await;
    let http = reqwest::Client::new();
    let mut contacts = Vec::new();
    for subscriber in ["5558001", "5558002"] {
        let first = model.calls();
        let mut per_message = Vec::new();
        for text in &sale.messages {
            let before = model.calls();
            let response = http
                .post(&url)
                .bearer_auth(SECRET)
                .json(&json!({"subscriber_id": subscriber, "text": text}))
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success());
            per_message.push(model.calls() - before);
            // A turn's actions run after its response: the contact's next message comes once
            // they are done, as a person's reply does, so the next turn sees their record.
            tokio::time::sleep(CONTACT_PAUSE).await;
        }
        contacts.push(Contact {
            steps: model.steps()[first..].to_vec(),
            per_message,
        });
    }
    shutdown.cancel();
    contacts.try_into().ok().unwrap()
}

/// A provider's body builder, the order it reads its body's fields in, and the model it is
/// priced as.
struct Provider {
    label: &'static str,
    model_id: &'static str,
    body: Box<dyn Fn(&ModelRequest) -> Value>,
    prompt_order: &'static [&'static str],
}

/// `body`'s top-level fields as JSON text, those of `order` first in that order, then the rest
/// by name.
fn prompt_text(body: &Value, order: &[&str]) -> String {
    let Some(fields) = body.as_object() else {
        return body.to_string();
    };
    let rest = fields.keys().filter(|k| !order.contains(&k.as_str()));
    let keys: Vec<&str> = order
        .iter()
        .copied()
        .filter(|k| fields.contains_key(*k))
        .chain(rest.map(String::as_str))
        .collect();
    let parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:{}", Value::from(*k), fields[*k]))
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn providers() -> Vec<Provider> {
    let key = Secret::new("bench-key");
    let openai = OpenAiModel::new("gpt-4.1-mini", &key, "https://api.openai.com/v1").unwrap();
    let anthropic =
        AnthropicModel::new("claude-haiku-4-5", &key, "https://api.anthropic.com").unwrap();
    let google = GoogleModel::new(
        "gemini-2.5-flash",
        &key,
        "https://generativelanguage.googleapis.com",
    )
    .unwrap();
    vec![
        Provider {
            label: "OpenAI chat body",
            model_id: "openai:gpt-4.1-mini",
            body: Box::new(move |r| openai.request_body(r)),
            prompt_order: &["tools", "response_format", "messages"],
        },
        Provider {
            label: "Anthropic messages body",
            model_id: "anthropic:claude-haiku-4-5",
            body: Box::new(move |r| anthropic.request_body(r)),
            prompt_order: &["tools", "system", "messages", "output_config"],
        },
        Provider {
            label: "Gemini generateContent body",
            model_id: "google:gemini-2.5-flash",
            body: Box::new(move |r| google.request_body(r)),
            prompt_order: &["tools", "systemInstruction", "contents"],
        },
    ]
}

/// The longest common prefix of `a` and `b`, ending on a character boundary.
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let mut end = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(end) {
        end -= 1;
    }
    &a[..end]
}

/// One call as a provider's body: its tokens and its shared prefixes' tokens.
struct Call {
    tokens: u64,
    /// With the same contact's previous request (0 on the first).
    own_prefix: u64,
    /// With the other contact's request at the same step (0 past the shorter sale).
    cross_prefix: u64,
    output: u64,
}

fn output_tokens(answer: &Option<ModelResponse>) -> u64 {
    let Some(answer) = answer else { return 0 };
    let calls: u64 = answer
        .tool_calls
        .iter()
        .map(|c| {
            let args = match &c.arguments {
                ToolArguments::Valid(v) => v.to_string(),
                ToolArguments::Invalid { .. } => String::new(),
            };
            tokenizer::count(&c.name) + tokenizer::count(&args)
        })
        .sum();
    calls + answer.output.as_deref().map_or(0, tokenizer::count)
}

fn measure(provider: &Provider, contacts: &[Contact; 2]) -> Vec<Call> {
    let bodies = |c: &Contact| -> Vec<String> {
        c.steps
            .iter()
            .map(|(r, _)| prompt_text(&(provider.body)(r), provider.prompt_order))
            .collect()
    };
    let (mine, other) = (bodies(&contacts[0]), bodies(&contacts[1]));
    mine.iter()
        .enumerate()
        .map(|(i, body)| Call {
            tokens: tokenizer::count(body),
            own_prefix: i
                .checked_sub(1)
                .map_or(0, |p| tokenizer::count(common_prefix(body, &mine[p]))),
            cross_prefix: other
                .get(i)
                .map_or(0, |o| tokenizer::count(common_prefix(body, o))),
            output: output_tokens(&contacts[0].steps[i].1),
        })
        .collect()
}

fn cost(model_id: &str, calls: &[Call], warm: bool) -> f64 {
    calls
        .iter()
        .map(|c| {
            let cached = if warm {
                c.own_prefix.max(c.cross_prefix)
            } else {
                0
            };
            let usage = Usage {
                input_tokens: c.tokens,
                output_tokens: c.output,
                cached_tokens: cached,
                cache_write_tokens: 0,
            };
            pricing::cost_usd(model_id, &usage)
        })
        .sum()
}

fn share(part: u64, whole: u64) -> String {
    format!("{:.1}%", 100.0 * part as f64 / whole.max(1) as f64)
}

fn report(sale: &Sale, contacts: &[Contact; 2]) {
    let first = &contacts[0];
    let calls = first.steps.len();
    let reported: u64 = first
        .steps
        .iter()
        .filter_map(|(_, a)| a.as_ref())
        .map(|a| a.usage.input_tokens)
        .sum();
    println!();
    println!(
        "## {} — {} messages, {} model calls per sale (per message: {}); second contact: {} calls",
        sale.name,
        sale.messages.len(),
        calls,
        first
            .per_message
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        contacts[1].steps.len(),
    );
    println!("input tokens the model reported (mock:demo's usage): {reported}");
    println!();
    println!(
        "| body (o200k_base over the JSON sent) | input tokens per sale | per call min / mean / max \
         | prefix of the contact's previous request | prefix of the other contact's same step |"
    );
    println!("|---|---|---|---|---|");
    let providers = providers();
    let measured: Vec<Vec<Call>> = providers.iter().map(|p| measure(p, contacts)).collect();
    for (provider, calls) in providers.iter().zip(&measured) {
        let total: u64 = calls.iter().map(|c| c.tokens).sum();
        let own: u64 = calls.iter().map(|c| c.own_prefix).sum();
        let cross: u64 = calls.iter().map(|c| c.cross_prefix).sum();
        let min = calls.iter().map(|c| c.tokens).min().unwrap_or(0);
        let max = calls.iter().map(|c| c.tokens).max().unwrap_or(0);
        println!(
            "| {} | {total} | {min} / {} / {max} | {} | {} |",
            provider.label,
            total / calls.len().max(1) as u64,
            share(own, total),
            share(cross, total),
        );
    }
    println!();
    println!("per call, OpenAI chat body:");
    println!(
        "| call | tokens | shared with the previous request | shared with the other contact |"
    );
    println!("|---|---|---|---|");
    for (i, c) in measured[0].iter().enumerate() {
        println!(
            "| {} | {} | {} ({}) | {} ({}) |",
            i + 1,
            c.tokens,
            c.own_prefix,
            share(c.own_prefix, c.tokens),
            c.cross_prefix,
            share(c.cross_prefix, c.tokens),
        );
    }
    println!();
    println!("| cost per sale | cold (nothing cached) | warm (shared prefix at the cached rate) |");
    println!("|---|---|---|");
    for (provider, calls) in providers.iter().zip(&measured) {
        println!(
            "| {} | ${:.5} | ${:.5} |",
            provider.model_id,
            cost(provider.model_id, calls, false),
            cost(provider.model_id, calls, true),
        );
    }
}

fn main() {
    run(async {
        let dir = tempfile::tempdir().unwrap();
        println!(
            "sale_cost: each sale sent by two contacts in turn through the HTTP route, answered \
             by mock:demo; tokens are o200k_base counts of each provider's request JSON"
        );
        for (index, sale) in sales().iter().enumerate() {
            let contacts = run_sale(sale, dir.path(), index).await;
            report(sale, &contacts);
        }
    });
}
