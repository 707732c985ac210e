//! The tag-removed release: while a contact is held and `handoff.tag` is set, each of its
//! messages reads the contact once (getInfo, through the shared limiter, bounded); the hold ends
//! when the tag is gone. A failed or slow read keeps the hold: it fails toward the person.

use std::time::Duration;

use crate::ids::SubscriberId;
use crate::manychat::ManyChatClient;

/// The read's bound, the limiter's wait included.
pub const TAG_READ_TIMEOUT: Duration = Duration::from_millis(1500);

/// Whether the read shows the handoff tag gone. False when the contact still has it, and when
/// the read failed or timed out.
pub async fn tag_removed(manychat: &ManyChatClient, subscriber: &SubscriberId, tag: &str) -> bool {
    match manychat.get_contact(subscriber, TAG_READ_TIMEOUT).await {
        Ok(contact) => !contact.has_tag(tag.trim()),
        Err(error) => {
            tracing::warn!(
                kind = error.kind(),
                "handoff tag read failed: the contact stays held"
            );
            false
        }
    }
}
