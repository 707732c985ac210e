//! When a row that failed passingly is tried again, and when the worker stops trying.
//!
//! Rules:
//! - A passing failure (ManyChat's 429, a 5xx, a network error, a store that did not answer) is
//!   retried until the row is too old to help: `OUTBOX_GIVE_UP_AFTER_MS` after it was queued
//!   (6 h by default), and never past the contact's 24-hour window after their last message
//!   (WhatsApp refuses a business message after it). Then it is dead-lettered and its contact
//!   handed to a person. A permanent failure (a 400) dead-letters at once.
//! - The pause after the `n`-th failed attempt is `min(60, 2^n)` seconds, or longer when ManyChat
//!   said when to come back (`Retry-After`), and never past the give-up time.
//! - While ManyChat keeps failing passingly (two failures in a row, with no success between)
//!   the worker probes it with one row at a time, no sooner than the same pause after the last
//!   failure ([`Outage`]), instead of spending the request budget on failures; the first success
//!   ends the outage.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// `OUTBOX_GIVE_UP_AFTER_MS`'s default: six hours.
pub const DEFAULT_GIVE_UP_AFTER: Duration = Duration::from_secs(6 * 3600);

/// WhatsApp's customer-service window: a business message is accepted only within 24 hours
/// of the contact's last message.
pub const CONTACT_WINDOW: chrono::Duration = chrono::Duration::hours(24);

/// The longest pause between two attempts, unless ManyChat asks for longer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The longest `Retry-After` honoured: a larger value is taken as this (the give-up time still
/// bounds the row).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The pause after the `attempts`-th failed attempt: `min(60, 2^attempts)` seconds.
pub fn backoff(attempts: i32) -> Duration {
    let secs = 2u64.saturating_pow(attempts.clamp(0, 30) as u32);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

/// When a row queued at `created_at` stops being retried: `give_up_after` later, or the end of
/// the contact's window after `last_message_at`, whichever comes first.
pub fn give_up_at(
    created_at: DateTime<Utc>,
    last_message_at: Option<DateTime<Utc>>,
    give_up_after: Duration,
) -> DateTime<Utc> {
    let after = created_at
        + chrono::Duration::from_std(give_up_after).unwrap_or(chrono::Duration::hours(6));
    match last_message_at {
        Some(last) => after.min(last + CONTACT_WINDOW),
        None => after,
    }
}

/// When a row that failed passingly for the `attempts`-th time is tried again, or `None` when
/// it is too old to help (`now` at or past `give_up`).
pub fn retry_at(
    now: DateTime<Utc>,
    give_up: DateTime<Utc>,
    attempts: i32,
    retry_after: Option<Duration>,
) -> Option<DateTime<Utc>> {
    if now >= give_up {
        return None;
    }
    let wait = backoff(attempts).max(retry_after.unwrap_or_default().min(MAX_RETRY_AFTER));
    let due = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::seconds(60));
    Some(due.min(give_up))
}

/// How many passing failures in a row, with no success between, make an outage.
pub const KEEPS_FAILING: i32 = 2;

/// Whether ManyChat is failing passingly, as this worker saw it, and when it may be probed again.
#[derive(Debug, Default)]
pub struct Outage {
    state: Mutex<Option<Probe>>,
}

#[derive(Debug, Clone, Copy)]
struct Probe {
    failures: i32,
    next: Instant,
}

impl Outage {
    /// How many rows may be claimed now, out of `room`: all of it while ManyChat answers; while
    /// it fails, one once the next probe is due and none is in hand (`in_hand` rows), else none.
    pub fn room(&self, room: usize, in_hand: usize) -> usize {
        match *self.lock() {
            Some(probe) if probe.failures >= KEEPS_FAILING => {
                if in_hand == 0 && Instant::now() >= probe.next {
                    room.min(1)
                } else {
                    0
                }
            }
            _ => room,
        }
    }

    /// Whether ManyChat keeps failing now.
    pub fn ongoing(&self) -> bool {
        self.lock().is_some_and(|p| p.failures >= KEEPS_FAILING)
    }

    /// A request failed passingly: the next probe waits the backoff of the failures so far, or
    /// `retry_after` when ManyChat asked for longer. Returns whether this started the outage.
    pub fn failed(&self, retry_after: Option<Duration>) -> bool {
        let mut state = self.lock();
        let failures = state.map_or(0, |p| p.failures) + 1;
        let wait = backoff(failures).max(retry_after.unwrap_or_default().min(MAX_RETRY_AFTER));
        let started = failures == KEEPS_FAILING;
        *state = Some(Probe {
            failures,
            next: Instant::now() + wait,
        });
        started
    }

    /// A request succeeded: the outage, if any, is over. Returns whether one was.
    pub fn recovered(&self) -> bool {
        self.lock()
            .take()
            .is_some_and(|p| p.failures >= KEEPS_FAILING)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Probe>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_770_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn fault_backoff_doubles_and_is_capped_at_a_minute() {
        assert_eq!(backoff(1).as_secs(), 2);
        assert_eq!(backoff(4).as_secs(), 16);
        assert_eq!(backoff(5).as_secs(), 32);
        assert_eq!(backoff(6).as_secs(), 60);
        assert_eq!(backoff(40).as_secs(), 60);
    }

    #[test]
    fn fault_a_passing_failure_is_retried_until_the_give_up_time_and_never_past_it() {
        let give_up = give_up_at(at(0), None, DEFAULT_GIVE_UP_AFTER);
        assert_eq!(give_up, at(6 * 3600));
        assert_eq!(retry_at(at(100), give_up, 30, None), Some(at(160)));
        assert_eq!(
            retry_at(at(6 * 3600 - 10), give_up, 30, None),
            Some(give_up),
            "the last try is at the give-up time"
        );
        assert_eq!(
            retry_at(give_up, give_up, 31, None),
            None,
            "then it gives up"
        );
    }

    #[test]
    fn fault_no_retry_goes_past_the_contacts_24_hour_window() {
        // The contact wrote 20 h before the reply was queued: the window ends 4 h later.
        let give_up = give_up_at(at(0), Some(at(-20 * 3600)), DEFAULT_GIVE_UP_AFTER);
        assert_eq!(give_up, at(4 * 3600));
    }

    #[test]
    fn fault_retry_after_is_honoured_beyond_the_backoff() {
        let give_up = at(3600);
        assert_eq!(
            retry_at(at(0), give_up, 1, Some(Duration::from_secs(30))),
            Some(at(30))
        );
        assert_eq!(
            retry_at(at(0), give_up, 8, Some(Duration::from_secs(5))),
            Some(at(60)),
            "a shorter Retry-After does not shorten the backoff"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fault_while_manychat_fails_the_worker_probes_one_row_at_a_time() {
        let outage = Outage::default();
        assert_eq!(outage.room(10, 3), 10, "no outage: the whole room");
        assert!(!outage.failed(None), "one failure is no outage");
        assert_eq!(outage.room(10, 3), 10);
        assert!(
            outage.failed(Some(Duration::from_secs(30))),
            "two in a row are"
        );
        assert_eq!(outage.room(10, 0), 0, "not before Retry-After");
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(outage.room(10, 1), 0, "never a second probe in hand");
        assert_eq!(outage.room(10, 0), 1, "one probe");
        assert!(!outage.failed(None));
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(outage.room(10, 0), 0, "the third failure waits 8 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(outage.room(10, 0), 1);
        assert!(outage.recovered());
        assert_eq!(outage.room(10, 4), 10, "over at the first success");
    }
}
