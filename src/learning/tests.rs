//! 031's verification items through the real store on both backends, a scripted analyst model
//! and a scripted tag reader, on tokio's paused clock (set, never slept). All data is invented.

use std::collections::HashSet;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use uuid::Uuid;

use super::cohort::TagReader;
use super::run::{Analyst, Outcome, run};
use crate::config::{ConfigContext, Learning, TenantConfig};
use crate::ids::SubscriberId;
use crate::model::mock::ScriptedModel;
use crate::store::learning::{ProposalStatus, RunStatus};
use crate::store::{NewTurn, Store};

mod measures;
use measures::{
    spec_031_measures_attribute_to_the_version_of_the_first_offered_write,
    spec_031_report_has_a_section_per_playbook_version,
};
mod review;
mod schedule;
use review::{
    spec_031_a_review_makes_one_content_hashed_version_not_yet_active,
    spec_031_the_activation_gate_refuses_and_a_rollback_skips_it,
};
use schedule::spec_031_the_hourly_check_runs_the_analyst_once_per_iso_week;

/// The run's clock: a fixed instant.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0)
        .single()
        .expect("a valid instant")
}

fn days_ago(days: i64) -> DateTime<Utc> {
    now() - chrono::Duration::days(days)
}

/// The shipped example tenant (it has a funnel field) with a `learning` section.
pub(super) fn learning_tenant(cap: f64) -> TenantConfig {
    let mut config = crate::config::examples::demo_tenant();
    config.rules.learning = Some(Learning {
        language: Some("English".to_owned()),
        converted_tag: "paid".to_owned(),
        max_run_cost_usd: cap,
    });
    config
}

/// Tags by subscriber: the converted ones have `paid`; a read of a failing one fails. Every
/// read is kept with tokio's instant.
#[derive(Default)]
pub(super) struct Tags {
    converted: Mutex<HashSet<String>>,
    failing: Mutex<HashSet<String>>,
    reads: Mutex<Vec<(String, tokio::time::Instant)>>,
}

impl Tags {
    fn reads(&self) -> Vec<(String, tokio::time::Instant)> {
        self.reads.lock().unwrap().clone()
    }
}

#[async_trait]
impl TagReader for Tags {
    async fn tags(&self, subscriber: &SubscriberId) -> Result<Vec<String>, String> {
        let id = subscriber.as_str().to_owned();
        self.reads
            .lock()
            .unwrap()
            .push((id.clone(), tokio::time::Instant::now()));
        if self.failing.lock().unwrap().contains(&id) {
            return Err("timeout".to_owned());
        }
        Ok(match self.converted.lock().unwrap().contains(&id) {
            true => vec!["lead".to_owned(), "paid".to_owned()],
            false => vec!["lead".to_owned()],
        })
    }
}

fn fresh_subscriber() -> SubscriberId {
    let n = Uuid::new_v4().as_u128() % 900_000_000_000_000 + 100_000_000_000_000;
    SubscriberId::parse(&n.to_string()).expect("digits are a subscriber id")
}

/// What a seeded contact looks like.
#[derive(Clone, Copy)]
pub(super) struct Seed {
    /// The funnel write's value.
    pub stage: &'static str,
    /// When the funnel write (and the last bound turn) was written.
    pub days_ago: i64,
    /// A bound contact message after it, this many days ago.
    pub later_message: Option<i64>,
    pub status: &'static str,
}

pub(super) const OFFERED: Seed = Seed {
    stage: "offered",
    days_ago: 20,
    later_message: None,
    status: "performed",
};

/// One contact: a bound message, then an agent turn performing the funnel write. Answers the
/// subscriber id and the agent turn's id.
/// The contact's `message`, then the agent's `answer` (the demo model's): answers its turn id.
/// The message is recorded at the answer's conversation, a second before the answer.
pub(super) async fn exchange(store: &dyn Store, message: &str, answer: NewTurn) -> i64 {
    let asked = answer.created_at - chrono::Duration::seconds(1);
    store
        .record_turn(&NewTurn::user(answer.conversation_id, message, true, asked))
        .await
        .expect("user turn");
    store
        .record_turn(&NewTurn {
            model: Some("mock:demo".to_owned()),
            ..answer
        })
        .await
        .expect("agent turn")
}

/// A bound message of the contact's, after the exchanges.
pub(super) async fn later_message(store: &dyn Store, message: NewTurn) {
    store.record_turn(&message).await.expect("later message");
}

pub(super) async fn seed(store: &dyn Store, seed: Seed, message: &str) -> (SubscriberId, i64) {
    let subscriber = fresh_subscriber();
    let at = days_ago(seed.days_ago);
    let conversation = store
        .conversation_for(&subscriber, "whatsapp", at)
        .await
        .expect("conversation");
    let actions = json!([{"tool": "set_field", "id": "funnel_stage", "value": seed.stage, "status": seed.status}]);
    let answer = NewTurn {
        actions: Some(actions),
        ..NewTurn::agent(
            conversation.id,
            "Invented answer about the wheel course.",
            "answered_inline",
            true,
            at + chrono::Duration::seconds(1),
        )
    };
    let agent = exchange(store, message, answer).await;
    if let Some(days) = seed.later_message {
        later_message(
            store,
            NewTurn::user(conversation.id, "Invented later", true, days_ago(days)),
        )
        .await;
    }
    (subscriber, agent)
}

/// `converted` paying contacts and `not_converted` others, all in the cohort; answers their
/// agent turn ids.
pub(super) async fn seed_cohort(
    store: &dyn Store,
    tags: &Tags,
    converted: usize,
    not_converted: usize,
) -> Vec<i64> {
    let mut turns = Vec::new();
    for i in 0..converted + not_converted {
        let (subscriber, turn) = seed(store, OFFERED, "Invented question about the course").await;
        if i < converted {
            tags.converted
                .lock()
                .unwrap()
                .insert(subscriber.as_str().to_owned());
        }
        turns.push(turn);
    }
    turns
}

fn analyst_answer(proposals: serde_json::Value) -> String {
    json!({ "proposals": proposals }).to_string()
}

fn proposal(text: &str, turn: i64) -> serde_json::Value {
    json!({
        "text": text,
        "rationale": "Paying contacts were asked which day suits them before the price.",
        "convertedCount": 12,
        "notConvertedCount": 3,
        "turnIds": [turn.to_string()]
    })
}

async fn run_once(
    store: &dyn Store,
    config: &TenantConfig,
    model: &ScriptedModel,
    tags: &Tags,
    forced: bool,
) -> Outcome {
    let analyst = Analyst {
        config,
        model,
        tags,
        temperature: 0.2,
    };
    run(store, &analyst, forced, now).await.expect("the run")
}

fn finished(outcome: &Outcome) -> (RunStatus, usize, Option<String>) {
    match outcome {
        Outcome::Finished {
            status,
            proposals,
            reason,
            ..
        } => (*status, *proposals, reason.clone()),
        other => panic!("the run did not finish: {other:?}"),
    }
}

/// A run whose whole cohort is in place answers proposals; the analyst saw the transcripts.
pub(super) async fn spec_031_a_completed_run_keeps_its_checked_proposals(store: &dyn Store) {
    let tags = Tags::default();
    let turns = seed_cohort(store, &tags, 20, 20).await;
    let config = learning_tenant(5.0);
    let model = ScriptedModel::replies([analyst_answer(json!([
        proposal(
            "Ask which day suits the contact before giving the price.",
            turns[0]
        ),
        proposal(
            "Name the course's first session when the contact hesitates.",
            turns[25]
        ),
    ]))])
    .with_id("mock:analyst");
    let outcome = run_once(store, &config, &model, &tags, false).await;
    let (status, kept, _) = finished(&outcome);
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(kept, 2);
    assert_eq!(model.calls(), 1);
    let pending = store
        .proposals(ProposalStatus::Pending, 100)
        .await
        .expect("pending");
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].turn_ids, vec![turns[0].to_string()]);
    let runs = store.learning_runs(10).await.expect("runs");
    assert_eq!(runs[0].status, RunStatus::Completed);
    assert_eq!(
        (runs[0].converted_count, runs[0].not_converted_count),
        (20, 20)
    );
    assert_eq!(runs[0].week, "2026-W49");
}

/// 031 § Cohort: a contact whose funnel never reached `offered`, whose write is older than 90
/// days, was not performed, or who wrote within 14 days is not a candidate; a failed read drops
/// the contact (never "not converted"); 19 on a side: `insufficient`, no model call.
pub(super) async fn spec_031_cohort_exclusions_failed_reads_and_nineteen_is_insufficient(
    store: &dyn Store,
) {
    let tags = Tags::default();
    seed_cohort(store, &tags, 19, 20).await;
    let excluded = [
        Seed {
            stage: "qualifying",
            ..OFFERED
        },
        Seed {
            days_ago: 91,
            ..OFFERED
        },
        Seed {
            status: "refused",
            ..OFFERED
        },
        Seed {
            later_message: Some(3),
            ..OFFERED
        },
        Seed {
            days_ago: 10,
            ..OFFERED
        },
    ];
    let mut outside = HashSet::new();
    for seed_kind in excluded {
        let (subscriber, _) = seed(store, seed_kind, "Invented").await;
        outside.insert(subscriber.as_str().to_owned());
    }
    // A paying contact whose read fails is dropped: the converted side stays at 19.
    let (failing, _) = seed(store, OFFERED, "Invented").await;
    tags.converted
        .lock()
        .unwrap()
        .insert(failing.as_str().to_owned());
    tags.failing
        .lock()
        .unwrap()
        .insert(failing.as_str().to_owned());

    let model = ScriptedModel::replies([analyst_answer(json!([]))]);
    let outcome = run_once(store, &learning_tenant(5.0), &model, &tags, false).await;
    let (status, kept, _) = finished(&outcome);
    assert_eq!(status, RunStatus::Insufficient);
    assert_eq!(kept, 0);
    assert_eq!(model.calls(), 0, "an insufficient run makes no model call");
    let read: HashSet<String> = tags.reads().into_iter().map(|(s, _)| s).collect();
    assert!(read.is_disjoint(&outside), "no excluded contact is read");
    assert!(
        read.contains(failing.as_str()),
        "the failing contact was read"
    );
    assert_eq!(read.len(), 40, "every candidate is read once");
    let run = &store.learning_runs(1).await.expect("runs")[0];
    assert_eq!((run.converted_count, run.not_converted_count), (19, 20));
}

/// 031 § Cohort: the labels are read one a second (tokio's paused clock).
pub(super) async fn spec_031_labels_are_read_one_a_second(store: &dyn Store) {
    let tags = Tags::default();
    seed_cohort(store, &tags, 3, 3).await;
    let model = ScriptedModel::replies(Vec::<String>::new());
    run_once(store, &learning_tenant(5.0), &model, &tags, false).await;
    let reads = tags.reads();
    assert_eq!(reads.len(), 6);
    for pair in reads.windows(2) {
        assert!(
            pair[1].1 - pair[0].1 >= super::READ_PACE,
            "reads are at least a second apart"
        );
    }
}

/// 031 § Analyst: transcripts are cleaned (identifier shapes removed, whitespace collapsed) and
/// fenced as untrusted; the active playbook and the rejected proposals are given.
pub(super) async fn spec_031_transcripts_are_cleaned_and_fenced(store: &dyn Store) {
    let tags = Tags::default();
    seed_cohort(store, &tags, 20, 19).await;
    seed(
        store,
        OFFERED,
        "Call me on +44 7700 900123   or\tmail invented@example.test",
    )
    .await;
    let model = ScriptedModel::replies([analyst_answer(json!([]))]);
    let outcome = run_once(store, &learning_tenant(5.0), &model, &tags, false).await;
    assert_eq!(finished(&outcome).0, RunStatus::Completed);
    let request = &model.requests()[0];
    let crate::model::Message::User { text } = &request.messages[0] else {
        panic!("one user message");
    };
    assert!(!text.contains("7700"), "a phone number is removed");
    assert!(
        !text.contains("invented@example.test"),
        "an email is removed"
    );
    assert!(
        text.contains("Call me on [removed] or mail [removed]"),
        "{text}"
    );
    assert!(text.contains("<<<CONTACT nonce="), "transcripts are fenced");
    assert!(text.contains("ACTIVE PLAYBOOK:\n(none)"));
    assert!(text.contains("REJECTED PROPOSALS"));
    assert!(request.system.contains("untrusted data"));
    assert!(request.tools.is_empty(), "the analyst has no tool");
}

/// 031 § Proposals: an answer that is not the JSON, or breaks a limit, fails the run with its
/// reason and keeps nothing.
pub(super) async fn spec_031_an_invalid_answer_fails_the_run_and_keeps_nothing(store: &dyn Store) {
    let long = "a".repeat(281);
    for answer in [
        "not json".to_owned(),
        json!({"proposals": [{"text": "x"}]}).to_string(),
        analyst_answer(json!([proposal(&long, 1)])),
    ] {
        let tags = Tags::default();
        seed_cohort(store, &tags, 20, 20).await;
        let model = ScriptedModel::replies([answer]);
        let outcome = run_once(store, &learning_tenant(5.0), &model, &tags, true).await;
        let (status, kept, reason) = finished(&outcome);
        assert_eq!(status, RunStatus::Failed);
        assert_eq!(kept, 0);
        assert!(reason.as_ref().is_some_and(|r| r.contains("analyst")));
        let stored = &store.learning_runs(1).await.expect("runs")[0];
        assert_eq!(stored.status, RunStatus::Failed, "the run is stored failed");
        assert_eq!(stored.reason, reason, "with its reason");
    }
    assert!(
        store
            .proposals(ProposalStatus::Pending, 100)
            .await
            .expect("pending")
            .is_empty(),
        "a failed run keeps no proposal"
    );
}

/// 031 § Proposals: a proposal with a digit, a currency symbol, a link or an unknown turn id is
/// refused alone; the sixth is dropped; no transcript text reaches a row or a log line.
pub(super) async fn spec_031_refused_proposals_and_no_transcript_text_stored_or_logged(
    store: &dyn Store,
) {
    // Every thread's lines: this test's, and those of the runs of the other tests.
    let logs = crate::observability::capture_global();
    let tags = Tags::default();
    let turns = seed_cohort(store, &tags, 20, 20).await;
    let good = |i: usize| {
        proposal(
            &format!("Invented good tactic {}", ["a", "b", "c", "d", "e", "f"][i]),
            turns[i],
        )
    };
    let answer = analyst_answer(json!([
        good(0),
        proposal("Offer the course for three payments of 9", turns[1]),
        proposal("Say it costs less than € a week", turns[1]),
        proposal("Send people to https://example.test", turns[1]),
        proposal("Invented tactic citing nothing known", 999_999_999),
        good(1),
    ]));
    let model = ScriptedModel::replies([answer]);
    let outcome = run_once(store, &learning_tenant(5.0), &model, &tags, false).await;
    let Outcome::Finished {
        status,
        proposals,
        refused,
        ..
    } = outcome
    else {
        panic!("finished");
    };
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(
        (proposals, refused),
        (1, 4),
        "four refused, the sixth dropped"
    );
    let pending = store
        .proposals(ProposalStatus::Pending, 100)
        .await
        .expect("pending");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].text, "Invented good tactic a");
    let stored = format!(
        "{pending:?}{:?}",
        store.learning_runs(5).await.expect("runs")
    );
    let logged = logs.text();
    for text in [
        "Invented question about the course",
        "Invented answer about the wheel",
    ] {
        assert!(!stored.contains(text), "no transcript text in a row");
        assert!(!logged.contains(text), "no transcript text in a log line");
    }
    assert!(logged.contains("learning run finished"));
    assert!(logged.contains("learning proposal refused"));
}

/// 031 § Analyst: the worst case is priced first; the oldest transcript of each side goes while
/// it is over `maxRunCostUsd`; below 20 a side: `skipped_budget`, no call; the cost is recorded
/// on the run and never in the daily budget.
pub(super) async fn spec_031_cost_trimming_and_skipped_budget_never_in_the_budget(
    store: &dyn Store,
) {
    let id = format!("test:analyst-{}", Uuid::new_v4().simple());
    crate::model::pricing::set_operator_price(
        &id,
        crate::model::pricing::Price {
            input: 1_000.0,
            cached_input: 1_000.0,
            cache_write: 1_000.0,
            output: 1_000.0,
        },
    );
    let tags = Tags::default();
    seed_cohort(store, &tags, 22, 22).await;
    // Price the full request and the one two transcripts shorter, to put the cap between.
    let probe = ScriptedModel::replies([analyst_answer(json!([]))]).with_id(id.clone());
    let outcome = run_once(store, &learning_tenant(1_000_000.0), &probe, &tags, false).await;
    assert_eq!(finished(&outcome).0, RunStatus::Completed);
    let full = super::run::worst_case_cost(&id, &probe.requests()[0]);
    let output_only = full
        - crate::model::pricing::cost_usd(
            &id,
            &super::transcript::worst_case_usage(0, super::ANALYST_OUTPUT_TOKENS),
        );
    // Each transcript is about 1/44 of the input: a cap a little under the full price trims.
    let cap = full - output_only / 60.0;
    let model = ScriptedModel::replies([analyst_answer(json!([]))]).with_id(id.clone());
    let outcome = run_once(store, &learning_tenant(cap), &model, &tags, true).await;
    assert_eq!(finished(&outcome).0, RunStatus::Completed);
    assert_eq!(model.calls(), 1);
    assert!(super::run::worst_case_cost(&id, &model.requests()[0]) <= cap);
    let run = &store.learning_runs(1).await.expect("runs")[0];
    assert!(
        run.converted_count < 22 && run.converted_count >= 20,
        "{run:?}"
    );
    assert_eq!(run.converted_count, run.not_converted_count, "one per side");
    assert!(run.cost_usd > 0.0, "the cost is recorded on the run");

    let broke = ScriptedModel::replies([analyst_answer(json!([]))]).with_id(id.clone());
    let outcome = run_once(store, &learning_tenant(output_only), &broke, &tags, true).await;
    assert_eq!(finished(&outcome).0, RunStatus::SkippedBudget);
    assert_eq!(broke.calls(), 0, "a skipped run makes no model call");
    let budget = store.budget(now().date_naive()).await.expect("budget");
    assert_eq!(
        budget,
        Default::default(),
        "nothing is charged to the daily budget"
    );
}

/// 031 § Scheduling: the week is claimed once; a second run that week finds it claimed, and
/// `--force` runs again; a run left `running` by a stopped process is failed on the next start.
pub(super) async fn spec_031_the_week_is_claimed_once_and_force_runs_again(store: &dyn Store) {
    let tags = Tags::default();
    seed_cohort(store, &tags, 20, 20).await;
    let config = learning_tenant(5.0);
    let model = ScriptedModel::replies([analyst_answer(json!([])), analyst_answer(json!([]))]);
    let stale = store
        .claim_learning_run("2026-W40", false, days_ago(50))
        .await
        .expect("claim")
        .expect("a stale run");
    assert_eq!(
        finished(&run_once(store, &config, &model, &tags, false).await).0,
        RunStatus::Completed
    );
    assert_eq!(
        run_once(store, &config, &model, &tags, false).await,
        Outcome::AlreadyClaimed {
            week: "2026-W49".to_owned()
        }
    );
    assert_eq!(
        finished(&run_once(store, &config, &model, &tags, true).await).0,
        RunStatus::Completed
    );
    assert_eq!(model.calls(), 2);
    let runs = store.learning_runs(10).await.expect("runs");
    let stale = runs.iter().find(|r| r.id == stale).expect("the stale run");
    assert_eq!(stale.status, RunStatus::Failed);
}

/// Two workers on one database check the week together: exactly one analyst call.
pub(super) async fn spec_031_two_workers_make_exactly_one_analyst_call(
    first: &dyn Store,
    second: &dyn Store,
) {
    let tags = Tags::default();
    seed_cohort(first, &tags, 20, 20).await;
    let config = learning_tenant(5.0);
    let model = ScriptedModel::replies([analyst_answer(json!([])), analyst_answer(json!([]))]);
    let (a, b) = tokio::join!(
        run_once(first, &config, &model, &tags, false),
        run_once(second, &config, &model, &tags, false)
    );
    let claimed = [&a, &b]
        .iter()
        .filter(|o| matches!(o, Outcome::AlreadyClaimed { .. }))
        .count();
    assert_eq!(claimed, 1, "one worker finds the week claimed: {a:?} {b:?}");
    assert_eq!(model.calls(), 1, "exactly one analyst call");
}

/// 031: the agent never writes the playbook: no tool offered on a turn names it, for a
/// tenant that learns.
#[test]
fn spec_031_no_tool_can_write_the_playbook() {
    let config = learning_tenant(5.0);
    let tools = config.tools.as_ref().expect("the example has tools");
    for offer_read in [false, true] {
        for spec in crate::tools::build_specs(tools, offer_read) {
            let text =
                format!("{} {} {}", spec.name, spec.description, spec.parameters).to_lowercase();
            for word in ["playbook", "insight", "proposal", "tactic"] {
                assert!(!text.contains(word), "tool {} mentions {word}", spec.name);
            }
        }
    }
}

#[test]
fn spec_031_proposal_checks_refuse_digits_currency_shapes_and_unknown_turns() {
    use super::proposals::{Refusal, check, text_refusal};
    assert_eq!(
        text_refusal("Ask about the 3 courses"),
        Some(Refusal::Digit)
    );
    assert_eq!(
        text_refusal("Ask about the ٣ courses"),
        Some(Refusal::Digit)
    );
    assert_eq!(text_refusal("Mention the £ price"), Some(Refusal::Currency));
    assert_eq!(text_refusal("Mention the ₹ price"), Some(Refusal::Currency));
    assert_eq!(
        text_refusal("Write to invented@example.test"),
        Some(Refusal::RemovedShape)
    );
    assert_eq!(text_refusal("Ask which day suits them"), None);
    let known: HashSet<String> = ["7".to_owned()].into();
    let checked = check(
        &analyst_answer(json!([proposal("Invented", 7), proposal("Invented", 8)])),
        &known,
    )
    .expect("parses");
    assert_eq!(checked.kept.len(), 1);
    assert_eq!(checked.refused, vec![Refusal::UnknownTurn]);
    let six = (0..6).map(|_| proposal("Invented", 7)).collect::<Vec<_>>();
    let checked = check(&analyst_answer(json!(six)), &known).expect("parses");
    assert_eq!(
        (checked.kept.len(), checked.dropped),
        (5, 1),
        "the sixth is dropped"
    );
    let long = check(
        &analyst_answer(json!([proposal(&"a".repeat(281), 7)])),
        &known,
    );
    assert!(long.is_err(), "over 280 characters fails the run");
    let rationale = json!([{"text": "x", "rationale": "b".repeat(501), "convertedCount": 1, "notConvertedCount": 1, "turnIds": ["7"]}]);
    assert!(check(&analyst_answer(rationale), &known).is_err());
    assert!(check(r#"{"proposals": [], "extra": 1}"#, &known).is_err());
}

#[test]
fn spec_031_learning_requires_a_funnel_field_and_a_cost_cap() {
    let dir = tempfile::tempdir().expect("temp dir");
    crate::config::examples::copy_demo_into(dir.path());
    let rules_path = dir.path().join("rules.json");
    let mut rules: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rules_path).expect("read")).expect("json");
    let context = ConfigContext::default();
    let load = |rules: &serde_json::Value| {
        std::fs::write(&rules_path, rules.to_string()).expect("write");
        crate::config::load_dir(dir.path(), &context)
    };
    rules["learning"] = json!({"language": "English", "convertedTag": "paid"});
    let errors = load(&rules).expect_err("no cost cap");
    assert!(errors.to_string().contains("maxRunCostUsd"), "{errors}");
    rules["learning"] = json!({"convertedTag": "paid", "maxRunCostUsd": 0});
    let errors = load(&rules).expect_err("a zero cap");
    assert!(
        errors.to_string().contains("$.learning.maxRunCostUsd"),
        "{errors}"
    );
    rules["learning"] = json!({"convertedTag": "paid", "maxRunCostUsd": 5});
    load(&rules).expect("a learning tenant with a funnel loads");
    std::fs::remove_file(dir.path().join("tools.json")).expect("remove tools.json");
    let errors = load(&rules).expect_err("no funnel field");
    let text = errors.to_string();
    assert!(
        text.contains("rules.json") && text.contains("$.learning"),
        "{text}"
    );
    assert!(text.contains("funnel field"), "{text}");
}

/// The cases that take one store, named once: each backend's module runs them through its own
/// `cases!`.
macro_rules! store_cases {
    ($run:ident) => {
        $run!(
            spec_031_a_completed_run_keeps_its_checked_proposals,
            spec_031_cohort_exclusions_failed_reads_and_nineteen_is_insufficient,
            spec_031_labels_are_read_one_a_second,
            spec_031_transcripts_are_cleaned_and_fenced,
            spec_031_an_invalid_answer_fails_the_run_and_keeps_nothing,
            spec_031_refused_proposals_and_no_transcript_text_stored_or_logged,
            spec_031_cost_trimming_and_skipped_budget_never_in_the_budget,
            spec_031_the_week_is_claimed_once_and_force_runs_again,
            spec_031_a_review_makes_one_content_hashed_version_not_yet_active,
            spec_031_the_activation_gate_refuses_and_a_rollback_skips_it,
            spec_031_measures_attribute_to_the_version_of_the_first_offered_write,
            spec_031_report_has_a_section_per_playbook_version,
        );
    };
}

mod sqlite {
    use crate::store::sqlite::SqliteStore;

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        let store = SqliteStore::connect(&url).await.expect("connect");
        (dir, store)
    }

    macro_rules! cases {
        ($($case:ident),* $(,)?) => {$(
            #[tokio::test(start_paused = true)]
            async fn $case() {
                let (_dir, store) = store().await;
                super::$case(&store).await;
            }
        )*};
    }

    store_cases!(cases);

    #[tokio::test(start_paused = true)]
    async fn spec_031_the_hourly_check_runs_the_analyst_once_per_iso_week() {
        let (_dir, store) = store().await;
        super::spec_031_the_hourly_check_runs_the_analyst_once_per_iso_week(std::sync::Arc::new(
            store,
        ))
        .await;
    }

    /// Two processes on one SQLite file.
    #[tokio::test(start_paused = true)]
    async fn spec_031_two_workers_make_exactly_one_analyst_call() {
        let (dir, first) = store().await;
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        let second = SqliteStore::connect(&url).await.expect("a second store");
        super::spec_031_two_workers_make_exactly_one_analyst_call(&first, &second).await;
    }
}

/// Runs `work` on tokio's paused clock beside a database reached over sockets: auto-advance
/// would jump to the pool's timeouts while a query waits on the network, so the clock is moved
/// by hand, 50 ms at a time, while a blocking task (a millisecond) holds auto-advance off.
async fn driven<F: std::future::Future>(work: F) -> F::Output {
    tokio::time::pause();
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            biased;
            out = &mut work => {
                tokio::time::resume();
                return out;
            }
            _ = tokio::task::spawn_blocking(|| std::thread::sleep(std::time::Duration::from_millis(1))) => {
                tokio::time::advance(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

mod postgres {
    use super::driven;
    use crate::store::postgres::{PgStore, connect_isolated, connect_isolated_pair};

    fn url() -> String {
        match std::env::var("TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => panic!("TEST_DATABASE_URL is not set: this test needs PostgreSQL"),
        }
    }

    async fn store() -> PgStore {
        connect_isolated(&url()).await.expect("connect")
    }

    macro_rules! cases {
        ($($case:ident),* $(,)?) => {$(
            #[tokio::test]
            #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
            async fn $case() {
                let store = store().await;
                driven(super::$case(&store)).await;
            }
        )*};
    }

    store_cases!(cases);

    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn spec_031_the_hourly_check_runs_the_analyst_once_per_iso_week() {
        let store = std::sync::Arc::new(store().await);
        driven(super::spec_031_the_hourly_check_runs_the_analyst_once_per_iso_week(store)).await;
    }

    /// Two replicas: two pools on one schema.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn spec_031_two_workers_make_exactly_one_analyst_call() {
        let (first, second) = connect_isolated_pair(&url()).await.expect("connect");
        driven(super::spec_031_two_workers_make_exactly_one_analyst_call(
            &first, &second,
        ))
        .await;
    }
}
