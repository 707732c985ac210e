//! `manychat-agent eval`: a golden suite through the agent, and (031) the eval record the
//! activation gate reads. `PLAYBOOK_VERSION=<hash or unique 8+ prefix>` runs the suite with that
//! version's section in the prompt; without it the prompt carries no playbook (the baseline of a
//! first activation). When the service's database is at hand and the model is not a mock, the
//! run ends by writing one record: the version's hash (`""` without one), the suite's hash and
//! each case's outcome. A mock's record would never count, so none is written.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use super::{CliError, CliResult, config_dir, context, env_value, existing_store, sqlite_path};
use crate::clock::Clock;
use crate::learning::gate::{outcomes, short, suite_hash};
use crate::learning::playbook::{ActivePlaybook, find};
use crate::store::Store;
use crate::store::learning::EvalRecord;

/// Runs `suite`; non-zero exit on any failure. Says first which model it runs (never the mock
/// unless asked), which playbook the prompt carries and whether a record will be written,
/// prints each case as it finishes, and runs `runner::CONCURRENCY` cases at a time. An unknown
/// `PLAYBOOK_VERSION` is refused before any model call.
pub async fn eval(env: &HashMap<String, String>, suite: &Path, model: Option<&str>) -> CliResult {
    super::config_used::print(
        Path::new(&config_dir(env)),
        &crate::config::ConfigContext {
            allow_examples: true,
            ..context(env)
        },
    );
    let run = crate::evals::runner::prepare(env, suite, model).await?;
    let mock = run.model_id().starts_with("mock:");
    let wanted = env_value(env, "PLAYBOOK_VERSION");
    let store = match (&wanted, mock) {
        (Some(_), _) => Some(existing_store(env).await.map_err(|e| {
            CliError::new(format!(
                "PLAYBOOK_VERSION: the version is read from the service's database: {e}"
            ))
        })?),
        (None, true) => None,
        (None, false) => record_store(env).await?,
    };
    let playbook = match (&wanted, &store) {
        (Some(wanted), Some(store)) => Some(version(store.as_ref(), wanted).await?),
        _ => None,
    };
    let suite_hash = suite_hash(suite).map_err(|e| {
        CliError::new(format!(
            "cannot read the golden suite {}: {e}",
            suite.display()
        ))
    })?;
    let run = run.with_playbook(playbook.clone());
    println!("{}", run.announcement());
    match &playbook {
        Some(p) => println!("playbook: version {} in the prompt", p.hash),
        None => println!("playbook: none (the no-playbook baseline)"),
    }
    let recorded = match (&store, mock) {
        (_, true) => {
            println!(
                "eval record: none is written: a mock model's eval never counts towards \
                 activating a playbook version"
            );
            None
        }
        (None, false) => {
            println!(
                "eval record: none is written: no database (set DATABASE_URL to the service's)"
            );
            None
        }
        (Some(store), false) => {
            println!(
                "eval record: written when the run ends, against suite {}",
                short(&suite_hash)
            );
            Some(store)
        }
    };
    let report = run.run(|result| println!("{result}")).await;
    println!("{}", report.summary());
    if let Some(store) = recorded {
        let record = EvalRecord {
            playbook_hash: playbook.map(|p| p.hash).unwrap_or_default(),
            suite_hash,
            model: run.model_id().to_owned(),
            outcomes: outcomes(&report),
            created_at: Clock::system().now(),
        };
        store.record_eval(&record).await?;
        let which = match record.playbook_hash.as_str() {
            "" => "the no-playbook baseline".to_owned(),
            hash => format!("playbook version {hash}"),
        };
        println!(
            "eval record written: {which}, suite {}, model {}, {} of {} cases passed",
            short(&record.suite_hash),
            record.model,
            report.passed(),
            report.results.len()
        );
    }
    Ok(if report.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The version `wanted` names, as a turn's prompt would carry it; an unknown or ambiguous name
/// is refused, listing where the hashes are printed.
async fn version(store: &dyn Store, wanted: &str) -> Result<ActivePlaybook, CliError> {
    let versions = store.playbook_versions().await?;
    let version =
        find(&versions, wanted).map_err(|e| CliError::new(format!("PLAYBOOK_VERSION: {e}")))?;
    Ok(ActivePlaybook::of(version))
}

/// Where a record goes without `PLAYBOOK_VERSION`: `DATABASE_URL`'s store, or the service's
/// default SQLite file when it exists (`None`: no database here, no record).
async fn record_store(env: &HashMap<String, String>) -> Result<Option<Arc<dyn Store>>, CliError> {
    if env_value(env, "DATABASE_URL").is_none()
        && let Some(path) = sqlite_path(crate::settings::DEFAULT_DATABASE_URL)
        && !Path::new(path).is_file()
    {
        return Ok(None);
    }
    existing_store(env).await.map(Some)
}
