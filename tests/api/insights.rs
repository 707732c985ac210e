//! `manychat-agent insights run|review|activate|report` (031) run as an operator runs them: the
//! binary on a SQLite file, the fake ManyChat for the run's label reads, `mock:demo` as the
//! analyst. What each prints and what the store holds after. All data is invented.

use std::path::{Path, PathBuf};
use std::process::Output;

use chrono::{Duration, Utc};
use manychat_agent::ids::SubscriberId;
use manychat_agent::store::learning::{
    EvalRecord, NewProposal, ProposalStatus, Review, RunEnd, RunStatus,
};
use manychat_agent::store::{NewTurn, Store};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;

/// The demo tenant with a `learning` section, in `dir/config`.
fn learning_config(dir: &Path) -> PathBuf {
    let config = dir.join("config");
    copy_demo_tenant(&config);
    let rules_path = config.join("rules.json");
    let mut rules: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rules_path).unwrap()).unwrap();
    rules["learning"] = json!({"convertedTag": "paid", "maxRunCostUsd": 5});
    std::fs::write(&rules_path, rules.to_string()).unwrap();
    config
}

/// Runs `insights <args>` with `vars` (and nothing else from this environment).
async fn insights(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"));
    command.arg("insights").args(args).env_clear();
    for (name, value) in vars {
        command.env(name, value);
    }
    command.output().await.unwrap()
}

/// A SQLite file in a fresh folder: the folder, its URL and the store on it.
async fn file_store() -> (tempfile::TempDir, String, std::sync::Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_file_url(dir.path());
    let store = manychat_agent::store::connect(&url).await.unwrap();
    (dir, url, store)
}

/// `insights` with `args`, which exits with `code`.
async fn insights_exits(args: &[&str], vars: &[(&str, &str)], code: i32) -> Output {
    let output = insights(args, vars).await;
    assert_eq!(output.status.code(), Some(code), "{args:?}: {output:?}");
    output
}

fn out(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn err(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Pending proposals as a run writes them: answers their ids, in `texts`' order.
async fn pending(store: &dyn Store, texts: &[&str]) -> Vec<i64> {
    let week = format!("cli-{}", uuid::Uuid::new_v4().simple());
    let run = store
        .claim_learning_run(&week, true, Utc::now())
        .await
        .unwrap()
        .unwrap();
    let end = RunEnd {
        status: RunStatus::Completed,
        converted_count: 20,
        not_converted_count: 20,
        cost_usd: 0.0,
        reason: None,
        proposals: texts
            .iter()
            .map(|text| NewProposal {
                text: (*text).to_owned(),
                rationale: "Invented rationale".to_owned(),
                converted_count: 3,
                not_converted_count: 1,
                turn_ids: vec!["1".to_owned()],
            })
            .collect(),
        at: Utc::now(),
    };
    store.finish_learning_run(run, &end).await.unwrap();
    let stored = store
        .proposals(ProposalStatus::Pending, 1000)
        .await
        .unwrap();
    texts
        .iter()
        .map(|t| stored.iter().find(|p| p.text == *t).unwrap().id)
        .collect()
}

/// The version a review made: its hash, from the line the review prints.
fn made_version(printed: &str) -> String {
    piece_after(printed, "new playbook version ", |rest| {
        rest.split_whitespace().next()
    })
    .to_owned()
}

#[tokio::test]
async fn spec_031_review_verbs_through_the_cli_list_approve_reject_retire() {
    let (_dir, url, store) = file_store().await;
    let db = [("DATABASE_URL", url.as_str())];

    // No pending proposals: said so, by the list and by the walk.
    let listed = insights_exits(&["review", "--list"], &db, 0).await;
    assert_eq!(out(&listed).trim(), "no pending proposals");
    let walked = insights_exits(&["review"], &db, 0).await;
    assert!(out(&walked).contains("no pending proposals"), "{walked:?}");
    let refused = insights_exits(&["review", "--approve", "1"], &db, 1).await;
    assert!(
        err(&refused).contains("no pending proposal 1"),
        "{refused:?}"
    );

    let ids = pending(
        store.as_ref(),
        &[
            "Invented tactic one",
            "Invented tactic two",
            "Invented tactic three",
        ],
    )
    .await;
    let listed = out(&insights(&["review", "--list"], &db).await);
    for (id, text) in ids.iter().zip(["one", "two", "three"]) {
        assert!(listed.contains(&format!("proposal {id} ")), "{listed}");
        assert!(
            listed.contains(&format!("Invented tactic {text}")),
            "{listed}"
        );
    }

    let approved = insights_exits(&["review", "--approve", &ids[0].to_string()], &db, 0).await;
    let printed = out(&approved);
    assert!(
        printed.contains("1 approved, 0 rejected, 0 retired"),
        "{printed}"
    );
    assert!(printed.contains("not active"), "{printed}");
    let first = made_version(&printed);
    assert!(
        printed.contains(&format!("PLAYBOOK_VERSION={first} manychat-agent eval")),
        "the review names the eval to run: {printed}"
    );

    let rejected = insights_exits(
        &[
            "review",
            "--reject",
            &ids[1].to_string(),
            "--reason",
            "Invented reason: too pushy",
        ],
        &db,
        0,
    )
    .await;
    assert!(
        out(&rejected).contains("0 approved, 1 rejected, 0 retired")
            && out(&rejected).contains("the playbook is unchanged"),
        "{rejected:?}"
    );
    let lone = insights_exits(&["review", "--text", "Invented"], &db, 1).await;
    assert!(
        err(&lone).contains("--text goes with --approve"),
        "{lone:?}"
    );
    let edited = insights_exits(
        &[
            "review",
            "--approve",
            &ids[2].to_string(),
            "--text",
            "Invented tactic three, edited",
        ],
        &db,
        0,
    )
    .await;
    let second = made_version(&out(&edited));

    let rejected_rows = store.proposals(ProposalStatus::Rejected, 10).await.unwrap();
    assert_eq!(rejected_rows.len(), 1);
    assert_eq!(rejected_rows[0].id, ids[1]);
    let versions = store.playbook_versions().await.unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0].content_hash, first);
    assert_eq!(versions[0].insights, vec!["Invented tactic one".to_owned()]);
    assert_eq!(versions[1].content_hash, second);
    assert_eq!(
        versions[1].insights,
        vec!["Invented tactic three, edited".to_owned()],
        "nothing is active yet: a review starts from no insight"
    );
    assert!(
        versions.iter().all(|v| !v.active),
        "a review activates nothing"
    );

    // Retire: the active version's insight at a place, numbered from 1.
    let ids = pending(store.as_ref(), &["Invented tactic four"]).await;
    store
        .activate_playbook(versions[0].id, "cli", Utc::now())
        .await
        .unwrap();
    let wrong = insights_exits(&["review", "--retire", "2"], &db, 1).await;
    assert!(err(&wrong).contains("has 1 insight(s)"), "{wrong:?}");
    let retired = insights_exits(
        &["review", "--retire", "1", "--approve", &ids[0].to_string()],
        &db,
        0,
    )
    .await;
    assert!(
        out(&retired).contains("1 approved, 0 rejected, 1 retired"),
        "{retired:?}"
    );
    let third = made_version(&out(&retired));
    let versions = store.playbook_versions().await.unwrap();
    let made = versions.iter().find(|v| v.content_hash == third).unwrap();
    assert_eq!(made.insights, vec!["Invented tactic four".to_owned()]);
    let listed = out(&insights(&["review", "--list"], &db).await);
    assert!(listed.contains("no pending proposals"), "{listed}");
    assert!(
        listed.contains(&format!("{first} 1 insight(s), active")),
        "{listed}"
    );
    // Every decision recorded by the CLI, with when and the reason given.
    let decisions = store.learning_decisions(100).await.unwrap();
    assert!(decisions.iter().all(|d| d.by == "cli"), "{decisions:?}");
    let reject = decisions
        .iter()
        .find(|d| d.proposal_id == Some(rejected_rows[0].id))
        .unwrap();
    assert_eq!(reject.reason.as_deref(), Some("Invented reason: too pushy"));
    assert!(
        listed.contains("rejected proposal") && listed.contains("by cli: Invented reason"),
        "{listed}"
    );
    assert!(
        decisions.iter().any(|d| d.place == Some(1)),
        "the retirement is a decision: {decisions:?}"
    );
}

/// A version made by a review of `text`: its id and hash.
async fn version(store: &dyn Store, text: &str) -> (i64, String) {
    let insights = vec![text.to_owned()];
    let hash = manychat_agent::learning::playbook::content_hash(&insights);
    store
        .record_review(&Review {
            approved: Vec::new(),
            rejected: Vec::new(),
            version: Some((hash.clone(), insights)),
            at: Utc::now(),
            by: "cli".to_owned(),
            ..Review::default()
        })
        .await
        .unwrap();
    let versions = store.playbook_versions().await.unwrap();
    let id = versions.iter().find(|v| v.content_hash == hash).unwrap().id;
    (id, hash)
}

async fn eval_record(store: &dyn Store, playbook: &str, suite: &str, model: &str) {
    store
        .record_eval(&EvalRecord {
            playbook_hash: playbook.to_owned(),
            suite_hash: suite.to_owned(),
            model: model.to_owned(),
            outcomes: json!({"case-a": true, "case-b": true}),
            created_at: Utc::now(),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn spec_031_activate_through_the_cli_is_gated_and_a_rollback_is_not() {
    let (_dir, url, store) = file_store().await;
    let db = [("DATABASE_URL", url.as_str())];
    let golden = repo_path("evals/golden");
    let golden = golden.to_str().unwrap();
    let suite = manychat_agent::learning::gate::suite_hash(Path::new(golden)).unwrap();
    let (_, first) = version(store.as_ref(), "Invented first tactic").await;

    let unknown = insights_exits(&["activate", "ffffffffffff", "--suite", golden], &db, 1).await;
    assert!(err(&unknown).contains("no playbook version"), "{unknown:?}");

    // No record: refused, naming the eval to run; a mock model's record never counts.
    let refused = insights_exits(&["activate", &first, "--suite", golden], &db, 1).await;
    assert!(
        err(&refused).contains(&format!("PLAYBOOK_VERSION={first} manychat-agent eval")),
        "{refused:?}"
    );
    eval_record(store.as_ref(), &first, &suite, "mock:demo").await;
    eval_record(store.as_ref(), "", &suite, "mock:demo").await;
    insights_exits(&["activate", &first, "--suite", golden], &db, 1).await;
    eval_record(store.as_ref(), &first, &suite, "openai:gpt-4.1-mini").await;
    let refused = insights_exits(&["activate", &first, "--suite", golden], &db, 1).await;
    assert!(
        err(&refused).contains("without PLAYBOOK_VERSION"),
        "the no-playbook baseline's eval is named: {refused:?}"
    );
    assert!(store.active_playbook().await.unwrap().is_none());

    eval_record(store.as_ref(), "", &suite, "openai:gpt-4.1-mini").await;
    let gated = insights_exits(&["activate", &first[..8], "--suite", golden], &db, 0).await;
    assert!(
        out(&gated).contains(&format!("playbook version {first} is active")),
        "{gated:?}"
    );

    let (_, second) = version(store.as_ref(), "Invented second tactic").await;
    eval_record(store.as_ref(), &second, &suite, "openai:gpt-4.1-mini").await;
    insights_exits(&["activate", &second, "--suite", golden], &db, 0).await;
    let active = store.active_playbook().await.unwrap().unwrap();
    assert_eq!(active.content_hash, second);

    // Rollback: the first was live before; a suite with no record at all does not stop it.
    let empty = tempfile::tempdir().unwrap();
    let rolled = insights_exits(
        &[
            "activate",
            &first,
            "--suite",
            empty.path().to_str().unwrap(),
        ],
        &db,
        0,
    )
    .await;
    assert!(
        out(&rolled).contains(&format!("rolled back to playbook version {first}")),
        "{rolled:?}"
    );
    assert_eq!(
        store.active_playbook().await.unwrap().unwrap().content_hash,
        first
    );
}

/// One contact whose funnel reached `offered` 20 days ago (settled): its subscriber id.
async fn offered_contact(store: &dyn Store) -> SubscriberId {
    let subscriber = SubscriberId::parse("5550123").unwrap();
    let at = Utc::now() - Duration::days(20);
    let c = store
        .conversation_for(&subscriber, "whatsapp", at)
        .await
        .unwrap();
    store
        .record_turn(&NewTurn::user(c.id, "Invented question", true, at))
        .await
        .unwrap();
    store
        .record_turn(&NewTurn {
            model: Some("mock:demo".to_owned()),
            actions: Some(json!([
                {"tool": "set_field", "id": "funnel_stage", "value": "offered", "status": "performed"}
            ])),
            ..NewTurn::agent(c.id, "Invented answer", "answered_inline", true, at)
        })
        .await
        .unwrap();
    subscriber
}

#[tokio::test]
async fn spec_031_run_through_the_cli_reads_labels_claims_the_week_and_force_runs_again() {
    let (dir, url, store) = file_store().await;
    let subscriber = offered_contact(store.as_ref()).await;
    let manychat = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/fb/subscriber/getInfo"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "status": "success",
            "data": {"id": "1", "tags": [{"id": 1, "name": "paid"}], "custom_fields": []}
        })))
        .mount(&manychat)
        .await;
    let config = learning_config(dir.path());
    let base = manychat.uri();
    let vars = [
        ("DATABASE_URL", url.as_str()),
        ("CONFIG_DIR", config.to_str().unwrap()),
        ("MANYCHAT_API_TOKEN", "invented-token"),
        ("MANYCHAT_API_BASE", base.as_str()),
        ("INSIGHT_MODEL", "mock:demo"),
    ];

    let unset = insights_exits(&["run"], &vars[..4], 1).await;
    assert!(err(&unset).contains("INSIGHT_MODEL"), "{unset:?}");
    let shipped = manychat_agent::config::examples::shipped_examples();
    let plain = dir.path().join("plain");
    copy_tenant(&shipped, &plain);
    let mut without = vars;
    without[1] = ("CONFIG_DIR", plain.to_str().unwrap());
    let off = insights_exits(&["run"], &without, 1).await;
    assert!(err(&off).contains("no learning section"), "{off:?}");
    assert!(store.learning_runs(10).await.unwrap().is_empty());

    // One contact: too few on both sides, no model call; its label read through ManyChat.
    let ran = insights_exits(&["run"], &vars, 0).await;
    assert!(
        out(&ran).contains("insufficient, 0 proposal(s) pending review, 0 refused"),
        "{ran:?}"
    );
    let reads = manychat.received_requests().await.unwrap();
    assert_eq!(reads.len(), 1, "one label read");
    assert!(
        reads[0]
            .url
            .query_pairs()
            .any(|(k, v)| k == "subscriber_id" && v == subscriber.as_str())
    );
    let again = insights_exits(&["run"], &vars, 0).await;
    assert!(out(&again).contains("is already claimed"), "{again:?}");
    let forced = insights_exits(&["run", "--force"], &vars, 0).await;
    assert!(out(&forced).contains("insufficient"), "{forced:?}");

    let runs = store.learning_runs(10).await.unwrap();
    assert_eq!(runs.len(), 2, "the claimed week and the forced run");
    assert!(runs.iter().all(|r| r.status == RunStatus::Insufficient));
    assert_eq!(
        (runs[1].converted_count, runs[1].not_converted_count),
        (1, 0)
    );
    assert!(runs[0].forced && !runs[1].forced);
}

#[tokio::test]
async fn spec_031_insights_report_prints_link_sent_per_version_and_says_it_is_before_after() {
    let (dir, url, store) = file_store().await;
    offered_contact(store.as_ref()).await;
    let config = learning_config(dir.path());
    let vars = [
        ("DATABASE_URL", url.as_str()),
        ("CONFIG_DIR", config.to_str().unwrap()),
    ];
    let text = insights_exits(&["report"], &vars, 0).await;
    let printed = out(&text);
    assert!(
        printed.contains("before/after reading, not a controlled experiment"),
        "{printed}"
    );
    let row: Vec<&str> = printed
        .lines()
        .find(|l| l.trim_start().starts_with("no playbook"))
        .unwrap_or_else(|| panic!("{printed}"))
        .split_whitespace()
        .collect();
    assert_eq!(row.join(" "), "no playbook - 1 0 0.0 % (0/1) 0");
    assert!(!printed.contains("Invented"), "never a text");

    let json = insights_exits(&["report", "--json"], &vars, 0).await;
    let value: serde_json::Value = serde_json::from_str(&out(&json)).unwrap();
    assert_eq!(value["versions"][0]["conversations"], 1);
    assert_eq!(value["versions"][0]["link_sent"], 0);
    assert!(
        value["reading"]
            .as_str()
            .unwrap()
            .contains("not a controlled experiment")
    );
}
