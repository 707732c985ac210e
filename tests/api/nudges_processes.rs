//! Spec 025 (in-window nudge) in the service's processes: `serve` runs the nudge worker and a due
//! nudge reaches ManyChat, `worker` needs a model for a tenant with a `nudge` section, and two
//! workers on one PostgreSQL database send each due nudge once.

use std::time::Duration;

use manychat_agent::model::mock::tool_calls;
use manychat_agent::store::{NudgeStatus, OutboxKind};
use serde_json::json;

use crate::helpers::*;
use crate::nudges_helpers::*;
use crate::selling::*;

#[tokio::test(start_paused = true)]
async fn spec_025_serve_runs_the_nudge_worker_and_a_due_nudge_reaches_manychat() {
    let _frozen = FrozenClock::freeze();
    let model = script(vec![
        tool_calls([prospect(), schedule("later_today")]),
        answer("The wheel course starts on Monday."),
        answer("Shall I keep a place for you on Monday?"),
    ]);
    let logs = manychat_agent::observability::capture_global();
    let mut options = AppOptions::new(model.clone()).edit(with_nudge);
    options.background_workers = true;
    let app = spawn_app_with(options).await;
    app.send("7101", "How much is the wheel course?").await;
    app.settle_advancing().await;
    let conversation = app.conversation("7101").await;
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Pending);

    // Two hours pass; the workers' own polls find the nudge, then deliver its reply.
    tokio::time::advance(Duration::from_secs(2 * 3600)).await;
    // Delivered: the reply field written, then the reply flow triggered.
    let delivered = async || {
        let requests = app.manychat_requests().await;
        requests
            .iter()
            .position(|r| r.body["field_value"] == json!("Shall I keep a place for you on Monday?"))
            .is_some_and(|field| {
                requests[field + 1..]
                    .iter()
                    .any(|r| r.body["flow_ns"] == json!(REPLY_FLOW))
            })
    };
    advance_by_steps_until(Duration::from_secs(1), Duration::from_secs(120), delivered).await;
    assert!(delivered().await, "the nudge's reply reached ManyChat");
    let requests = app.manychat_requests().await;
    let reply = requests
        .iter()
        .position(|r| r.body["field_value"] == json!("Shall I keep a place for you on Monday?"))
        .unwrap();
    assert_eq!(requests[reply].path, "/fb/subscriber/setCustomFieldByName");
    assert_eq!(requests[reply + 1].path, "/fb/sending/sendFlow");
    assert_eq!(requests[reply + 1].body["flow_ns"], json!(REPLY_FLOW));
    let nudge = app.store.nudge(conversation.id).await.unwrap().unwrap();
    assert_eq!(nudge.status, NudgeStatus::Sent);
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains("manychat_agent_nudges_total{state=\"scheduled\",reason=\"\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("manychat_agent_nudges_total{state=\"sent\",reason=\"\"} 1"),
        "{metrics}"
    );
    // One log line for the state change, naming the conversation, never the text.
    let text = logs.text();
    let id = conversation.id.to_string();
    assert!(
        text.lines()
            .any(|l| l.contains("nudge settled") && l.contains(&id) && l.contains("sent")),
        "{text}"
    );
    assert!(!text.contains("Shall I keep a place"));
    app.stop().await;
}

/// `worker` runs follow-ups for a tenant with a `nudge` section, so it needs the model then
/// (and only then: without the section it asks for none, see `cli_start.rs`).
#[test]
fn spec_025_worker_with_a_nudge_section_needs_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    with_nudge(&config);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .arg("worker")
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", sqlite_file_url(dir.path()))
        .env("MANYCHAT_API_TOKEN", "mc-fixture-token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content20260101000000_000900")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains("AGENT_MODEL"), "{errors}");
}

/// Two processes on one PostgreSQL database (two apps, each with its nudge worker): every due
/// nudge is claimed, turned and queued exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_025_two_workers_on_one_postgres_send_each_due_nudge_once() {
    const CONTACTS: usize = 6;
    let url = fresh_postgres_url().await;
    let answers = || {
        script(
            (0..CONTACTS)
                .map(|_| answer("Any questions about Monday?"))
                .collect(),
        )
    };
    let one = spawn_app_with(
        AppOptions::new(answers())
            .edit(with_nudge)
            .env("DATABASE_URL", url.clone()),
    )
    .await;
    let two = spawn_app_with(
        AppOptions::new(answers())
            .edit(with_nudge)
            .env("DATABASE_URL", url),
    )
    .await;
    let mut conversations = Vec::new();
    for n in 0..CONTACTS {
        conversations.push(quiet_contact(&one, &format!("7201{n}"), hours(2)).await);
    }
    let due = chrono::Utc::now() + hours(3);
    let a = rig_at(&one, due, answers());
    let b = rig_at(&two, due, answers());
    let (pass_a, pass_b) = bounded("two racing passes", async {
        tokio::join!(a.worker.run_once(), b.worker.run_once())
    })
    .await;
    assert_eq!(pass_a.claimed + pass_b.claimed, CONTACTS);
    assert_eq!(a.model.calls() + b.model.calls(), CONTACTS, "one turn each");
    let rows = one.outbox().await;
    for conversation in &conversations {
        let nudge = one.store.nudge(conversation.id).await.unwrap().unwrap();
        assert_eq!(nudge.status, NudgeStatus::Sent);
        let replies = rows
            .iter()
            .filter(|r| r.conversation_id == conversation.id && r.kind == OutboxKind::Reply)
            .count();
        assert_eq!(replies, 1, "one follow-up queued");
    }
}
