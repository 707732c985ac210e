//! The per-address request limit (SYSTEM 3.1): 300 requests per minute per address, counted
//! before authentication, with separate budgets for requests that did and did not present a valid
//! secret, so a flood of bad guesses from an address cannot starve ManyChat's real traffic from it.
//!
//! The limiter is a keyed GCRA (the generic cell rate algorithm governor uses) on tokio's clock,
//! so tests pause and advance time instead of sleeping. It allows a burst of the whole budget and
//! refills continuously: one request per `60 s / limit`, a full budget after a minute idle.
//!
//! Invariants: memory stays bounded by the keys active in the last minute (a key whose budget is
//! full again carries no state and is pruned); IPv6 addresses are keyed by their /64, because a
//! single host usually controls a whole /64 and could otherwise rotate addresses for free.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Requests per address per minute, per budget (SYSTEM 3.1).
pub const REQUESTS_PER_MINUTE: u32 = 300;

const WINDOW: Duration = Duration::from_secs(60);

/// Below this many keys, pruning is not worth a pass over the map.
const MIN_PRUNE_AT: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    address: IpAddr,
    authenticated: bool,
}

#[derive(Debug)]
struct State {
    /// Per key, the GCRA's theoretical arrival time: the budget is full again at this instant.
    full_at: HashMap<Key, Instant>,
    /// Map size that triggers the next prune; doubles with the live set so pruning stays O(1)
    /// amortised.
    prune_at: usize,
}

/// A keyed limiter: one budget per (address, authenticated).
#[derive(Debug)]
pub struct RateLimiter {
    state: Mutex<State>,
    /// Time one request costs: `60 s / limit`.
    interval: Duration,
    /// How far ahead of now the budget may be spent: `interval × (limit − 1)`.
    tolerance: Duration,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::per_minute(REQUESTS_PER_MINUTE)
    }
}

impl RateLimiter {
    /// A limiter allowing `limit` requests per minute per key (at least 1).
    pub fn per_minute(limit: u32) -> Self {
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

    /// Counts one request from `ip` against the budget for `authenticated`; false when over it.
    pub fn check(&self, ip: IpAddr, authenticated: bool) -> bool {
        let now = Instant::now();
        let key = Key {
            address: bucket_address(ip),
            authenticated,
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.full_at.len() >= state.prune_at {
            state.full_at.retain(|_, full_at| *full_at > now);
            state.prune_at = (state.full_at.len() * 2).max(MIN_PRUNE_AT);
        }
        let full_at = state
            .full_at
            .get(&key)
            .copied()
            .filter(|t| *t > now)
            .unwrap_or(now);
        if full_at - now > self.tolerance {
            return false;
        }
        state.full_at.insert(key, full_at + self.interval);
        true
    }

    /// Keys currently holding state (for tests and metrics).
    pub fn tracked_keys(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.full_at.len()
    }
}

/// IPv4 (and IPv4-mapped IPv6) addresses count alone; IPv6 addresses count per /64.
fn bucket_address(ip: IpAddr) -> IpAddr {
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

    fn spend(limiter: &RateLimiter, addr: IpAddr, authenticated: bool, n: u32) -> u32 {
        (0..n)
            .filter(|_| limiter.check(addr, authenticated))
            .count() as u32
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_three_hundred_pass_and_the_next_is_refused() {
        let limiter = RateLimiter::default();
        let addr = ip("203.0.113.7");
        assert_eq!(spend(&limiter, addr, false, 300), 300);
        assert!(!limiter.check(addr, false));
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_authenticated_and_unauthenticated_budgets_are_separate() {
        let limiter = RateLimiter::default();
        let addr = ip("203.0.113.7");
        assert_eq!(spend(&limiter, addr, false, 301), 300);
        assert_eq!(spend(&limiter, addr, true, 300), 300);
        assert!(!limiter.check(addr, true));
        // Another address is untouched.
        assert!(limiter.check(ip("203.0.113.8"), false));
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_budget_refills_after_a_minute() {
        let limiter = RateLimiter::default();
        let addr = ip("203.0.113.7");
        assert_eq!(spend(&limiter, addr, true, 300), 300);
        assert!(!limiter.check(addr, true));
        advance(Duration::from_secs(30)).await;
        assert_eq!(spend(&limiter, addr, true, 300), 150);
        advance(Duration::from_secs(60)).await;
        assert_eq!(spend(&limiter, addr, true, 301), 300);
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_ipv6_addresses_share_their_slash_64() {
        let limiter = RateLimiter::per_minute(2);
        assert!(limiter.check(ip("2001:db8::1"), false));
        assert!(limiter.check(ip("2001:db8::2"), false));
        assert!(!limiter.check(ip("2001:db8::3"), false));
        assert!(limiter.check(ip("2001:db8:0:1::1"), false));
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_1_idle_keys_are_pruned() {
        let limiter = RateLimiter::default();
        for i in 0..MIN_PRUNE_AT as u32 {
            assert!(limiter.check(IpAddr::from(i.to_be_bytes()), false));
        }
        assert_eq!(limiter.tracked_keys(), MIN_PRUNE_AT);
        advance(WINDOW).await;
        assert!(limiter.check(ip("203.0.113.7"), false));
        assert_eq!(limiter.tracked_keys(), 1);
    }
}
