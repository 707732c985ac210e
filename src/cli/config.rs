//! `manychat-agent config upgrade`, `config check` and `config check --env`: the tenant's files
//! (and, with `--env`, the environment) checked as `serve` checks them, starting nothing.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

use super::{CliResult, config_dir, config_used, context, insights, plugin_secrets, settings_for};
use crate::clock::Clock;
use crate::settings::Needs;
use crate::startup::{self, Overrides};

/// `manychat-agent config upgrade` (042): renames the pre-offering keys of the tenant's files in
/// place (`courses`, `enrollmentUrl`, a field's or flow's `course`, `learning.enrolledTag`),
/// then says whether the result loads. A second run changes nothing; `prompt.md` is never read.
pub fn config_upgrade(env: &HashMap<String, String>) -> CliResult {
    let dir = config_dir(env);
    let done = match crate::config::upgrade::upgrade_dir(Path::new(&dir)) {
        Ok(done) => done,
        Err(error) => {
            eprintln!("{error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if done.is_empty() {
        println!("{dir}: nothing to upgrade");
    }
    for file in &done {
        for renamed in &file.renamed {
            println!("{}: renamed {renamed}", file.path.display());
        }
        for kept in &file.kept {
            println!(
                "{}: left {kept} in place: the object already has the new key (remove one by hand)",
                file.path.display()
            );
        }
    }
    config_check(env)
}

/// `manychat-agent config check`: every error at once, file, JSON path and rule. Without
/// `MANYCHAT_REPLY_FLOW_NS` it says that the check against the reply flow was skipped.
pub fn config_check(env: &HashMap<String, String>) -> CliResult {
    let dir = config_dir(env);
    let context = context(env);
    let skipped = context.reply_flow_ns.is_none().then_some(
        "not checked: that no configured flow is the reply flow (MANYCHAT_REPLY_FLOW_NS is not set)",
    );
    config_used::print(Path::new(&dir), &context);
    match crate::config::load_dir(Path::new(&dir), &context) {
        Ok(config) => {
            // A configured tool's secret that is set but malformed is refused, as `serve`
            // refuses it; one not set here is a check it could not make (the check may run
            // outside the service's environment), said like the reply flow's.
            let (unset, malformed): (Vec<String>, Vec<String>) =
                crate::plugins::PluginClient::new(plugin_secrets(env))
                    .secret_problems(config.plugins.as_ref())
                    .into_iter()
                    .partition(|problem| problem.contains(" is not set "));
            if !malformed.is_empty() {
                eprintln!("plugin secrets: {}", malformed.join("; "));
                return Ok(ExitCode::FAILURE);
            }
            for problem in &unset {
                println!("not checked: the plugin secret {problem}");
            }
            print_valid(&crate::config::printable(&dir), &config);
            if let Some(skipped) = skipped {
                println!("{skipped}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            eprintln!("{errors}");
            if let Some(skipped) = skipped {
                eprintln!("{skipped}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `manychat-agent config check --env`: what `serve` checks before it starts, and nothing
/// more: the variables it needs (`Needs::SERVE`), the tenant config, the learning run's model,
/// and `startup::Checked` (plugin secrets, the model resolved and priced, the media settings).
/// Every problem is printed; nothing is started, opened or requested.
pub fn config_check_env(env: &HashMap<String, String>) -> CliResult {
    let dir = config_dir(env);
    config_used::print(Path::new(&dir), &context(env));
    let checked = settings_for(env, Needs::SERVE).and_then(|settings| {
        insights::weekly_parts(&settings)?;
        let checked = startup::Checked::check(&settings, &mut Overrides::default())?;
        Ok((settings, checked))
    });
    let (settings, checked) = match checked {
        Ok(checked) => checked,
        Err(problems) => {
            eprintln!("{problems}");
            eprintln!("serve would refuse to start: fix the above, then run this check again");
            return Ok(ExitCode::FAILURE);
        }
    };
    let config = checked.config.snapshot();
    print_valid(&dir, &config);
    for note in &checked.notes {
        println!("{note}");
    }
    println!(
        "environment: ready for serve (model {}, {}, port {})",
        checked.model.id(),
        crate::store::describe_database(settings.database_url.expose()),
        settings.port
    );
    println!(
        "{}",
        handshake_line(settings.manychat_delivery_handshake.as_ref())
    );
    println!(
        "{}",
        match settings.console_password_hash {
            Some(_) =>
                "owner's console: on at /console (CONSOLE_PASSWORD_HASH is a valid Argon2id hash)",
            None =>
                "owner's console: off (CONSOLE_PASSWORD_HASH unset; `manychat-agent console password` makes one)",
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// What a deferred reply whose trigger got no answer does, as configured.
fn handshake_line(handshake: Option<&crate::outbox::DeliveryHandshake>) -> String {
    match handshake {
        Some(h) => format!(
            "deferred replies: delivery handshake on (MANYCHAT_DELIVERED_FIELD {}, \
             MANYCHAT_DELIVERY_ID_FIELD {}): a message the reply flow recorded is not sent again",
            crate::config::printable(&h.delivered_field),
            crate::config::printable(&h.delivery_id_field)
        ),
        None => "deferred replies: no delivery handshake (MANYCHAT_DELIVERED_FIELD unset): a \
                 trigger that got no answer is sent again once, so a message may reach the \
                 contact twice"
            .to_owned(),
    }
}

/// The lines a valid config prints: what `dir` holds, each document with its passages and
/// estimated tokens, and the opening hours as of now.
fn print_valid(dir: &str, config: &crate::config::TenantConfig) {
    let plugins = config.plugins.as_ref().map_or(0, |p| p.tools.len());
    let documents = documents(&config.knowledge);
    let tokens: usize = documents.iter().map(|d| d.2).sum();
    let count = |n: usize, one: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {one}s"),
    };
    println!(
        "{dir}: valid ({} offerings, {} tool entries, {plugins} plugin tools, {}: {}, ~{tokens} \
         tokens)",
        config.catalog.offerings.len(),
        tool_entries(config),
        count(documents.len(), "document"),
        count(config.knowledge.len(), "passage"),
    );
    for (file, passages, tokens) in &documents {
        println!(
            "  {}/{}: {}, ~{tokens} tokens",
            crate::config::load::KNOWLEDGE_DIR,
            crate::config::printable(file),
            count(*passages, "passage")
        );
    }
    println!(
        "{}",
        crate::config::hours::describe(config.rules.hours.as_ref(), Clock::system().now())
    );
}

/// Each document, in load order, with its passages and their estimated tokens
/// (`Passage::estimated_tokens`: characters over 4).
fn documents(knowledge: &[crate::config::knowledge::Passage]) -> Vec<(&str, usize, usize)> {
    let mut out: Vec<(&str, usize, usize)> = Vec::new();
    for passage in knowledge {
        match out.last_mut() {
            Some((file, passages, tokens)) if *file == passage.file => {
                *passages += 1;
                *tokens += passage.estimated_tokens();
            }
            _ => out.push((&passage.file, 1, passage.estimated_tokens())),
        }
    }
    out
}

/// The `tools.json` entries the model may use: flows, tags, fields and notes.
fn tool_entries(config: &crate::config::TenantConfig) -> usize {
    config.tools.as_ref().map_or(0, |t| {
        t.flows.len() + t.tags.len() + t.fields.len() + t.notes.len()
    })
}
