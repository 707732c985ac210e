//! Scale-out on PostgreSQL, measured, not asserted: turns per second with one and
//! with two replicas of the real app on one PostgreSQL schema, with an instant model and with a
//! slow one (1 s per turn, far beyond a pool's worth of concurrent turns), and the database's
//! connection count at its peak during each run.
//!
//! Each client is one contact writing again and again (its turns never overlap), so what is
//! measured is the service's capacity, not a contact's queue. Every contact has written once
//! before anything is measured, so its token write has settled.
//!
//! Run: `TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo bench --bench replicas`
//! (optionally, with their defaults, `BENCH_REQUESTS=2000 BENCH_CONCURRENCY=64`
//! `BENCH_SLOW_CONCURRENCY=128`).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use manychat_agent::model::{Model, ModelError, ModelRequest, ModelResponse, Usage};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::*;

/// Answers after `delay` (zero: at once).
struct BenchModel {
    delay: Duration,
}

#[async_trait]
impl Model for BenchModel {
    fn id(&self) -> &str {
        "mock:bench"
    }
    async fn step(&self, _request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        Ok(final_reply(Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_tokens: 0,
            cache_write_tokens: 0,
        }))
    }
}

/// Starts one replica on `database_url`; returns its route URL.
async fn start_replica(
    dir: &std::path::Path,
    name: &str,
    database_url: &str,
    manychat_base: &str,
    delay: Duration,
    shutdown: &CancellationToken,
) -> String {
    let config = demo_tenant(dir, name);
    // Every turn a real turn: no budget, cap or hourly rate stops one.
    edit_json(&config.join("rules.json"), |rules| {
        lift_daily_budget(rules);
        rules["maxTurnsPerConversation"] = json!(100_000);
        rules["rateLimit"] = json!({"turnsPerSubscriberPerHour": 100_000});
    });
    let model = Arc::new(BenchModel { delay });
    start_app(
        &config,
        database_url.to_owned(),
        manychat_base,
        model,
        shutdown,
    )
    .await
}

struct Measured {
    turns_per_second: f64,
    p50: Duration,
    p99: Duration,
    /// Answers that were not the model's (an acknowledgement, the escalation copy).
    not_answered: usize,
}

/// `requests` turns from `concurrency` contacts, contact `n` always on replica `n % urls`.
async fn drive(
    urls: &[String],
    first_contact: usize,
    requests: usize,
    concurrency: usize,
) -> Measured {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let url = urls[worker % urls.len()].clone();
        let client = client.clone();
        let count = requests / concurrency + usize::from(worker < requests % concurrency);
        let subscriber = (first_contact + worker).to_string();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(count);
            let mut not_answered = 0;
            for _ in 0..count {
                let sent = Instant::now();
                let body: Value = client
                    .post(&url)
                    .bearer_auth(SECRET)
                    .header(
                        "x-forwarded-for",
                        format!("10.9.{}.{}", worker / 250, worker % 250),
                    )
                    .json(&json!({"subscriber_id": subscriber, "text": "When are classes?"}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                latencies.push(sent.elapsed());
                let text = body["content"]["messages"][0]["text"]
                    .as_str()
                    .unwrap_or("");
                if text != "Classes run on weekday evenings." {
                    not_answered += 1;
                }
            }
            (latencies, not_answered)
        }));
    }
    let mut latencies = Vec::new();
    let mut not_answered = 0;
    for worker in workers {
        let (mut l, n) = worker.await.unwrap();
        latencies.append(&mut l);
        not_answered += n;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
    Measured {
        turns_per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.5),
        p99: at(0.99),
        not_answered,
    }
}

/// Samples the server's connection count every 20 ms until `stop`; the peak.
fn watch_connections(admin: sqlx::PgPool, stop: CancellationToken) -> Arc<AtomicI64> {
    let peak = Arc::new(AtomicI64::new(0));
    let seen = peak.clone();
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            if let Ok(count) = sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()",
            )
            .fetch_one(&admin)
            .await
            {
                seen.fetch_max(count, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    peak
}

fn main() {
    let Ok(base) = std::env::var("TEST_DATABASE_URL") else {
        eprintln!("replicas bench: set TEST_DATABASE_URL to a PostgreSQL database");
        std::process::exit(2);
    };
    run(async move {
        let requests = env_usize("BENCH_REQUESTS", 2000);
        let concurrency = env_usize("BENCH_CONCURRENCY", 64);
        let slow_concurrency = env_usize("BENCH_SLOW_CONCURRENCY", 128);
        let fake = Router::new().fallback(|| async {
            axum::Json(
                json!({"status": "success", "data": {"id": "1", "tags": [], "custom_fields": []}}),
            )
        });
        let manychat_base = serve(fake).await;
        let admin = sqlx::PgPool::connect(&base).await.unwrap();
        let dir = tempfile::tempdir().unwrap();

        println!(
            "| model | replicas | clients | turns/s | p50 | p99 | not the model's answer | connections at peak (server) |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        let mut first_contact = 9_000_000;
        for (label, delay, clients, total) in [
            ("instant", Duration::ZERO, concurrency, requests),
            (
                "1 s",
                Duration::from_secs(1),
                slow_concurrency,
                slow_concurrency * 4,
            ),
        ] {
            for replicas in [1usize, 2] {
                let schema = manychat_agent::store::postgres::create_test_schema(&base)
                    .await
                    .unwrap();
                let separator = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{separator}options[search_path]={schema}");
                let shutdown = CancellationToken::new();
                let mut urls = Vec::new();
                for n in 0..replicas {
                    let name = format!("{label}-{replicas}-{n}").replace(' ', "");
                    urls.push(
                        start_replica(dir.path(), &name, &url, &manychat_base, delay, &shutdown)
                            .await,
                    );
                }
                // Each contact writes once first (its token write settles off the clock).
                drive(&urls, first_contact, clients, clients).await;
                tokio::time::sleep(Duration::from_secs(clients as u64 / 10 + 2)).await;
                let stop = CancellationToken::new();
                let peak = watch_connections(admin.clone(), stop.clone());
                let measured = drive(&urls, first_contact, total, clients).await;
                stop.cancel();
                println!(
                    "| {label} | {replicas} | {clients} | {:.0} | {:.1} ms | {:.1} ms | {} | {} |",
                    measured.turns_per_second,
                    measured.p50.as_secs_f64() * 1000.0,
                    measured.p99.as_secs_f64() * 1000.0,
                    measured.not_answered,
                    peak.load(Ordering::Relaxed),
                );
                shutdown.cancel();
                first_contact += clients;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });
}
