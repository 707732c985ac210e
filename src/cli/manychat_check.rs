//! `manychat-agent manychat check`: every flow, tag and custom field the deployment relies on,
//! checked against the ManyChat account; and the account the demo's sandbox presents.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

use super::{CliError, CliResult, config_dir, config_used, context, settings_for};
use crate::clock::Clock;
use crate::manychat::ManyChatClient;
use crate::manychat::account::{Account, AccountField, AccountFlow, Named, Wiring};
use crate::outbox::DeliveryHandshake;
use crate::settings::Needs;
use crate::startup;

/// The name `name` reads from each of `items`, placed at `tools.json: $.<list>[i].<key>`.
fn placed<'a, T>(
    items: &'a [T],
    list: &'a str,
    key: &'a str,
    name: impl Fn(&T) -> &String + 'a,
) -> impl Iterator<Item = Named> + 'a {
    items
        .iter()
        .enumerate()
        .map(move |(i, item)| Named::new(format!("tools.json: $.{list}[{i}].{key}"), name(item)))
}

/// Every flow, tag and custom field the deployment relies on: what `tools.json` and
/// `rules.json` name, the reply flow, and the reply and token fields (written with text), and
/// with the delivery handshake its two fields (both Text).
fn wiring_of(
    config: &crate::config::TenantConfig,
    reply_flow_ns: Option<&str>,
    reply_field: &str,
    token_field: &str,
    handshake: Option<&DeliveryHandshake>,
) -> Wiring {
    let mut wiring = Wiring::default();
    if let Some(ns) = reply_flow_ns {
        wiring.flows.push(Named::new("MANYCHAT_REPLY_FLOW_NS", ns));
    }
    wiring
        .text_fields
        .push(Named::new("MANYCHAT_REPLY_FIELD", reply_field));
    wiring
        .text_fields
        .push(Named::new("MANYCHAT_TOKEN_FIELD", token_field));
    if let Some(handshake) = handshake {
        wiring.text_fields.push(Named::new(
            "MANYCHAT_DELIVERED_FIELD",
            &handshake.delivered_field,
        ));
        wiring.text_fields.push(Named::new(
            "MANYCHAT_DELIVERY_ID_FIELD",
            &handshake.delivery_id_field,
        ));
    }
    let rules = &config.rules;
    if let Some(handoff) = &rules.handoff {
        if let Some(tag) = &handoff.tag {
            wiring
                .tags
                .push(Named::new("rules.json: $.handoff.tag", tag));
        }
        if let Some(ns) = &handoff.flow_ns {
            wiring
                .flows
                .push(Named::new("rules.json: $.handoff.flowNs", ns));
        }
    }
    if let Some(tag) = rules.learning.as_ref().map(|l| &l.converted_tag) {
        wiring
            .tags
            .push(Named::new("rules.json: $.learning.convertedTag", tag));
    }
    let Some(tools) = &config.tools else {
        return wiring;
    };
    let Wiring {
        flows,
        tags,
        text_fields,
        read_fields,
    } = &mut wiring;
    flows.extend(placed(&tools.flows, "flows", "flowNs", |f| &f.flow_ns));
    flows.extend(placed(&tools.events, "events", "flowNs", |e| &e.flow_ns));
    tags.extend(placed(&tools.tags, "tags", "tag", |t| &t.tag));
    tags.extend(placed(&tools.readable.tags, "readable.tags", "tag", |t| {
        &t.tag
    }));
    if let Some(tag) = tools
        .nudge
        .as_ref()
        .and_then(|n| n.human_active_tag.as_ref())
    {
        tags.push(Named::new("tools.json: $.nudge.humanActiveTag", tag));
    }
    text_fields.extend(placed(&tools.fields, "fields", "field", |f| &f.field));
    text_fields.extend(placed(&tools.notes, "notes", "field", |n| &n.field));
    let readable = &tools.readable.fields;
    read_fields.extend(placed(readable, "readable.fields", "field", |f| &f.field));
    wiring
}

/// The account the demo's sandbox presents: everything the configuration `vars` point at names
/// (examples allowed, as in the demo), every field a Text field, so `manychat check` passes
/// against the demo.
pub fn demo_sandbox_account(vars: &HashMap<String, String>) -> Account {
    let context = crate::config::ConfigContext {
        allow_examples: true,
        ..context(vars)
    };
    // A config that does not load leaves the account empty: the app refuses to start anyway.
    let Ok(config) = crate::config::load_dir(Path::new(&config_dir(vars)), &context) else {
        return Account::default();
    };
    let wiring = wiring_of(
        &config,
        context.reply_flow_ns.as_deref(),
        &context.reply_field,
        &context.token_field,
        handshake_of(vars).as_ref(),
    );
    Account {
        flows: wiring
            .flows
            .into_iter()
            .map(|f| AccountFlow {
                name: f.place,
                ns: f.name,
            })
            .collect(),
        tags: wiring.tags.into_iter().map(|t| t.name).collect(),
        fields: wiring
            .text_fields
            .into_iter()
            .chain(wiring.read_fields)
            .map(|f| AccountField {
                name: f.name,
                kind: "text".into(),
            })
            .collect(),
    }
}

/// The delivery handshake's fields as the environment names them, read straight from it (the
/// settings validate them).
pub(super) fn handshake_of(vars: &HashMap<String, String>) -> Option<DeliveryHandshake> {
    let value = |name: &str| {
        vars.get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    Some(DeliveryHandshake {
        delivered_field: value("MANYCHAT_DELIVERED_FIELD")?,
        delivery_id_field: value("MANYCHAT_DELIVERY_ID_FIELD")
            .unwrap_or_else(|| crate::outbox::handshake::DEFAULT_DELIVERY_ID_FIELD.to_owned()),
    })
}

/// What a check against the demo's sandbox proves: little, since the sandbox's account is built
/// from the config the demo loaded.
const SANDBOX_MIRRORS: &str = "note: this is the demo's local sandbox, whose account is made \
     from the config the demo loaded: it mirrors that config, so a passing check here shows only \
     that the files load and name each other consistently. Run the check against your real \
     ManyChat account (MANYCHAT_API_TOKEN from Settings → API) before going live.";

/// `manychat-agent manychat check`: reads the ManyChat account (flows, tags, custom
/// fields; read-only, paced like every ManyChat request, from the replicas' shared budget on
/// Postgres) and checks every name the deployment relies on. One line per problem; exit 1 on
/// any. Run it before going live and after every change to the config or the account.
pub async fn manychat_check(env: &HashMap<String, String>) -> CliResult {
    let settings = settings_for(env, Needs::TOKENS_BACKFILL)?;
    let api_token = settings
        .manychat_api_token
        .clone()
        .ok_or_else(|| CliError::new("MANYCHAT_API_TOKEN is required"))?;
    // Against the demo's sandbox the config is read as the demo read it (examples allowed).
    let sandbox = api_token.expose() == crate::manychat::sandbox::DEMO_TOKEN;
    let context = startup::config_context(&settings, sandbox);
    config_used::print(&settings.config_dir, &context);
    let config = crate::config::load_dir(&settings.config_dir, &context)?;
    // A check beside running replicas draws from their budget; on SQLite (one process, and a
    // check that must not create a database file) it paces itself.
    let limiter = if settings.database_url.expose().starts_with("postgres") {
        let store = crate::store::connect(settings.database_url.expose()).await?;
        startup::manychat_limiter(&store, Clock::system())
    } else {
        crate::manychat::ManyChatLimiter::new()
    };
    let client = ManyChatClient::new(&settings.manychat_api_base, &api_token, limiter)?;
    let account = client
        .account()
        .await
        .map_err(|e| CliError::new(format!("cannot read the ManyChat account: {e}")))?;
    let wiring = wiring_of(
        &config,
        settings.manychat_reply_flow_ns.as_deref(),
        &settings.manychat_reply_field,
        &settings.manychat_token_field,
        settings.manychat_delivery_handshake.as_ref(),
    );
    let mut problems = crate::manychat::account::problems(&account, &wiring);
    if settings.manychat_reply_flow_ns.is_none() {
        problems.insert(
            0,
            "MANYCHAT_REPLY_FLOW_NS: not set (deferred replies are delivered through that flow)"
                .to_owned(),
        );
    }
    if problems.is_empty() {
        println!(
            "ManyChat account matches: {} flows, {} tags, {} custom fields checked",
            wiring.flows.len(),
            wiring.tags.len(),
            wiring.text_fields.len() + wiring.read_fields.len()
        );
        if sandbox {
            println!("{SANDBOX_MIRRORS}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &problems {
        println!("{problem}");
    }
    eprintln!("{} wiring problems", problems.len());
    Ok(ExitCode::FAILURE)
}
