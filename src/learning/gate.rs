//! The activation gate (031 § Activation gate): a version goes live only with an eval record of
//! its content hash against the current golden suite's hash, made with a model that is not a
//! mock, in which no asserted case fails that did not also fail in the baseline (the active
//! version's record, or the no-playbook record on a first activation). A baseline that passes
//! no case gates nothing (the model was likely unreachable while it ran) and is refused. A version that was
//! active before goes live again without the gate: the rollback.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::playbook::find;
use crate::store::Store;

/// The golden suite the gate reads unless told otherwise (`insights activate --suite`, the
/// console), relative to the working directory.
pub const DEFAULT_SUITE: &str = "evals/golden";

/// What `activate` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Activated {
    /// Passed the gate.
    Gated {
        hash: String,
    },
    /// Was active before: no gate.
    RolledBack {
        hash: String,
    },
    AlreadyActive {
        hash: String,
    },
}

/// The golden suite's hash: the SHA-256 of its `*.jsonl` files, by name, in name order.
pub fn suite_hash(dir: &Path) -> std::io::Result<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        hasher.update(name.unwrap_or_default().as_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(&file)?);
        hasher.update([0]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The command that writes the eval record a gate needs (`""`: the no-playbook record).
fn eval_command(hash: &str) -> String {
    match hash {
        "" => "manychat-agent eval --model <provider:model> (without PLAYBOOK_VERSION)".to_owned(),
        hash => format!("PLAYBOOK_VERSION={hash} manychat-agent eval --model <provider:model>"),
    }
}

/// Activates the version `wanted` names (a hash or a unique prefix of at least 8 characters),
/// recorded as decided by `by` (`review::BY_*`) at `at`. `Err` says why not, naming the eval
/// to run when a record is missing.
pub async fn activate(
    store: &dyn Store,
    wanted: &str,
    suite: &str,
    by: &str,
    at: DateTime<Utc>,
) -> Result<Activated, String> {
    let read = |e: crate::store::StoreError| e.to_string();
    let versions = store.playbook_versions().await.map_err(read)?;
    let version = find(&versions, wanted)?;
    let hash = version.content_hash.clone();
    if version.active {
        return Ok(Activated::AlreadyActive { hash });
    }
    if version.activated_at.is_some() {
        store
            .activate_playbook(version.id, by, at)
            .await
            .map_err(read)?;
        return Ok(Activated::RolledBack { hash });
    }
    let candidate = store
        .latest_eval(&hash, suite)
        .await
        .map_err(read)?
        .ok_or_else(|| {
            format!(
                "no eval record of version {} against the current golden suite made with a \
                 real model: run `{}` first",
                short(&hash),
                eval_command(&hash)
            )
        })?;
    let baseline_hash = versions
        .iter()
        .find(|v| v.active)
        .map(|v| v.content_hash.clone())
        .unwrap_or_default();
    let baseline = store
        .latest_eval(&baseline_hash, suite)
        .await
        .map_err(read)?
        .ok_or_else(|| {
            let which = match baseline_hash.as_str() {
                "" => "the no-playbook baseline".to_owned(),
                active => format!("the active version {}", short(active)),
            };
            format!(
                "no eval record of {which} against the current golden suite made with a real \
                 model: run `{}` first",
                eval_command(&baseline_hash)
            )
        })?;
    if passes_no_case(&baseline.outcomes) {
        // Nothing could fail anew against it: a provider outage during the baseline's eval
        // would let any version through.
        return Err(format!(
            "the baseline's eval record passes no case (was the model unreachable?): run `{}` \
             again first",
            eval_command(&baseline_hash)
        ));
    }
    let regressions = new_failures(&candidate.outcomes, &baseline.outcomes);
    if !regressions.is_empty() {
        return Err(format!(
            "version {} fails {} case(s) the baseline passes: {}",
            short(&hash),
            regressions.len(),
            regressions.join(", ")
        ));
    }
    store
        .activate_playbook(version.id, by, at)
        .await
        .map_err(read)?;
    Ok(Activated::Gated { hash })
}

/// An eval report's outcomes as its record keeps them and [`new_failures`] reads them: each
/// case's id, mapped to whether it passed. Every golden case is asserted (each has `expect`).
pub fn outcomes(report: &crate::evals::EvalReport) -> Value {
    Value::Object(
        report
            .results
            .iter()
            .map(|r| (r.id.clone(), Value::Bool(r.passed())))
            .collect(),
    )
}

/// A record in which no case passed (or that holds none) cannot be a baseline.
pub fn passes_no_case(outcomes: &Value) -> bool {
    !outcomes
        .as_object()
        .is_some_and(|cases| cases.values().any(|passed| passed.as_bool() == Some(true)))
}

/// The cases `candidate` fails (`false`) that `baseline` did not fail.
pub fn new_failures(candidate: &Value, baseline: &Value) -> Vec<String> {
    let Some(cases) = candidate.as_object() else {
        return Vec::new();
    };
    cases
        .iter()
        .filter(|(_, passed)| passed.as_bool() == Some(false))
        .filter(|(case, _)| baseline.get(case.as_str()).and_then(Value::as_bool) != Some(false))
        .map(|(case, _)| case.clone())
        .collect()
}

/// A hash's first 12 characters, for messages.
pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}
