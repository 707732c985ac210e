//! The outbox under a backlog (Performance), measured, not asserted.
//!
//! A backlog of replies (1,000 by default, one contact each) is queued in a real SQLite file and
//! the real outbox worker (`OutboxWorker::run`) delivers it through the real ManyChat client and
//! its shared limiter to a fake ManyChat on loopback that answers every call after a short
//! latency. While the backlog drains, a fresh contact's reply is queued every few seconds.
//! Prints, for docs/PERFORMANCE.md:
//! - the share of the ManyChat budget (10 requests/s) used from the first request to the last,
//!   and the most requests in any 1-second window (after the first second, which the limiter's
//!   burst of 5 may fill to 14);
//! - each fresh contact's wait (queued → its trigger reached ManyChat) beside the least it could
//!   be under first-in-first-out delivery at 10/s: the requests still owed to the rows queued
//!   ahead of it, divided by 10. The ratio is what the worker's scheduling adds.
//!
//! Real time, not tokio's paused clock: with a paused clock tokio jumps to the next timer
//! whenever every task waits for the database thread or a socket, which would move time on
//! while nothing is waited for; on the real clock each wait is what it is. The run therefore
//! lasts as long as the backlog takes at 10/s (about 200 s for 1,000 one-message replies).
//!
//! Run: `cargo bench --bench outbox_backlog` (optionally, with their defaults,
//! `BENCH_BACKLOG=1000 BENCH_MESSAGES=1 BENCH_FRESH=20 BENCH_LATENCY_MS=20`; `BENCH_MESSAGES`
//! is the messages per reply, paced `MANYCHAT_REPLY_GAP_MS` = 2000 apart).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::Uri;
use manychat_agent::clock::Clock;
use manychat_agent::ids::{Secret, SubscriberId};
use manychat_agent::manychat::{ManyChatClient, ManyChatLimiter};
use manychat_agent::metrics::Metrics;
use manychat_agent::outbox::{OutboxWorker, WorkerSettings};
use manychat_agent::store::{NewOutboxRow, OutboxKind, OutboxStatus, Store};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::{env_usize, run, serve};

/// ManyChat's budget, requests per second.
const BUDGET_PER_SECOND: f64 = 10.0;
/// Fresh contacts' subscriber ids start here; the backlog's start at 1.
const FRESH_BASE: u64 = 900_000;

/// One request the fake ManyChat received.
#[derive(Clone, Copy)]
struct Received {
    at: Instant,
    flow: bool,
    subscriber: u64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A fake ManyChat that records every request and answers success after `latency`.
async fn fake_manychat(latency: Duration, log: Arc<Mutex<Vec<Received>>>) -> String {
    let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
        let log = log.clone();
        async move {
            let at = Instant::now();
            let subscriber = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|b| b["subscriber_id"].as_u64())
                .unwrap_or(0);
            log.lock().unwrap().push(Received {
                at,
                flow: uri.path() == "/fb/sending/sendFlow",
                subscriber,
            });
            tokio::time::sleep(latency).await;
            axum::Json(json!({"status": "success"}))
        }
    });
    serve(app).await
}

async fn queue_reply(store: &dyn Store, subscriber: u64, messages: usize) {
    let id = SubscriberId::parse(&subscriber.to_string()).unwrap();
    let now = chrono::Utc::now();
    let conversation = store.conversation_for(&id, "whatsapp", now).await.unwrap();
    let texts: Vec<String> = (1..=messages)
        .map(|m| format!("Invented reply {m}"))
        .collect();
    store
        .enqueue(&NewOutboxRow::of(
            &conversation,
            OutboxKind::Reply,
            json!({"messages": texts, "actions": [], "turnId": null}),
            now,
        ))
        .await
        .unwrap();
}

fn main() {
    run(async {
        let backlog = env_usize("BENCH_BACKLOG", 1000);
        let messages = env_usize("BENCH_MESSAGES", 1).max(1);
        let fresh = env_usize("BENCH_FRESH", 20);
        let latency = Duration::from_millis(env_usize("BENCH_LATENCY_MS", 20) as u64);
        let requests_per_row = 2 * messages;

        let log = Arc::new(Mutex::new(Vec::<Received>::new()));
        let base = fake_manychat(latency, log.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("agent.db").display());
        let store = manychat_agent::store::connect(&url).await.unwrap();
        for n in 1..=backlog as u64 {
            queue_reply(store.as_ref(), n, messages).await;
        }
        println!(
            "backlog: {backlog} replies of {messages} message(s) ({} requests); \
             fake ManyChat latency {} ms; {fresh} fresh contacts",
            backlog * requests_per_row,
            latency.as_millis()
        );

        let client = ManyChatClient::new(
            &base,
            &Secret::new("bench-token-0000"),
            ManyChatLimiter::new(),
        )
        .unwrap();
        let worker = OutboxWorker::new(
            store.clone(),
            client,
            Clock::system(),
            WorkerSettings::new(
                "ai_message".into(),
                "content_bench_reply".into(),
                Duration::from_millis(2000),
            ),
            Arc::new(Metrics::default()),
        );
        let shutdown = CancellationToken::new();
        let started = Instant::now();
        let running = tokio::spawn(worker.run(shutdown.clone()));

        // Fresh contacts arrive evenly over the first ~80% of the expected drain.
        let expected_drain = backlog as f64 * requests_per_row as f64 / BUDGET_PER_SECOND;
        let every = Duration::from_secs_f64(expected_drain * 0.8 / (fresh.max(1) as f64));
        // (subscriber, queued at, rows ahead still owed requests at that moment)
        let mut arrivals: Vec<(u64, Instant, usize)> = Vec::new();
        for f in 0..fresh as u64 {
            tokio::time::sleep(every).await;
            let received = log.lock().unwrap().len();
            // Requests still owed to rows queued before this one (first-in-first-out).
            let queued_before = backlog + arrivals.len();
            let owed = (queued_before * requests_per_row).saturating_sub(received);
            let subscriber = FRESH_BASE + f;
            queue_reply(store.as_ref(), subscriber, messages).await;
            arrivals.push((subscriber, Instant::now(), owed));
        }

        // Wait until every row is settled.
        let total = backlog + fresh;
        loop {
            let rows = store.outbox_rows().await.unwrap();
            let settled = rows
                .iter()
                .filter(|r| matches!(r.status, OutboxStatus::Delivered | OutboxStatus::Failed))
                .count();
            if settled == total {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        shutdown.cancel();
        running.await.unwrap();
        let elapsed = started.elapsed();

        let rows = store.outbox_rows().await.unwrap();
        let failed = rows
            .iter()
            .filter(|r| r.status == OutboxStatus::Failed)
            .count();
        let log = log.lock().unwrap().clone();
        assert_eq!(failed, 0, "every row delivered");
        assert_eq!(
            log.len(),
            total * requests_per_row,
            "each message written and triggered exactly once"
        );

        // Budget: requests over the span from the first to the last.
        let mut times: Vec<Instant> = log.iter().map(|r| r.at).collect();
        times.sort();
        let span = times
            .last()
            .unwrap()
            .duration_since(times[0])
            .as_secs_f64()
            .max(f64::EPSILON);
        // n requests at the limiter's pace span (n - 1) intervals of 100 ms.
        let rate = (times.len() - 1) as f64 / span;
        // The most requests in any window of `width` (sliding), and the same counting only
        // windows that start after the first second (the limiter's burst is spent by then).
        let most_in = |width: Duration| {
            let (mut most, mut most_later, mut start) = (0, 0, 0);
            for end in 0..times.len() {
                while times[end].duration_since(times[start]) >= width {
                    start += 1;
                }
                let in_window = end - start + 1;
                most = most.max(in_window);
                if times[start].duration_since(times[0]) >= Duration::from_secs(1) {
                    most_later = most_later.max(in_window);
                }
            }
            (most, most_later)
        };
        let (most_1s, most_1s_later) = most_in(Duration::from_secs(1));
        let (most_10s, most_10s_later) = most_in(Duration::from_secs(10));
        println!(
            "requests: {} over {:.1} s: {:.2}/s = {:.1}% of the 10/s budget; run {:.1} s",
            times.len(),
            span,
            rate,
            100.0 * rate / BUDGET_PER_SECOND,
            elapsed.as_secs_f64()
        );
        println!(
            "most requests in any 1 s window: {most_1s} ({most_1s_later} in windows after the \
             first second); in any 10 s window: {most_10s} ({most_10s_later} after the first \
             second)"
        );

        // Fresh contacts: wait to their (first) trigger, beside the FIFO least.
        let mut waits = Vec::new();
        let mut ratios = Vec::new();
        for (subscriber, queued, owed) in &arrivals {
            let reached = log
                .iter()
                .filter(|r| r.flow && r.subscriber == *subscriber)
                .map(|r| r.at)
                .min()
                .expect("the fresh reply was triggered");
            let wait = reached.duration_since(*queued).as_secs_f64();
            // Its own field write and trigger come after what is owed ahead of it.
            let least = (*owed + 2) as f64 / BUDGET_PER_SECOND;
            waits.push(wait);
            ratios.push(wait / least);
        }
        let mut sorted_waits = waits.clone();
        sorted_waits.sort_by(f64::total_cmp);
        let mut sorted_ratios = ratios.clone();
        sorted_ratios.sort_by(f64::total_cmp);
        println!(
            "fresh contact's wait behind the backlog: p50 {:.1} s, p95 {:.1} s, max {:.1} s; \
             measured / FIFO least at 10/s: p50 {:.3}, p95 {:.3}, max {:.3}",
            percentile(&sorted_waits, 50.0),
            percentile(&sorted_waits, 95.0),
            sorted_waits.last().copied().unwrap_or(f64::NAN),
            percentile(&sorted_ratios, 50.0),
            percentile(&sorted_ratios, 95.0),
            sorted_ratios.last().copied().unwrap_or(f64::NAN),
        );
    });
}
