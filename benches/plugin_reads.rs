//! What a plugin read costs a turn (Performance), measured, not asserted: with the tenant's
//! endpoint answering in 10 ms, a turn whose model calls one read tool is timed against a plain
//! turn of the same app in the same run (interleaved, so a change in the machine's speed falls
//! on both). Ours is the difference less the endpoint's 10 ms: signing, the call, checking and
//! fencing the answer, the second model step's request, and recording the read.
//!
//! The endpoint's 10 ms is a timer, which ends on a later tick of the runtime's clock (about a
//! millisecond late): the endpoint times its own answer, from its handler's start to its return,
//! and that measured time is what is taken off, per turn, not the nominal 10 ms.
//!
//! Run: `cargo bench --bench plugin_reads` (optionally `BENCH_TURNS=200`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use manychat_agent::model::mock::{ScriptedModel, call, reply, tool_calls};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod common;
use common::*;

/// How long the tenant's endpoint takes to answer.
const ENDPOINT_ANSWER: Duration = Duration::from_millis(10);
const PLUGIN_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn answer() -> String {
    json!({"messages": ["There are three seats left."], "escalate": false,
        "escalation_reason": null, "confidence": 0.9, "closing_question": null})
    .to_string()
}

async fn turn(http: &reqwest::Client, url: &str, subscriber: usize) -> Duration {
    let started = Instant::now();
    let response = http
        .post(url)
        .bearer_auth(SECRET)
        .json(&json!({"subscriber_id": (900_000 + subscriber).to_string(),
            "text": "Is there room in the wheel class?"}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body["content"]["messages"][0]["text"], "There are three seats left.",
        "every measured turn is answered by the model"
    );
    started.elapsed()
}

#[tokio::main]
async fn main() {
    let turns = env_usize("BENCH_TURNS", 200);
    let manychat =
        serve(Router::new().fallback(|| async { axum::Json(json!({"status": "success"})) })).await;
    // Each answer's own time, in the order of the reads.
    let answered: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let endpoint = {
        let answered = answered.clone();
        serve(Router::new().route(
            "/seats",
            post(move || {
                let answered = answered.clone();
                async move {
                    let started = Instant::now();
                    tokio::time::sleep(ENDPOINT_ANSWER).await;
                    let body = axum::Json(json!({"seats": 3, "next_date": "Wednesday 7pm"}));
                    answered.lock().unwrap().push(started.elapsed());
                    body
                }
            }),
        ))
        .await
    };

    let dir = tempfile::tempdir().unwrap();
    let config = demo_tenant(dir.path(), "plugins");
    edit_json(&config.join("rules.json"), lift_daily_budget);
    std::fs::write(
        config.join("plugins.json"),
        json!({"tools": [{
            "name": "seats_left", "kind": "read", "url": format!("{endpoint}/seats"),
            "secretEnv": "PLUGIN_BENCH_SECRET", "description": "Seats left in a class.",
            "parameters": {"class": {"type": "enum", "values": ["wheel_basics", "handbuilding"]}},
            "result": {"seats": {"type": "number", "integer": true, "min": 0},
                       "next_date": {"type": "text", "maxLength": 40, "optional": true}}
        }]})
        .to_string(),
    )
    .unwrap();
    // Turns alternate plain, read, plain, read… (warm-up included), so the script follows.
    let warm_up = 20;
    let mut steps = Vec::new();
    for i in 0..(turns + warm_up) {
        steps.push(Ok(reply(answer())));
        steps.push(Ok(tool_calls([call(
            format!("seats_{i}"),
            "seats_left",
            json!({"class": "wheel_basics"}),
        )])));
        steps.push(Ok(reply(answer())));
    }
    let model = Arc::new(ScriptedModel::new(steps));
    let shutdown = CancellationToken::new();
    let database = format!("sqlite://{}", dir.path().join("bench.db").display());
    let url = start_app_with(&config, database, &manychat, model, &shutdown, |o| {
        o.plugin_secrets = Some(Arc::new(|name| {
            (name == "PLUGIN_BENCH_SECRET").then(|| PLUGIN_SECRET.to_owned())
        }));
    })
    .await;

    let http = reqwest::Client::new();
    let (mut plain, mut read) = (Vec::new(), Vec::new());
    for i in 0..(turns + warm_up) {
        let p = turn(&http, &url, 2 * i).await;
        let r = turn(&http, &url, 2 * i + 1).await;
        if i >= warm_up {
            plain.push(p);
            read.push(r);
        }
    }
    let endpoint_times = answered.lock().unwrap().split_off(warm_up);
    assert_eq!(
        endpoint_times.len(),
        turns,
        "one endpoint call per read turn"
    );
    // Ours, turn by turn: the read turn less its plain neighbour less the endpoint's own answer.
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut ours: Vec<f64> = (0..turns)
        .map(|i| ms(read[i]) - ms(plain[i]) - ms(endpoint_times[i]))
        .collect();
    ours.sort_by(f64::total_cmp);
    let mut endpoint_sorted = endpoint_times.clone();
    plain.sort();
    read.sort();
    endpoint_sorted.sort();
    let p50 = |v: &[Duration]| v[v.len() / 2];
    let p90 = |v: &[Duration]| v[v.len() * 9 / 10];
    println!(
        "turns={turns} each, sequential, endpoint answering in {} ms (its own time measured)",
        ENDPOINT_ANSWER.as_millis()
    );
    println!("| turn | p50 | p90 |");
    println!("|---|---|---|");
    for (name, times) in [
        ("plain", &plain),
        ("one plugin read", &read),
        ("the endpoint's own answer", &endpoint_sorted),
    ] {
        println!(
            "| {name} | {:.2} ms | {:.2} ms |",
            ms(p50(times)),
            ms(p90(times))
        );
    }
    println!(
        "ours (read − plain − the endpoint's own time, per turn): p50 {:.2} ms, p90 {:.2} ms; \
         from the medians: {:.2} ms",
        ours[ours.len() / 2],
        ours[ours.len() * 9 / 10],
        ms(p50(&read)) - ms(p50(&plain)) - ms(p50(&endpoint_sorted))
    );
    shutdown.cancel();
}
