//! `manychat-agent report` over a seeded store on both backends, run as an operator
//! runs it. Every expected number is worked out by hand from
//! `manychat_agent::store::conformance::seed_report_week` (listed turn by turn there).

use std::process::Command;

use chrono::Utc;
use manychat_agent::store::conformance::{SeededReportWeek, seed_report_week, seed_sales_week};
use serde_json::{Value, json};

use crate::helpers::{fresh_postgres_url, on_both_backends, sqlite_file_url};
use crate::selling::Backend;

/// The demo tenant's config folder: the report reads its sales ids.
fn demo_config() -> String {
    manychat_agent::config::examples::shipped_examples()
        .display()
        .to_string()
}

fn report(url: &str, args: &[&str]) -> String {
    report_with_config(url, &demo_config(), args).0
}

/// Runs the report with `CONFIG_DIR=config_dir`: stdout and stderr.
fn report_with_config(url: &str, config_dir: &str, args: &[&str]) -> (String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .arg("report")
        .args(args)
        .env_clear()
        .env("DATABASE_URL", url)
        .env("CONFIG_DIR", config_dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Seeds last ISO week (so the report's 4 weeks hold: the seed's day before in week 2, its
/// week in week 3, its day after in the current week).
/// A store on `backend` (a fresh SQLite file, or a fresh PostgreSQL schema): the SQLite file's
/// folder, kept while the test runs, and the store's URL.
async fn store_url(backend: Backend) -> (Option<tempfile::TempDir>, String) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = sqlite_file_url(dir.path());
            (Some(dir), url)
        }
        Backend::Postgres => (None, fresh_postgres_url().await),
    }
}

async fn seed(url: &str) -> (SeededReportWeek, Vec<String>) {
    let store = manychat_agent::store::connect(url).await.unwrap();
    let (monday, _) = manychat_agent::report::iso_week(Utc::now(), 1);
    let from = monday.and_hms_opt(0, 0, 0).unwrap().and_utc();
    let seeded = seed_report_week(store.as_ref(), from).await;
    let mut conversations = Vec::new();
    for subscriber in &seeded.subscribers {
        let conversation = store.conversation_by_subscriber(subscriber).await.unwrap();
        conversations.push(conversation.unwrap().id.to_string());
    }
    (seeded, conversations)
}

async fn report_numbers_match_the_hand_computed_ones(backend: Backend) {
    let (_dir, url) = &store_url(backend).await;
    let (seeded, conversations) = seed(url).await;

    let printed = report(url, &["--format", "json"]);
    let report: Value = serde_json::from_str(&printed).unwrap();
    let weeks = report["weeks"].as_array().unwrap();
    assert_eq!(weeks.len(), 4, "--weeks defaults to 4");

    // The seed's week: 4 contacts wrote, A also the day before, so 3 are new. Model-written:
    // A's and C's inline answers, B's deferred answer, B's model escalation = 4 (D's pre-model
    // escalation has no model). Deferred share 1/4 = 25 % > 20 %: flagged. Inline answer times
    // 1000 and 2000 ms: p50 = 1st of 2 = 1000, p95 = 2nd (ceil 1.9) = 2000. Reads 2+0+1+1 = 4
    // over 4 turns. Tokens (100+10)+(200+20)+(300+30)+(100+10) = 770 over 4 = 192.5. Cost
    // 0.5+0.25+0.125+0.125 = 1.0 over 4 = 0.25.
    let week = &weeks[2];
    assert_eq!(week["contacts_with_first_turn"], 3);
    assert_eq!(week["recorded_turns"], 11);
    assert_eq!(week["model_written_turns"], 4);
    assert_eq!(week["deferred_turns"], 1);
    assert_eq!(week["deferred_share"], 0.25);
    assert_eq!(week["deferred_share_flagged"], true);
    assert_eq!(week["inline_answer_ms_p50"], 1000);
    assert_eq!(week["inline_answer_ms_p95"], 2000);
    assert_eq!(week["reads_per_turn"], 1.0);
    assert_eq!(week["input_tokens"], 700);
    assert_eq!(week["output_tokens"], 70);
    assert_eq!(week["tokens_per_turn"], 192.5);
    assert_eq!(week["cost_usd"], 1.0);
    assert_eq!(week["cost_usd_per_turn"], 0.25);
    assert_eq!(
        week["turns_by_outcome"],
        json!({"answered_inline": 2, "deferred": 1, "escalated_model": 1, "escalated_precheck": 1})
    );
    assert_eq!(
        week["escalations_by_reason"],
        json!({"abort": 1, "escalation_keyword": 1, "low_confidence": 1})
    );
    // Failed, then dead-lettered, then the rest by count (ties by tool).
    assert_eq!(
        week["actions"],
        json!([
            {"tool": "send_flow", "status": "failed", "count": 1},
            {"tool": "send_flow", "status": "dead_lettered", "count": 1},
            {"tool": "add_tag", "status": "performed", "count": 1},
            {"tool": "write_note", "status": "performed", "count": 1},
        ])
    );
    // What it cost: A, B, C and D had turns in the week (4 conversations, 1.0 USD); none
    // reached link_sent; B (low_confidence), C (abort) and D (keyword) were handed to a
    // person, costing 0.375 + 0.125 + 0 = 0.5 over 3. No token was served from a cache.
    assert_eq!(
        week["cost"],
        json!({
            "currency": "USD",
            "conversations": 4,
            "cost_usd": 1.0,
            "cost_per_conversation_usd": 0.25,
            "sales": 0,
            "cost_per_sale_usd": null,
            "spend_per_sale_usd": null,
            "handed_off_conversations": 3,
            "cost_per_handoff_usd": 0.5 / 3.0,
            "input_tokens": 700,
            "cached_tokens": 0,
            "output_tokens": 70,
            "cached_share": 0.0,
        })
    );
    // Per day: Monday A (110 tokens, 0.5), Tuesday B twice (550, 0.375), Wednesday C (110,
    // 0.125; D's pre-model escalation cost nothing).
    let days: Vec<(i64, i64, f64)> = week["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["model_written_turns"].as_i64().unwrap(),
                d["input_tokens"].as_i64().unwrap() + d["output_tokens"].as_i64().unwrap(),
                d["cost_usd"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(days, vec![(1, 110, 0.5), (2, 550, 0.375), (1, 110, 0.125)]);

    // The week before holds A's first message only; the current week D's later answer.
    assert_eq!(weeks[1]["contacts_with_first_turn"], 1);
    assert_eq!(weeks[1]["deferred_share"], Value::Null);
    assert_eq!(weeks[3]["contacts_with_first_turn"], 0);
    assert_eq!(weeks[3]["turns_by_outcome"], json!({"answered_inline": 1}));
    assert_eq!(weeks[0]["recorded_turns"], 0);
    let pending: Vec<&str> = report["not_measured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["measure"].as_str().unwrap())
        .collect();
    assert_eq!(
        pending,
        vec!["model steps per turn"],
        "the demo configures every sales measure"
    );

    let table = report_table_and_html(url);
    // The owner's words: the deferred share flagged, waits in seconds.
    let row = |name: &str, value: &str| format!("  {name:<50} {value}\n");
    for line in [
        row("answered a moment later", "25.0 %  above 20.0 %: too slow"),
        row("longest usual wait", "2.0 s"),
        row("typical wait", "1.0 s"),
    ] {
        assert!(table[0].contains(&line), "{line:?} in\n{}", table[0]);
    }
    assert!(table[1].contains("<svg"), "charts are inline SVG");

    // Aggregates only: no subscriber, conversation, text, note or action error, in any format.
    for output in [printed, table[0].clone(), table[1].clone()] {
        for subscriber in &seeded.subscribers {
            assert!(
                !output.contains(subscriber.as_str()),
                "a subscriber id leaked"
            );
        }
        for conversation in &conversations {
            assert!(
                !output.contains(conversation.as_str()),
                "a conversation id leaked"
            );
        }
        for text in &seeded.private_text {
            assert!(!output.contains(text), "private text leaked");
        }
        assert!(!output.contains("Invented"), "private text leaked");
    }
}

/// The table and the HTML page (written with `--out`).
fn report_table_and_html(url: &str) -> [String; 2] {
    let table = report(url, &["--weeks", "4"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    let printed = report(url, &["--format", "html", "--out", path.to_str().unwrap()]);
    assert!(printed.contains("report written to"), "{printed}");
    let html = std::fs::read_to_string(&path).unwrap();
    // Self-contained: no script, nothing fetched.
    assert!(!html.contains("<script"), "no script");
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "no external asset"
    );
    [table, html]
}

#[tokio::test]
async fn an_empty_store_says_no_turns_yet_in_every_format() {
    let (_dir, url) = store_url(Backend::Sqlite).await;
    manychat_agent::store::connect(&url).await.unwrap();
    let table = report(&url, &[]);
    assert!(
        table
            .trim()
            .ends_with("No conversations yet: nothing was recorded in the last 4 week(s)."),
        "{table}"
    );
    let json: Value = serde_json::from_str(&report(&url, &["--format", "json"])).unwrap();
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["business"], "Riverside Clay Studio");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .starts_with("no turns yet")
    );
    let html = report(&url, &["--format", "html"]);
    assert!(html.contains("No conversations yet"), "{html}");
    // Every chart is drawn, empty, with its sentence: never a broken page.
    assert_eq!(
        html.matches(
            "<figcaption>Nothing to draw yet: the chart fills in as contacts write.</figcaption>"
        )
        .count(),
        4,
        "{html}"
    );

    // No week is no report: refused, saying why.
    let output = Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .args(["report", "--weeks", "0"])
        .env_clear()
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--weeks must be at least 1"));
}

#[tokio::test]
async fn a_report_is_titled_with_the_business_and_names_the_version_that_made_it() {
    let (_dir, url) = store_url(Backend::Sqlite).await;
    manychat_agent::store::connect(&url).await.unwrap();
    let version = format!("manychat-agent {}", env!("CARGO_PKG_VERSION"));
    let table = report(&url, &[]);
    assert!(
        table.starts_with("Riverside Clay Studio: how the sales assistant did\n"),
        "{table}"
    );
    assert!(table.contains(&version), "{table}");
    let html = report(&url, &["--format", "html"]);
    assert!(
        html.contains("<title>Riverside Clay Studio: how the sales assistant did</title>"),
        "{html}"
    );
    assert!(html.contains(&version), "{html}");
}

/// The HTML page names no measure or outcome by its stored name, and explains every measure it
/// shows in one sentence.
fn html_reads_for_a_business_owner(html: &str) {
    for stored in [
        "bypass rate",
        "deferred share",
        "prospect share",
        "link-sent rate",
        "model turns",
        "answered_inline",
        "escalated_model",
        "escalated_precheck",
        "send_flow",
        "performed",
    ] {
        assert!(!html.contains(stored), "{stored:?} in the page");
    }
    let en = manychat_agent::config::Language::En;
    for measure in manychat_agent::words::ALL_MEASURES {
        let (name, means) = (measure.name(en), measure.means(en));
        assert!(
            html.contains(&format!("<dt>{name}</dt><dd>{means}</dd>")),
            "{name} is explained"
        );
    }
    assert!(html.contains("<td>answered at once</td>"), "{html}");
}

/// The sales measures of a seeded week, worked out by hand
/// in `seed_sales_week`'s comment, as the command prints them with the demo tenant's config.
async fn sales_measures_match_the_hand_computed_ones(backend: Backend) {
    let (_dir, url) = &store_url(backend).await;
    let store = manychat_agent::store::connect(url).await.unwrap();
    let (monday, _) = manychat_agent::report::iso_week(Utc::now(), 1);
    let from = monday.and_hms_opt(0, 0, 0).unwrap().and_utc();
    let subscribers = seed_sales_week(store.as_ref(), from).await;

    let report: Value = serde_json::from_str(&report(url, &["--format", "json"])).unwrap();
    let week = &report["weeks"][2];
    assert_eq!(week["contacts_with_first_turn"], 4, "P, Q, S and T");
    assert_eq!(
        week["sales"],
        json!({
            "prospects": 3,
            "prospect_share": 0.75,
            "offered": 3,
            "prepared": 2,
            "link_sent": 2,
            "link_sent_rate": 0.5,
            "prospect_link_sent_rate": 2.0 / 3.0,
            "links_sent": 3,
            "links_contact_asked": 1,
            "bypass_rate": 1.0 / 3.0,
            "nudges_sent": 3,
            "nudges_replied": 2,
            "nudge_reply_rate": 2.0 / 3.0,
            // The seed's T answers its window-closing flow too.
            "window_closings_sent": 1,
            "window_closings_replied": 1,
            "window_closing_reply_rate": 1.0,
        })
    );
    // The week after holds P's answer only: no sales, no nudge.
    assert_eq!(report["weeks"][3]["sales"]["prospects"], 0);
    assert_eq!(report["weeks"][3]["sales"]["nudge_reply_rate"], Value::Null);

    let [table, html] = report_table_and_html(url);
    let row = |name: &str, value: &str| format!("  {name:<50} {value}\n");
    for line in [
        row("new contacts", "4"),
        row("interested in buying", "3"),
        row("share interested", "75.0 % (3/4)"),
        row("shown an offer", "3"),
        row("ready to pay", "2"),
        row("sent the payment link", "2"),
        row("got the link, of new contacts", "50.0 % (2/4)"),
        row("got the link, of the interested", "66.7 % (2/3)"),
        row("links sent early on request", "33.3 % (1/3)"),
        row("follow-ups answered", "66.7 % (2/3)"),
        row("last words answered", "100.0 % (1/1)"),
    ] {
        assert!(table.contains(&line), "{line:?} in\n{table}");
    }
    assert!(html.contains("<h2>Sales</h2>"), "the sales table");
    assert!(
        html.contains("<figure><h3>From first message to payment link, week of"),
        "the funnel chart"
    );
    html_reads_for_a_business_owner(&html);
    assert!(
        !html.contains(">not set up"),
        "every stage is set up in the demo"
    );
    for subscriber in &subscribers {
        assert!(!table.contains(subscriber.as_str()) && !html.contains(subscriber.as_str()));
    }
    assert!(!table.contains("Invented") && !html.contains("Invented"));
}

#[tokio::test]
async fn without_a_loadable_config_the_sales_measures_are_listed_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_file_url(dir.path());
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let (monday, _) = manychat_agent::report::iso_week(Utc::now(), 1);
    seed_sales_week(
        store.as_ref(),
        monday.and_hms_opt(0, 0, 0).unwrap().and_utc(),
    )
    .await;
    let missing = dir.path().join("no-config");
    let (printed, stderr) =
        report_with_config(&url, missing.to_str().unwrap(), &["--format", "json"]);
    assert!(
        stderr.contains("did not load") && stderr.contains("no sales measures"),
        "{stderr}"
    );
    let report: Value = serde_json::from_str(&printed).unwrap();
    let week = &report["weeks"][2];
    assert_eq!(week["sales"]["prospects"], Value::Null);
    assert_eq!(week["sales"]["link_sent_rate"], Value::Null);
    assert_eq!(week["sales"]["nudges_sent"], 3, "nudges need no config");
    assert!(
        report["not_measured"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["measure"] == "sales measures")
    );
}

// --- the handoff that holds -------------------------------------------------------------

/// Last ISO week: two handoffs of one contact, each released (after 2 h by an operator, after
/// 5 h by the tag's removal), one message held in between, and a third handoff still held.
async fn seed_handoffs(url: &str) {
    use manychat_agent::store::NewTurn;
    let store = manychat_agent::store::connect(url).await.unwrap();
    let (monday, _) = manychat_agent::report::iso_week(Utc::now(), 1);
    let at =
        |hour: i64| monday.and_hms_opt(0, 0, 0).unwrap().and_utc() + chrono::Duration::hours(hour);
    let subscriber = manychat_agent::ids::SubscriberId::parse("5550777").unwrap();
    let id = store
        .conversation_for(&subscriber, "whatsapp", at(0))
        .await
        .unwrap()
        .id;
    let handoff = |hour| NewTurn {
        escalation_reason: Some("escalation_keyword".into()),
        ..NewTurn::agent(id, "Invented copy", "escalated_precheck", false, at(hour))
    };
    // Each turn, the hour it escalated at, and the hour and reason its hold was released.
    for (turn, escalated, released) in [
        (handoff(1), Some(1), Some((3, "released"))),
        (NewTurn::agent(id, "", "held", false, at(2)), None, None),
        (handoff(10), Some(10), Some((15, "tag_removed"))),
        (handoff(30), Some(30), None),
    ] {
        store.record_turn(&turn).await.unwrap();
        if let Some(hour) = escalated {
            store.set_escalated(id, at(hour)).await.unwrap();
        }
        if let (Some(hour), Some((until, reason))) = (escalated, released) {
            assert!(
                store
                    .release_hold(id, at(hour), at(until), reason)
                    .await
                    .unwrap(),
                "released at hour {until}: {reason}"
            );
        }
    }
}

async fn handoff_report_counts_handoffs_releases_hours_and_held_messages(backend: Backend) {
    let (_dir, url) = &store_url(backend).await;
    seed_handoffs(url).await;
    let report: Value = serde_json::from_str(&report(url, &["--format", "json"])).unwrap();
    let last_week = &report["weeks"][2]["handoffs"];
    assert_eq!(
        last_week,
        &json!({
            "handoffs": 3,
            "releases_by_reason": {"hold_expired": 0, "released": 1, "tag_removed": 1},
            "median_hours_with_a_person": 3.5,
            "messages_held": 1
        }),
        "{report}"
    );
    let [table, html] = report_table_and_html(url);
    assert!(table.contains("hours with a person"), "{table}");
    assert!(html.contains("When a person took over"), "{html}");
    assert!(html.contains("<td>3.5 h</td>"), "{html}");
}

// --- what a conversation, a sale and a handoff cost ---------------------------------------

/// `seed_cost_week`'s week, worked out by hand in its comment, as the command prints it in
/// every format: a sale is a conversation that reached `link_sent` in the week.
async fn report_cost_per_sale_counts_conversations_that_reached_link_sent(backend: Backend) {
    let (_dir, url) = &store_url(backend).await;
    let store = manychat_agent::store::connect(url).await.unwrap();
    let (monday, _) = manychat_agent::report::iso_week(Utc::now(), 1);
    let from = monday.and_hms_opt(0, 0, 0).unwrap().and_utc();
    let subscribers =
        manychat_agent::store::conformance::seed_cost_week(store.as_ref(), from).await;

    let report: Value = serde_json::from_str(&report(url, &["--format", "json"])).unwrap();
    assert_eq!(
        report["weeks"][2]["cost"],
        json!({
            "currency": "USD",
            "conversations": 4,
            "cost_usd": 1.0,
            "cost_per_conversation_usd": 0.25,
            // P and S: 0.4375 between them; the week's 1.0 over them is 0.5 a sale.
            "sales": 2,
            "cost_per_sale_usd": 0.21875,
            "spend_per_sale_usd": 0.5,
            // R and S: 0.125 between them.
            "handed_off_conversations": 2,
            "cost_per_handoff_usd": 0.0625,
            "input_tokens": 4600,
            "cached_tokens": 1900,
            "output_tokens": 270,
            "cached_share": 1900.0 / 4600.0,
        }),
        "{report}"
    );
    // The week after: P's last turn, a sale of its own.
    assert_eq!(report["weeks"][3]["cost"]["sales"], 1);
    assert_eq!(report["weeks"][3]["cost"]["cost_per_sale_usd"], 8.0);

    let [table, html] = report_table_and_html(url);
    let row = |name: &str, value: &str| format!("  {name:<50} {value}\n");
    for line in [
        "  -- What the AI model cost (US dollars) --\n".to_owned(),
        row("conversations", "4"),
        row("sales (payment link sent)", "2"),
        row("AI model cost per conversation", "US$ 0.25"),
        row("AI model cost per sale", "US$ 0.22"),
        row("AI model spend per sale", "US$ 0.50"),
        row("AI model cost per handoff", "US$ 0.0625"),
        row("text read again", "41.3 %"),
    ] {
        assert!(table.contains(&line), "{line:?} in\n{table}");
    }
    assert!(
        html.contains("<h2>What the AI model cost (US dollars)</h2>"),
        "{html}"
    );
    assert!(
        html.contains(
            "<td>4</td><td>2</td><td>US$ 0.25</td><td>US$ 0.22</td><td>US$ 0.50</td>\
             <td>US$ 0.0625</td><td>41.3 %</td>"
        ),
        "{html}"
    );
    let en = manychat_agent::config::Language::En;
    for measure in manychat_agent::report::costs::WORDS {
        let (name, means) = (measure.name(en), measure.means(en));
        assert!(
            html.contains(&format!("<dt>{name}</dt><dd>{means}</dd>")),
            "{name} is explained"
        );
    }
    for subscriber in &subscribers {
        assert!(!table.contains(subscriber.as_str()) && !html.contains(subscriber.as_str()));
    }
    assert!(!table.contains("Invented") && !html.contains("Invented"));
}

on_both_backends!(
    report_cost_per_sale_counts_conversations_that_reached_link_sent,
    report_numbers_match_the_hand_computed_ones,
    sales_measures_match_the_hand_computed_ones,
    handoff_report_counts_handoffs_releases_hours_and_held_messages,
);
