//! A turn's place among the turns in flight: one contact cannot take every slot.
//!
//! `MAX_TURNS_IN_FLIGHT` bounds the turns the process runs at once (a turn in flight holds a
//! slot until its model call ends); a message that finds every slot taken when its turn could
//! start is load-shed to a person. So that one contact's burst cannot take every slot:
//! - a turn takes a slot only when it can start: a bound turn once it is its contact's next
//!   (037), any turn once its contact has fewer than [`IN_FLIGHT_PER_CONTACT`] turns in flight.
//!   Until then it waits holding no slot;
//! - a contact has at most [`WAITING_PER_CONTACT`] turns waiting; a message beyond that is
//!   recorded and answered silently (`busy`), at that contact's expense only.
//!
//! Invariants: a place counts as waiting from [`TurnPlace::wait`] until it starts or is
//! dropped; a started turn's [`InFlight`] holds its contact's place and its slot until the
//! last holder (the request, the agent's task after a lost race) ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ids::SubscriberId;

/// Turns of one contact in flight at once (each holding a slot). A contact's bound turns run
/// one at a time (037), so this bounds its unbound ones beside them.
pub const IN_FLIGHT_PER_CONTACT: usize = 2;
/// Turns of one contact waiting to start (holding no slot).
pub const WAITING_PER_CONTACT: usize = 4;

/// Prune the contacts' map when it grows past this many contacts.
const PRUNE_AT: usize = 1024;

/// The process's slots (`MAX_TURNS_IN_FLIGHT`) and every contact's turns.
pub struct TurnPlaces {
    slots: Arc<Semaphore>,
    contacts: Mutex<HashMap<SubscriberId, Arc<Contact>>>,
    /// Turns waiting to start, all contacts (the `turns_waiting` gauge).
    waiting: Gauge,
}

/// One contact's turns.
#[derive(Debug)]
struct Contact {
    in_flight: Arc<Semaphore>,
    waiting: AtomicUsize,
}

impl TurnPlaces {
    pub fn new(max_in_flight: usize, waiting: Gauge) -> Arc<Self> {
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(max_in_flight)),
            contacts: Mutex::new(HashMap::new()),
            waiting,
        })
    }

    /// A new message's place: it holds nothing until it starts or waits.
    pub fn place(&self, contact: &SubscriberId) -> TurnPlace {
        let mut contacts = self.contacts.lock().unwrap_or_else(PoisonError::into_inner);
        if contacts.len() >= PRUNE_AT {
            contacts.retain(|_, c| Arc::strong_count(c) > 1);
        }
        let contact = contacts
            .entry(contact.clone())
            .or_insert_with(|| {
                Arc::new(Contact {
                    in_flight: Arc::new(Semaphore::new(IN_FLIGHT_PER_CONTACT)),
                    waiting: AtomicUsize::new(0),
                })
            })
            .clone();
        TurnPlace {
            contact,
            slots: self.slots.clone(),
            gauge: self.waiting.clone(),
            waiting: false,
        }
    }
}

/// Why a turn cannot start at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotNow {
    /// Its contact has [`IN_FLIGHT_PER_CONTACT`] turns in flight: it waits.
    ContactBusy,
    /// Every slot is taken: the turn is load-shed.
    Full,
}

/// One message's place, from its arrival until its turn starts.
#[derive(Debug)]
pub struct TurnPlace {
    contact: Arc<Contact>,
    slots: Arc<Semaphore>,
    gauge: Gauge,
    /// Counted among its contact's waiting turns.
    waiting: bool,
}

/// A started turn's contact place and slot, shared by the request and the agent it starts:
/// given back when the last holder ends.
#[derive(Debug)]
pub struct Running {
    _contact: OwnedSemaphorePermit,
    _slot: OwnedSemaphorePermit,
}

/// A started turn's place under `MAX_TURNS_IN_FLIGHT`.
pub type InFlight = Arc<Running>;

impl TurnPlace {
    /// Starts the turn now, without waiting: its contact has room and a slot is free.
    pub fn try_start(&mut self) -> Result<InFlight, NotNow> {
        let contact = self
            .contact
            .in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| NotNow::ContactBusy)?;
        let slot = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| NotNow::Full)?;
        self.stop_waiting();
        Ok(Arc::new(Running {
            _contact: contact,
            _slot: slot,
        }))
    }

    /// Counts the turn among its contact's waiting turns; `false` (not counted) when the contact
    /// has [`WAITING_PER_CONTACT`] waiting already.
    pub fn wait(&mut self) -> bool {
        if self.waiting {
            return true;
        }
        let counted = self
            .contact
            .waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < WAITING_PER_CONTACT).then_some(n + 1)
            })
            .is_ok();
        if counted {
            self.waiting = true;
            self.gauge.inc();
        }
        counted
    }

    /// Once the turn may start in its contact's order: waits for its contact to have room, then
    /// takes a slot if one is free. `None`: every slot is taken (the turn is load-shed).
    pub async fn start(mut self) -> Option<InFlight> {
        let contact = self.contact.in_flight.clone().acquire_owned().await.ok()?;
        let slot = self.slots.clone().try_acquire_owned().ok()?;
        self.stop_waiting();
        Some(Arc::new(Running {
            _contact: contact,
            _slot: slot,
        }))
    }

    fn stop_waiting(&mut self) {
        if std::mem::take(&mut self.waiting) {
            self.contact.waiting.fetch_sub(1, Ordering::SeqCst);
            self.gauge.dec();
        }
    }
}

impl Drop for TurnPlace {
    fn drop(&mut self) {
        self.stop_waiting();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact(id: &str) -> SubscriberId {
        SubscriberId::parse(id).unwrap()
    }

    #[test]
    fn turn_places_a_contact_has_two_turns_in_flight_and_four_waiting_at_most() {
        let places = TurnPlaces::new(8, Gauge::default());
        let busy = contact("5553001");
        let running: Vec<_> = (0..IN_FLIGHT_PER_CONTACT)
            .map(|_| places.place(&busy).try_start().expect("room"))
            .collect();
        let mut third = places.place(&busy);
        assert_eq!(third.try_start().unwrap_err(), NotNow::ContactBusy);
        let mut waiting = vec![third];
        for _ in 1..WAITING_PER_CONTACT {
            waiting.push(places.place(&busy));
        }
        assert!(waiting.iter_mut().all(TurnPlace::wait));
        assert_eq!(places.waiting.get(), 4);
        assert!(!places.place(&busy).wait(), "a fifth does not wait");
        assert!(
            places.place(&contact("5553002")).try_start().is_ok(),
            "another contact starts"
        );
        assert_eq!(places.slots.available_permits(), 8 - 2);
        drop(waiting);
        assert_eq!(places.waiting.get(), 0, "a dropped place waits no more");
        drop(running);
        assert!(places.place(&busy).try_start().is_ok());
    }

    #[tokio::test]
    async fn turn_places_a_waiting_turn_holds_no_slot_and_is_shed_when_none_is_free() {
        let places = TurnPlaces::new(1, Gauge::default());
        let mut waiting = places.place(&contact("5553003"));
        assert!(waiting.wait());
        assert_eq!(places.slots.available_permits(), 1, "waiting holds no slot");
        let other = places.place(&contact("5553004")).try_start().unwrap();
        assert_eq!(
            places.place(&contact("5553005")).try_start().unwrap_err(),
            NotNow::Full
        );
        assert!(waiting.start().await.is_none(), "its place came: shed");
        assert_eq!(places.waiting.get(), 0);
        drop(other);
        let mut next = places.place(&contact("5553003"));
        assert!(next.wait());
        let started = next.start().await;
        assert!(started.is_some());
        assert_eq!(places.slots.available_permits(), 0, "it holds the slot");
    }
}
