//! 031 § Measures: the sales per playbook version through the real store (both backends, by
//! the parent module's cases) at a set instant: attribution to the version of the first
//! performed funnel write at `offered` or later, the 14-day settle, the no-playbook row, the
//! before/after sentence, and `report`'s section in its three formats.

use super::*;
use crate::learning::measures::{Keys, PlaybookMeasures, READING, read};
use crate::store::learning::Review;

/// A version made and first activated `days` ago: answers its hash.
async fn live_version(store: &dyn Store, text: &str, days: i64) -> String {
    let insights = vec![text.to_owned()];
    let hash = crate::learning::playbook::content_hash(&insights);
    store
        .record_review(&Review {
            approved: Vec::new(),
            rejected: Vec::new(),
            version: Some((hash.clone(), insights)),
            at: days_ago(days + 1),
            by: "cli".to_owned(),
            ..Review::default()
        })
        .await
        .expect("review");
    let versions = store.playbook_versions().await.expect("versions");
    let id = versions
        .iter()
        .find(|v| v.content_hash == hash)
        .expect("the version")
        .id;
    store
        .activate_playbook(id, "cli", days_ago(days))
        .await
        .expect("activate");
    hash
}

/// An agent turn's action entries.
fn offered(status: &str) -> serde_json::Value {
    json!({"tool": "set_field", "id": "funnel_stage", "value": "offered", "status": status})
}
fn stage(value: &str) -> serde_json::Value {
    json!({"tool": "set_field", "id": "funnel_stage", "value": value, "status": "performed"})
}
fn link() -> serde_json::Value {
    json!({"tool": "send_flow", "id": "booking_link", "status": "performed"})
}

/// One agent turn: when, its playbook version, its action entries.
type AgentTurn<'a> = (i64, Option<&'a str>, Vec<serde_json::Value>);

/// A conversation: a bound message and a bound agent turn for each of `turns`, then a last
/// bound message `last_message` days ago.
async fn conversation(store: &dyn Store, turns: &[AgentTurn<'_>], last_message: i64) {
    let subscriber = fresh_subscriber();
    let first = turns.first().map_or(last_message, |t| t.0);
    let c = store
        .conversation_for(&subscriber, "whatsapp", days_ago(first))
        .await
        .expect("conversation");
    for (days, version, entries) in turns {
        let answer = NewTurn {
            actions: Some(json!(entries)),
            playbook_version: version.map(str::to_owned),
            ..NewTurn::agent(
                c.id,
                "Invented answer",
                "answered_inline",
                true,
                days_ago(*days) + chrono::Duration::seconds(1),
            )
        };
        exchange(store, "Invented question", answer).await;
    }
    let last = NewTurn::user(c.id, "Invented later message", true, days_ago(last_message));
    later_message(store, last).await;
}

fn keys() -> Keys {
    Keys::of(&crate::sales::sales_keys(&learning_tenant(5.0))).expect("funnel and payment link")
}

/// Seven conversations over a no-playbook period, version A (live 40 days ago) and version B
/// (live 25 days ago, active now): answers A's and B's hashes.
async fn seed_versions(store: &dyn Store) -> (String, String) {
    let a = live_version(store, "Invented tactic of version A", 40).await;
    let b = live_version(store, "Invented tactic of version B", 25).await;
    let (va, vb) = (Some(a.as_str()), Some(b.as_str()));
    // Each conversation's agent turns and its last message's day.
    let conversations: [(Vec<AgentTurn>, i64); 7] = [
        // No playbook: offered and linked; offered long ago, never linked.
        (vec![(60, None, vec![offered("performed"), link()])], 59),
        (vec![(100, None, vec![offered("performed")])], 99),
        // First offered under A, the link under B: A's.
        (
            vec![
                (35, va, vec![offered("performed")]),
                (20, vb, vec![stage("prepared"), link()]),
            ],
            20,
        ),
        // Qualifying under A, first offered under B: B's, no link.
        (
            vec![
                (38, va, vec![stage("qualifying")]),
                (22, vb, vec![offered("performed")]),
            ],
            21,
        ),
        // A refused offered write under A does not count: B's, its last message 5 days ago.
        (
            vec![
                (30, va, vec![offered("refused")]),
                (17, vb, vec![offered("performed")]),
            ],
            5,
        ),
        // B's, linked, its last message exactly 14 days ago: counted.
        (vec![(16, vb, vec![offered("performed"), link()])], 14),
        // B's, its last message 13 days ago: settling.
        (vec![(15, vb, vec![offered("performed"), link()])], 13),
    ];
    for (turns, last_message) in &conversations {
        conversation(store, turns, *last_message).await;
    }
    (a, b)
}

fn row<'a>(
    m: &'a PlaybookMeasures,
    version: Option<&str>,
) -> &'a super::super::measures::VersionMeasures {
    m.versions
        .iter()
        .find(|r| r.version.as_deref() == version)
        .expect("a row")
}

/// 031 § Measures: each conversation counts under the version of its first performed funnel
/// write at `offered` or later, once its latest bound turn is 14 days old; the no-playbook row
/// comes first; the reading says it is before/after, not controlled.
pub(super) async fn spec_031_measures_attribute_to_the_version_of_the_first_offered_write(
    store: &dyn Store,
) {
    let (a, b) = seed_versions(store).await;
    let m = read(store, &keys(), now()).await.expect("measures");
    assert_eq!(m.versions.len(), 3, "{m:?}");
    assert_eq!(m.versions[0].version, None, "no playbook first");
    let none = row(&m, None);
    assert_eq!(
        (none.conversations, none.link_sent, none.settling),
        (2, 1, 0)
    );
    assert_eq!(none.link_sent_rate, Some(0.5));
    let va = row(&m, Some(&a));
    assert_eq!((va.conversations, va.link_sent, va.settling), (1, 1, 0));
    assert_eq!(va.first_activated_at, Some(days_ago(40)));
    assert!(!va.active);
    let vb = row(&m, Some(&b));
    assert_eq!(
        (vb.conversations, vb.link_sent, vb.settling),
        (2, 1, 2),
        "two settled (one linked), two settling"
    );
    assert_eq!(vb.link_sent_rate, Some(0.5));
    assert!(vb.active);
    assert_eq!(m.versions[1].version.as_deref(), Some(a.as_str()));
    assert!(
        m.reading
            .contains("before/after reading, not a controlled experiment")
    );
    assert_eq!(m.reading, READING);
    assert_eq!(m.settle_days, 14);

    // A day later the conversation at 13 days has settled.
    let later = read(store, &keys(), now() + chrono::Duration::days(1))
        .await
        .expect("measures");
    let vb = row(&later, Some(&b));
    assert_eq!((vb.conversations, vb.link_sent, vb.settling), (3, 2, 1));

    let mut text = String::new();
    crate::report::playbooks::text(&mut text, &m);
    assert!(text.contains(READING), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line(&b[..12]),
        format!(
            "{} {} (active) 2 1 50.0 % (1/2) 2",
            &b[..12],
            days_ago(25).format("%Y-%m-%d")
        )
    );
    assert_eq!(line("no playbook"), "no playbook - 2 1 50.0 % (1/2) 0");
}

/// 031 § Measures: `report` shows the same numbers in its table, JSON and HTML.
pub(super) async fn spec_031_report_has_a_section_per_playbook_version(store: &dyn Store) {
    use crate::report::render::{Format, render};
    let (a, b) = seed_versions(store).await;
    let sales = crate::sales::sales_keys(&learning_tenant(5.0));
    let report = crate::report::build(store, 16, now(), Some(&sales))
        .await
        .expect("report");
    let m = report.playbooks.as_ref().expect("the section");
    assert_eq!(m, &read(store, &keys(), now()).await.expect("measures"));

    let en = crate::config::Language::En;
    let table = render(&report, Format::Table, en);
    let owner_reading = crate::words::text(en, crate::words::Key::PlaybookReading);
    assert!(
        table.contains("Got the payment link, per playbook version:")
            && table.contains(owner_reading),
        "{table}"
    );
    assert!(table.contains(&a[..12]) && table.contains(&b[..12]));
    assert!(!table.contains(&b[..13]), "hashes are cut to 12 characters");

    let json: serde_json::Value =
        serde_json::from_str(&render(&report, Format::Json, en)).expect("JSON");
    let versions = &json["playbooks"]["versions"];
    assert_eq!(versions[0]["version"], serde_json::Value::Null);
    assert_eq!(versions[2]["version"], b.as_str());
    assert_eq!(versions[2]["conversations"], 2);
    assert_eq!(versions[2]["link_sent"], 1);
    assert_eq!(versions[2]["link_sent_rate"], 0.5);
    assert_eq!(versions[2]["settling"], 2);
    assert_eq!(json["playbooks"]["reading"], READING);

    let html = render(&report, Format::Html, en);
    assert!(
        html.contains("<h2>Got the payment link, per playbook version</h2>"),
        "{html}"
    );
    assert!(html.contains("before/after reading, not a controlled experiment"));
    assert!(html.contains(&format!("<td>{}</td>", &b[..12])));
    assert!(html.contains("<td>50.0 % (1/2)</td>"));

    // Without a payment-link flow there is no section, and the report says why.
    let bare = crate::store::SalesKeys {
        payment_flow: None,
        ..sales
    };
    let report = crate::report::build(store, 1, now(), Some(&bare))
        .await
        .expect("report");
    assert_eq!(report.playbooks, None);
    assert!(
        report
            .not_measured
            .iter()
            .any(|p| p.measure == "link sent per playbook version")
    );
}
