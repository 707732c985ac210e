//! What a message from a contact held for a person costs, measured against a pre-model
//! escalation (an escalation keyword) of the same app in the same run, and how many ManyChat
//! requests it makes.
//!
//! The demo tenant holds a contact for 24 hours after a handoff and reads its handoff tag
//! (`needs-studio-reply`) once per held message. Its contacts of two pools have written once
//! before anything is measured: the held pool with an escalation keyword (handed to a person,
//! held since), the other with a plain question (answered by the model). Then, one message at a
//! time and alternated: a keyword escalation from a contact of the second pool (each contact
//! once), and a message from a held contact (each several times). A message every
//! `BENCH_GAP_MS` (200 ms), so that the handoffs' and the tag reads' requests stay under
//! ManyChat's 10 per second and no request waits for the limiter. Measured per message: the
//! answer time, and the process's CPU time (the client and the fake ManyChat included) over the
//! message's own gap, so that work done after the response (the escalation's handoff) counts
//! against it. The fake ManyChat counts every request per contact: a held contact's tag reads
//! must equal its messages.
//!
//! Run: `cargo bench --bench held` (optionally `BENCH_PAIRS=60 BENCH_GAP_MS=200`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use manychat_agent::model::mock::ScriptedModel;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::{SECRET, env_usize, run, serve};

/// What the fake ManyChat received: (path, subscriber) per request.
type Requests = Arc<Mutex<Vec<(String, String)>>>;

const TAG: &str = "needs-studio-reply";

fn answer() -> String {
    json!({"messages": ["Classes run on weekday evenings."], "escalate": false,
        "escalation_reason": null, "confidence": 0.9, "closing_question": null})
    .to_string()
}

/// The subscriber a request is about: getInfo's query, or a write's body.
fn subscriber_of(uri: &str, body: &[u8]) -> String {
    if let Some(query) = uri.split_once('?').map(|(_, q)| q) {
        for pair in query.split('&') {
            if let Some(id) = pair.strip_prefix("subscriber_id=") {
                return id.to_owned();
            }
        }
    }
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| match &b["subscriber_id"] {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_default()
}

async fn fake_manychat(
    State(requests): State<Requests>,
    uri: Uri,
    body: Bytes,
) -> axum::Json<Value> {
    let uri = uri.to_string();
    let path = uri.split('?').next().unwrap_or("").to_owned();
    let subscriber = subscriber_of(&uri, &body);
    requests
        .lock()
        .unwrap()
        .push((path.clone(), subscriber.clone()));
    if path.ends_with("/getInfo") {
        // The contact still carries the handoff tag: it stays held.
        return axum::Json(json!({"status": "success", "data": {"id": subscriber,
            "tags": [{"id": 1, "name": TAG}], "custom_fields": []}}));
    }
    axum::Json(json!({"status": "success"}))
}

/// CPU time this process has used so far, in nanoseconds (the sum of its threads' run times,
/// /proc/self/task/*/schedstat).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

async fn send(client: &reqwest::Client, url: &str, subscriber: usize, text: &str) -> Value {
    let response = client
        .post(url)
        .bearer_auth(SECRET)
        .header(
            "x-forwarded-for",
            format!("10.9.{}.{}", (subscriber >> 8) & 255, subscriber & 255),
        )
        .json(&json!({"subscriber_id": subscriber.to_string(), "text": text}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

/// Waits until the fake ManyChat has received nothing for a second and a half (the first
/// contacts' token writes and the handoffs, paced by the limiter, have all gone).
async fn settle(requests: &Requests) {
    let mut seen = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = requests.lock().unwrap().len();
        if now == seen {
            return;
        }
        seen = now;
    }
}

fn main() {
    run(async {
        let pairs = env_usize("BENCH_PAIRS", 60);
        let gap = Duration::from_millis(env_usize("BENCH_GAP_MS", 200) as u64);
        let held_contacts = 20;
        let requests: Requests = Arc::default();
        let manychat = serve(
            Router::new()
                .fallback(fake_manychat)
                .with_state(requests.clone()),
        )
        .await;
        let dir = tempfile::tempdir().unwrap();
        let config = common::demo_tenant(dir.path(), "held");
        common::edit_json(&config.join("rules.json"), common::lift_daily_budget);
        let model = Arc::new(ScriptedModel::replies(
            std::iter::repeat_with(answer).take(pairs + 8),
        ));
        let shutdown = CancellationToken::new();
        let database = format!("sqlite://{}", dir.path().join("held.db").display());
        let url = common::start_app(&config, database, &manychat, model.clone(), &shutdown).await;
        let client = reqwest::Client::new();

        // The held pool: handed to a person by an escalation keyword. The other: answered once.
        let held = |n: usize| 700_000 + n % held_contacts;
        let escalating = |n: usize| 710_000 + n;
        for n in 0..held_contacts {
            let body = send(&client, &url, held(n), "I want a refund").await;
            assert!(body.to_string().contains("pass this to someone"), "{body}");
        }
        for n in 0..pairs {
            let body = send(&client, &url, escalating(n), "When are classes?").await;
            assert!(body.to_string().contains("weekday evenings"), "{body}");
        }
        settle(&requests).await;
        let model_calls = model.calls();
        let before = requests.lock().unwrap().len();

        let (mut escalation, mut held_message) = (Vec::new(), Vec::new());
        let mut next = Instant::now();
        let mut pending: Option<(bool, Duration, u64)> = None;
        let mut close = |pending: &mut Option<(bool, Duration, u64)>| {
            if let Some((is_held, latency, cpu_from)) = pending.take() {
                let cpu = Duration::from_nanos(cpu_ns() - cpu_from);
                if is_held {
                    held_message.push((latency, cpu));
                } else {
                    escalation.push((latency, cpu));
                }
            }
        };
        for n in 0..pairs * 2 {
            tokio::time::sleep_until(next.into()).await;
            next += gap;
            close(&mut pending);
            let is_held = n % 2 == 1;
            let cpu_from = cpu_ns();
            let sent = Instant::now();
            let body = if is_held {
                send(&client, &url, held(n / 2), "Are you there?").await
            } else {
                send(&client, &url, escalating(n / 2), "I want a refund").await
            };
            let latency = sent.elapsed();
            if is_held {
                // Silent: no message, the callback kept.
                assert_eq!(body["content"]["messages"], json!([]), "{body}");
            } else {
                assert!(body.to_string().contains("pass this to someone"), "{body}");
            }
            pending = Some((is_held, latency, cpu_from));
        }
        tokio::time::sleep_until(next.into()).await;
        close(&mut pending);
        settle(&requests).await;
        assert_eq!(
            model.calls(),
            model_calls,
            "no measured message reached the model"
        );

        // Requests per contact during the measured phase.
        let measured = requests.lock().unwrap()[before..].to_vec();
        let mut per_held: HashMap<String, (usize, usize)> = HashMap::new();
        for (path, subscriber) in &measured {
            let id: usize = subscriber.parse().unwrap_or(0);
            if (700_000..700_000 + held_contacts).contains(&id) {
                let entry = per_held.entry(subscriber.clone()).or_default();
                entry.0 += 1;
                if path.ends_with("/getInfo") {
                    entry.1 += 1;
                }
            }
        }
        let held_requests: usize = per_held.values().map(|v| v.0).sum();
        let tag_reads: usize = per_held.values().map(|v| v.1).sum();
        let escalation_requests = measured
            .iter()
            .filter(|(_, s)| s.parse::<usize>().is_ok_and(|id| id >= 710_000))
            .count();

        let stats = |v: &[(Duration, Duration)]| {
            let mut latency: Vec<Duration> = v.iter().map(|x| x.0).collect();
            latency.sort();
            let cpu: Duration = v.iter().map(|x| x.1).sum::<Duration>() / v.len().max(1) as u32;
            (
                latency[latency.len() / 2],
                latency[latency.len() * 95 / 100],
                cpu,
            )
        };
        let (e50, e95, ecpu) = stats(&escalation);
        let (h50, h95, hcpu) = stats(&held_message);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "pairs={pairs}, a message every {} ms; load {}",
            gap.as_millis(),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        println!(
            "keyword escalation  p50 {:.2} ms  p95 {:.2} ms  cpu {:.0} us/message  ManyChat requests {:.2}/message",
            ms(e50),
            ms(e95),
            ecpu.as_secs_f64() * 1e6,
            escalation_requests as f64 / pairs as f64
        );
        println!(
            "held message        p50 {:.2} ms  p95 {:.2} ms  cpu {:.0} us/message  ManyChat requests {:.2}/message (tag reads {tag_reads} for {pairs} messages)",
            ms(h50),
            ms(h95),
            hcpu.as_secs_f64() * 1e6,
            held_requests as f64 / pairs as f64
        );
        println!(
            "ratio held / keyword escalation: p50 {:.2}, p95 {:.2}, cpu {:.2}",
            ms(h50) / ms(e50),
            ms(h95) / ms(e95),
            hcpu.as_secs_f64() / ecpu.as_secs_f64()
        );
        assert_eq!(
            (held_requests, tag_reads),
            (pairs, pairs),
            "a held contact's message makes one ManyChat request, its tag read"
        );
        shutdown.cancel();
    });
}
