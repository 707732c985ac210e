//! The service's own cost per turn (issue: performance), measured, not asserted.
//!
//! Runs, in one process and one run: (1) a bare axum handler that returns the same Dynamic
//! Block JSON, and (2) the real app on SQLite with an instant model, every turn durably
//! recorded. Both are driven through real HTTP on loopback at a fixed concurrency. Prints
//! requests per second and p50/p99 latency for each, and the ratio, for docs/PERFORMANCE.md.
//!
//! Run: `cargo bench --bench turn_throughput` (optionally `BENCH_REQUESTS=4000 BENCH_CONCURRENCY=16`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::routing::post;
use manychat_agent::model::{Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage};
use manychat_agent::settings::Settings;
use manychat_agent::startup::{Application, Overrides};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "bench-secret-0123456789";

struct InstantModel;

#[async_trait]
impl Model for InstantModel {
    fn id(&self) -> &str {
        "mock:instant"
    }
    async fn step(&self, _request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            tool_calls: Vec::new(),
            output: Some(
                json!({"messages": ["Classes run on weekday evenings."], "escalate": false,
                    "escalation_reason": null, "confidence": 0.9, "closing_question": null})
                .to_string(),
            ),
            usage: Usage {
                input_tokens: 1200,
                output_tokens: 40,
                cached_tokens: 1000,
            },
            stop: StopReason::Completed,
        })
    }
}

fn block() -> Value {
    json!({"version": "v2", "content": {"type": "whatsapp",
        "messages": [{"type": "text", "text": "Classes run on weekday evenings."}],
        "actions": [], "external_message_callback": {"url": "https://bench.example.test/v1/channels/manychat/message",
        "method": "post", "headers": {"Authorization": format!("Bearer {SECRET}")},
        "payload": {"text": "{{last_input_text}}", "subscriber_id": "{{contact.id}}", "ai_token": "{{ai_token}}"},
        "timeout": 86400}}})
}

struct Measured {
    rps: f64,
    p50: Duration,
    p99: Duration,
}

async fn drive(url: String, requests: usize, concurrency: usize) -> Measured {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();
    let started = Instant::now();
    let per_worker = requests / concurrency;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let client = client.clone();
        let url = url.clone();
        workers.spawn(async move {
            let mut latencies = Vec::with_capacity(per_worker);
            for n in 0..per_worker {
                // Many contacts, each writing a few times: realistic per-contact history.
                let subscriber = 100_000 + worker * 1000 + n % 50;
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .bearer_auth(SECRET)
                    // Behind a trusted proxy, as in production: the per-address limit (300
                    // per minute) applies per client address, not to the benchmark's loopback.
                    .header("x-forwarded-for", format!("198.51.100.{}", n % 250))
                    .json(&json!({"subscriber_id": subscriber.to_string(), "text": "When are classes?"}))
                    .send()
                    .await
                    .unwrap();
                assert!(response.status().is_success());
                let _ = response.bytes().await.unwrap();
                latencies.push(sent.elapsed());
            }
            latencies
        });
    }
    let mut latencies = Vec::with_capacity(requests);
    while let Some(result) = workers.join_next().await {
        latencies.extend(result.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Measured {
        rps: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: pick(0.50),
        p99: pick(0.99),
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let requests = env_usize("BENCH_REQUESTS", 2000);
        let concurrency = env_usize("BENCH_CONCURRENCY", 8);

        // Baseline: a bare handler returning the same JSON.
        let body = Arc::new(block());
        let bare = Router::new().route(
            "/v1/channels/manychat/message",
            post(move || {
                let body = body.clone();
                async move { axum::Json((*body).clone()) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let bare_url = format!(
            "http://{}/v1/channels/manychat/message",
            listener.local_addr().unwrap()
        );
        tokio::spawn(async move { axum::serve(listener, bare).await.unwrap() });

        // The real app: SQLite file, demo tenant, instant model.
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        for name in ["prompt.md", "catalog.json", "rules.json", "tools.json"] {
            let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("config")
                .join(format!("{name}.example"));
            if from.exists() {
                std::fs::copy(from, config.join(name)).unwrap();
            }
        }
        let vars = [
            ("MANYCHAT_SHARED_SECRET", SECRET.to_owned()),
            ("PUBLIC_BASE_URL", "https://bench.example.test".to_owned()),
            ("MANYCHAT_API_TOKEN", "1:bench".to_owned()),
            ("MANYCHAT_API_BASE", "http://127.0.0.1:9".to_owned()),
            ("MANYCHAT_REPLY_FLOW_NS", "bench_reply_flow".to_owned()),
            ("CONFIG_DIR", config.display().to_string()),
            (
                "DATABASE_URL",
                format!("sqlite://{}", dir.path().join("bench.db").display()),
            ),
            ("MAX_TURNS_IN_FLIGHT", "1024".to_owned()),
            ("TRUST_PROXY", "loopback".to_owned()),
            ("LOG_LEVEL", "error".to_owned()),
        ];
        let settings = Settings::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        })
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let overrides = Overrides {
            model: Some(Arc::new(InstantModel)),
            manual_worker: true,
            ..Overrides::default()
        };
        let app = Application::build(settings, listener, overrides)
            .await
            .unwrap();
        let app_url = format!(
            "http://127.0.0.1:{}/v1/channels/manychat/message",
            app.port()
        );
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move { app.run(token).await.unwrap() });

        // Warm up both, then measure.
        drive(bare_url.clone(), 200, concurrency).await;
        drive(app_url.clone(), 200, concurrency).await;
        let bare = drive(bare_url, requests, concurrency).await;
        let real = drive(app_url, requests, concurrency).await;
        println!("requests={requests} concurrency={concurrency}");
        println!(
            "bare handler : {:>8.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
            bare.rps,
            bare.p50.as_secs_f64() * 1e3,
            bare.p99.as_secs_f64() * 1e3
        );
        println!(
            "plain turn   : {:>8.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
            real.rps,
            real.p50.as_secs_f64() * 1e3,
            real.p99.as_secs_f64() * 1e3
        );
        println!(
            "ratio        : {:.1}% of the bare handler's throughput",
            100.0 * real.rps / bare.rps
        );
        shutdown.cancel();
    });
}
