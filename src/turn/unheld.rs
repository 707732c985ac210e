//! The hold of a contact handed off without the store (`escalate::hand_off_without_store`): the
//! contact was told a person will write and tagged through ManyChat, but `escalated_at` could
//! not be written, so nothing held the conversation. The contact is remembered here until its
//! hold is on disk: a task writes it once the store takes writes again (retrying, backing off),
//! and a turn of that contact writes it first, before its hold check, so the handoff and the
//! hold are one promise.
//!
//! Invariants: a contact is written at most once per handoff (removed once written); the hold
//! begins when the contact was handed off, not when it was written; the memory is this
//! process's (a restart before the store returns keeps the ManyChat tag, which a held contact's
//! check reads, but no hold).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::TurnEngine;
use crate::ids::SubscriberId;
use crate::store::{Conversation, StoreError};

/// The first wait before the task tries to write a hold again; doubled up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Contacts handed off without the store, and when.
#[derive(Clone, Default)]
pub(super) struct Unheld {
    contacts: Arc<Mutex<HashMap<SubscriberId, DateTime<Utc>>>>,
}

impl Unheld {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SubscriberId, DateTime<Utc>>> {
        self.contacts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, subscriber: &SubscriberId, at: DateTime<Utc>) {
        self.lock().insert(subscriber.clone(), at);
    }

    fn handed_off_at(&self, subscriber: &SubscriberId) -> Option<DateTime<Utc>> {
        self.lock().get(subscriber).copied()
    }

    /// Forgets `subscriber` if it is still the handoff of `at`.
    fn written(&self, subscriber: &SubscriberId, at: DateTime<Utc>) {
        let mut contacts = self.lock();
        if contacts.get(subscriber) == Some(&at) {
            contacts.remove(subscriber);
        }
    }
}

impl TurnEngine {
    /// Remembers that `subscriber` was handed off now without the store, and writes the hold
    /// once the store takes it (a task of its own, retrying while the hold would last).
    pub(super) fn hold_without_store(&self, subscriber: &SubscriberId) {
        let inner = &self.inner;
        let at = inner.clock.now();
        inner.unheld.remember(subscriber, at);
        let hours = crate::handoff::hold_hours(&inner.config.snapshot());
        let engine = self.clone();
        let subscriber = subscriber.clone();
        // Not tracked: shutdown does not wait for a store that does not answer.
        tokio::spawn(async move {
            let until = at + chrono::Duration::hours(i64::from(hours.max(1)));
            let mut wait = RETRY_FIRST;
            loop {
                tokio::time::sleep(wait).await;
                if engine.inner.unheld.handed_off_at(&subscriber) != Some(at) {
                    return;
                }
                match engine.write_hold(&subscriber, at).await {
                    Ok(()) => return,
                    Err(error) if engine.inner.clock.now() >= until => {
                        tracing::error!(error = %error, "the hold of a contact handed off without the store was never written");
                        return;
                    }
                    Err(_) => wait = (wait * 2).min(RETRY_MAX),
                }
            }
        });
    }

    /// Before a turn of `conversation`'s contact: writes its hold when it was handed off without
    /// the store, so the turn finds it held.
    pub(super) async fn hold_handed_off(
        &self,
        conversation: &mut Conversation,
    ) -> Result<(), StoreError> {
        let unheld = &self.inner.unheld;
        let Some(at) = unheld.handed_off_at(&conversation.subscriber_id) else {
            return Ok(());
        };
        self.inner.store.set_escalated(conversation.id, at).await?;
        unheld.written(&conversation.subscriber_id, at);
        if conversation.escalated_at.is_none_or(|was| was < at) {
            conversation.escalated_at = Some(at);
        }
        tracing::info!(conversation = %conversation.id, "hold of a contact handed off without the store written");
        Ok(())
    }

    async fn write_hold(
        &self,
        subscriber: &SubscriberId,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let mut conversation = inner
            .store
            .conversation_for(subscriber, "whatsapp", inner.clock.now())
            .await?;
        if inner.unheld.handed_off_at(subscriber) != Some(at) {
            return Ok(());
        }
        self.hold_handed_off(&mut conversation).await
    }
}
