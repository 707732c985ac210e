//! A message sent in three pieces (Performance), measured, not asserted: the demo tenant's
//! `burst.windowMs` (1500) against the same three pieces with no window (every message its own
//! turn), on two apps in the same run, alternated. Per burst: the model calls, the tokens they
//! cost (the scripted model's estimate: about four characters a token, as `mock` reports them),
//! the answers the contact gets, and the first piece's answer time, which the window delays by
//! design (the model runs once the window has passed after the last piece).
//!
//! Run: `cargo bench --bench burst` (optionally `BENCH_ROUNDS=10`, `BENCH_GAP_MS=400`: the time
//! between pieces, `BENCH_MODEL_MS=800`: the model's answer time).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, estimate_usage, reply};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::*;

const PIECES: [&str; 3] = ["hi", "I saw your ad", "how much is the wheel course?"];

fn answer() -> String {
    json!({"messages": ["The wheel course is 120 euros for four sessions."], "escalate": false,
        "escalation_reason": null, "confidence": 0.9, "closing_question": null})
    .to_string()
}

/// What one burst cost and how it was answered.
struct Burst {
    first_answer: Duration,
    answers: usize,
}

async fn send(http: reqwest::Client, url: String, subscriber: String, text: &str) -> Value {
    let response = http
        .post(url)
        .bearer_auth(SECRET)
        .json(&json!({"subscriber_id": subscriber, "text": text}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    response.json().await.unwrap()
}

/// The three pieces from a new contact, `gap` apart.
async fn burst(http: &reqwest::Client, url: &str, subscriber: String, gap: Duration) -> Burst {
    let started = Instant::now();
    let mut requests = Vec::new();
    for (i, piece) in PIECES.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(gap).await;
        }
        let request = send(http.clone(), url.to_owned(), subscriber.clone(), piece);
        requests.push(tokio::spawn(async move {
            let body = request.await;
            (body, Instant::now())
        }));
    }
    let mut first_answer = Duration::ZERO;
    let mut answers = 0;
    for (i, request) in requests.into_iter().enumerate() {
        let (body, at) = request.await.unwrap();
        let messages = body["content"]["messages"].as_array().map_or(0, Vec::len);
        answers += messages;
        if i == 0 {
            first_answer = at - started;
        }
    }
    Burst {
        first_answer,
        answers,
    }
}

async fn app(
    dir: &std::path::Path,
    name: &str,
    window_ms: u64,
    model: Arc<ScriptedModel>,
    manychat: &str,
    shutdown: &CancellationToken,
) -> String {
    let config = demo_tenant(dir, name);
    edit_json(&config.join("rules.json"), |rules| {
        lift_daily_budget(rules);
        rules["burst"] = json!({"windowMs": window_ms});
    });
    let database = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
    start_app(&config, database, manychat, model, shutdown).await
}

fn tokens(model: &ScriptedModel) -> u64 {
    let response = reply(answer());
    model
        .requests()
        .iter()
        .map(|r| {
            let usage = estimate_usage(r, &response);
            usage.input_tokens + usage.output_tokens
        })
        .sum()
}

#[tokio::main]
async fn main() {
    let rounds = env_usize("BENCH_ROUNDS", 10);
    let gap = Duration::from_millis(env_usize("BENCH_GAP_MS", 400) as u64);
    let model_time = Duration::from_millis(env_usize("BENCH_MODEL_MS", 800) as u64);
    let manychat =
        serve(Router::new().fallback(|| async { axum::Json(json!({"status": "success"})) })).await;
    let script = |calls: usize| {
        Arc::new(ScriptedModel::from_steps(
            (0..calls).map(|_| ScriptStep::ok(reply(answer())).after(model_time)),
        ))
    };
    let merged_model = script(rounds * 3);
    let separate_model = script(rounds * 3);
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let merged_url = app(
        dir.path(),
        "burst",
        1500,
        merged_model.clone(),
        &manychat,
        &shutdown,
    )
    .await;
    let separate_url = app(
        dir.path(),
        "separate",
        0,
        separate_model.clone(),
        &manychat,
        &shutdown,
    )
    .await;

    let http = reqwest::Client::new();
    let (mut merged, mut separate) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        merged.push(burst(&http, &merged_url, format!("{}", 810_000 + round), gap).await);
        separate.push(burst(&http, &separate_url, format!("{}", 820_000 + round), gap).await);
    }
    let p50 = |bursts: &[Burst]| {
        let mut times: Vec<Duration> = bursts.iter().map(|b| b.first_answer).collect();
        times.sort();
        times[times.len() / 2].as_secs_f64() * 1000.0
    };
    let answers = |bursts: &[Burst]| bursts.iter().map(|b| b.answers).sum::<usize>() as f64;
    let per = |total: f64| total / rounds as f64;
    println!(
        "rounds={rounds}, three pieces {} ms apart, model answering in {} ms",
        gap.as_millis(),
        model_time.as_millis()
    );
    println!("| per burst | model calls | tokens | answers | first piece answered (p50) |");
    println!("|---|---:|---:|---:|---:|");
    for (name, model, bursts) in [
        ("windowMs 1500", &merged_model, &merged),
        ("windowMs 0 (three messages)", &separate_model, &separate),
    ] {
        println!(
            "| {name} | {:.1} | {:.0} | {:.1} | {:.0} ms |",
            per(model.calls() as f64),
            per(tokens(model) as f64),
            per(answers(bursts)),
            p50(bursts)
        );
    }
    println!(
        "the window delays the first piece's answer by {:.0} ms (p50)",
        p50(&merged) - p50(&separate)
    );
    shutdown.cancel();
}
