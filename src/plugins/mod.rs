//! The business's own tools (`config/plugins.json`): each an HTTPS endpoint of the business's,
//! in any language, signed with the Standard Webhooks scheme. No third-party code runs in the
//! service; a no-code automation's webhook can serve a tool.
//!
//! - `crate::config::plugins`: the file's types and rules (the config module loads it with the
//!   other files).
//! - [`sign`]: the signature headers and the secrets' rules.
//! - [`call`]: the signed HTTP call (no redirects, 64 KiB answer, `User-Agent`).
//! - [`args`]: the model's parameter schema and the check of its arguments.
//! - [`result`]: a read's answer checked against its declared `result`.
//!
//! Invariants:
//! - A read tool is performed during the step, like `get_contact` (ADR-0016): [`READ_TIMEOUT`]
//!   each, performed only on a turn that reads history (offered on every inbound turn, so the
//!   tools are the config's; the others answer `{"available": false}` with no call), sharing the turn's reads with
//!   `get_contact` (the turn's tools keep the count). Any failure answers
//!   `{"available": false}` and the turn goes on. Each read is recorded ([`ReadRecord`]): tool,
//!   available, milliseconds, never the arguments or the answer; each call is counted in
//!   `actions_total` under the tool's name (`performed` when its answer was given, else
//!   `failed`), where every configured tool has its series from the start.
//! - A write tool is staged like 012's writes ([`stage_write`]) and performed once after the
//!   reply's text ([`perform_write`]), with [`WRITE_TIMEOUT`], never retried, looked up in the
//!   config in force when it is performed: a tool a reload removed fails without a request. On
//!   the outbox path its row records that it is under way before the request; one found under
//!   way on a resumed row is settled `failed` ([`settle_may_have_run`]), never sent again.
//! - The subscriber is the turn's, never a parameter (C4).

pub mod args;
pub mod call;
pub mod commands;
pub mod result;
pub mod sign;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::actions::{ActionStatus, Operation, StagedAction};
use crate::fence::Fence;
use crate::ids::{ConversationId, SubscriberId};
use crate::model::ToolSpec;

pub use crate::config::plugins::{PLUGINS_FILE, PluginTool, PluginsConfig, ToolKind};
pub use call::{CallError, PluginClient};

/// One read's bound (as `get_contact`'s, 024).
pub const READ_TIMEOUT: Duration = Duration::from_millis(1500);

/// One write's bound.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The plugin tools' specs for a turn: the writes always, the reads only when `offer_read`.
pub fn specs(config: Option<&PluginsConfig>, offer_read: bool) -> Vec<ToolSpec> {
    config
        .map(|c| c.tools.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|t| offer_read || t.kind == ToolKind::Write)
        .map(args::spec)
        .collect()
}

/// What the turn records of one read (never its arguments or its answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRecord {
    pub tool: String,
    pub available: bool,
    pub ms: u64,
}

/// The `turns.plugin_reads` JSON of a turn's reads (`None`: the turn made none).
pub fn reads_record(reads: &[ReadRecord]) -> Option<Value> {
    (!reads.is_empty()).then(|| serde_json::to_value(reads).unwrap_or(Value::Null))
}

/// A read the model asked for beyond the turn's reads: no call.
pub fn over_budget(tool: &PluginTool) -> ReadRecord {
    ReadRecord {
        tool: tool.name.clone(),
        available: false,
        ms: 0,
    }
}

/// Performs a read tool now: the model's view (`{"available": false}` on any failure) and its
/// record. `Err` when the arguments were refused: nothing was called and no read was spent.
pub async fn read(
    client: &PluginClient,
    tool: &PluginTool,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    arguments: &Value,
    fence: &Fence,
) -> Result<(Value, ReadRecord), args::Refused> {
    let checked = args::check(tool, arguments)?;
    let started = tokio::time::Instant::now();
    let record = |available: bool| ReadRecord {
        tool: tool.name.clone(),
        available,
        ms: started.elapsed().as_millis() as u64,
    };
    if checked.empty_query {
        // Nothing left to look up: no call, still a read.
        return Ok((result::unavailable(), record(false)));
    }
    let called = view_of(client, tool, subscriber, &checked.sent, fence, READ_TIMEOUT).await;
    if let Some(metrics) = client.metrics() {
        let status = match called {
            Ok(_) => ActionStatus::Performed,
            Err(_) => ActionStatus::Failed,
        };
        metrics.action(&tool.name, &status.label());
    }
    let view = match called {
        Ok(view) => view,
        Err(why) => {
            tracing::warn!(
                conversation = %conversation,
                tool = %tool.name,
                why = %why,
                "plugin read unavailable; the turn goes on without it"
            );
            return Ok((result::unavailable(), record(false)));
        }
    };
    Ok((view, record(true)))
}

/// One call of a read tool and its checked answer, or why there is none (`plugin try` prints
/// it).
pub async fn view_of(
    client: &PluginClient,
    tool: &PluginTool,
    subscriber: &SubscriberId,
    sent: &Map<String, Value>,
    fence: &Fence,
    timeout: Duration,
) -> Result<Value, String> {
    let fields = tool.result.clone().unwrap_or_default();
    let answer = client
        .call(tool, subscriber, sent, timeout)
        .await
        .map_err(|e| e.to_string())?;
    result::check(&fields, &answer.body, fence)
}

/// A write tool's call as a staged action, or why it is refused (no request, no cap slot).
pub fn stage_write(tool: &PluginTool, arguments: &Value) -> Result<StagedAction, args::Refused> {
    let checked = args::check(tool, arguments)?;
    let mut action = StagedAction::new(
        &tool.name,
        "",
        Operation::Plugin {
            tool: tool.name.clone(),
            arguments: checked.sent,
        },
    );
    action.entry.arguments = (!checked.recorded.is_empty()).then_some(checked.recorded);
    Ok(action)
}

/// Performs every staged plugin write once, in order ([`perform_write`]). The inline path's
/// and `plugin try`'s: a reply's row in the outbox performs them one by one, saving before each
/// that it is under way (`crate::outbox`).
pub async fn perform_writes(
    client: &PluginClient,
    config: Option<&PluginsConfig>,
    metrics: &crate::metrics::Metrics,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    actions: &mut [StagedAction],
) {
    for action in actions.iter_mut() {
        perform_write(client, config, metrics, subscriber, conversation, action).await;
    }
}

/// Whether `action` is a plugin write still to be performed.
pub fn pending_write(action: &StagedAction) -> bool {
    action.entry.status == ActionStatus::Staged
        && matches!(action.operation, Operation::Plugin { .. })
}

/// Performs one staged plugin write (anything else is left alone) within [`WRITE_TIMEOUT`],
/// against the tools of `config` (the config in force now): `performed` on a 2xx, else `failed`
/// with the status or error. Never retried. Its outcome is counted in `actions_total` under the
/// tool's name, as a built-in action's ManyChat attempt is.
pub async fn perform_write(
    client: &PluginClient,
    config: Option<&PluginsConfig>,
    metrics: &crate::metrics::Metrics,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    action: &mut StagedAction,
) {
    if !pending_write(action) {
        return;
    }
    let Operation::Plugin { tool, arguments } = &action.operation else {
        return;
    };
    let configured = config
        .and_then(|c| c.tool(tool))
        .filter(|t| t.kind == ToolKind::Write);
    let outcome = match configured {
        None => Err("the tool is no longer configured".to_owned()),
        Some(tool) => client
            .call(tool, subscriber, arguments, WRITE_TIMEOUT)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    match outcome {
        Ok(()) => {
            action.entry.status = ActionStatus::Performed;
            action.entry.error = None;
        }
        Err(error) => {
            tracing::warn!(
                conversation = %conversation,
                tool = %action.entry.tool,
                error = %error,
                "plugin write failed; not retried"
            );
            action.entry.status = ActionStatus::Failed;
            action.entry.error = Some(error);
        }
    }
    metrics.action(&action.entry.tool, &action.entry.status.label());
    // A performed or failed write forgets what it sent (a note's text does not outlive it).
    action.operation = Operation::Cleared;
}

/// The error of a plugin write found under way on a resumed outbox row.
/// The mark a staged plugin write carries in its turn's action record (as its `error`) while its
/// request is under way after the response: a process that stops then leaves it, and the write
/// is settled `failed` ([`MAY_HAVE_RUN`]) instead of staying `staged`.
pub const UNDER_WAY: &str = "under way";

pub const MAY_HAVE_RUN: &str =
    "under way when its process stopped; not sent again (it may have run)";

/// Settles a plugin write found under way on a resumed outbox row (its process stopped while
/// it waited for the endpoint): `failed`, never sent again, since the endpoint may have run it.
pub fn settle_may_have_run(
    metrics: &crate::metrics::Metrics,
    conversation: ConversationId,
    action: &mut StagedAction,
) {
    tracing::warn!(
        conversation = %conversation,
        tool = %action.entry.tool,
        "plugin write was under way when its process stopped; not sent again"
    );
    action.entry.status = ActionStatus::Failed;
    action.entry.error = Some(MAY_HAVE_RUN.to_owned());
    action.operation = Operation::Cleared;
    metrics.action(&action.entry.tool, &ActionStatus::Failed.label());
}

#[cfg(test)]
mod tests;
