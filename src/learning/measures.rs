//! The sales per playbook version (031 § Measures), read from the store alone (no ManyChat
//! read), for `insights report` and a section of `report`.
//!
//! - A conversation is attributed to the playbook version (or to no playbook) of the agent turn
//!   that first performed a funnel write at `offered` or later (`Funnel::reached_offered`, the
//!   cohort's test); a turn prompted with no playbook has none.
//! - It is counted once its latest bound turn is at least [`SETTLE_DAYS`] old; until then it is
//!   settling. A conversation with no bound turn is left out, as the cohort leaves it out.
//! - Its sale is `report`'s: the payment-link flow performed on any of its turns ("link sent").
//!   Paid conversion (the converted tag) lives in ManyChat and is not read here.
//!
//! A before/after reading, not a controlled experiment: each version met other contacts at
//! another time. Counts only; no text, subscriber id or conversation id is printed.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::SETTLE_DAYS;
use super::cohort::Funnel;
use crate::ids::ConversationId;
use crate::store::learning::{PlaybookTurn, PlaybookVersion};
use crate::store::{Result, SalesKeys, Store};

/// Said wherever the numbers are printed.
pub const READING: &str = "A before/after reading, not a controlled experiment: each version \
     met other contacts at another time, so a difference between rows is not proof that a \
     version caused it.";

/// What the rows count, in one sentence.
pub const COUNTED: &str = "Each conversation counts under the version its first funnel write \
     at offered or later was prompted with, once its latest turn is at least 14 days old \
     (settling until then); link sent is the payment-link flow performed, as in the weekly \
     report. Paid conversion lives in ManyChat (the converted tag) and is not read here.";

/// One version's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionMeasures {
    /// The version's content hash; `None`: conversations offered with no playbook.
    pub version: Option<String>,
    /// When it first went live (a rollback keeps this date); `None`: never, or no playbook.
    pub first_activated_at: Option<DateTime<Utc>>,
    /// Live now.
    pub active: bool,
    /// Conversations attributed to it whose latest bound turn has settled.
    pub conversations: i64,
    /// Of those, the ones the payment-link flow was performed for.
    pub link_sent: i64,
    /// `link_sent / conversations`; `None` without conversations.
    pub link_sent_rate: Option<f64>,
    /// Conversations attributed to it, not settled yet (not counted above).
    pub settling: i64,
}

/// The rows: no playbook first, then each version that went live or was attributed a
/// conversation, by first activation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlaybookMeasures {
    pub reading: &'static str,
    pub counted: &'static str,
    pub settle_days: i64,
    pub versions: Vec<VersionMeasures>,
}

/// What the measures are read by: the funnel and the payment-link flow.
#[derive(Debug, Clone)]
pub struct Keys {
    pub funnel: Funnel,
    pub payment_flow: String,
}

impl Keys {
    /// `None` when the tenant has no funnel field or no payment-link flow.
    pub fn of(sales: &SalesKeys) -> Option<Self> {
        Some(Self {
            funnel: Funnel {
                field: sales.funnel_field.clone()?,
                offered_or_later: sales.offered_or_later.clone(),
            },
            payment_flow: sales.payment_flow.clone()?,
        })
    }
}

/// The measures at `now`: every agent turn with an action record, each conversation's latest
/// bound turn, and the versions.
pub async fn read(store: &dyn Store, keys: &Keys, now: DateTime<Utc>) -> Result<PlaybookMeasures> {
    let turns = store.playbook_turns(DateTime::UNIX_EPOCH).await?;
    let last_bound: HashMap<ConversationId, DateTime<Utc>> = store
        .last_bound_turns(DateTime::UNIX_EPOCH)
        .await?
        .into_iter()
        .collect();
    let versions = store.playbook_versions().await?;
    Ok(measure(&turns, &last_bound, &versions, keys, now))
}

/// A conversation as attributed.
struct Attributed {
    version: Option<String>,
    link_sent: bool,
}

/// The measures of `turns` (oldest first), pure.
pub fn measure(
    turns: &[PlaybookTurn],
    last_bound: &HashMap<ConversationId, DateTime<Utc>>,
    versions: &[PlaybookVersion],
    keys: &Keys,
    now: DateTime<Utc>,
) -> PlaybookMeasures {
    let mut conversations: BTreeMap<ConversationId, Attributed> = BTreeMap::new();
    let mut linked: Vec<ConversationId> = Vec::new();
    for turn in turns {
        if performed_flow(&turn.actions, &keys.payment_flow) {
            linked.push(turn.conversation_id);
        }
        if !conversations.contains_key(&turn.conversation_id)
            && keys.funnel.reached_offered(&turn.actions)
        {
            let version = turn.playbook_version.clone().filter(|v| !v.is_empty());
            conversations.insert(
                turn.conversation_id,
                Attributed {
                    version,
                    link_sent: false,
                },
            );
        }
    }
    for id in linked {
        if let Some(attributed) = conversations.get_mut(&id) {
            attributed.link_sent = true;
        }
    }

    let mut rows = vec![row(None, None, false)];
    let mut live: Vec<&PlaybookVersion> = versions
        .iter()
        .filter(|v| v.activated_at.is_some())
        .collect();
    live.sort_by_key(|v| v.activated_at);
    for v in live {
        rows.push(row(Some(v.content_hash.clone()), v.activated_at, v.active));
    }
    let settled_before = now - chrono::Duration::days(SETTLE_DAYS);
    for (id, attributed) in &conversations {
        let Some(last) = last_bound.get(id) else {
            continue;
        };
        let place = match rows.iter().position(|r| r.version == attributed.version) {
            Some(place) => place,
            None => {
                rows.push(row(attributed.version.clone(), None, false));
                rows.len() - 1
            }
        };
        let r = &mut rows[place];
        if *last <= settled_before {
            r.conversations += 1;
            r.link_sent += i64::from(attributed.link_sent);
        } else {
            r.settling += 1;
        }
    }
    for r in &mut rows {
        r.link_sent_rate =
            (r.conversations > 0).then(|| r.link_sent as f64 / r.conversations as f64);
    }
    PlaybookMeasures {
        reading: READING,
        counted: COUNTED,
        settle_days: SETTLE_DAYS,
        versions: rows,
    }
}

fn row(
    version: Option<String>,
    first_activated_at: Option<DateTime<Utc>>,
    active: bool,
) -> VersionMeasures {
    VersionMeasures {
        version,
        first_activated_at,
        active,
        conversations: 0,
        link_sent: 0,
        link_sent_rate: None,
        settling: 0,
    }
}

/// Whether an action record holds a performed `send_flow` of `flow`.
fn performed_flow(actions: &serde_json::Value, flow: &str) -> bool {
    actions.as_array().is_some_and(|entries| {
        entries.iter().any(|entry| {
            let text = |key| entry.get(key).and_then(serde_json::Value::as_str);
            text("tool") == Some("send_flow")
                && text("status") == Some("performed")
                && text("id") == Some(flow)
        })
    })
}
