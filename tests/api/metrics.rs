//! `/metrics` through the Prometheus client, parsed by a strict OpenMetrics parser:
//! every series README.md documents is there after a turn of each kind, with the values the
//! turns imply, and no label carries contact data.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::ToolCall;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, call, reply, tool_calls};
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use serde_json::json;

use crate::helpers::*;

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

/// Every family README.md lists, without the `manychat_agent_` prefix (OpenMetrics family
/// names: a counter's samples add `_total`).
const COUNTERS: &[&str] = &[
    "turns",
    "escalations",
    "actions",
    "guardrail_violations",
    "nudges",
    "duplicate_replies",
    "window_closings",
    "variables_not_substituted",
    "outbox_delivered",
    "outbox_retried",
    "outbox_dead_lettered",
    "outbox_dead_letter_handoffs",
    "handoff_failed",
    "handoffs_without_store",
    "race_lost",
    "model_aborted",
    "load_shed",
    "unauthorized",
    "rate_limited",
    "bad_requests",
    "connections_refused",
    "connections_timed_out",
    "connections_evicted",
    "connections_accepted",
    "store_sample_failures",
    "held_messages",
    "burst_pieces_merged",
    "knowledge_retrieved",
    "knowledge_misses",
    "knowledge_embedding_failures",
    "knowledge_embedded",
    "hold_releases",
    "model_tokens",
    "model_cost_usd",
];
const HISTOGRAMS: &[&str] = &[
    "answer_duration_seconds",
    "model_call_duration_seconds",
    "manychat_request_duration_seconds",
];
const GAUGES: &[&str] = &[
    "outbox_backlog",
    "outbox_oldest_due_age_seconds",
    "budget_spent_usd",
    "budget_cap_usd",
    "budget_spent_tokens",
    "budget_cap_tokens",
    "contacts_held",
    "turns_waiting",
    "bursts_open",
    "requests_in_flight",
    "knowledge_embedding_vectors",
];

fn documented() -> Vec<(String, OpenMetricsType)> {
    let with = |names: &[&str], kind: OpenMetricsType| {
        names
            .iter()
            .map(move |n| (format!("manychat_agent_{n}"), kind))
            .collect::<Vec<_>>()
    };
    [
        with(COUNTERS, OpenMetricsType::Counter),
        with(HISTOGRAMS, OpenMetricsType::Histogram),
        with(GAUGES, OpenMetricsType::Gauge),
    ]
    .concat()
}

/// A sample's value: a counter's or gauge's, a histogram's count.
fn sample_value(value: &OpenMetricsValue) -> f64 {
    match value {
        OpenMetricsValue::Counter(c) => c.value.as_f64(),
        OpenMetricsValue::Gauge(g) | OpenMetricsValue::Unknown(g) => g.as_f64(),
        OpenMetricsValue::Histogram(h) => h.count.unwrap_or_default() as f64,
        other => panic!("unexpected value {other:?}"),
    }
}

struct Scrape {
    text: String,
    parsed: Exposition,
}

impl Scrape {
    async fn of(app: &TestApp) -> Self {
        let response = app.get("/metrics").await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        let text = response.text().await.unwrap();
        let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("/metrics is not valid OpenMetrics ({e:?}):\n{text}"));
        Self { text, parsed }
    }

    /// The value of `family`'s sample with exactly `labels` (a histogram's count), if present.
    fn value(&self, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let family = self.parsed.families.get(family)?;
        family.iter_samples().find_map(|sample| {
            let set = sample.get_labelset().ok()?;
            let pairs: Vec<(String, String)> =
                set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let wanted: Vec<(String, String)> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let mut got = pairs.clone();
            got.sort();
            let mut want = wanted;
            want.sort();
            (got == want).then(|| sample_value(&sample.value))
        })
    }

    fn expect(&self, family: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(family, labels)
            .unwrap_or_else(|| panic!("{family}{labels:?} missing in\n{}", self.text))
    }
}

#[tokio::test]
async fn every_documented_family_has_series_at_zero_before_the_first_message() {
    let app = spawn_app(Arc::new(ScriptedModel::replies(Vec::<String>::new()))).await;
    let scrape = Scrape::of(&app).await;
    for (family, _) in documented() {
        let samples: Vec<f64> = scrape
            .parsed
            .families
            .get(&family)
            .unwrap_or_else(|| panic!("{family} missing in\n{}", scrape.text))
            .iter_samples()
            .map(|sample| sample_value(&sample.value))
            .collect();
        assert!(!samples.is_empty(), "{family} has no series at start");
        let is_cap = family.ends_with("_cap_usd") || family.ends_with("_cap_tokens");
        // The scrape is the first connection accepted and the one request in flight.
        let is_the_scrape = family == "manychat_agent_connections_accepted"
            || family == "manychat_agent_requests_in_flight";
        if is_the_scrape {
            assert_eq!(samples, vec![1.0], "{family}");
        } else if !is_cap {
            assert!(samples.iter().all(|v| *v == 0.0), "{family}: {samples:?}");
        }
    }
    for (family, labels) in [
        ("manychat_agent_turns", [("outcome", "deferred")]),
        ("manychat_agent_escalations", [("reason", "turn_cap")]),
    ] {
        assert_eq!(scrape.expect(family, &labels), 0.0, "{family} {labels:?}");
    }
}

fn add_tag(id: &str) -> ToolCall {
    call(format!("add_{id}"), "add_tag", json!({"tag": id}))
}

#[tokio::test(start_paused = true)]
async fn metrics_serves_every_documented_series_after_a_turn_of_each_kind() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps([
        // 7001: inline.
        ScriptStep::ok(reply(reply_json("We open at nine."))),
        // 7002: inline, with an action performed after the response.
        ScriptStep::ok(tool_calls([add_tag("interested_wheel")])),
        ScriptStep::ok(reply(reply_json("Noted."))),
        // 7003: the model escalates.
        ScriptStep::ok(reply(escalation_json("complaint"))),
        // 7004: a guardrail stops the reply (not an AgentReply).
        ScriptStep::ok(reply("Sure! The class costs whatever you like.")),
        // 7005: the race is lost, the reply is deferred.
        ScriptStep::ok(reply(reply_json("The evening class has places.")))
            .after(Duration::from_secs(9)),
    ]));
    let app =
        spawn_app_with(AppOptions::new(model.clone()).edit(crate::selling::without_sales)).await;
    for contact in ["7001", "7002", "7003", "7004", "7005"] {
        app.returning_contact(contact).await;
    }

    let empty = Scrape::of(&app).await;
    assert_eq!(empty.expect("manychat_agent_outbox_backlog", &[]), 0.0);

    for (contact, text) in [
        ("7001", "When do you open?"),
        ("7002", "I like the wheel course"),
        ("7003", "My order never came"),
        ("7004", "How much is it?"),
    ] {
        let (status, _) = app.send(contact, text).await;
        assert_eq!(status, 200);
        app.settle_advancing().await;
    }
    deferred_by_a_late_answer(&app, &model, 6, "7005", "Any places left?").await;

    // The deferred reply waits in the outbox: the gauges read it at scrape time.
    tokio::time::advance(Duration::from_secs(5)).await;
    let queued = Scrape::of(&app).await;
    assert_eq!(queued.expect("manychat_agent_outbox_backlog", &[]), 1.0);
    let age = queued.expect("manychat_agent_outbox_oldest_due_age_seconds", &[]);
    assert!(
        (5.0..6.0).contains(&age),
        "the reply has been due 5 s: {age}"
    );

    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let after = Scrape::of(&app).await;
    // Every documented family is there, of its documented type, parsed strictly.
    for (family, kind) in documented() {
        let found = after
            .parsed
            .families
            .get(&family)
            .unwrap_or_else(|| panic!("{family} missing in\n{}", after.text));
        assert_eq!(found.family_type, kind, "{family}");
    }
    assert_eq!(
        after.parsed.families.len(),
        documented().len(),
        "every served family is documented"
    );
    let families = "manychat_agent_turns";
    for outcome in [
        "answered_inline",
        "escalated_model",
        "failed_validation",
        "deferred",
    ] {
        assert!(
            after.expect(families, &[("outcome", outcome)]) >= 1.0,
            "{outcome}"
        );
    }
    for (family, labels, count) in [
        (
            "manychat_agent_turns",
            [("outcome", "answered_inline")],
            2.0,
        ),
        ("manychat_agent_escalations", [("reason", "complaint")], 1.0),
        (
            "manychat_agent_guardrail_violations",
            [("kind", "schema")],
            1.0,
        ),
        (
            "manychat_agent_answer_duration_seconds",
            [("path", "inline")],
            2.0,
        ),
        (
            "manychat_agent_answer_duration_seconds",
            [("path", "deferred")],
            1.0,
        ),
    ] {
        assert_eq!(after.expect(family, &labels), count, "{family} {labels:?}");
    }
    assert_eq!(
        after.expect(
            "manychat_agent_actions",
            &[("tool", "add_tag"), ("status", "performed")]
        ) as i64,
        1 + 2 * handoff_tags(&app),
        "the staged tag, and the handoff's tag on each of the two escalations"
    );
    assert_eq!(
        after.expect(
            "manychat_agent_model_call_duration_seconds",
            &[("result", "ok")]
        ),
        6.0,
        "one observation per model call"
    );
    assert!(
        after.expect(
            "manychat_agent_manychat_request_duration_seconds",
            &[("endpoint", "addTagByName"), ("status_class", "2xx")]
        ) >= 1.0
    );
    assert_eq!(
        after.expect(
            "manychat_agent_manychat_request_duration_seconds",
            &[("endpoint", "sendFlow"), ("status_class", "2xx")]
        ),
        1.0 + 2.0 * handoff_flows(&app) as f64,
        "the deferred reply's flow, and the handoff's on each escalation"
    );
    assert_eq!(after.expect("manychat_agent_outbox_delivered", &[]), 1.0);
    assert_eq!(after.expect("manychat_agent_race_lost", &[]), 1.0);
    assert_eq!(after.expect("manychat_agent_outbox_backlog", &[]), 0.0);
    // Today's spend, as the store's budget counters hold it, beside the caps of rules.json.
    let spent = app
        .store
        .budget(chrono::Utc::now().date_naive())
        .await
        .unwrap();
    assert!(spent.tokens > 0, "the model turns were charged");
    assert_eq!(
        after.expect("manychat_agent_budget_spent_tokens", &[]),
        spent.tokens as f64
    );
    let budget = &app.rules()["budget"];
    assert_eq!(
        after.expect("manychat_agent_budget_cap_tokens", &[]),
        budget["dailyTokenCap"].as_f64().unwrap()
    );
    assert_eq!(
        after.expect("manychat_agent_budget_cap_usd", &[]),
        budget["dailyCostCapUsd"].as_f64().unwrap()
    );
    assert_eq!(
        after.expect("manychat_agent_outbox_oldest_due_age_seconds", &[]),
        0.0
    );

    // Every model call's billed tokens, as the turns recorded them (the scripted model bills
    // no price: 0 USD).
    let mut recorded = (0, 0);
    for contact in ["7001", "7002", "7003", "7004", "7005"] {
        for turn in app.turns(contact).await {
            recorded.0 += turn.input_tokens;
            recorded.1 += turn.output_tokens;
        }
    }
    assert!(recorded.0 > 0);
    assert_eq!(
        after.expect("manychat_agent_model_tokens", &[("kind", "input")]),
        recorded.0 as f64
    );
    assert_eq!(
        after.expect("manychat_agent_model_tokens", &[("kind", "output")]),
        recorded.1 as f64
    );
    assert_eq!(
        after.expect("manychat_agent_model_tokens", &[("kind", "cached")]),
        0.0
    );
    assert_eq!(after.expect("manychat_agent_model_cost_usd", &[]), 0.0);

    // C5: no subscriber id and no message text in any series.
    for contact_data in ["7001", "7005", "wheel course", "evening class", "nine"] {
        assert!(
            !after.text.contains(contact_data),
            "{contact_data} in\n{}",
            after.text
        );
    }
}

/// The demo tenant's handoff tag (0 or 1 per escalation).
fn handoff_tags(app: &TestApp) -> i64 {
    i64::from(handoff(app)["tag"].is_string())
}

/// The demo tenant's handoff flows (0 or 1 per escalation).
fn handoff_flows(app: &TestApp) -> i64 {
    i64::from(handoff(app)["flowNs"].is_string())
}

fn handoff(app: &TestApp) -> serde_json::Value {
    app.rules()["handoff"].clone()
}
