//! `manychat-agent report --weeks 4` over a large SQLite store (Performance), measured,
//! not asserted.
//!
//! Seeds a real SQLite file (migrated by the store itself) with `BENCH_TURNS` turns (1,000,000
//! by default: half contacts' messages, half agent turns with the outcome mix (nudges included),
//! usage, latency and an action record on one agent turn in three of a busy tenant, half of them
//! sales writes with the demo's ids), spread evenly over the last
//! four ISO weeks (`BENCH_SPAN_WEEKS`: a longer history, of which the report reads the last
//! four) and 50,000 contacts, then times `report::build` for `--weeks 4` with the demo's sales
//! ids the way the command runs it (same store, same queries), cold (first run after opening)
//! and warm (best of three), then against the same run's baseline (the four weeks read the way
//! the report read them before its action records were read once: median of 3, alternated),
//! and prints the query plan of each statement for docs/PERFORMANCE.md.
//!
//! Run: `cargo bench --bench report` (optionally `BENCH_TURNS=1000000 BENCH_CONTACTS=50000`;
//! `BENCH_SPAN_WEEKS=52`; `BENCH_WITHOUT_INDEX=1` drops the report's index first, for comparison).

use std::time::Instant;

use chrono::{Duration, Utc};
use manychat_agent::report::{build, iso_week, render};
use manychat_agent::store::conformance::demo_sales_keys;
use rusqlite::{Connection, params};

mod common;
use common::env_usize;

/// The statements a report week ran before its action records were read once (the baseline,
/// timed in the same run on the same file, on a connection of its own with the store's
/// `temp_store`): the grouped turn statements and the nudge statement (unchanged since, copied
/// here), and the actions table's and the sales counts' own passes over the week's records in
/// SQL.
const BEFORE_NEW_CONTACTS: &str = "SELECT COUNT(*) FROM \
     (SELECT DISTINCT conversation_id FROM turns WHERE created_at >= ?1 AND created_at < ?2) w \
     WHERE NOT EXISTS (SELECT 1 FROM turns e \
                       WHERE e.conversation_id = w.conversation_id AND e.created_at < ?1)";
const BEFORE_TURN_GROUPS: &str = "SELECT created_at / 86400000 AS day, role, outcome, \
     escalation_reason, model IS NOT NULL AS model_written, COUNT(*), SUM(reads), \
     SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) \
     FROM turns WHERE created_at >= ?1 AND created_at < ?2 \
     GROUP BY day, role, outcome, escalation_reason, model_written ORDER BY day";
const BEFORE_INLINE_LATENCIES: &str = "SELECT latency_ms, COUNT(*) FROM turns \
     WHERE created_at >= ?1 AND created_at < ?2 AND outcome = 'answered_inline' \
     GROUP BY latency_ms ORDER BY latency_ms";
const BEFORE_NUDGES: &str = "SELECT COUNT(*), COALESCE(SUM(EXISTS (SELECT 1 FROM turns r \
     WHERE r.conversation_id = n.conversation_id AND r.role = 'user' \
       AND r.created_at > n.created_at AND r.created_at <= n.created_at + 86400000)), 0) \
     FROM turns n WHERE n.created_at >= ?1 AND n.created_at < ?2 AND n.outcome = 'nudge_sent'";
const BEFORE_ACTIONS: &str = "SELECT json_extract(a.value, '$.tool') AS tool, \
     json_extract(a.value, '$.status') AS status, COUNT(*) \
     FROM turns t, json_each(t.actions) a \
     WHERE t.created_at >= ?1 AND t.created_at < ?2 AND t.actions IS NOT NULL \
       AND json_type(t.actions) = 'array' \
     GROUP BY tool, status ORDER BY tool, status";
const BEFORE_SALES: &str = "SELECT \
     COALESCE(SUM(p), 0), \
     COALESCE(SUM(o), 0), COALESCE(SUM(pr), 0), COALESCE(SUM(l > 0), 0), \
     COALESCE(SUM(l), 0), COALESCE(SUM(la), 0) \
     FROM (SELECT c, \
             MAX(tool = 'set_field' AND id = ?3 AND value = 'prospect') AS p, \
             MAX(tool = 'set_field' AND id = ?4 AND instr(?5, '\"' || value || '\"') > 0) AS o, \
             MAX(tool = 'set_field' AND id = ?4 AND instr(?6, '\"' || value || '\"') > 0) AS pr, \
             SUM(tool = 'send_flow' AND id = ?7) AS l, \
             SUM(tool = 'send_flow' AND id = ?7 AND asked = 1) AS la \
           FROM (SELECT t.conversation_id AS c, json_extract(a.value, '$.tool') AS tool, \
                        json_extract(a.value, '$.id') AS id, \
                        json_extract(a.value, '$.value') AS value, \
                        json_extract(a.value, '$.contactAsked') AS asked \
                 FROM turns t, json_each(t.actions) a \
                 WHERE t.created_at >= ?1 AND t.created_at < ?2 AND t.actions IS NOT NULL \
                   AND json_type(t.actions) = 'array' \
                   AND json_extract(a.value, '$.status') = 'performed' \
                   AND json_extract(a.value, '$.id') IN (?3, ?4, ?7)) \
           GROUP BY c) w";

/// One week as the report read it before (see `BEFORE_NEW_CONTACTS`): every row is read.
fn before_week(conn: &Connection, from: i64, until: i64) {
    for sql in [
        BEFORE_NEW_CONTACTS,
        BEFORE_TURN_GROUPS,
        BEFORE_INLINE_LATENCIES,
        BEFORE_NUDGES,
    ] {
        let mut statement = conn.prepare_cached(sql).unwrap();
        let mut rows = statement.query(params![from, until]).unwrap();
        while rows.next().unwrap().is_some() {}
    }
    before_passes(conn, from, until);
}

/// The baseline's two record passes for one week: (actions rows, sales counts).
fn before_passes(conn: &Connection, from: i64, until: i64) -> (usize, [i64; 6]) {
    let keys = demo_sales_keys();
    let actions = conn
        .prepare_cached(BEFORE_ACTIONS)
        .unwrap()
        .query_map(params![from, until], |r| r.get::<_, i64>(2))
        .unwrap()
        .count();
    let offered = serde_json::Value::from(keys.offered_or_later.clone()).to_string();
    let prepared = serde_json::Value::from(keys.prepared_or_later.clone()).to_string();
    let sales = conn
        .prepare_cached(BEFORE_SALES)
        .unwrap()
        .query_row(
            params![
                from,
                until,
                keys.intent_field,
                keys.funnel_field,
                offered,
                prepared,
                keys.payment_flow
            ],
            |r| {
                Ok([
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ])
            },
        )
        .unwrap();
    (actions, sales)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

const OUTCOMES: [&str; 7] = [
    "answered_inline",
    "answered_inline",
    "answered_inline",
    "deferred",
    "escalated_model",
    "escalated_precheck",
    "nudge_sent",
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
            // One record in two is a sales turn with the demo's ids (prospect, a funnel stage,
            // the payment link; `contactAsked` on one link in two), read by the sales measures.
            let actions = match pair % 6 {
                0 => Some(
                    r#"[{"tool":"add_tag","id":"lead","status":"performed"},{"tool":"send_flow","id":"brochure","status":"failed","error":"x"}]"#,
                ),
                3 if pair % 12 == 3 => Some(
                    r#"[{"tool":"set_field","id":"intent","value":"prospect","status":"performed"},{"tool":"set_field","id":"funnel_stage","value":"offered","status":"performed"},{"tool":"send_flow","id":"booking_link","status":"performed","contactAsked":true},{"tool":"set_field","id":"funnel_stage","value":"link_sent","status":"performed"}]"#,
                ),
                3 => Some(
                    r#"[{"tool":"set_field","id":"intent","value":"prospect","status":"performed"},{"tool":"set_field","id":"funnel_stage","value":"prepared","status":"performed"},{"tool":"send_flow","id":"booking_link","status":"performed"}]"#,
                ),
                _ => None,
            };
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
        let report = build(store.as_ref(), 4, Utc::now(), Some(&demo_sales_keys()))
            .await
            .expect("report");
        runs.push(started.elapsed().as_secs_f64());
        last = Some(report);
    }
    let report = last.unwrap();

    // The same run's baseline, alternated with the report: the four weeks as they were read
    // before (`before_week`), against `report::build`.
    let raw = Connection::open(&path).unwrap();
    raw.execute_batch("PRAGMA temp_store = MEMORY").unwrap();
    let weeks: Vec<_> = (0..4u32)
        .rev()
        .map(|back| {
            let (monday, _) = iso_week(Utc::now(), back);
            let from = monday.and_hms_opt(0, 0, 0).unwrap().and_utc();
            (from, from + Duration::weeks(1))
        })
        .collect();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let started = Instant::now();
        for (from, until) in &weeks {
            before_week(&raw, from.timestamp_millis(), until.timestamp_millis());
        }
        before.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        build(store.as_ref(), 4, Utc::now(), Some(&demo_sales_keys()))
            .await
            .unwrap();
        after.push(started.elapsed().as_secs_f64());
    }
    let (before, after) = (median(before), median(after));
    println!(
        "same run, median of 3 alternated: before (six statements a week) {before:.3} s, \
         report --weeks 4 now {after:.3} s, ratio {:.2}",
        after / before
    );
    let counted: i64 = report.weeks.iter().map(|w| w.recorded_turns).sum();
    if span_weeks <= 4 {
        assert_eq!(counted, turns as i64, "every seeded turn is in the 4 weeks");
    }
    println!("turns in the report's 4 weeks: {counted}");
    let started = Instant::now();
    let table = render::table(&report, manychat_agent::config::Language::En);
    let rendering = started.elapsed().as_secs_f64();
    let warm = runs[1..].iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "report --weeks 4: cold {:.3} s, warm (best of 3) {warm:.3} s; table rendered in {:.1} ms",
        runs[0],
        rendering * 1000.0
    );
    println!("{}", table.lines().take(20).collect::<Vec<_>>().join("\n"));

    // Where a week's time goes: the grouped turn statements, the sales statement with the demo's
    // ids, and the nudge statement alone (a tenant without sales ids).
    let (monday, _) = iso_week(Utc::now(), 1);
    let from = monday.and_hms_opt(0, 0, 0).unwrap().and_utc();
    let until = from + Duration::weeks(1);
    let started = Instant::now();
    let (before_actions, before_sales) =
        before_passes(&raw, from.timestamp_millis(), until.timestamp_millis());
    println!(
        "one week, before: the two SQL record passes {:.3} s ({before_actions} tool/status rows, sales {before_sales:?})",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let week = store
        .report_week(from, until, &demo_sales_keys())
        .await
        .unwrap();
    let counts = week.sales;
    println!(
        "one week, now: report_week {:.3} s (sales {counts:?}; {} conversations, {} sales)",
        started.elapsed().as_secs_f64(),
        week.costs.all.conversations,
        week.costs.sold.conversations
    );
    let started = Instant::now();
    store
        .conversation_costs(from, until, &demo_sales_keys())
        .await
        .unwrap();
    println!(
        "one week: conversation_costs alone {:.3} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        before_sales,
        [
            counts.prospects,
            counts.offered,
            counts.prepared,
            counts.link_contacts,
            counts.links_sent,
            counts.links_contact_asked
        ],
        "the one pass counts what the SQL passes counted"
    );
    for (name, keys) in [
        ("sales (demo ids)", Some(demo_sales_keys())),
        ("sales (no ids: nudges only)", None),
    ] {
        let started = Instant::now();
        store.report_aggregates(from, until).await.unwrap();
        let grouped = started.elapsed().as_secs_f64();
        let started = Instant::now();
        store
            .sales_aggregates(from, until, &keys.unwrap_or_default())
            .await
            .unwrap();
        println!(
            "one week: report_aggregates {grouped:.3} s, {name} {:.3} s",
            started.elapsed().as_secs_f64()
        );
    }

    let conn = Connection::open(&path).unwrap();
    let from = (Utc::now() - Duration::weeks(1)).timestamp_millis();
    let until = Utc::now().timestamp_millis();
    for (name, sql) in [
        ("new contacts", BEFORE_NEW_CONTACTS),
        ("turn groups", BEFORE_TURN_GROUPS),
        (
            "action records",
            "SELECT conversation_id, actions FROM turns WHERE created_at >= ?1 AND created_at < ?2 AND actions IS NOT NULL AND actions <> '[]'",
        ),
        ("inline latencies", BEFORE_INLINE_LATENCIES),
        (
            "conversation costs",
            "SELECT conversation_id, SUM(input_tokens), SUM(cached_tokens), SUM(output_tokens), SUM(cost_usd), MAX(escalation_reason IS NOT NULL) FROM turns WHERE created_at >= ?1 AND created_at < ?2 GROUP BY conversation_id",
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
