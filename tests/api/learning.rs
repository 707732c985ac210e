//! Learning from what sold (031), from the outside: the active playbook in the turns' prompt
//! (after the catalog, refreshed every minute off the inbound path, a failed refresh keeping the
//! version, `turns.playbook_version` on model-written turns, nothing changed without `learning`).
//! All tactics and texts are invented.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::learning::playbook::{HEADER_PLAYBOOK, REFRESH_EVERY, content_hash, section};
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::learning::Review;
use manychat_agent::store::{Role, Store};
use serde_json::json;

use crate::helpers::*;
use crate::selling::edit_rules;

const TACTIC: &str = "Invented tactic: ask which evening suits the contact before the price";
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
    };
    store.record_review(&review).await.unwrap();
    hash
}

/// Makes the stored version `hash` the active one, as `insights activate` does past its gate.
async fn activate(store: &dyn Store, hash: &str) {
    let versions = store.playbook_versions().await.unwrap();
    let version = versions.iter().find(|v| v.content_hash == hash).unwrap();
    store
        .activate_playbook(version.id, chrono::Utc::now())
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
