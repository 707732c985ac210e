//! What turns waiting on a slow model cost, measured, not asserted: the memory each waiting turn
//! holds, and when the acknowledgement leaves under that load.
//!
//! The app runs in a child process of its own (this binary, `BENCH_ROLE=app`) so that its
//! resident memory is the app's alone; the parent holds the load generator, a fake ManyChat that
//! accepts every call and a fake OpenAI-compatible provider. The app resolves
//! `openai:gpt-4.1-mini` against that provider as `serve` would: every step is a real request
//! body sent over HTTP.
//!
//! Each run: a warm-up of a few turns the provider answers at once, then the child's resident
//! memory at rest (the baseline); then `BENCH_WAITING` (1,000) new contacts write at once and the
//! provider holds every call for `BENCH_MODEL_MS` (12 s, past the 8 s race deadline). Sampled:
//! the resident memory while all of them wait before the deadline, and after every
//! acknowledgement has left (the agents still waiting). Per waiting turn = (waiting − at rest) /
//! turns. Each contact's connection is opened first (how long the connects took is reported:
//! a full listen queue shows as connects re-sent a second later), then every request is written
//! at once; the acknowledgement's time is each response's time from its request's writing, less
//! `RACE_DEADLINE_MS` (the deadline counts from the request's arrival): median, p95 and max.
//! `BENCH_RUNS` (3) runs, each with a fresh child.
//!
//! Run: `cargo bench --bench waiting_turns` (optionally `BENCH_WAITING=1000 BENCH_MODEL_MS=12000
//! BENCH_RUNS=3`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

mod common;
use common::{SECRET, address_of, env_usize, listed_rounds, run, serve};

/// `RACE_DEADLINE_MS` as the app runs it (the default).
const DEADLINE: Duration = Duration::from_millis(8000);

/// The provider's final answer: an AgentReply as the message content.
fn completion() -> Value {
    let reply = json!({"messages": ["Classes run on weekday evenings."], "escalate": false,
        "escalation_reason": null, "confidence": 0.9, "closing_question": null});
    json!({"id": "chatcmpl-bench", "object": "chat.completion", "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": reply.to_string(), "refusal": null}}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 1000}}})
}

fn main() {
    if std::env::var("BENCH_ROLE").is_ok_and(|r| r == "app") {
        return run(app());
    }
    run(parent());
}

/// The child: the real app on a SQLite file, its model resolved from the environment; prints its
/// route URL and runs until its parent ends it.
async fn app() {
    let dir = std::path::PathBuf::from(std::env::var("BENCH_DIR").unwrap());
    let config = common::demo_tenant(&dir, "waiting");
    common::edit_json(&config.join("rules.json"), common::lift_daily_budget);
    let shutdown = CancellationToken::new();
    let extra = [
        ("AGENT_MODEL", "openai:gpt-4.1-mini".to_owned()),
        ("OPENAI_API_KEY", "sk-bench".to_owned()),
        (
            "OPENAI_BASE_URL",
            std::env::var("BENCH_MODEL_BASE").unwrap(),
        ),
        ("MAX_TURNS_IN_FLIGHT", "4096".to_owned()),
        ("HTTP_MAX_CONNECTIONS", "8192".to_owned()),
        ("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "8192".to_owned()),
    ];
    let url = common::start_app_on(
        &config,
        format!("sqlite://{}", dir.join("waiting.db").display()),
        &std::env::var("BENCH_MANYCHAT_BASE").unwrap(),
        &extra,
        None,
        &shutdown,
        |_| {},
    )
    .await;
    println!("url={url}");
    // Ends when the parent closes its stdin (also through a wrapper such as heaptrack).
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    std::future::pending::<()>().await;
}

/// The child's resident memory in KiB (`VmRSS` of /proc/<pid>/status).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn parent() {
    let waiting = env_usize("BENCH_WAITING", 1000);
    let model_ms = env_usize("BENCH_MODEL_MS", 12_000) as u64;
    let runs = env_usize("BENCH_RUNS", 3).max(1);
    // Slow: every call is held for `model_ms`; otherwise answered at once (the warm-up).
    let slow = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let model_base = {
        let (slow, calls) = (slow.clone(), calls.clone());
        serve(Router::new().route(
            "/v1/chat/completions",
            post(move || {
                let (slow, calls) = (slow.clone(), calls.clone());
                async move {
                    calls.fetch_add(1, Ordering::Relaxed);
                    if slow.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(model_ms)).await;
                    }
                    axum::Json(completion())
                }
            }),
        ))
        .await
    };
    let manychat =
        serve(Router::new().fallback(|| async { axum::Json(json!({"status": "success"})) })).await;

    println!(
        "waiting={waiting} turns, provider holding each call {model_ms} ms, deadline {} ms; load {}",
        DEADLINE.as_millis(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let mut per_turn = Vec::new();
    let mut p95s = Vec::new();
    for run in 1..=runs {
        slow.store(false, Ordering::Relaxed);
        let dir = tempfile::tempdir().unwrap();
        // `BENCH_APP_WRAP`: a command the app runs under (e.g. `heaptrack`), for profiling.
        let wrap = std::env::var("BENCH_APP_WRAP").unwrap_or_default();
        let mut command: Vec<String> = wrap.split_whitespace().map(str::to_owned).collect();
        command.push(std::env::current_exe().unwrap().display().to_string());
        let mut child = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .env("BENCH_ROLE", "app")
            .env("BENCH_DIR", dir.path())
            .env("BENCH_MODEL_BASE", format!("{model_base}/v1"))
            .env("BENCH_MANYCHAT_BASE", &manychat)
            .stdout(std::process::Stdio::piped())
            .stdin(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the app printed its URL");
            if let Some(url) = line.strip_prefix("url=") {
                break url.to_owned();
            }
        };
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        // Warm-up: a few answered turns, so that what the first turn builds once is built.
        for n in 0..20 {
            send(&client, &url, 5_000_000 + n).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle = rss_kib(pid);

        slow.store(true, Ordering::Relaxed);
        let started = Instant::now();
        let all_connected = Arc::new(tokio::sync::Barrier::new(waiting + 1));
        let mut turns = tokio::task::JoinSet::new();
        for n in 0..waiting {
            let (url, all_connected) = (url.clone(), all_connected.clone());
            turns.spawn(async move {
                let connecting = Instant::now();
                let mut stream = connect(&url).await;
                let connected = connecting.elapsed();
                all_connected.wait().await;
                let sent = Instant::now();
                let body = write_and_read(&mut stream, &url, 6_000_000 + run * 100_000 + n).await;
                (connected, sent.elapsed(), body)
            });
        }
        all_connected.wait().await;
        // All waiting, before the deadline.
        tokio::time::sleep_until((started + DEADLINE - Duration::from_millis(1500)).into()).await;
        let before_deadline = rss_kib(pid);
        // Every response promises a reply: the acknowledgement, or silence from a turn that
        // could not start before its deadline (its response promised the reply already).
        let (mut acks, mut connects, mut silent) = (Vec::new(), Vec::new(), 0);
        while let Some(result) = turns.join_next().await {
            let (connected, elapsed, body) = result.unwrap();
            connects.push(connected);
            if body.contains("\"messages\":[]") {
                silent += 1;
            } else {
                assert!(
                    body.contains("checking the details"),
                    "the response is the acknowledgement: {body}"
                );
            }
            acks.push(elapsed.saturating_sub(DEADLINE));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after_ack = rss_kib(pid);
        acks.sort();
        connects.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let pick = |q: f64| acks[((acks.len() as f64 * q) as usize).min(acks.len() - 1)];
        let kib_per = |rss: u64| rss.saturating_sub(idle) as f64 / waiting as f64;
        println!(
            "run {run}: rss at rest {:.1} MiB; {waiting} waiting {:.1} MiB ({:.1} KiB per waiting turn); after the acknowledgements {:.1} MiB ({:.1} KiB per turn)",
            idle as f64 / 1024.0,
            before_deadline as f64 / 1024.0,
            kib_per(before_deadline),
            after_ack as f64 / 1024.0,
            kib_per(after_ack),
        );
        println!(
            "run {run}: {} acknowledgements, {silent} silent; the response at the deadline + {:.1} ms (median), + {:.1} ms (p95), + {:.1} ms (max)",
            acks.len() - silent,
            ms(pick(0.5)),
            ms(pick(0.95)),
            ms(*acks.last().unwrap())
        );
        println!(
            "run {run}: {waiting} connects opened at once took {:.1} ms (median), {:.1} ms (p95), {:.1} ms (max)",
            ms(connects[connects.len() / 2]),
            ms(connects[(connects.len() * 95 / 100).min(connects.len() - 1)]),
            ms(*connects.last().unwrap())
        );
        per_turn.push(kib_per(before_deadline).max(kib_per(after_ack)));
        p95s.push(ms(pick(0.95)));
        drop(child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
    per_turn.sort_by(f64::total_cmp);
    p95s.sort_by(f64::total_cmp);
    println!(
        "summary: {:.1} KiB per waiting turn (median of {runs} runs, the larger of the two samples; runs: {}); acknowledgement p95 deadline + {:.1} ms (median; runs: {})",
        per_turn[per_turn.len() / 2],
        listed_rounds(&per_turn, ""),
        p95s[p95s.len() / 2],
        listed_rounds(&p95s, "")
    );
    println!("provider calls: {}", calls.load(Ordering::Relaxed));
}

/// One contact message over a fresh connection; returns the response body (the warm-up).
async fn send(client: &reqwest::Client, url: &str, subscriber: usize) -> String {
    let response = client
        .post(url)
        .bearer_auth(SECRET)
        .header("x-forwarded-for", address_of(subscriber))
        .json(&message(subscriber))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.text().await.unwrap()
}

fn message(subscriber: usize) -> Value {
    json!({"subscriber_id": subscriber.to_string(), "text": "When are classes?"})
}

/// `url`'s `host:port` and path.
fn split_url(url: &str) -> (&str, &str) {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let slash = rest.find('/').unwrap_or(rest.len());
    (&rest[..slash], &rest[slash..])
}

/// A connection to the app, opened before its request is written.
async fn connect(url: &str) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(split_url(url).0)
        .await
        .unwrap()
}

/// Writes one contact message on `stream` as HTTP/1.1 (the connection closed after it) and
/// reads the whole response; returns its body.
async fn write_and_read(
    stream: &mut tokio::net::TcpStream,
    url: &str,
    subscriber: usize,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, path) = split_url(url);
    let body = message(subscriber).to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {SECRET}\r\n\
         x-forwarded-for: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        address_of(subscriber),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "{}",
        response.lines().next().unwrap_or_default()
    );
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}
