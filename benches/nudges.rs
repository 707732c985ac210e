//! The nudge worker's claim (Performance), measured, not asserted: a due-time scan must
//! cost the due rows, not the table. 100,000 conversations each hold a pending nudge, of which
//! 100 are due; the claim (`Store::claim_due_nudges`, limit 100) is timed on SQLite and, when
//! `TEST_DATABASE_URL` is set, on a fresh PostgreSQL schema. Each round puts the 100 rows back
//! to pending (the upsert) and claims them again.
//!
//! Run: `[TEST_DATABASE_URL=postgres://…] cargo bench --bench nudges` (optionally
//! `BENCH_PENDING=100000 BENCH_DUE=100 BENCH_ROUNDS=20`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use manychat_agent::ids::{ConversationId, SubscriberId};
use manychat_agent::store::Store;

mod common;
use common::env_usize;

async fn fill(store: &Arc<dyn Store>, pending: usize, due: usize) -> Vec<ConversationId> {
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
    let mut due_ids = Vec::new();
    for chunk in (0..pending).collect::<Vec<_>>().chunks(500) {
        let mut set = tokio::task::JoinSet::new();
        for &i in chunk {
            let store = store.clone();
            set.spawn(async move {
                let subscriber =
                    SubscriberId::parse(&(100_000_000_000_000u64 + i as u64).to_string()).unwrap();
                let conversation = store
                    .conversation_for(&subscriber, "whatsapp", now)
                    .await
                    .unwrap();
                // The first `due` rows are due now; the rest later today.
                let at = if i < due {
                    now - chrono::Duration::minutes(1)
                } else {
                    now + chrono::Duration::minutes(60 + (i % 1000) as i64)
                };
                store
                    .schedule_nudge(conversation.id, "later_today", at, now)
                    .await
                    .unwrap();
                (i, conversation.id)
            });
        }
        for (i, id) in set.join_all().await {
            if i < due {
                due_ids.push(id);
            }
        }
    }
    due_ids
}

async fn measure(label: &str, store: Arc<dyn Store>, pending: usize, due: usize, rounds: usize) {
    let started = Instant::now();
    let due_ids = fill(&store, pending, due).await;
    let filled = started.elapsed();
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
    let mut times: Vec<Duration> = Vec::new();
    for round in 0..rounds {
        let at = now + chrono::Duration::seconds(round as i64);
        for id in &due_ids {
            store
                .schedule_nudge(*id, "later_today", at - chrono::Duration::minutes(1), at)
                .await
                .unwrap();
        }
        let start = Instant::now();
        let claimed = store.claim_due_nudges(at, due as i64).await.unwrap();
        times.push(start.elapsed());
        assert_eq!(claimed.len(), due, "every due row, and only those");
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| {label} | {pending} | {due} | {:.2} ms | {:.2} ms | {:.2} ms | {:.0} s |",
        ms(times[times.len() / 2]),
        ms(times[times.len() * 9 / 10]),
        ms(times[times.len() - 1]),
        filled.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let pending = env_usize("BENCH_PENDING", 100_000);
    let due = env_usize("BENCH_DUE", 100);
    let rounds = env_usize("BENCH_ROUNDS", 20);
    println!("| backend | pending rows | due | claim p50 | p90 | max | fill time |");
    println!("|---|---|---|---|---|---|---|");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("nudges.db").display());
    let sqlite = manychat_agent::store::connect(&url).await.unwrap();
    measure("SQLite", sqlite, pending, due, rounds).await;
    if let Ok(base) = std::env::var("TEST_DATABASE_URL") {
        let schema = manychat_agent::store::postgres::create_test_schema(&base)
            .await
            .unwrap();
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options[search_path]={schema}");
        let pg = manychat_agent::store::connect(&url).await.unwrap();
        measure("PostgreSQL", pg, pending, due, rounds).await;
    }
}
