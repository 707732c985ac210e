//! The one token bucket every ManyChat request passes through.
//!
//! ManyChat allows 10 requests per second per API key for getInfo and every tag or field write,
//! and may stop serving a key for 24 hours when the limit is exceeded, so staying under it is a
//! hard requirement. One bucket is shared by every request of the process (sendFlow's own, higher
//! limit is covered by the lower one): `Quota::per_second(10).allow_burst(5)`.
//!
//! Invariants:
//! - The limiter reads tokio's clock (through [`TokioClock`]) and waits with
//!   `tokio::time::sleep`, never real time, so a test with a paused tokio clock controls it and a
//!   waiting request never blocks a runtime thread.
//! - Waiters are not queued: each one retries after the wait governor names, so ordering among
//!   concurrent waiters is not guaranteed, only the rate.

use std::num::NonZeroU32;
use std::ops::Add;
use std::sync::Arc;

use governor::clock::{Clock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

/// Requests per second ManyChat allows for the calls we make (the lowest of its limits).
const PER_SECOND: NonZeroU32 = NonZeroU32::new(10).expect("10 is not zero");
/// Requests that may go out back to back before the rate applies.
const BURST: NonZeroU32 = NonZeroU32::new(5).expect("5 is not zero");

/// An instant of tokio's clock, in the form governor's GCRA arithmetic needs.
///
/// A newtype because governor's `Reference` needs `Add<Nanos>`, which cannot be implemented on
/// tokio's type from this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TokioInstant(tokio::time::Instant);

impl Add<Nanos> for TokioInstant {
    type Output = Self;

    fn add(self, other: Nanos) -> Self {
        Self(self.0 + std::time::Duration::from(other))
    }
}

impl Reference for TokioInstant {
    fn duration_since(&self, earlier: Self) -> Nanos {
        Nanos::from(self.0.saturating_duration_since(earlier.0))
    }

    fn saturating_sub(&self, duration: Nanos) -> Self {
        Self(
            self.0
                .checked_sub(std::time::Duration::from(duration))
                .unwrap_or(self.0),
        )
    }
}

/// governor's clock, reading `tokio::time::Instant::now()`, so pausing tokio's clock pauses it.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    type Instant = TokioInstant;

    fn now(&self) -> Self::Instant {
        TokioInstant(tokio::time::Instant::now())
    }
}

type Bucket = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<TokioInstant>>;

/// The shared ManyChat rate limiter. Cloning shares the bucket.
#[derive(Clone)]
pub struct ManyChatLimiter {
    bucket: Arc<Bucket>,
    /// Waiters queue here (a fair mutex) and only the one at the head watches the bucket: a
    /// backlog of N requests costs one wake-up per slot, not N, and is served in arrival order.
    queue: Arc<tokio::sync::Mutex<()>>,
}

impl ManyChatLimiter {
    /// A fresh bucket with ManyChat's quota, full (a burst of 5 is available at once).
    pub fn new() -> Self {
        let quota = Quota::per_second(PER_SECOND).allow_burst(BURST);
        Self {
            bucket: Arc::new(RateLimiter::direct_with_clock(quota, TokioClock)),
            queue: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Waits until one more request may be sent, then takes its slot.
    pub async fn acquire(&self) {
        // A waiter given up (its caller's deadline passed) leaves the queue when dropped.
        let _head = self.queue.lock().await;
        loop {
            match self.bucket.check() {
                Ok(()) => return,
                Err(not_until) => {
                    let wait = not_until.wait_time_from(TokioClock.now());
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

impl Default for ManyChatLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ManyChatLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManyChatLimiter")
            .field("per_second", &PER_SECOND)
            .field("burst", &BURST)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_lets_a_burst_of_five_through_then_paces_at_ten_per_second() {
        let limiter = ManyChatLimiter::new();
        let start = Instant::now();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the burst of 5 must not wait"
        );

        limiter.acquire().await;
        let sixth = start.elapsed();
        assert!(
            sixth >= Duration::from_millis(100) && sixth <= Duration::from_millis(102),
            "the 6th request waits one replenish interval (100 ms), waited {sixth:?}"
        );

        limiter.acquire().await;
        let seventh = start.elapsed();
        assert!(
            seventh >= Duration::from_millis(200) && seventh <= Duration::from_millis(204),
            "the 7th request waits another 100 ms, waited {seventh:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_is_shared_between_clones() {
        let limiter = ManyChatLimiter::new();
        let other = limiter.clone();
        let start = Instant::now();
        for _ in 0..5 {
            other.acquire().await;
        }
        limiter.acquire().await;
        assert!(
            start.elapsed() >= Duration::from_millis(100),
            "a clone draws from the same bucket"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_serves_waiters_in_arrival_order() {
        let limiter = ManyChatLimiter::new();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        let served = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for n in 0..12 {
            let limiter = limiter.clone();
            let served = served.clone();
            waiters.push(tokio::spawn(async move {
                limiter.acquire().await;
                served.lock().unwrap().push(n);
            }));
            // Each waiter is queued before the next arrives.
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
        }
        for waiter in waiters {
            waiter.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), (0..12).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_refills_after_idle_time() {
        let limiter = ManyChatLimiter::new();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        tokio::time::advance(Duration::from_millis(500)).await;
        let start = Instant::now();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "half a second refills the burst of 5"
        );
    }
}
