//! Ending a hold and recording why: an operator's release (the CLI and the release route), and
//! the expiry recorded by the first message after it. A release is one conditional write on the
//! conversation row: it releases the hold that began at the last handoff and nothing newer.

use chrono::{DateTime, Utc};

use super::{Hold, Release, hold_at, hold_hours};
use crate::config::TenantConfig;
use crate::ids::SubscriberId;
use crate::store::{Conversation, Store, StoreError};

/// An operator releases the contact: `Some(Released)` when a hold was in force and is now over;
/// `None` when the contact is unknown or was not held (a hold that ran out is recorded as
/// expired, not released).
pub async fn release_contact(
    store: &dyn Store,
    config: &TenantConfig,
    subscriber: &SubscriberId,
    now: DateTime<Utc>,
) -> Result<Option<Release>, StoreError> {
    let Some(conversation) = store.conversation_by_subscriber(subscriber).await? else {
        return Ok(None);
    };
    match hold_at(&conversation, hold_hours(config), now) {
        Hold::Held { since, .. } => {
            let released = record(store, &conversation, since, now, Release::Released).await?;
            Ok(released.then_some(Release::Released))
        }
        Hold::Expired { since, at } => {
            record(store, &conversation, since, at, Release::HoldExpired).await?;
            Ok(None)
        }
        Hold::Free => Ok(None),
    }
}

/// Records the release of the hold that began at `since`; false when that hold is no longer the
/// one in force (a newer handoff) or was released already (another replica, the CLI).
pub async fn record(
    store: &dyn Store,
    conversation: &Conversation,
    since: DateTime<Utc>,
    at: DateTime<Utc>,
    why: Release,
) -> Result<bool, StoreError> {
    let released = store
        .release_hold(conversation.id, since, at, why.as_str())
        .await?;
    if released {
        tracing::info!(
            conversation = %conversation.id,
            reason = why.as_str(),
            "hold released"
        );
    }
    Ok(released)
}
