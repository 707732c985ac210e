//! Learning from what sold (031), from the outside: the active playbook in the turns' prompt
//! (after the catalog, refreshed every minute off the inbound path, a failed refresh keeping the
//! version, `turns.playbook_version` on model-written turns, nothing changed without `learning`),
//! and `eval` with `PLAYBOOK_VERSION` writing the record `insights activate` gates on, through
//! the CLI functions, the real store and an OpenAI-compatible fake (a model that is not a mock).
//! All tactics and texts are invented.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::learning::gate::suite_hash;
use manychat_agent::learning::playbook::{HEADER_PLAYBOOK, REFRESH_EVERY, content_hash, section};
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::learning::Review;
use manychat_agent::store::{Role, Store};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::helpers::*;
use crate::selling::edit_rules;

const TACTIC: &str = "Invented tactic: ask which evening suits the contact before the price";
/// A tactic the fake model obeys by handing every contact to a person: the suite regresses.
const REGRESSING: &str = "Invented tactic: hand every contact to a person at once";
const QUESTION: &str = "How much is the wheel course?";
const ANSWER: &str = "The wheel course is 120 euros.";

/// Adds the `learning` section (the demo tenant has a funnel field).
fn with_learning(config: &Path) {
    edit_rules(config, |rules| {
        rules["learning"] = json!({"convertedTag": "paid", "maxRunCostUsd": 5});
    });
}

/// Stores a playbook version of `insights` as a review would: its hash.
async fn stored_version(store: &dyn Store, insights: &[&str]) -> String {
    let insights: Vec<String> = insights.iter().map(|i| (*i).to_owned()).collect();
    let hash = content_hash(&insights);
    let review = Review {
        approved: Vec::new(),
        rejected: Vec::new(),
        version: Some((hash.clone(), insights)),
        at: chrono::Utc::now(),
        by: "cli".to_owned(),
        ..Review::default()
    };
    store.record_review(&review).await.unwrap();
    hash
}

/// Makes the stored version `hash` the active one, as `insights activate` does past its gate.
async fn activate(store: &dyn Store, hash: &str) {
    let versions = store.playbook_versions().await.unwrap();
    let version = versions.iter().find(|v| v.content_hash == hash).unwrap();
    store
        .activate_playbook(version.id, "cli", chrono::Utc::now())
        .await
        .unwrap();
}

/// The app's tenant config as `static_prefix` renders it today.
fn static_prefix_of(app: &TestApp) -> String {
    let context = manychat_agent::config::ConfigContext {
        reply_flow_ns: Some(REPLY_FLOW.to_owned()),
        ..manychat_agent::config::ConfigContext::default()
    };
    let config = manychat_agent::config::load_dir(&app.config_dir, &context).unwrap();
    manychat_agent::agent::static_prefix(&config)
}

/// The contact's last agent turn's `playbook_version`, and that its message's is empty.
async fn last_agent_version(app: &TestApp, subscriber: &str) -> Option<String> {
    let turns = app.turns(subscriber).await;
    let agent = turns.iter().rev().find(|t| t.role == Role::Agent).unwrap();
    assert_eq!(agent.text, ANSWER, "a model-written turn");
    let user = turns.iter().rev().find(|t| t.role == Role::User).unwrap();
    assert_eq!(user.playbook_version, None, "a contact's message has none");
    agent.playbook_version.clone()
}

/// Moves the clock past one refresh and waits (in real time) until it has read the store. On
/// PostgreSQL the turns' tickets are given back first: a give-back still waiting for a
/// connection when the clock jumps would time out, and the next turn would wait on it.
async fn past_a_refresh(app: &TestApp, schema: Option<&str>) {
    if let Some(schema) = schema {
        let admin = sqlx::PgPool::connect(&test_database_url()).await.unwrap();
        let count = format!("SELECT COUNT(*) FROM {schema}.turn_tickets");
        until(async || {
            let left: i64 = sqlx::query_scalar(&count).fetch_one(&admin).await.unwrap();
            left == 0
        })
        .await;
    }
    let reads = app.playbook.reads();
    tokio::time::advance(REFRESH_EVERY).await;
    until(async || app.playbook.reads() > reads).await;
}

/// Makes the store's next read of the active version fail (its table is renamed away).
async fn playbook_reads_fail(app: &TestApp, schema: Option<&str>) {
    match schema {
        None => {
            let conn = rusqlite::Connection::open(&app.database_path).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            conn.execute_batch("ALTER TABLE playbook_versions RENAME TO playbook_versions_away")
                .unwrap();
        }
        Some(schema) => {
            let admin = sqlx::PgPool::connect(&test_database_url()).await.unwrap();
            sqlx::query(&format!(
                "ALTER TABLE {schema}.playbook_versions RENAME TO playbook_versions_away"
            ))
            .execute(&admin)
            .await
            .unwrap();
        }
    }
}

/// The contact asks [`QUESTION`]; returns once the turn's tasks have ended (on PostgreSQL the
/// next turn would otherwise wait for this one's place on the frozen clock).
async fn ask(app: &TestApp, subscriber: &str) {
    let (status, _) = app.send(subscriber, QUESTION).await;
    assert_eq!(status, 200);
    app.settle().await;
}

fn answers(n: usize) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies(vec![reply_json(ANSWER); n]))
}

async fn app_on(model: Arc<ScriptedModel>, database: Option<&str>, learning: bool) -> TestApp {
    let mut options = AppOptions::new(model);
    if learning {
        options = options.edit(with_learning);
    }
    if let Some(url) = database {
        options = options.env("DATABASE_URL", url);
    }
    spawn_app_with(options).await
}

/// 031 § The prompt: a version activated while the app runs reaches the turns within a minute,
/// never by a read on the inbound path; the turn's prompt is then the static prefix with the
/// section after the catalog, and its agent turn records the version's hash. A refresh that
/// fails keeps the version.
/// Run on a frozen clock (`FrozenClock`).
async fn activated_version_prompts_the_next_turn(schema: Option<&str>, url: Option<&str>) {
    let model = answers(4);
    let app = app_on(model.clone(), url, true).await;
    let prefix = static_prefix_of(&app);
    let subscriber = "9301";
    assert_eq!(app.playbook.reads(), 1, "loaded once at start");

    ask(&app, subscriber).await;
    assert_eq!(&*model.requests()[0].system, prefix.as_str());
    assert_eq!(last_agent_version(&app, subscriber).await, None);

    let hash = stored_version(app.store.as_ref(), &[TACTIC]).await;
    activate(app.store.as_ref(), &hash).await;
    ask(&app, subscriber).await;
    assert_eq!(
        &*model.requests()[1].system,
        prefix.as_str(),
        "a turn never reads the store for the playbook: the next refresh brings it"
    );
    assert_eq!(app.playbook.reads(), 1);

    past_a_refresh(&app, schema).await;
    ask(&app, subscriber).await;
    let expected = format!("{prefix}{}", section(&[TACTIC.to_owned()]));
    let system = model.requests()[2].system.clone();
    assert_eq!(&*system, expected.as_str());
    let catalog = system.rfind("\n# CATALOG\n").unwrap();
    let payment = system.rfind("\n# PAYMENT OPTIONS\n").unwrap();
    let playbook = system.rfind(&format!("\n{HEADER_PLAYBOOK}\n")).unwrap();
    assert!(catalog < payment && payment < playbook, "after the catalog");
    assert!(system[playbook..].contains(&format!("- {TACTIC}\n")));
    assert_eq!(
        last_agent_version(&app, subscriber).await.as_deref(),
        Some(hash.as_str())
    );

    playbook_reads_fail(&app, schema).await;
    past_a_refresh(&app, schema).await;
    ask(&app, subscriber).await;
    assert_eq!(
        &*model.requests()[3].system,
        expected.as_str(),
        "a failed refresh keeps the version"
    );
    assert_eq!(
        last_agent_version(&app, subscriber).await.as_deref(),
        Some(hash.as_str())
    );
}

#[tokio::test(start_paused = true)]
async fn spec_031_an_activated_version_prompts_the_next_turn_after_the_catalog() {
    let _frozen = FrozenClock::freeze();
    activated_version_prompts_the_next_turn(None, None).await;
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_031_an_activated_version_prompts_the_next_turn_after_the_catalog_on_postgres() {
    let _frozen = FrozenClock::freeze();
    let (schema, url) = fresh_postgres_schema().await;
    activated_version_prompts_the_next_turn(Some(&schema), Some(&url)).await;
}

/// 031 § The prompt: without `learning` the system prompt is byte-identical to the static
/// prefix built today, though a version is active in the store, and no turn records a version;
/// the playbook is not even read.
/// Run on a frozen clock (`FrozenClock`).
async fn without_learning_the_prompt_is_unchanged(url: Option<&str>) {
    let model = answers(1);
    let app = app_on(model.clone(), url, false).await;
    let hash = stored_version(app.store.as_ref(), &[TACTIC]).await;
    activate(app.store.as_ref(), &hash).await;
    tokio::time::advance(REFRESH_EVERY * 2).await;
    let_tasks_run().await;

    ask(&app, "9302").await;
    let system = model.requests()[0].system.clone();
    assert_eq!(system.as_bytes(), static_prefix_of(&app).as_bytes());
    assert!(!system.contains(HEADER_PLAYBOOK) && !system.contains(TACTIC));
    assert_eq!(last_agent_version(&app, "9302").await, None);
    assert_eq!(
        app.playbook.reads(),
        0,
        "a tenant without learning reads no playbook"
    );
}

#[tokio::test(start_paused = true)]
async fn spec_031_without_learning_the_prompt_is_byte_identical_with_a_version_active() {
    let _frozen = FrozenClock::freeze();
    without_learning_the_prompt_is_unchanged(None).await;
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_031_without_learning_the_prompt_is_byte_identical_with_a_version_active_on_postgres()
{
    let _frozen = FrozenClock::freeze();
    let url = fresh_postgres_url().await;
    without_learning_the_prompt_is_unchanged(Some(&url)).await;
}

/// 031 verification: pending and rejected proposals never reach the prompt; only the active
/// version's insights do, and an approved insight only once its version is active.
#[tokio::test(start_paused = true)]
async fn spec_031_pending_and_rejected_proposals_are_never_in_the_prompt() {
    use manychat_agent::store::learning::{NewProposal, ProposalStatus, RunEnd, RunStatus};
    const PENDING: &str = "Invented proposal still pending: offer the evening class first";
    const REJECTED: &str = "Invented proposal rejected: mention the teacher's name early";
    let _frozen = FrozenClock::freeze();
    let model = answers(2);
    let app = app_on(model.clone(), None, true).await;
    let store = app.store.as_ref();
    let run = store
        .claim_learning_run("2026-W49", false, chrono::Utc::now())
        .await
        .unwrap()
        .expect("the week's claim");
    let proposal = |text: &str| NewProposal {
        text: text.to_owned(),
        rationale: "Invented rationale".to_owned(),
        converted_count: 3,
        not_converted_count: 1,
        turn_ids: Vec::new(),
    };
    let end = RunEnd {
        status: RunStatus::Completed,
        converted_count: 20,
        not_converted_count: 20,
        cost_usd: 0.1,
        reason: None,
        proposals: vec![proposal(PENDING), proposal(REJECTED)],
        at: chrono::Utc::now(),
    };
    store.finish_learning_run(run, &end).await.unwrap();
    let pending = store.proposals(ProposalStatus::Pending, 10).await.unwrap();
    let rejected_id = pending.iter().find(|p| p.text == REJECTED).unwrap().id;
    let hash = content_hash(&[TACTIC.to_owned()]);
    let review = Review {
        approved: Vec::new(),
        rejected: vec![rejected_id],
        version: Some((hash.clone(), vec![TACTIC.to_owned()])),
        at: chrono::Utc::now(),
        by: "cli".to_owned(),
        ..Review::default()
    };
    store.record_review(&review).await.unwrap();

    // A version made but not active: nothing of the playbook is in the prompt.
    past_a_refresh(&app, None).await;
    ask(&app, "9303").await;
    let system = model.requests()[0].system.clone();
    for text in [PENDING, REJECTED, TACTIC, HEADER_PLAYBOOK] {
        assert!(!system.contains(text), "{text:?} is not in the prompt");
    }

    activate(store, &hash).await;
    past_a_refresh(&app, None).await;
    ask(&app, "9303").await;
    let system = model.requests()[1].system.clone();
    assert!(
        system.contains(&format!("- {TACTIC}\n")),
        "the active version"
    );
    assert!(!system.contains(PENDING), "a pending proposal never");
    assert!(!system.contains(REJECTED), "a rejected proposal never");
}

/// 031: a follow-up (025) is a model-written turn too: the nudge worker `serve` runs shares
/// the turns' playbook, so its prompt carries the section and its turn records the version.
#[tokio::test(start_paused = true)]
async fn spec_031_a_nudge_turn_is_prompted_with_the_playbook_and_records_its_version() {
    let _frozen = FrozenClock::freeze();
    const FOLLOW_UP: &str = "Any questions about the wheel course?";
    let model = Arc::new(ScriptedModel::replies([
        reply_json(ANSWER),
        reply_json(FOLLOW_UP),
    ]));
    let app = spawn_app_with(AppOptions::new(model.clone()).edit(|dir| {
        with_learning(dir);
        crate::selling::with_nudge(dir);
    }))
    .await;
    let hash = stored_version(app.store.as_ref(), &[TACTIC]).await;
    activate(app.store.as_ref(), &hash).await;
    past_a_refresh(&app, None).await;
    ask(&app, "9304").await;
    // Due now on the app's clock, for the app's own nudge worker.
    let conversation = app.conversation("9304").await;
    let at = conversation.last_message_at.unwrap();
    app.store
        .schedule_nudge(conversation.id, "later_today", at, at)
        .await
        .unwrap();

    assert_eq!(app.nudges.run_once().await.claimed, 1);
    let expected = format!(
        "{}{}",
        static_prefix_of(&app),
        section(&[TACTIC.to_owned()])
    );
    assert_eq!(&*model.requests()[1].system, expected.as_str());
    let turns = app.turns("9304").await;
    let nudge = turns.last().unwrap();
    assert_eq!((nudge.role, nudge.text.as_str()), (Role::Agent, FOLLOW_UP));
    assert_eq!(nudge.playbook_version.as_deref(), Some(hash.as_str()));
}

// ---------------------------------------------------------------------------------------------
// `eval` with PLAYBOOK_VERSION, and the gate it feeds

const MODEL: &str = "openai:gpt-4.1-mini";
const CASES: [&str; 2] = ["asks_the_price", "asks_for_evenings"];

/// An OpenAI-compatible model (not a mock) that answers every case, unless its system prompt
/// carries [`REGRESSING`]: then it hands the contact to a person, and every case fails.
struct FakeOpenAi;

impl Respond for FakeOpenAi {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let regressing = String::from_utf8_lossy(&request.body).contains(REGRESSING);
        let reply = json!({
            "messages": [if regressing { "One moment." } else { ANSWER }],
            "escalate": regressing,
            "escalation_reason": if regressing { json!("low_confidence") } else { Value::Null },
            "confidence": 0.9, "closing_question": null
        });
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4.1-mini-2025-04-14",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.to_string(), "refusal": null},
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}
        }))
    }
}

/// A deployment's pieces for `eval`: the demo tenant with `learning`, a two-case suite, the
/// fake model and the store at `url`.
struct EvalBench {
    dir: tempfile::TempDir,
    url: String,
    model: MockServer,
    store: Arc<dyn Store>,
}

impl EvalBench {
    async fn new(url: String) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        copy_demo_tenant(&config);
        with_learning(&config);
        let suite = dir.path().join("suite");
        std::fs::create_dir_all(&suite).unwrap();
        let cases = [
            json!({"id": CASES[0], "text": QUESTION,
                   "expect": {"escalate": false, "must_contain": ["wheel"]}}),
            json!({"id": CASES[1], "text": "Do you run classes in the evening?",
                   "expect": {"escalate": false}}),
        ];
        let lines: Vec<String> = cases.iter().map(Value::to_string).collect();
        std::fs::write(suite.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
        let model = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(FakeOpenAi)
            .mount(&model)
            .await;
        let store = manychat_agent::store::connect(&url).await.unwrap();
        Self {
            dir,
            url,
            model,
            store,
        }
    }

    fn suite(&self) -> PathBuf {
        self.dir.path().join("suite")
    }

    fn env(&self, version: Option<&str>) -> HashMap<String, String> {
        let mut env: HashMap<String, String> = [
            (
                "CONFIG_DIR",
                self.dir.path().join("config").display().to_string(),
            ),
            ("DATABASE_URL", self.url.clone()),
            ("OPENAI_API_KEY", "sk-test-key".to_owned()),
            ("OPENAI_BASE_URL", format!("{}/v1", self.model.uri())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(version) = version {
            env.insert("PLAYBOOK_VERSION".to_owned(), version.to_owned());
        }
        env
    }

    async fn eval(&self, version: Option<&str>) -> ExitCode {
        manychat_agent::cli::eval(&self.env(version), &self.suite(), Some(MODEL))
            .await
            .unwrap()
    }

    async fn activate(&self, version: &str) -> Result<ExitCode, String> {
        manychat_agent::cli::insights::activate_version(&self.env(None), version, &self.suite())
            .await
            .map_err(|e| e.to_string())
    }

    /// The system prompts of the model requests made since `from`.
    async fn prompts_since(&self, from: usize) -> Vec<String> {
        let requests = self.model.received_requests().await.unwrap();
        requests[from..]
            .iter()
            .map(|r| {
                let body: Value = serde_json::from_slice(&r.body).unwrap();
                body["messages"][0]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    async fn requests(&self) -> usize {
        self.model.received_requests().await.unwrap().len()
    }

    /// The latest eval record of `playbook` on `suite_hash`, which there must be (`what`).
    async fn latest_eval(
        &self,
        playbook: &str,
        suite_hash: &str,
        what: &str,
    ) -> manychat_agent::store::learning::EvalRecord {
        let record = self.store.latest_eval(playbook, suite_hash).await.unwrap();
        record.expect(what)
    }

    /// Every eval record stored, whatever its model (the gate reads only real models').
    async fn record_count(&self) -> i64 {
        match self.url.strip_prefix("sqlite://") {
            Some(file) => rusqlite::Connection::open(file)
                .unwrap()
                .query_row("SELECT COUNT(*) FROM eval_records", [], |row| row.get(0))
                .unwrap(),
            None => {
                let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
                sqlx::query_scalar("SELECT COUNT(*) FROM eval_records")
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        }
    }
}

/// 031 § Activation gate: `eval` writes the record of the prompt it ran (no playbook: `""`; a
/// version named by `PLAYBOOK_VERSION`: its hash) against the suite's hash with each case's
/// outcome; a mock's run writes none and says so; an unknown version is refused before any
/// model call; `insights activate` then passes on the records (no-playbook baseline, then the
/// version) and refuses a version whose eval fails a case the active version's passes.
async fn eval_records_feed_the_gate(url: String) {
    let bench = EvalBench::new(url).await;
    let suite_hash = suite_hash(&bench.suite()).unwrap();
    let good = stored_version(bench.store.as_ref(), &[TACTIC]).await;
    let bad = stored_version(bench.store.as_ref(), &[REGRESSING]).await;

    let unknown = manychat_agent::cli::eval(
        &bench.env(Some("deadbeefdeadbeef")),
        &bench.suite(),
        Some(MODEL),
    )
    .await
    .expect_err("an unknown version is refused");
    assert!(
        unknown
            .to_string()
            .contains("PLAYBOOK_VERSION: no playbook version deadbeefdeadbeef"),
        "{unknown}"
    );
    assert_eq!(bench.requests().await, 0, "refused before any model call");
    let refused = bench.activate(&good[..12]).await.unwrap_err();
    assert!(
        refused.contains(&format!("PLAYBOOK_VERSION={good} manychat-agent eval")),
        "{refused}"
    );

    // A mock's run: the suite runs, no record is written, and the run says so.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .args(["eval", "--model", "mock:demo", "--suite"])
        .arg(bench.suite())
        .env_clear()
        .envs(bench.env(Some(&good)))
        .current_dir(bench.dir.path())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains(&format!("playbook: version {good} in the prompt"))
            && printed.contains("eval record: none is written: a mock model's eval never counts")
            && printed.contains("2 cases:"),
        "{output:?}"
    );
    assert_eq!(bench.record_count().await, 0);

    // The no-playbook baseline.
    assert_eq!(bench.eval(None).await, ExitCode::SUCCESS);
    let baseline = bench
        .latest_eval("", &suite_hash, "the no-playbook record")
        .await;
    assert_eq!(baseline.model, MODEL);
    assert_eq!(baseline.suite_hash, suite_hash);
    assert_eq!(baseline.outcomes, json!({CASES[0]: true, CASES[1]: true}));
    let prompts = bench.prompts_since(0).await;
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts.iter().all(|p| !p.contains(HEADER_PLAYBOOK)),
        "no playbook"
    );

    // The version, named by a prefix: its section in every prompt, after the catalog.
    let from = bench.requests().await;
    assert_eq!(bench.eval(Some(&good[..12])).await, ExitCode::SUCCESS);
    let record = bench
        .latest_eval(&good, &suite_hash, "the version's record")
        .await;
    assert_eq!(record.playbook_hash, good);
    assert_eq!(record.outcomes, json!({CASES[0]: true, CASES[1]: true}));
    let expected = section(&[TACTIC.to_owned()]);
    for prompt in bench.prompts_since(from).await {
        assert!(prompt.ends_with(&expected), "{prompt}");
        assert!(prompt.rfind("\n# CATALOG\n") < prompt.rfind(HEADER_PLAYBOOK));
    }
    assert_eq!(bench.activate(&good[..12]).await, Ok(ExitCode::SUCCESS));
    let active = bench.store.active_playbook().await.unwrap().unwrap();
    assert_eq!(active.content_hash, good);

    // A version whose eval fails the cases the active version passes is refused.
    assert_eq!(bench.eval(Some(&bad)).await, ExitCode::FAILURE);
    let record = bench
        .latest_eval(&bad, &suite_hash, "a failing run is recorded too")
        .await;
    assert_eq!(record.outcomes, json!({CASES[0]: false, CASES[1]: false}));
    let refused = bench.activate(&bad).await.unwrap_err();
    assert!(
        refused.contains("fails 2 case(s) the baseline passes")
            && refused.contains(CASES[0])
            && refused.contains(CASES[1]),
        "{refused}"
    );
    let active = bench.store.active_playbook().await.unwrap().unwrap();
    assert_eq!(active.content_hash, good, "the active version stays");
    assert_eq!(bench.record_count().await, 3);
}

#[tokio::test]
async fn spec_031_eval_with_playbook_version_writes_the_record_the_gate_reads() {
    let dir = tempfile::tempdir().unwrap();
    eval_records_feed_the_gate(sqlite_file_url(dir.path())).await;
}

#[tokio::test]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn spec_031_eval_with_playbook_version_writes_the_record_the_gate_reads_on_postgres() {
    eval_records_feed_the_gate(fresh_postgres_url().await).await;
}
