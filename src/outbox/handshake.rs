//! The delivery handshake (optional, `MANYCHAT_DELIVERED_FIELD`): how a resumed reply learns
//! whether ManyChat ran a trigger that got no answer, so it is not sent to the contact twice.
//!
//! ManyChat takes no idempotency key, so the reply flow records what it delivered:
//! - each message the outbox sends carries a delivery id, `<row id>.<message index>` (no
//!   personal data), written in the same setCustomFields request as the text: the text into
//!   `MANYCHAT_REPLY_FIELD`, the id into `MANYCHAT_DELIVERY_ID_FIELD`;
//! - the tenant's reply flow, after its message, copies the id field into the delivered field
//!   (a Set Custom Field step: `MANYCHAT_DELIVERED_FIELD` = the id field's value);
//! - before a trigger that got no answer is sent again, the worker reads the contact once
//!   (getInfo, through the shared limiter): when the delivered field holds that message's
//!   id, the flow ran and the message counts as delivered without a second trigger; when it
//!   does not, the message is sent again, once at most ([`super::MAX_UNANSWERED_TRIGGERS`]);
//!   when the read fails, the same.
//!
//! Without the handshake a trigger that got no answer (a timeout, a process killed while it
//! waited) is sent again once: the contact may get that message twice, never three times.

use std::time::Duration;

use crate::ids::SubscriberId;
use crate::manychat::{ContactRecord, ManyChatClient, ManyChatError};

/// `MANYCHAT_DELIVERY_ID_FIELD` when unset.
pub const DEFAULT_DELIVERY_ID_FIELD: &str = "ai_delivery_id";

/// How long the read of the delivered field may take, the wait for the limiter included.
pub const DELIVERED_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The two custom fields of the handshake, both Text fields in the ManyChat account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryHandshake {
    /// `MANYCHAT_DELIVERED_FIELD`: written by the tenant's reply flow with the id of the
    /// message it just sent; read by the worker.
    pub delivered_field: String,
    /// `MANYCHAT_DELIVERY_ID_FIELD` (default `ai_delivery_id`): written by the worker with each
    /// message's delivery id, beside the text.
    pub delivery_id_field: String,
}

/// A message's delivery id: its outbox row and its place in the row, nothing about the
/// contact. Unique per row and message.
pub fn delivery_id(row_id: i64, index: usize) -> String {
    format!("{row_id}.{index}")
}

/// What the read of the contact says about one message's trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// The delivered field holds the message's id: the reply flow ran and sent it.
    Yes,
    /// The field holds something else (or nothing): the flow did not get that far.
    No,
    /// The contact could not be read: nothing is known.
    Unknown,
}

impl DeliveryHandshake {
    /// Whether `record` (the contact as getInfo returned it) shows `id` in the delivered field.
    /// ManyChat's field names are not case-sensitive.
    pub fn shows(&self, record: &ContactRecord, id: &str) -> bool {
        record
            .fields
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&self.delivered_field))
            .and_then(|(_, value)| value.as_str())
            .is_some_and(|held| held.trim() == id)
    }

    /// Reads the contact once and says whether message `id` was delivered.
    pub async fn read(
        &self,
        manychat: &ManyChatClient,
        subscriber: &SubscriberId,
        id: &str,
    ) -> (Delivered, Option<ManyChatError>) {
        match manychat
            .get_contact(subscriber, DELIVERED_READ_TIMEOUT)
            .await
        {
            Ok(record) if self.shows(&record, id) => (Delivered::Yes, None),
            Ok(_) => (Delivered::No, None),
            Err(error) => (Delivered::Unknown, Some(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn handshake() -> DeliveryHandshake {
        DeliveryHandshake {
            delivered_field: "ai_delivered".into(),
            delivery_id_field: DEFAULT_DELIVERY_ID_FIELD.into(),
        }
    }

    fn record(fields: &[(&str, serde_json::Value)]) -> ContactRecord {
        ContactRecord {
            tags: Vec::new(),
            fields: fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn a_delivery_id_names_the_row_and_the_message_only() {
        assert_eq!(delivery_id(42, 0), "42.0");
        assert_eq!(delivery_id(42, 1), "42.1");
        assert_ne!(delivery_id(4, 21), delivery_id(42, 1));
    }

    #[test]
    fn only_the_messages_own_id_in_the_delivered_field_counts_as_delivered() {
        let handshake = handshake();
        let held = |value| record(&[("AI_Delivered", value), ("ai_delivery_id", json!("9.0"))]);
        assert!(handshake.shows(&held(json!("9.0")), "9.0"));
        assert!(handshake.shows(&held(json!(" 9.0 ")), "9.0"));
        assert!(
            !handshake.shows(&held(json!("9.1")), "9.0"),
            "another message"
        );
        assert!(!handshake.shows(&held(json!("19.0")), "9.0"), "another row");
        assert!(!handshake.shows(&held(json!(null)), "9.0"), "never written");
        assert!(
            !handshake.shows(&record(&[("ai_delivery_id", json!("9.0"))]), "9.0"),
            "the id the worker wrote is not the flow's copy"
        );
    }
}
