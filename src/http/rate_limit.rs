//! The request limits (SYSTEM 3.1): 300 requests per minute per key, where the
//! key is the client's address for a request without a valid secret (counted before the 401),
//! and the contact (`subscriber_id`) for an authenticated one (counted once the body is parsed,
//! before the store is touched). ManyChat sends every contact's messages from a few addresses, so
//! a per-address budget would throttle a busy account; a contact in a loop is throttled alone.
//! A refusal says when the key has budget again (`Retry-After`).
//!
//! The limiter is a keyed GCRA (the generic cell rate algorithm governor uses) on tokio's clock,
//! so tests pause and advance time instead of sleeping. It allows a burst of the whole budget and
//! refills continuously: one request per `60 s / limit`, a full budget after a minute idle.
//!
//! Invariants: memory stays bounded by the keys active in the last minute (a key whose budget is
//! full again carries no state and is pruned); IPv6 addresses are keyed by their /64, because a
//! single host usually controls a whole /64 and could otherwise rotate addresses for free.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::ids::SubscriberId;

/// Requests per key per minute (SYSTEM 3.1).
pub const REQUESTS_PER_MINUTE: u32 = 300;

const WINDOW: Duration = Duration::from_secs(60);

/// Below this many keys, pruning is not worth a pass over the map.
const MIN_PRUNE_AT: usize = 1024;

/// A refused request: how long until the key has budget for one more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

impl RetryAfter {
    /// Whole seconds for the `Retry-After` header, rounded up and at least 1, so a client that
    /// waits that long is let through.
    pub fn seconds(self) -> u64 {
        let whole = self.0.as_secs() + u64::from(self.0.subsec_nanos() > 0);
        whole.max(1)
    }
}

#[derive(Debug)]
struct State<K> {
    /// Per key, the GCRA's theoretical arrival time: the budget is full again at this instant.
    full_at: HashMap<K, Instant>,
    /// Map size that triggers the next prune; doubles with the live set so pruning stays O(1)
    /// amortised.
    prune_at: usize,
}

/// One GCRA budget per key.
#[derive(Debug)]
struct Budgets<K> {
    state: Mutex<State<K>>,
    /// Time one request costs: `60 s / limit`.
    interval: Duration,
    /// How far ahead of now the budget may be spent: `interval × (limit − 1)`.
    tolerance: Duration,
}

impl<K: Hash + Eq> Budgets<K> {
    fn per_minute(limit: u32) -> Self {
        let limit = limit.max(1);
        let interval = WINDOW / limit;
        Self {
            state: Mutex::new(State {
                full_at: HashMap::new(),
                prune_at: MIN_PRUNE_AT,
            }),
            interval,
            tolerance: interval * (limit - 1),
        }
    }

    /// Counts one request against `key`'s budget. The key is copied only when it is new.
    fn check<Q>(&self, key: &Q) -> Result<(), RetryAfter>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.full_at.len() >= state.prune_at {
            state.full_at.retain(|_, full_at| *full_at > now);
            state.prune_at = (state.full_at.len() * 2).max(MIN_PRUNE_AT);
        }
        let full_at = state
            .full_at
            .get(key)
            .copied()
            .filter(|t| *t > now)
            .unwrap_or(now);
        if full_at - now > self.tolerance {
            return Err(RetryAfter(full_at - now - self.tolerance));
        }
        match state.full_at.get_mut(key) {
            Some(slot) => *slot = full_at + self.interval,
            None => {
                state
                    .full_at
                    .insert(key.to_owned(), full_at + self.interval);
            }
        }
        Ok(())
    }

    fn tracked_keys(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.full_at.len()
    }
}

/// The per-address budgets of unauthenticated requests and the per-contact budgets of
/// authenticated ones.
#[derive(Debug)]
pub struct RateLimiter {
    addresses: Budgets<IpAddr>,
    contacts: Budgets<String>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::per_minute(REQUESTS_PER_MINUTE)
    }
}

impl RateLimiter {
    /// A limiter allowing `limit` requests per minute per key (at least 1).
    pub fn per_minute(limit: u32) -> Self {
        Self {
            addresses: Budgets::per_minute(limit),
            contacts: Budgets::per_minute(limit),
        }
    }

    /// Counts one request without a valid secret from `ip`.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), RetryAfter> {
        self.addresses.check(&bucket_address(ip))
    }

    /// Counts one authenticated request for `contact`.
    pub fn check_contact(&self, contact: &SubscriberId) -> Result<(), RetryAfter> {
        self.contacts.check(contact.as_str())
    }

    /// Keys currently holding state (for tests and metrics).
    pub fn tracked_keys(&self) -> usize {
        self.addresses.tracked_keys() + self.contacts.tracked_keys()
    }
}

/// IPv4 (and IPv4-mapped IPv6) addresses count alone; IPv6 addresses count per /64.
pub(crate) fn bucket_address(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn contact(s: &str) -> SubscriberId {
        SubscriberId::parse(s).unwrap()
    }

    fn spend(limiter: &RateLimiter, addr: IpAddr, n: u32) -> u32 {
        (0..n)
            .filter(|_| limiter.check_address(addr).is_ok())
            .count() as u32
    }

    fn spend_contact(limiter: &RateLimiter, who: &SubscriberId, n: u32) -> u32 {
        (0..n)
            .filter(|_| limiter.check_contact(who).is_ok())
            .count() as u32
    }

    /// A limiter whose address `203.0.113.7` spent its minute: 300 passed, the next refused.
    fn spent_address() -> (RateLimiter, IpAddr) {
        let limiter = RateLimiter::default();
        let addr = ip("203.0.113.7");
        assert_eq!(spend(&limiter, addr, 300), 300);
        assert!(limiter.check_address(addr).is_err());
        (limiter, addr)
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_three_hundred_pass_and_the_next_is_refused() {
        spent_address();
    }

    #[tokio::test(start_paused = true)]
    async fn contacts_have_budgets_of_their_own_apart_from_addresses() {
        let limiter = RateLimiter::default();
        let addr = ip("203.0.113.7");
        assert_eq!(spend(&limiter, addr, 301), 300);
        let busy = contact("5550001");
        assert_eq!(spend_contact(&limiter, &busy, 301), 300);
        // Another contact, and another address, are untouched.
        assert_eq!(spend_contact(&limiter, &contact("5550002"), 300), 300);
        assert!(limiter.check_address(ip("203.0.113.8")).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_says_when_to_retry_and_that_time_is_enough() {
        let limiter = RateLimiter::default();
        let busy = contact("5550001");
        assert_eq!(spend_contact(&limiter, &busy, 300), 300);
        let refused = limiter.check_contact(&busy).unwrap_err();
        // One request costs 200 ms of a 300-per-minute budget.
        assert_eq!(refused, RetryAfter(Duration::from_millis(200)));
        assert_eq!(refused.seconds(), 1);
        advance(Duration::from_millis(199)).await;
        assert!(limiter.check_contact(&busy).is_err());
        advance(Duration::from_millis(1)).await;
        assert!(limiter.check_contact(&busy).is_ok());
        assert_eq!(RetryAfter(Duration::from_millis(2001)).seconds(), 3);
        assert_eq!(RetryAfter(Duration::ZERO).seconds(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_budget_refills_after_a_minute() {
        let (limiter, addr) = spent_address();
        advance(Duration::from_secs(30)).await;
        assert_eq!(spend(&limiter, addr, 300), 150);
        advance(Duration::from_secs(60)).await;
        assert_eq!(spend(&limiter, addr, 301), 300);
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_ipv6_addresses_share_their_slash_64() {
        let limiter = RateLimiter::per_minute(2);
        assert!(limiter.check_address(ip("2001:db8::1")).is_ok());
        assert!(limiter.check_address(ip("2001:db8::2")).is_ok());
        assert!(limiter.check_address(ip("2001:db8::3")).is_err());
        assert!(limiter.check_address(ip("2001:db8:0:1::1")).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_idle_keys_are_pruned() {
        let limiter = RateLimiter::default();
        for i in 0..MIN_PRUNE_AT as u32 {
            assert!(limiter.check_address(IpAddr::from(i.to_be_bytes())).is_ok());
        }
        assert_eq!(limiter.tracked_keys(), MIN_PRUNE_AT);
        advance(WINDOW).await;
        assert!(limiter.check_address(ip("203.0.113.7")).is_ok());
        assert_eq!(limiter.tracked_keys(), 1);
    }
}
