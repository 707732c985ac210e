//! `manychat-agent report --weeks 4` over a large SQLite store (issue 18, Performance), measured,
//! not asserted.
//!
//! Seeds a real SQLite file (migrated by the store itself) with `BENCH_TURNS` turns (1,000,000
//! by default: half contacts' messages, half agent turns with the outcome mix, usage, latency and
//! an action record on one agent turn in three of a busy tenant), spread evenly over the last
//! four ISO weeks (`BENCH_SPAN_WEEKS`: a longer history, of which the report reads the last
//! four) and 50,000 contacts, then times `report::build` for `--weeks 4` the way the
//! command runs it (same store, same queries), cold (first run after opening) and warm (best of
//! three), and prints the query plan of each statement for docs/PERFORMANCE.md.
//!
//! Run: `cargo bench --bench report` (optionally `BENCH_TURNS=1000000 BENCH_CONTACTS=50000`;
//! `BENCH_SPAN_WEEKS=52`; `BENCH_WITHOUT_INDEX=1` drops the report's index first, for comparison).

use std::time::Instant;

use chrono::{Duration, Utc};
use manychat_agent::report::{build, iso_week, render};
use rusqlite::{Connection, params};

mod common;
use common::env_usize;

const OUTCOMES: [&str; 6] = [
    "answered_inline",
    "answered_inline",
    "answered_inline",
    "deferred",
    "escalated_model",
    "escalated_precheck",
];

fn seed(path: &std::path::Path, turns: usize, contacts: usize, span_weeks: u32) {
    let mut conn = Connection::open(path).expect("open the bench database");
    let now = Utc::now();
    let (monday, _) = iso_week(now, span_weeks - 1);
    let start = monday
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis();
    let span = now.timestamp_millis() - start;
    let tx = conn.transaction().unwrap();
    {
        let mut conversation = tx
            .prepare(
                "INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) \
                 VALUES (?1, ?2, 'whatsapp', ?3, ?3)",
            )
            .unwrap();
        for c in 0..contacts {
            conversation
                .execute(params![
                    format!("00000000-0000-4000-8000-{c:012}"),
                    (100_000 + c).to_string(),
                    start
                ])
                .unwrap();
        }
        let mut turn = tx
            .prepare(
                "INSERT INTO turns (id, seq, conversation_id, role, text, outcome, model, bound, \
                 actions, reads, input_tokens, output_tokens, cached_tokens, cost_usd, \
                 latency_ms, created_at, escalation_reason) \
                 VALUES (?1, ?1, ?2, ?3, '', ?4, ?5, 1, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12, ?13)",
            )
            .unwrap();
        for i in 0..turns {
            let at = start + (span as i128 * i as i128 / turns as i128) as i64;
            let contact = (i / 2 * 7919) % contacts;
            let id = format!("00000000-0000-4000-8000-{contact:012}");
            let pair = i / 2;
            if i % 2 == 0 {
                turn.execute(params![
                    i as i64 + 1,
                    id,
                    "user",
                    None::<String>,
                    None::<String>,
                    None::<String>,
                    0,
                    0,
                    0,
                    0.0,
                    0,
                    at,
                    None::<String>
                ])
                .unwrap();
                continue;
            }
            let outcome = OUTCOMES[pair % OUTCOMES.len()];
            let model = (outcome != "escalated_precheck").then_some("mock:demo");
            let reason = match outcome {
                "escalated_model" => Some("low_confidence"),
                "escalated_precheck" => Some("escalation_keyword"),
                _ => None,
            };
            let actions = (pair % 3 == 0).then_some(
                r#"[{"tool":"add_tag","id":"lead","status":"performed"},{"tool":"send_flow","id":"brochure","status":"failed","error":"x"}]"#,
            );
            let latency = 800 + (pair * 37 % 4000) as i64;
            turn.execute(params![
                i as i64 + 1,
                id,
                "agent",
                outcome,
                model,
                actions,
                (pair % 3) as i64,
                1200,
                80,
                0.0021,
                latency,
                at,
                reason
            ])
            .unwrap();
        }
    }
    tx.commit().unwrap();
}

#[tokio::main]
async fn main() {
    let turns = env_usize("BENCH_TURNS", 1_000_000);
    let contacts = env_usize("BENCH_CONTACTS", 50_000);
    let span_weeks = env_usize("BENCH_SPAN_WEEKS", 4).max(1) as u32;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let url = format!("sqlite://{}", path.display());
    // The store creates and migrates the file (indexes included), then the seed fills it.
    drop(
        manychat_agent::store::connect(&url)
            .await
            .expect("create the store"),
    );
    let seeding = Instant::now();
    seed(&path, turns, contacts, span_weeks);
    if std::env::var("BENCH_WITHOUT_INDEX").is_ok_and(|v| v == "1") {
        // For comparison only: the report without migration 0012's index.
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP INDEX turns_created")
            .unwrap();
        println!("BENCH_WITHOUT_INDEX=1: turns_created dropped");
    }
    println!(
        "seeded {turns} turns over {contacts} contacts in the last {span_weeks} ISO weeks in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );

    let store = manychat_agent::store::connect(&url)
        .await
        .expect("open the store");
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..4 {
        let started = Instant::now();
        let report = build(store.as_ref(), 4, Utc::now()).await.expect("report");
        runs.push(started.elapsed().as_secs_f64());
        last = Some(report);
    }
    let report = last.unwrap();
    let counted: i64 = report.weeks.iter().map(|w| w.recorded_turns).sum();
    if span_weeks <= 4 {
        assert_eq!(counted, turns as i64, "every seeded turn is in the 4 weeks");
    }
    println!("turns in the report's 4 weeks: {counted}");
    let started = Instant::now();
    let table = render::table(&report);
    let rendering = started.elapsed().as_secs_f64();
    let warm = runs[1..].iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "report --weeks 4: cold {:.3} s, warm (best of 3) {warm:.3} s; table rendered in {:.1} ms",
        runs[0],
        rendering * 1000.0
    );
    println!("{}", table.lines().take(12).collect::<Vec<_>>().join("\n"));

    let conn = Connection::open(&path).unwrap();
    let from = (Utc::now() - Duration::weeks(1)).timestamp_millis();
    let until = Utc::now().timestamp_millis();
    for (name, sql) in [
        (
            "new contacts",
            "SELECT COUNT(*) FROM (SELECT DISTINCT conversation_id FROM turns WHERE created_at >= ?1 AND created_at < ?2) w WHERE NOT EXISTS (SELECT 1 FROM turns e WHERE e.conversation_id = w.conversation_id AND e.created_at < ?1)",
        ),
        (
            "turn groups",
            "SELECT created_at / 86400000 AS day, role, outcome, escalation_reason, model IS NOT NULL AS m, COUNT(*) FROM turns WHERE created_at >= ?1 AND created_at < ?2 GROUP BY day, role, outcome, escalation_reason, m",
        ),
        (
            "inline latencies",
            "SELECT latency_ms, COUNT(*) FROM turns WHERE created_at >= ?1 AND created_at < ?2 AND outcome = 'answered_inline' GROUP BY latency_ms",
        ),
    ] {
        let mut plan = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let steps: Vec<String> = plan
            .query_map(params![from, until], |r| r.get::<_, String>(3))
            .unwrap()
            .map(|s| s.unwrap())
            .collect();
        println!("plan, {name}: {}", steps.join(" | "));
    }
}
