//! `manychat-agent insights run|review|activate|report` (031): the analyst run on demand, the
//! review of its proposals (a terminal walk, or the same verbs as flags for scripts),
//! activation behind the eval gate, and the sales per playbook version. Prints counts,
//! proposals and hashes; never a transcript.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use super::{CliError, CliResult, existing_store, settings_for};
use crate::clock::Clock;
use crate::learning::gate::{Activated, activate, short, suite_hash};
use crate::learning::review::{BY_CLI, Decision, apply};
use crate::learning::run::{Analyst, Outcome};
use crate::manychat::ManyChatClient;
use crate::settings::Needs;
use crate::startup;
use crate::store::Store;
use crate::store::learning::ProposalStatus;

/// The analyst model `INSIGHT_MODEL` names, through the same registry and prices as
/// `AGENT_MODEL` (its reasoning effort is the agent's alone). `None` when unset.
pub(crate) fn insight_model(
    settings: &crate::settings::Settings,
) -> Result<Option<Arc<dyn crate::model::Model>>, CliError> {
    let Some(spec) = settings.insight_model.as_deref() else {
        return Ok(None);
    };
    let env = crate::model::ModelEnv {
        reasoning_effort: None,
        max_output_tokens: crate::learning::ANALYST_OUTPUT_TOKENS,
        ..settings.model.clone()
    };
    Ok(Some(crate::model::resolve(spec, &env)?))
}

/// `insights run [--force]`: this week's run now (a second with `--force`).
pub async fn run(env: &HashMap<String, String>, force: bool) -> CliResult {
    let needs = Needs {
        manychat_api: true,
        ..Needs::DATABASE_ONLY
    };
    let settings = settings_for(env, needs)?;
    let context = startup::config_context(&settings, false);
    let config = crate::config::load_dir(Path::new(&settings.config_dir), &context)?;
    if config.rules.learning.is_none() {
        return Err(CliError::new(
            "rules.json has no learning section: nothing to run (see docs/LEARNING.md)",
        ));
    }
    let model = insight_model(&settings)?.ok_or_else(|| {
        CliError::new("INSIGHT_MODEL: required to run the analyst (provider:model)")
    })?;
    let store = crate::store::connect(settings.database_url.expose()).await?;
    let client = super::required_manychat_client(&settings, &store, Clock::system())?;
    let analyst = Analyst {
        config: &config,
        model: model.as_ref(),
        tags: &client,
        temperature: settings.model.temperature.unwrap_or(0.2),
    };
    let clock = Clock::system();
    let outcome =
        crate::learning::run::run(store.as_ref(), &analyst, force, || clock.now()).await?;
    match outcome {
        Outcome::AlreadyClaimed { week } => {
            println!("the run of {week} is already claimed: `insights run --force` runs again");
        }
        Outcome::NotConfigured(why) => return Err(CliError::new(why)),
        Outcome::Finished {
            run_id,
            status,
            proposals,
            refused,
            cost_usd,
            reason,
        } => {
            println!(
                "run {run_id}: {}, {proposals} proposal(s) pending review, {refused} refused, \
                 cost {cost_usd:.4} USD",
                status.as_str()
            );
            if let Some(reason) = reason {
                println!("reason: {reason}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The flags of `insights review`; all empty: the terminal walk.
#[derive(Debug, Default)]
pub struct ReviewArgs {
    pub list: bool,
    pub approve: Option<i64>,
    pub text: Option<String>,
    pub reject: Option<i64>,
    /// With --approve or --reject: why, recorded with the decision.
    pub reason: Option<String>,
    pub retire: Option<usize>,
}

/// `insights review`: `--list`, one verb as flags, or the walk over the pending proposals.
pub async fn review(env: &HashMap<String, String>, args: ReviewArgs) -> CliResult {
    let store = existing_store(env).await?;
    if args.list {
        print_list(store.as_ref()).await?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.text.is_some() && args.approve.is_none() {
        return Err(CliError::new("--text goes with --approve <id>"));
    }
    if args.reason.is_some() && args.approve.is_none() && args.reject.is_none() {
        return Err(CliError::new(
            "--reason goes with --approve <id> or --reject <id>",
        ));
    }
    let mut decisions = Vec::new();
    if let Some(id) = args.approve {
        decisions.push(Decision::Approve {
            id,
            text: args.text,
            reason: args.reason.clone(),
        });
    }
    if let Some(id) = args.reject {
        decisions.push(Decision::Reject {
            id,
            reason: args.reason,
        });
    }
    if let Some(place) = args.retire {
        decisions.push(Decision::Retire { place });
    }
    if decisions.is_empty() {
        let pending = store.proposals(ProposalStatus::Pending, 1000).await?;
        let active = store.active_playbook().await?;
        decisions = walk(&pending, active.as_ref());
        if decisions.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let reviewed = apply(store.as_ref(), &decisions, BY_CLI, Clock::system().now())
        .await
        .map_err(CliError::new)?;
    println!(
        "{} approved, {} rejected, {} retired",
        reviewed.approved, reviewed.rejected, reviewed.retired
    );
    match reviewed.version {
        Some((hash, insights)) => println!(
            "new playbook version {hash} ({} insight(s)), not active: evaluate it with \
             `PLAYBOOK_VERSION={hash} manychat-agent eval --model <provider:model>`, then \
             `manychat-agent insights activate {}`",
            insights.len(),
            short(&hash)
        ),
        None => println!("the playbook is unchanged"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn print_list(store: &dyn Store) -> Result<(), CliError> {
    let pending = store.proposals(ProposalStatus::Pending, 1000).await?;
    if pending.is_empty() {
        println!("no pending proposals");
    }
    for p in &pending {
        println!(
            "proposal {} (run {}; converted {}, not converted {}; turns {})\n  {}\n  why: {}",
            p.id,
            p.run_id,
            p.converted_count,
            p.not_converted_count,
            p.turn_ids.join(", "),
            p.text,
            p.rationale
        );
    }
    let versions = store.playbook_versions().await?;
    if !versions.is_empty() {
        println!("playbook versions (oldest first):");
    }
    for v in &versions {
        let state = match (v.active, v.activated_at) {
            (true, _) => "active",
            (false, Some(_)) => "was active (activate again to roll back)",
            (false, None) => "never active",
        };
        println!(
            "  {} {} insight(s), {state}",
            v.content_hash,
            v.insights.len()
        );
        for (i, insight) in v.insights.iter().enumerate() {
            println!("    {}. {insight}", i + 1);
        }
    }
    let decisions = store.learning_decisions(20).await?;
    if !decisions.is_empty() {
        println!("the last decisions (newest first):");
    }
    for d in &decisions {
        let on = match (d.proposal_id, &d.version_hash, d.place) {
            (Some(id), _, _) => format!("proposal {id}"),
            (None, _, Some(place)) => format!("insight {place}"),
            (None, Some(hash), None) => format!("version {}", short(hash)),
            (None, None, None) => String::new(),
        };
        println!(
            "  {} {} {on} by {}{}",
            d.at.format("%Y-%m-%d %H:%M UTC"),
            d.kind.as_str(),
            d.by,
            d.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The terminal walk: each pending proposal, then the active insights to retire. Reads
/// answers line by line from standard input.
fn walk(
    pending: &[crate::store::learning::Proposal],
    active: Option<&crate::store::learning::PlaybookVersion>,
) -> Vec<Decision> {
    if pending.is_empty() {
        println!("no pending proposals");
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut ask = |question: &str| -> Option<String> {
        println!("{question}");
        lines
            .next()
            .and_then(|l| l.ok())
            .map(|l| l.trim().to_owned())
    };
    let mut decisions = Vec::new();
    for p in pending {
        println!(
            "\nproposal {} (converted {}, not converted {})\n  {}\n  why: {}",
            p.id, p.converted_count, p.not_converted_count, p.text, p.rationale
        );
        match ask("[a]pprove, [e]dit and approve, [r]eject, [s]kip, [q]uit?").as_deref() {
            Some("a") => decisions.push(Decision::Approve {
                id: p.id,
                text: None,
                reason: None,
            }),
            Some("e") => {
                let text = ask("the tactic as it should read:").unwrap_or_default();
                decisions.push(Decision::Approve {
                    id: p.id,
                    text: Some(text),
                    reason: None,
                });
            }
            Some("r") => {
                let reason = ask("why (optional, recorded with the decision):");
                decisions.push(Decision::Reject { id: p.id, reason });
            }
            Some("q") | None => return decisions,
            _ => {}
        }
    }
    if let Some(active) = active {
        for (i, insight) in active.insights.iter().enumerate() {
            println!("\nactive insight {}: {insight}", i + 1);
            if ask("[k]eep or [r]etire?").as_deref() == Some("r") {
                decisions.push(Decision::Retire { place: i + 1 });
            }
        }
    }
    decisions
}

/// `insights activate <version>`: the gate against `suite`, or the rollback.
pub async fn activate_version(
    env: &HashMap<String, String>,
    version: &str,
    suite: &Path,
) -> CliResult {
    let store = existing_store(env).await?;
    let suite = suite_hash(suite).map_err(|e| {
        CliError::new(format!(
            "cannot read the golden suite {}: {e}",
            suite.display()
        ))
    })?;
    let activated = activate(
        store.as_ref(),
        version,
        &suite,
        BY_CLI,
        Clock::system().now(),
    )
    .await
    .map_err(CliError::new)?;
    match activated {
        Activated::Gated { hash } => println!(
            "playbook version {hash} is active; running services pick it up within a minute"
        ),
        Activated::RolledBack { hash } => println!(
            "rolled back to playbook version {hash} (active before: no eval gate); running \
             services pick it up within a minute"
        ),
        Activated::AlreadyActive { hash } => println!("playbook version {hash} is already active"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `insights report [--json]`: link sent per playbook version, from the store alone (the
/// tenant config gives the funnel field and the payment-link flow; no ManyChat read).
pub async fn report(env: &HashMap<String, String>, json: bool) -> CliResult {
    let tenant = super::report_tenant(env).ok_or_else(|| {
        CliError::new("the tenant config did not load: it names the funnel and the payment link")
    })?;
    let keys = crate::learning::measures::Keys::of(&crate::sales::sales_keys(&tenant)).ok_or_else(
        || {
            CliError::new(
                "tools.json needs a funnel field and a payment_link flow: nothing to measure",
            )
        },
    )?;
    let store = existing_store(env).await?;
    let measures =
        crate::learning::measures::read(store.as_ref(), &keys, Clock::system().now()).await?;
    if json {
        let value = serde_json::to_value(&measures).unwrap_or_default();
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    } else {
        let mut out = String::new();
        crate::report::playbooks::text(&mut out, &measures);
        print!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What the weekly run needs from the settings, taken before they are handed to the app.
pub(crate) struct WeeklyParts {
    model: Arc<dyn crate::model::Model>,
    token: crate::ids::Secret,
    api_base: String,
    temperature: f32,
}

/// The weekly run's parts when `INSIGHT_MODEL` and `MANYCHAT_API_TOKEN` are set (unset model:
/// no learning run).
pub(crate) fn weekly_parts(
    settings: &crate::settings::Settings,
) -> Result<Option<WeeklyParts>, CliError> {
    let (Some(model), Some(token)) = (
        insight_model(settings)?,
        settings.manychat_api_token.clone(),
    ) else {
        return Ok(None);
    };
    Ok(Some(WeeklyParts {
        model,
        token,
        api_base: settings.manychat_api_base.clone(),
        temperature: settings.model.temperature.unwrap_or(0.2),
    }))
}

/// Checks the week hourly (031 § Scheduling) until the guard drops; for a tenant without
/// `learning` each check does nothing.
pub(crate) fn spawn_weekly(
    parts: Option<WeeklyParts>,
    store: Arc<dyn Store>,
    config: Arc<crate::config::ConfigHandle>,
) -> Result<Option<tokio_util::sync::DropGuard>, CliError> {
    let Some(parts) = parts else {
        return Ok(None);
    };
    let client = ManyChatClient::new(
        &parts.api_base,
        &parts.token,
        startup::manychat_limiter(&store, Clock::system()),
    )?;
    let weekly = crate::learning::schedule::Weekly {
        store,
        config,
        model: parts.model,
        tags: Arc::new(client),
        temperature: parts.temperature,
        clock: Clock::system(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(weekly.run(stop.clone()));
    Ok(Some(stop.drop_guard()))
}
