//! Knowledge at scale, measured (not asserted), at 10, 500, 5,000 and 20,000 offerings of the
//! invented Spanish shop (`knowledge::fixtures`): each size in a child process of its own, so
//! its memory is its own.
//!
//! Per size: the load (the tenant folder read and validated by `config::load_dir`, then what
//! turns derive from it: the knowledge index, the tool specs, the prompt; a catalog over the
//! 1 MiB file limit is parsed from memory instead, and the row says so), a reload (the same
//! again, the old snapshot dropped), the process's RSS after the load and after five reloads,
//! the first step's request tokens (o200k) for a price question about an offering deep in the
//! list, the retrieval time per turn (the contact's message and three history lines; p50 and
//! p99 over `BENCH_QUERIES`), and the agent's half of a turn per second (retrieval, prompt,
//! tools, an instant model, the guardrails: the part that depends on the catalog's size), as a
//! ratio to the 10-offering tenant. Semantic search (`KNOWLEDGE_EMBEDDINGS`), last: every
//! indexed document given a vector of `BENCH_VECTOR_DIMS` floats (text-embedding-3-small's
//! 1,536), the RSS then, and the retrieval time with the message's vector (the full-text
//! searches plus the brute-force cosine scans and the fusion).
//!
//! Run: `cargo bench --bench knowledge` (options, with their defaults: `BENCH_SIZES=10,500,
//! 5000,20000 BENCH_QUERIES=2000 BENCH_TURNS=2000 BENCH_RELOADS=5 BENCH_VECTOR_DIMS=1536`; the
//! RSS column's last figure is after the last reload).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use manychat_agent::agent::{self, SnapshotPrompt, ThinkInput};
use manychat_agent::config::{ConfigContext, MAX_FILE_BYTES, TenantConfig, load_dir};
use manychat_agent::knowledge::fixtures::{spanish_catalog, spanish_tenant};
use manychat_agent::knowledge::{Knowledge, Query};
use manychat_agent::model::embedding::pseudo_random;
use manychat_agent::model::mock::RecordingModel;
use manychat_agent::model::{Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage};
use manychat_agent::tools::{ToolSpecs, TurnTools};
use serde_json::{Value, json};

mod common;
use common::env_usize;

const CHILD: &str = "BENCH_KNOWLEDGE_SIZE";

/// Answers at once, without a tool call.
struct InstantModel;

#[async_trait]
impl Model for InstantModel {
    fn id(&self) -> &str {
        "mock:instant"
    }
    async fn step(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            output: Some(
                json!({"messages": ["Cuesta lo que dice el catálogo."], "escalate": false,
                       "escalation_reason": null, "confidence": 0.9, "closing_question": null})
                .to_string(),
            ),
            tool_calls: vec![],
            usage: Usage::default(),
            stop: StopReason::Completed,
            ..ModelResponse::default()
        })
    }
}

/// What one turn derives from a snapshot.
struct Derived {
    config: Arc<TenantConfig>,
    prompt: SnapshotPrompt,
    knowledge: Arc<Knowledge>,
    _tools: ToolSpecs,
}

fn derive(config: TenantConfig) -> Derived {
    let config = Arc::new(config);
    Derived {
        prompt: SnapshotPrompt::new(&config),
        knowledge: Arc::new(Knowledge::build(&config)),
        _tools: ToolSpecs::new(&config),
        config,
    }
}

/// The tenant's folder: the invented catalog, the demo's rules and tools (the offering field
/// left to the catalog), its prompt.
fn write_tenant(dir: &Path, config: &TenantConfig) -> usize {
    let catalog = serde_json::to_string(&config.catalog).unwrap();
    std::fs::write(dir.join("catalog.json"), &catalog).unwrap();
    std::fs::write(
        dir.join("rules.json"),
        serde_json::to_string(&config.rules).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("tools.json"),
        serde_json::to_string(config.tools.as_ref().unwrap()).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("prompt.md"), &config.prompt).unwrap();
    catalog.len()
}

/// A load as the service does it when the catalog fits its file limit, else the catalog parsed
/// from memory (the rest as generated).
fn load(dir: &Path, fits: bool, n: usize) -> Derived {
    if fits {
        let mut config = load_dir(dir, &ConfigContext::default()).expect("the tenant loads");
        config.knowledge = spanish_tenant(0).knowledge;
        derive(config)
    } else {
        let text = std::fs::read_to_string(dir.join("catalog.json")).unwrap();
        let mut config = spanish_tenant(0);
        config.catalog = serde_json::from_str(&text).unwrap();
        assert_eq!(config.catalog.offerings.len(), n);
        derive(config)
    }
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

async fn think(d: &Derived, model: &dyn Model, text: &str, history: &[&str]) -> Option<Value> {
    let retrieved = d.knowledge.for_turn(text, history, None);
    let mut tools =
        TurnTools::without_reads_with(d.config.clone(), Default::default(), d.knowledge.clone());
    let thought = agent::think(
        model,
        ThinkInput {
            config: &d.config,
            prompt: &d.prompt,
            notices: &[],
            history: &[],
            contact_text: text,
            max_output_tokens: 400,
            temperature: 0.0,
            max_messages: 3,
            images: &[],
            budget: None,
            retrieved: retrieved.as_ref(),
        },
        &mut tools,
    )
    .await;
    (!thought.reply.escalate).then(|| json!(thought.reply.messages))
}

fn child(n: usize) {
    let queries = env_usize("BENCH_QUERIES", 2000);
    let turns = env_usize("BENCH_TURNS", 2000);
    let dir = tempfile::tempdir().unwrap();
    let generated = spanish_tenant(n);
    let bytes = write_tenant(dir.path(), &generated);
    drop(generated);
    let fits = bytes as u64 <= MAX_FILE_BYTES;
    let rss_before = rss_mb();

    let started = Instant::now();
    let mut derived = load(dir.path(), fits, n);
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss_load = rss_mb();
    let mut reload_ms = 0f64;
    // Each reload builds the new snapshot beside the old one, then drops the old (as the
    // service swaps them): the peak holds two, and the allocator keeps what it freed.
    let mut rss_reloads = Vec::new();
    for _ in 0..env_usize("BENCH_RELOADS", 5).max(5) {
        let started = Instant::now();
        let next = load(dir.path(), fits, n);
        derived = next;
        reload_ms = reload_ms.max(started.elapsed().as_secs_f64() * 1e3);
        rss_reloads.push(rss_mb());
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let catalog = spanish_catalog(n, 7);
    let deep = &catalog.offerings[n * 9 / 10];
    let question = format!("Hola, ¿cuánto cuesta la {}?", deep.name);
    let recording = RecordingModel::new(Arc::new(InstantModel));
    runtime.block_on(think(&derived, &recording, &question, &[]));
    let tokens = manychat_agent::model::tokenizer::request_tokens(&recording.requests()[0]);

    let history = [
        "hola",
        "¡Hola! ¿En qué te ayudo?",
        "busco un instrumento para mi hija",
    ];
    let mut times: Vec<Duration> = (0..queries)
        .map(|i| {
            let o = &catalog.offerings[(i * 7919) % n];
            let message = format!("¿y la {} cuánto cuesta?", o.name);
            let started = Instant::now();
            let got = derived.knowledge.retrieve(Query {
                message: &message,
                history: &history,
                recorded: None,
                vector: None,
            });
            let took = started.elapsed();
            std::hint::black_box(got);
            took
        })
        .collect();
    times.sort_unstable();

    let started = Instant::now();
    runtime.block_on(async {
        for i in 0..turns {
            let o = &catalog.offerings[(i * 7919) % n];
            let text = format!("¿Cuánto cuesta la {}?", o.name);
            std::hint::black_box(think(&derived, &InstantModel, &text, &history).await);
        }
    });
    let per_second = turns as f64 / started.elapsed().as_secs_f64();

    // Semantic search: a vector per indexed document, then retrieval with the message's.
    let dims = env_usize("BENCH_VECTOR_DIMS", 1536);
    let texts = derived.knowledge.embedding_texts(&derived.config);
    let rss_before_vectors = rss_mb();
    for (doc, text) in texts.iter().enumerate() {
        derived
            .knowledge
            .set_vector(doc as u32, pseudo_random(text, dims));
    }
    let rss_vectors = rss_mb() - rss_before_vectors;
    let mut semantic: Vec<Duration> = (0..queries)
        .map(|i| {
            let o = &catalog.offerings[(i * 7919) % n];
            let message = format!("¿y la {} cuánto cuesta?", o.name);
            let vector = pseudo_random(&message, dims);
            let started = Instant::now();
            let got = derived.knowledge.retrieve(Query {
                message: &message,
                history: &history,
                recorded: None,
                vector: Some(&vector),
            });
            let took = started.elapsed();
            std::hint::black_box(got);
            took
        })
        .collect();
    semantic.sort_unstable();

    println!(
        "{}",
        json!({
            "n": n, "catalog_bytes": bytes, "load": if fits { "load_dir" } else { "parsed" },
            "load_ms": load_ms, "reload_ms": reload_ms,
            "rss_before_mb": rss_before, "rss_load_mb": rss_load, "rss_reloads_mb": rss_reloads,
            "tokens": tokens,
            "p50_us": percentile(&times, 0.5), "p99_us": percentile(&times, 0.99),
            "turns_per_s": per_second,
            "vectors": texts.len(), "dims": dims, "rss_vectors_mb": rss_vectors,
            "semantic_p50_us": percentile(&semantic, 0.5),
            "semantic_p99_us": percentile(&semantic, 0.99)
        })
    );
}

fn main() {
    if let Ok(n) = std::env::var(CHILD) {
        return child(n.parse().expect("a size"));
    }
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "10,500,5000,20000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let exe = std::env::current_exe().unwrap();
    let mut rows: Vec<Value> = Vec::new();
    for n in sizes {
        let out = std::process::Command::new(&exe)
            .env(CHILD, n.to_string())
            .output()
            .expect("the child runs");
        let line = String::from_utf8_lossy(&out.stdout);
        let row: Value = line
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("size {n}: {}", String::from_utf8_lossy(&out.stderr)));
        eprintln!("{row}");
        rows.push(row);
    }
    let base = rows
        .iter()
        .find(|r| r["n"] == 10)
        .and_then(|r| r["turns_per_s"].as_f64());
    println!(
        "| offerings | catalog.json | load | reload | RSS after load / reload 1 / last reload | first-step tokens | retrieval p50 / p99 | agent turns/s (ratio to 10) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or_default();
        let ratio = base.map_or(String::new(), |b| format!(" ({:.2})", f("turns_per_s") / b));
        println!(
            "| {} | {:.0} KB | {:.0} ms ({}) | {:.0} ms | {:.0} / {:.0} / {:.0} MB | {} | {:.0} / {:.0} µs | {:.0}{ratio} |",
            r["n"],
            f("catalog_bytes") / 1024.0,
            f("load_ms"),
            r["load"].as_str().unwrap_or_default(),
            f("reload_ms"),
            f("rss_load_mb"),
            r["rss_reloads_mb"][0].as_f64().unwrap_or_default(),
            r["rss_reloads_mb"]
                .as_array()
                .and_then(|a| a.last()?.as_f64())
                .unwrap_or_default(),
            r["tokens"],
            f("p50_us"),
            f("p99_us"),
            f("turns_per_s"),
        );
    }
    println!();
    println!(
        "| offerings | vectors × floats | RSS the vectors add | retrieval with the message's vector p50 / p99 |"
    );
    println!("|---|---|---|---|");
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or_default();
        println!(
            "| {} | {} × {} | {:.0} MB | {:.0} / {:.0} µs |",
            r["n"],
            r["vectors"],
            r["dims"],
            f("rss_vectors_mb"),
            f("semantic_p50_us"),
            f("semantic_p99_us"),
        );
    }
}
