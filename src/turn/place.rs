//! A turn's place among the turns in flight: one contact cannot take every slot.
//!
//! `MAX_TURNS_IN_FLIGHT` bounds the turns the process runs at once; beyond it a message is
//! load-shed to a person. Without a bound per contact, one contact sending a burst would hold
//! every slot and every other contact would be shed. So:
//! - a contact has at most [`MAX_TURNS_PER_CONTACT`] turns admitted at once (in flight or
//!   waiting behind its own earlier turn: [`MAX_IN_FLIGHT_PER_CONTACT`] +
//!   [`MAX_WAITING_PER_CONTACT`]); a message beyond that is refused with 429 and `Retry-After`
//!   before any slot is taken, at that contact's expense only;
//! - a turn waiting behind its contact's earlier turn (037) holds no slot: it gives its slot
//!   back while it waits ([`TurnPlace::step_aside`]) and takes one again, waiting for it if
//!   need be, when its place in the contact's order comes ([`TurnPlace::resume`]).
//!
//! A place is held from the request's admission until its last holder (the request, the agent's
//! task after a lost race) ends, like the slot itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ids::SubscriberId;

/// Turns of one contact in flight at once (holding a slot).
pub const MAX_IN_FLIGHT_PER_CONTACT: usize = 2;
/// Turns of one contact waiting behind its earlier turn.
pub const MAX_WAITING_PER_CONTACT: usize = 4;
/// Turns of one contact admitted at once.
pub const MAX_TURNS_PER_CONTACT: usize = MAX_IN_FLIGHT_PER_CONTACT + MAX_WAITING_PER_CONTACT;

/// Every contact's admitted turns.
#[derive(Debug, Default)]
pub struct ContactTurns {
    admitted: Mutex<HashMap<SubscriberId, usize>>,
}

impl ContactTurns {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The contact's admission for one more turn, or `None` when it has
    /// [`MAX_TURNS_PER_CONTACT`] already.
    pub fn admit(self: &Arc<Self>, contact: &SubscriberId) -> Option<ContactAdmission> {
        let mut admitted = self.lock();
        let count = admitted.entry(contact.clone()).or_insert(0);
        if *count >= MAX_TURNS_PER_CONTACT {
            return None;
        }
        *count += 1;
        Some(ContactAdmission {
            turns: self.clone(),
            contact: contact.clone(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SubscriberId, usize>> {
        self.admitted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One admitted turn of a contact; released when dropped.
#[derive(Debug)]
pub struct ContactAdmission {
    turns: Arc<ContactTurns>,
    contact: SubscriberId,
}

impl Drop for ContactAdmission {
    fn drop(&mut self) {
        let mut admitted = self.turns.lock();
        if let Some(count) = admitted.get_mut(&self.contact) {
            *count -= 1;
            if *count == 0 {
                admitted.remove(&self.contact);
            }
        }
    }
}

/// A turn's place: its contact's admission and, unless it is waiting behind the contact's
/// earlier turn, its slot under `MAX_TURNS_IN_FLIGHT`.
#[derive(Debug)]
pub struct TurnPlace {
    slots: Arc<Semaphore>,
    slot: Mutex<Option<OwnedSemaphorePermit>>,
    _admission: Option<ContactAdmission>,
}

impl TurnPlace {
    pub fn new(slot: OwnedSemaphorePermit, admission: Option<ContactAdmission>) -> Self {
        Self {
            slots: slot.semaphore().clone(),
            slot: Mutex::new(Some(slot)),
            _admission: admission,
        }
    }

    /// Gives the slot back while the turn waits behind its contact's earlier turn.
    pub fn step_aside(&self) {
        self.lock().take();
    }

    /// Takes a slot again (waiting for one when all are taken) once the turn's place comes.
    pub async fn resume(&self) {
        if self.lock().is_some() {
            return;
        }
        if let Ok(slot) = self.slots.clone().acquire_owned().await {
            *self.lock() = Some(slot);
        }
    }

    /// Whether the place holds a slot now.
    pub fn holds_slot(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn contact_turns_a_contact_is_admitted_at_most_six_turns_and_a_waiting_turn_holds_no_slot()
     {
        let turns = ContactTurns::new();
        let busy = SubscriberId::parse("5553001").unwrap();
        let held: Vec<_> = (0..MAX_TURNS_PER_CONTACT)
            .map(|_| turns.admit(&busy).expect("admitted"))
            .collect();
        assert!(turns.admit(&busy).is_none(), "the seventh is refused");
        let other = SubscriberId::parse("5553002").unwrap();
        assert!(turns.admit(&other).is_some(), "another contact is not");
        drop(held);
        assert!(turns.admit(&busy).is_some(), "released when the turns end");

        let slots = Arc::new(Semaphore::new(1));
        let place = TurnPlace::new(slots.clone().try_acquire_owned().unwrap(), None);
        assert_eq!(slots.available_permits(), 0);
        place.step_aside();
        assert_eq!(slots.available_permits(), 1, "given back while it waits");
        place.resume().await;
        assert!(place.holds_slot());
        assert_eq!(slots.available_permits(), 0);
    }
}
