//! Which contacts a run compares (031 § Cohort): a performed funnel write at `offered` or later
//! within [`COHORT_DAYS`], and the latest bound turn at least [`SETTLE_DAYS`] old. Each is
//! labelled by the converted tag, read from ManyChat at [`READ_PACE`]; a failed read drops the
//! contact (it is never labelled "not converted"). At most [`MAX_PER_SIDE`] per side, the most
//! recent first.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{COHORT_DAYS, MAX_PER_SIDE, READ_PACE, SETTLE_DAYS};
use crate::ids::{ConversationId, SubscriberId};
use crate::manychat::ManyChatClient;
use crate::store::{Result, Store, Turn};

/// Reads a contact's tag names (getInfo). `Err` carries the failure's kind only.
#[async_trait]
pub trait TagReader: Send + Sync {
    async fn tags(&self, subscriber: &SubscriberId) -> std::result::Result<Vec<String>, String>;
}

/// A label read's bound, the limiter's wait included.
const TAG_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[async_trait]
impl TagReader for ManyChatClient {
    async fn tags(&self, subscriber: &SubscriberId) -> std::result::Result<Vec<String>, String> {
        self.get_contact(subscriber, TAG_READ_TIMEOUT)
            .await
            .map(|contact| contact.tags)
            .map_err(|e| e.kind().to_owned())
    }
}

/// The funnel the cohort is picked by: its field id and the values at or past `offered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funnel {
    pub field: String,
    pub offered_or_later: Vec<String>,
}

impl Funnel {
    /// The tenant's funnel, when it has a funnel field.
    pub fn of(config: &crate::config::TenantConfig) -> Option<Self> {
        let keys = crate::sales::sales_keys(config);
        Some(Self {
            field: keys.funnel_field?,
            offered_or_later: keys.offered_or_later,
        })
    }

    /// Whether an action record holds a performed write of the funnel at `offered` or later.
    pub fn reached_offered(&self, actions: &serde_json::Value) -> bool {
        actions.as_array().is_some_and(|entries| {
            entries.iter().any(|entry| {
                let text = |key| entry.get(key).and_then(serde_json::Value::as_str);
                text("tool") == Some("set_field")
                    && text("status") == Some("performed")
                    && text("id") == Some(self.field.as_str())
                    && text("value").is_some_and(|v| self.offered_or_later.iter().any(|o| o == v))
            })
        })
    }
}

/// One contact of the cohort: its bound turns (oldest first) and when the last was written.
#[derive(Debug, Clone)]
pub struct Member {
    pub conversation_id: ConversationId,
    pub last_bound_at: DateTime<Utc>,
    pub turns: Vec<Turn>,
}

/// The labelled cohort, each side most recent first.
#[derive(Debug, Default)]
pub struct Cohort {
    pub converted: Vec<Member>,
    pub not_converted: Vec<Member>,
    /// Contacts whose read failed (dropped, never labelled).
    pub dropped: usize,
}

/// A candidate before its label: the member and whom to read.
struct Candidate {
    member: Member,
    subscriber: SubscriberId,
}

/// The cohort at `now`: candidates from the store, then labels read one a second (tokio's
/// clock), until both sides are full or the candidates run out.
pub async fn gather(
    store: &dyn Store,
    funnel: &Funnel,
    converted_tag: &str,
    tags: &dyn TagReader,
    now: DateTime<Utc>,
) -> Result<Cohort> {
    let candidates = candidates(store, funnel, now).await?;
    let mut cohort = Cohort::default();
    let tag = converted_tag.trim();
    for (i, candidate) in candidates.into_iter().enumerate() {
        if cohort.converted.len() >= MAX_PER_SIDE && cohort.not_converted.len() >= MAX_PER_SIDE {
            break;
        }
        if i > 0 {
            tokio::time::sleep(READ_PACE).await;
        }
        match tags.tags(&candidate.subscriber).await {
            Ok(names) => {
                let side = match names.iter().any(|n| n == tag) {
                    true => &mut cohort.converted,
                    false => &mut cohort.not_converted,
                };
                if side.len() < MAX_PER_SIDE {
                    side.push(candidate.member);
                }
            }
            Err(kind) => {
                cohort.dropped += 1;
                tracing::warn!(
                    conversation_id = %candidate.member.conversation_id,
                    kind,
                    "learning label read failed: the contact is left out"
                );
            }
        }
    }
    Ok(cohort)
}

/// The contacts whose funnel reached `offered` within the window and whose latest bound turn
/// has settled, the most recent first.
async fn candidates(
    store: &dyn Store,
    funnel: &Funnel,
    now: DateTime<Utc>,
) -> Result<Vec<Candidate>> {
    let since = now - chrono::Duration::days(COHORT_DAYS);
    let settled_before = now - chrono::Duration::days(SETTLE_DAYS);
    let mut found = Vec::new();
    for id in store.conversations_with_actions_since(since).await? {
        let record = store.sales_record(id).await?;
        let offered = record
            .actions
            .iter()
            .any(|r| r.at >= since && funnel.reached_offered(&r.actions));
        if !offered {
            continue;
        }
        let turns: Vec<Turn> = store
            .turns(id)
            .await?
            .into_iter()
            .filter(|t| t.bound)
            .collect();
        let Some(last_bound_at) = turns.last().map(|t| t.created_at) else {
            continue;
        };
        if last_bound_at > settled_before {
            continue;
        }
        let Some(conversation) = store.conversation(id).await? else {
            continue;
        };
        found.push(Candidate {
            member: Member {
                conversation_id: id,
                last_bound_at,
                turns,
            },
            subscriber: conversation.subscriber_id,
        });
    }
    found.sort_by_key(|c| std::cmp::Reverse(c.member.last_bound_at));
    Ok(found)
}
