//! Conformance: learning runs and their weekly claim, proposals, playbook versions and eval
//! records (`LearningStore`, 031). Weeks and hashes are random, so the cases share nothing.

use super::*;
use crate::store::learning::{
    DecisionKind, EvalRecord, LearningRun, NewProposal, Proposal, ProposalStatus, Review, RunEnd,
    RunStatus,
};

fn fresh_week() -> String {
    format!("test-{}", Uuid::new_v4().simple())
}

fn fresh_hash() -> String {
    format!("{:064x}", Uuid::new_v4().as_u128())
}

fn proposal(text: &str) -> NewProposal {
    NewProposal {
        text: text.to_owned(),
        rationale: "Invented rationale".to_owned(),
        converted_count: 4,
        not_converted_count: 1,
        turn_ids: vec!["7".to_owned(), "9".to_owned()],
    }
}

fn end(status: RunStatus, proposals: Vec<NewProposal>) -> RunEnd {
    RunEnd {
        status,
        converted_count: 21,
        not_converted_count: 30,
        cost_usd: 0.123456,
        reason: None,
        proposals,
        at: at_s(60),
    }
}

/// 031: one unforced run per ISO week, whoever claims first; `--force` always gets a run.
pub async fn spec_031_the_weekly_claim_is_taken_once(store: &dyn Store) {
    let week = fresh_week();
    let first = store
        .claim_learning_run(&week, false, t0())
        .await
        .expect("claim");
    assert!(first.is_some(), "the first claim of a week wins");
    let second = store
        .claim_learning_run(&week, false, at_s(1))
        .await
        .expect("claim");
    assert_eq!(second, None, "the week is claimed");
    let forced = store
        .claim_learning_run(&week, true, at_s(2))
        .await
        .expect("forced claim");
    assert!(forced.is_some() && forced != first, "--force runs again");

    let other = fresh_week();
    let (a, b) = tokio::join!(
        store.claim_learning_run(&other, false, t0()),
        store.claim_learning_run(&other, false, t0())
    );
    let won = [a.expect("claim"), b.expect("claim")]
        .iter()
        .filter(|c| c.is_some())
        .count();
    assert_eq!(won, 1, "of two racing claims exactly one wins");
}

/// A run claimed for a week of its own at `at`: its id.
async fn claimed_run(store: &dyn Store, at: DateTime<Utc>) -> i64 {
    store
        .claim_learning_run(&fresh_week(), false, at)
        .await
        .expect("claim")
        .expect("a run")
}

/// Run `id` as the store lists it.
async fn run_of(store: &dyn Store, id: i64) -> LearningRun {
    let runs = store.learning_runs(50).await.expect("runs");
    runs.into_iter().find(|r| r.id == id).expect("the run")
}

/// The proposals in `status` (up to 1000).
async fn proposals_in(store: &dyn Store, status: ProposalStatus) -> Vec<Proposal> {
    store
        .proposals(status, 1000)
        .await
        .unwrap_or_else(|e| panic!("proposals {status:?}: {e:?}"))
}

/// 031: a run's end and its proposals are written together; a run ends once.
pub async fn spec_031_a_run_ends_with_its_proposals(store: &dyn Store) {
    let id = claimed_run(store, t0()).await;
    let runs = store.learning_runs(50).await.expect("runs");
    let running = runs.iter().find(|r| r.id == id).expect("the run is listed");
    assert_eq!(running.status, RunStatus::Running);
    assert_eq!(running.finished_at, None);

    let text = format!("Invented tactic {}", Uuid::new_v4().simple());
    store
        .finish_learning_run(id, &end(RunStatus::Completed, vec![proposal(&text)]))
        .await
        .expect("finish");
    let run = run_of(store, id).await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!((run.converted_count, run.not_converted_count), (21, 30));
    assert!((run.cost_usd - 0.123456).abs() < 1e-9, "{}", run.cost_usd);
    assert_eq!(run.finished_at, Some(at_s(60)));

    let pending = proposals_in(store, ProposalStatus::Pending).await;
    let stored = pending
        .iter()
        .find(|p| p.text == text)
        .expect("the proposal is pending");
    assert_eq!(stored.run_id, id);
    assert_eq!(stored.turn_ids, vec!["7".to_owned(), "9".to_owned()]);
    assert_eq!((stored.converted_count, stored.not_converted_count), (4, 1));
    assert_eq!(stored.created_at, at_s(60));

    let again = store
        .finish_learning_run(id, &end(RunStatus::Failed, vec![]))
        .await;
    assert!(again.is_err(), "a finished run is not finished again");
}

/// 031: a process that stopped mid-run leaves its run `failed`, found on the next start.
pub async fn spec_031_a_run_left_running_is_failed(store: &dyn Store) {
    let id = claimed_run(store, t0()).await;
    let recent = claimed_run(store, at_s(100)).await;
    let failed = store
        .fail_running_learning_runs(at_s(50), "the process stopped during the run", at_s(150))
        .await
        .expect("fail");
    assert!(failed >= 1);
    let runs = store.learning_runs(50).await.expect("runs");
    let still = runs
        .iter()
        .find(|r| r.id == recent)
        .expect("the recent run");
    assert_eq!(
        still.status,
        RunStatus::Running,
        "a run started since is another process's, still at work"
    );
    let run = run_of(store, id).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        run.reason.as_deref(),
        Some("the process stopped during the run")
    );
}

/// 031: one review writes its decisions and one version; a version's hash is unique and the
/// version is not active until activated; only pending proposals change.
pub async fn spec_031_a_review_makes_one_version_not_yet_active(store: &dyn Store) {
    let id = claimed_run(store, t0()).await;
    let (keep, drop) = (
        format!("Keep {}", Uuid::new_v4().simple()),
        format!("Drop {}", Uuid::new_v4().simple()),
    );
    store
        .finish_learning_run(
            id,
            &end(RunStatus::Completed, vec![proposal(&keep), proposal(&drop)]),
        )
        .await
        .expect("finish");
    let pending = proposals_in(store, ProposalStatus::Pending).await;
    let find = |text: &str| pending.iter().find(|p| p.text == text).expect("pending").id;
    let (keep_id, drop_id) = (find(&keep), find(&drop));
    let hash = fresh_hash();
    let review = Review {
        approved: vec![keep_id],
        rejected: vec![drop_id],
        reasons: vec![(drop_id, "Too pushy".to_owned())],
        version: Some((hash.clone(), vec![keep.clone()])),
        by: "console".to_owned(),
        at: at_s(90),
        ..Review::default()
    };
    store.record_review(&review).await.expect("review");
    // The same review again changes nothing: decided proposals stay, the hash is kept.
    store
        .record_review(&Review {
            approved: vec![drop_id],
            rejected: vec![keep_id],
            version: Some((hash.clone(), vec!["Other".to_owned()])),
            by: "cli".to_owned(),
            at: at_s(91),
            ..Review::default()
        })
        .await
        .expect("review again");

    let approved = proposals_in(store, ProposalStatus::Approved).await;
    assert!(
        approved
            .iter()
            .any(|p| p.id == keep_id && p.reviewed_at == Some(at_s(90)))
    );
    let rejected = proposals_in(store, ProposalStatus::Rejected).await;
    assert!(rejected.iter().any(|p| p.id == drop_id));
    let versions = store.playbook_versions().await.expect("versions");
    let version = versions
        .iter()
        .filter(|v| v.content_hash == hash)
        .collect::<Vec<_>>();
    assert_eq!(version.len(), 1, "one version per hash");
    assert_eq!(version[0].insights, vec![keep], "a version never changes");
    assert!(!version[0].active, "a new version is not active");
    assert_eq!(version[0].activated_at, None);

    // Each decision is recorded once, with who, when and why; the repeat decided nothing.
    let decisions = store.learning_decisions(1000).await.expect("decisions");
    let of = |id: i64| {
        decisions
            .iter()
            .filter(|d| d.proposal_id == Some(id))
            .collect::<Vec<_>>()
    };
    let (kept, dropped) = (of(keep_id), of(drop_id));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(kept[0].kind, DecisionKind::Approved);
    assert_eq!(kept[0].version_hash.as_deref(), Some(hash.as_str()));
    assert_eq!((kept[0].by.as_str(), kept[0].at), ("console", at_s(90)));
    assert_eq!(dropped[0].kind, DecisionKind::Rejected);
    assert_eq!(dropped[0].reason.as_deref(), Some("Too pushy"));
    assert_eq!(dropped[0].version_hash, None);
}

/// 031: at most one version is active; activating another retires the first, and a version's
/// first activation time is kept (how a rollback is known).
pub async fn spec_031_one_version_is_active_and_its_first_activation_is_kept(store: &dyn Store) {
    let (first, second) = (fresh_hash(), fresh_hash());
    for hash in [&first, &second] {
        store
            .record_review(&Review {
                version: Some((hash.clone(), vec![format!("Tactic {hash}")])),
                by: "cli".to_owned(),
                at: t0(),
                ..Review::default()
            })
            .await
            .expect("version");
    }
    let versions = store.playbook_versions().await.expect("versions");
    let id = |hash: &str| {
        versions
            .iter()
            .find(|v| v.content_hash == hash)
            .expect("stored")
            .id
    };
    // The first, the second, then a roll back to the first: the version active after each.
    let mut active = Vec::new();
    for (hash, at) in [(&first, 10), (&second, 20), (&first, 30)] {
        store
            .activate_playbook(id(hash), "console", at_s(at))
            .await
            .unwrap_or_else(|e| panic!("activate at {at}: {e:?}"));
        active.push(store.active_playbook().await.expect("active").expect("one"));
    }
    assert_eq!(active[0].content_hash, first);
    assert_eq!(active[1].content_hash, second);
    assert_eq!(active[2].content_hash, first, "rolled back");
    assert_eq!(
        active[2].activated_at,
        Some(at_s(10)),
        "the first activation is kept"
    );
    let all = store.playbook_versions().await.expect("versions");
    assert_eq!(all.iter().filter(|v| v.active).count(), 1, "one active");
    assert!(
        store
            .activate_playbook(i64::MAX, "cli", at_s(40))
            .await
            .is_err()
    );
    // Each activation is a decision: the first two gated, the third a rollback.
    let decisions = store.learning_decisions(1000).await.expect("decisions");
    let mut taken: Vec<_> = decisions
        .iter()
        .filter(|d| [&first, &second].contains(&d.version_hash.as_ref().unwrap_or(&String::new())))
        .filter(|d| d.proposal_id.is_none() && d.place.is_none())
        .map(|d| {
            (
                d.kind,
                d.version_hash.clone().unwrap_or_default(),
                d.at,
                d.by.clone(),
            )
        })
        .collect();
    taken.reverse();
    let console = || "console".to_owned();
    assert_eq!(
        taken,
        vec![
            (DecisionKind::Activated, first.clone(), at_s(10), console()),
            (DecisionKind::Activated, second.clone(), at_s(20), console()),
            (DecisionKind::RolledBack, first.clone(), at_s(30), console()),
        ]
    );
}

/// 031: the newest eval record of a playbook against a suite, never a mock model's.
pub async fn spec_031_eval_records_of_a_mock_model_never_count(store: &dyn Store) {
    let (playbook, suite) = (fresh_hash(), fresh_hash());
    let record = |model: &str, at, passed: bool| EvalRecord {
        playbook_hash: playbook.clone(),
        suite_hash: suite.clone(),
        model: model.to_owned(),
        outcomes: json!({"case-a": passed}),
        created_at: at,
    };
    store
        .record_eval(&record("mock:demo", at_s(1), true))
        .await
        .expect("record");
    assert_eq!(
        store.latest_eval(&playbook, &suite).await.expect("read"),
        None,
        "a mock model's record never counts"
    );
    store
        .record_eval(&record("openai:gpt-4.1-mini", at_s(2), false))
        .await
        .expect("record");
    store
        .record_eval(&record("openai:gpt-4.1-mini", at_s(3), true))
        .await
        .expect("record");
    store
        .record_eval(&record("mock:demo", at_s(4), false))
        .await
        .expect("record");
    let latest = store
        .latest_eval(&playbook, &suite)
        .await
        .expect("read")
        .expect("a real model's record");
    assert_eq!(latest, record("openai:gpt-4.1-mini", at_s(3), true));
    assert_eq!(
        store
            .latest_eval(&playbook, &fresh_hash())
            .await
            .expect("read"),
        None,
        "another suite's record does not count"
    );
}

/// 031: `turns.playbook_version` round-trips, and the learning reads find a conversation's
/// agent turns with a record.
pub async fn spec_031_playbook_version_is_kept_on_the_turn(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let since = at_s(1000);
    let actions = json!([{"tool": "set_field", "id": "funnel_stage", "value": "offered", "status": "performed"}]);
    let written = record(
        store,
        NewTurn {
            model: Some("mock:demo".to_owned()),
            actions: Some(actions.clone()),
            playbook_version: Some("abc123".to_owned()),
            ..NewTurn::agent(
                conversation.id,
                "Invented",
                "answered_inline",
                true,
                at_s(1001),
            )
        },
    )
    .await;
    let turn = store.turn(written).await.expect("turn").expect("exists");
    assert_eq!(turn.playbook_version.as_deref(), Some("abc123"));

    let candidates = store
        .conversations_with_actions_since(since)
        .await
        .expect("candidates");
    assert!(candidates.contains(&conversation.id));
    assert!(
        !store
            .conversations_with_actions_since(at_s(1002))
            .await
            .expect("candidates")
            .contains(&conversation.id),
        "an older record is outside the window"
    );
    let turns = store.playbook_turns(since).await.expect("turns");
    let mine = turns
        .iter()
        .find(|t| t.conversation_id == conversation.id)
        .expect("the turn");
    assert_eq!(mine.playbook_version.as_deref(), Some("abc123"));
    assert_eq!(mine.actions, actions);
    assert_eq!(mine.at, at_s(1001));
}

/// 031 § Measures: each conversation's latest bound turn (an unbound one never counts), from
/// `since` on.
pub async fn spec_031_the_latest_bound_turn_of_each_conversation(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    for (id, bound, at) in [
        (conversation.id, true, at_s(2001)),
        (conversation.id, true, at_s(2003)),
        (conversation.id, false, at_s(2009)),
        (other.id, true, at_s(1999)),
    ] {
        record(store, NewTurn::user(id, "Invented", bound, at)).await;
    }
    let latest = store
        .last_bound_turns(at_s(2000))
        .await
        .expect("latest bound turns");
    let mine: Vec<_> = latest
        .iter()
        .filter(|(id, _)| *id == conversation.id || *id == other.id)
        .collect();
    assert_eq!(
        mine,
        vec![&(conversation.id, at_s(2003))],
        "the latest bound turn; the unbound one and the one before `since` do not count"
    );
}
