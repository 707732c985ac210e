//! 031's review and activation items: a review makes one content-hashed version, and the
//! activation gate refuses without a passing eval record while a rollback skips it. Run on both
//! backends by the parent module's cases.

use super::*;

/// Pending proposals written as a run would: answers their ids.
async fn pending_proposals(store: &dyn Store, texts: &[&str]) -> Vec<i64> {
    use crate::store::learning::{NewProposal, RunEnd};
    let run = store
        .claim_learning_run(&format!("review-{}", Uuid::new_v4().simple()), true, now())
        .await
        .expect("claim")
        .expect("a run");
    let proposals = texts
        .iter()
        .map(|text| NewProposal {
            text: (*text).to_owned(),
            rationale: "Invented rationale".to_owned(),
            converted_count: 3,
            not_converted_count: 1,
            turn_ids: vec!["1".to_owned()],
        })
        .collect();
    let end = RunEnd {
        status: RunStatus::Completed,
        converted_count: 20,
        not_converted_count: 20,
        cost_usd: 0.0,
        reason: None,
        proposals,
        at: now(),
    };
    store.finish_learning_run(run, &end).await.expect("finish");
    let pending = store
        .proposals(ProposalStatus::Pending, 1000)
        .await
        .expect("pending");
    texts
        .iter()
        .map(|t| pending.iter().find(|p| p.text == *t).expect("pending").id)
        .collect()
}

/// 031 § Review: one review's approvals (as written or edited) make one immutable version named
/// by its content hash, not active; a rejected proposal is in no version; an edit keeps the
/// rules; a version holds at most 10 insights and 2,000 characters.
pub(super) async fn spec_031_a_review_makes_one_content_hashed_version_not_yet_active(
    store: &dyn Store,
) {
    use crate::learning::review::{Decision, apply};
    let ids = pending_proposals(
        store,
        &[
            "Invented tactic one",
            "Invented tactic two",
            "Invented tactic three",
        ],
    )
    .await;
    let refused = apply(
        store,
        &[Decision::Approve {
            id: ids[0],
            text: Some("Offer 2 dates".to_owned()),
            reason: None,
        }],
        "cli",
        now(),
    )
    .await;
    assert!(
        refused.is_err_and(|e| e.contains("digit")),
        "an edit keeps the rules"
    );
    let reviewed = apply(
        store,
        &[
            Decision::Approve {
                id: ids[0],
                text: None,
                reason: None,
            },
            Decision::Approve {
                id: ids[1],
                text: Some("Invented tactic two, edited".to_owned()),
                reason: None,
            },
            Decision::Reject {
                id: ids[2],
                reason: None,
            },
        ],
        "cli",
        now(),
    )
    .await
    .expect("the review");
    let (hash, insights) = reviewed.version.expect("a version");
    assert_eq!(
        insights,
        vec![
            "Invented tactic one".to_owned(),
            "Invented tactic two, edited".to_owned()
        ]
    );
    assert_eq!(hash, crate::learning::playbook::content_hash(&insights));
    let versions = store.playbook_versions().await.expect("versions");
    assert_eq!(versions.len(), 1);
    assert!(!versions[0].active, "a reviewed version is not active");
    assert!(store.active_playbook().await.expect("active").is_none());
    assert!(
        apply(
            store,
            &[Decision::Reject {
                id: ids[2],
                reason: None,
            }],
            "cli",
            now()
        )
        .await
        .is_err(),
        "a decided proposal is not pending"
    );
    assert!(
        store
            .proposals(ProposalStatus::Pending, 100)
            .await
            .expect("pending")
            .is_empty()
    );

    // Bounds: an eleventh insight, or over 2,000 characters, is refused.
    let texts: Vec<String> = (0..11)
        .map(|i| format!("Invented tactic {}", "abcdefghijk".chars().nth(i).unwrap()))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let eleven = approve_all(store, &refs).await;
    assert!(
        eleven.is_err_and(|e| e.contains("at most 10")),
        "ten insights at most"
    );
    let long: Vec<String> = (0..9)
        .map(|i| {
            format!(
                "{} {}",
                "Invented long tactic".repeat(12),
                "abcdefghi".chars().nth(i).unwrap()
            )
        })
        .collect();
    let refs: Vec<&str> = long.iter().map(|t| &t[..t.len().min(280)]).collect();
    let over = approve_all(store, &refs).await;
    assert!(
        over.is_err_and(|e| e.contains("2000 characters")),
        "2,000 characters at most"
    );
    assert_eq!(
        store.playbook_versions().await.expect("versions").len(),
        1,
        "nothing written"
    );
}

/// One review approving `texts`, each a pending proposal first: what it answers.
async fn approve_all(
    store: &dyn Store,
    texts: &[&str],
) -> Result<crate::learning::review::Reviewed, String> {
    use crate::learning::review::{Decision, apply};
    let ids = pending_proposals(store, texts).await;
    let decisions: Vec<Decision> = ids
        .iter()
        .map(|&id| Decision::Approve {
            id,
            text: None,
            reason: None,
        })
        .collect();
    apply(store, &decisions, "cli", now()).await
}

/// A version made by one review approving `texts`: answers its hash.
async fn version_of(store: &dyn Store, texts: &[&str]) -> String {
    approve_all(store, texts)
        .await
        .expect("review")
        .version
        .expect("a version")
        .0
}

async fn eval_record(store: &dyn Store, playbook: &str, model: &str, outcomes: serde_json::Value) {
    store
        .record_eval(&crate::store::learning::EvalRecord {
            playbook_hash: playbook.to_owned(),
            suite_hash: "suite-a".to_owned(),
            model: model.to_owned(),
            outcomes,
            created_at: now(),
        })
        .await
        .expect("record");
}

/// 031 § Activation gate: every refusal (no record, a mock model's record, no baseline, a new
/// failure, an unknown or too short version), a first activation against the no-playbook
/// record, the next against the active version's, and the rollback without the gate.
pub(super) async fn spec_031_the_activation_gate_refuses_and_a_rollback_skips_it(
    store: &dyn Store,
) {
    use crate::learning::gate::{Activated, activate};
    const REAL: &str = "openai:gpt-4.1-mini";
    let gate = async |wanted: &str| activate(store, wanted, "suite-a", "cli", now()).await;
    let refused = async |wanted: &str, why: &str| gate(wanted).await.expect_err(why);
    let active = async || {
        let active = store.active_playbook().await.expect("active");
        active.expect("one").content_hash
    };

    let first = version_of(store, &["Invented first tactic"]).await;
    let no_record = refused(&first, "no record").await;
    assert!(
        no_record.contains(&format!("PLAYBOOK_VERSION={first} manychat-agent eval")),
        "{no_record}"
    );
    eval_record(store, &first, "mock:demo", json!({"a": true})).await;
    assert!(gate(&first).await.is_err(), "a mock record never counts");
    eval_record(store, &first, REAL, json!({"a": false, "b": true})).await;
    let no_baseline = refused(&first, "no baseline").await;
    assert!(
        no_baseline.contains("no-playbook baseline")
            && no_baseline.contains("without PLAYBOOK_VERSION"),
        "{no_baseline}"
    );
    eval_record(store, "", REAL, json!({"a": true, "b": true})).await;
    let new_failure = refused(&first, "a new failure").await;
    assert!(
        new_failure.contains("fails 1 case(s)") && new_failure.contains('a'),
        "{new_failure}"
    );
    assert!(
        activate(store, &first, "suite-b", "cli", now())
            .await
            .is_err(),
        "a record against another suite does not count"
    );
    // A baseline that passes nothing (an outage while it ran) gates nothing: refused.
    eval_record(store, "", REAL, json!({"a": false, "b": false})).await;
    let outage = refused(&first, "a baseline that passes no case").await;
    assert!(outage.contains("passes no case"), "{outage}");
    // The baseline failed `a` too: not a new failure.
    eval_record(store, "", REAL, json!({"a": false, "b": true})).await;
    assert_eq!(
        gate(&first[..8]).await,
        Ok(Activated::Gated {
            hash: first.clone()
        })
    );
    assert_eq!(active().await, first);

    let second = version_of(store, &["Invented second tactic"]).await;
    eval_record(store, &second, REAL, json!({"a": true, "b": false})).await;
    let regressed = refused(&second, "b regressed").await;
    assert!(regressed.contains('b'), "{regressed}");
    eval_record(store, &second, REAL, json!({"a": true, "b": true})).await;
    assert_eq!(
        gate(&second).await,
        Ok(Activated::Gated {
            hash: second.clone()
        })
    );
    // Rollback: the first was active before; no record is asked for.
    assert_eq!(
        activate(store, &first, "suite-z", "cli", now()).await,
        Ok(Activated::RolledBack {
            hash: first.clone()
        })
    );
    assert_eq!(active().await, first);
    let unknown = refused("ffffffffffff", "unknown").await;
    assert!(unknown.contains("no playbook version"), "{unknown}");
    let short = refused(&first[..4], "too short").await;
    assert!(short.contains("at least its first 8"), "{short}");
}
