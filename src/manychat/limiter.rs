//! The one token bucket every ManyChat request passes through, and the per-contact sendFlow
//! count.
//!
//! ManyChat allows 10 requests per second per API key for getInfo and every tag or field write,
//! and may stop serving a key for 24 hours when the limit is exceeded, so staying under it is a
//! hard requirement. One bucket is shared by every request (sendFlow's own, higher limit is
//! covered by the lower one): 10 per second, burst 5. A bucket alone lets its burst go on top of
//! the rate (15 in the second after an idle time), so every grant also passes the sliding
//! second: never more than [`PER_SECOND`] requests of this process in any second.
//!
//! The limit is per account, not per process: when the deployment has a [`SharedBucket`] (the
//! Postgres store keeps one in the database) every replica draws from it with
//! [`SHARED_QUOTA`], which has no burst: one request every 100 ms of the database's clock, so
//! never more than 10 in any sliding second of all replicas together (a burst would let 14 or 15
//! through, each replica's own sliding second seeing only its share). Otherwise (SQLite, one
//! process) the in-process bucket below is the whole budget. sendFlow is also limited per
//! contact ([`FLOW_SENDS_PER_HOUR`] an hour): a [`FlowCounter`], when given, counts each trigger
//! and refuses the one past the limit with [`ManyChatError::FlowCapReached`].
//!
//! ManyChat's `Retry-After` holds every request: [`ManyChatLimiter::hold`] keeps this process's
//! requests back until it passes and, with a shared bucket, pushes that bucket's next slot past
//! it by the database's clock, so every replica's requests wait too.
//!
//! Two priorities ([`Priority`]): a request waiting for a slot as [`Priority::Background`] (a
//! contact-token write) goes only when no [`Priority::Normal`] one (a reply, a handoff, a read)
//! waits, and steps back from a slot it is waiting for when one arrives: a backlog of token
//! writes delays a reply by at most the one request already let go. A priority in the
//! limiter rather than in the outbox's claim order because the limiter is where every path meets
//! (token writes beside a turn never pass the outbox), and it costs nothing while nothing waits.
//!
//! Invariants:
//! - The limiter reads tokio's clock (through [`TokioClock`]) and waits with
//!   `tokio::time::sleep`, never real time, so a test with a paused tokio clock controls it and a
//!   waiting request never blocks a runtime thread.
//! - Waiters of one process and one priority queue (a fair mutex) and only the head one asks the
//!   bucket, local or shared: a backlog costs one question per slot, and is served in arrival
//!   order within its priority.
//! - A shared bucket that cannot answer (the database is down) does not stop ManyChat traffic:
//!   the request falls back to the in-process bucket, so this replica alone stays under the
//!   limit, and a warning says so. A flow counter that cannot answer lets the trigger through
//!   (the per-contact limit is far above what a conversation sends), with a warning.

use std::num::NonZeroU32;
use std::ops::Add;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use governor::clock::{Clock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::error::{FLOW_SENDS_PER_HOUR, ManyChatError};
use crate::ids::SubscriberId;

/// Requests per second ManyChat allows for the calls we make (the lowest of its limits).
const PER_SECOND: NonZeroU32 = NonZeroU32::new(10).expect("10 is not zero");
/// The sliding second: no more than [`PER_SECOND`] requests within it.
const SLIDING_SECOND: Duration = Duration::from_secs(1);

/// Requests that may go out back to back before the rate applies.
const BURST: NonZeroU32 = NonZeroU32::new(5).expect("5 is not zero");

/// The account-wide quota a [`SharedBucket`] enforces: one request every `interval`, and up to
/// `burst` back to back after an idle time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketQuota {
    pub interval: Duration,
    pub burst: u32,
}

/// ManyChat's quota: 10 per second (one every 100 ms), burst 5.
pub const MANYCHAT_QUOTA: BucketQuota = BucketQuota {
    interval: Duration::from_millis(1000 / PER_SECOND.get() as u64),
    burst: BURST.get(),
};

/// The quota every replica shares: 10 per second and no burst (one request every 100 ms), so
/// that no sliding second of all replicas together holds more than 10 requests. Each replica's
/// own sliding second cannot see the others' requests, so the shared bucket itself must not
/// burst.
pub const SHARED_QUOTA: BucketQuota = BucketQuota {
    interval: MANYCHAT_QUOTA.interval,
    burst: 1,
};

/// Which requests go first when several wait for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Replies, handoffs, reads, flows: everything a contact waits for.
    #[default]
    Normal,
    /// Contact-token writes: they use the slots no normal request waits for.
    Background,
}

/// How long a request must wait, and whose clock measured it.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// This process's hold, sliding second or bucket: tokio's clock.
    Process(Duration),
    /// The shared bucket's answer: its own clock ([`SharedBucket::wait`]).
    Shared(Duration),
}

/// A token bucket kept outside the process, shared by every replica of the deployment.
#[async_trait]
pub trait SharedBucket: Send + Sync {
    /// Takes one slot if one is free now (`Ok(None)`), else takes nothing and says how long
    /// until one is (`Ok(Some(wait))`). `Err` carries a description for the warning.
    async fn take(&self, quota: BucketQuota) -> Result<Option<Duration>, String>;

    /// Holds every replica's requests for `wait` from now (ManyChat's `Retry-After`), by the
    /// bucket's own clock: its next slot is pushed past it. A hold never shortens a later one.
    async fn hold(&self, quota: BucketQuota, wait: Duration) -> Result<(), String>;

    /// Waits out `wait`, a span [`take`](Self::take) measured on the bucket's own clock. The
    /// default waits on tokio's clock; a bucket whose clock is elsewhere (the database's, which
    /// runs in real time whatever tokio's clock does) waits on that clock.
    async fn wait(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
    }
}

/// Counts sendFlow triggers per contact, wherever that count lives (the store).
#[async_trait]
pub trait FlowCounter: Send + Sync {
    /// Counts one trigger for `subscriber` when fewer than `per_hour` were counted in the past
    /// hour (`Ok(true)`); counts nothing and answers `Ok(false)` otherwise.
    async fn count(&self, subscriber: &SubscriberId, per_hour: u32) -> Result<bool, String>;
}

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
    /// The account-wide bucket, when the deployment keeps one; `bucket` is then the fallback.
    shared: Option<Arc<dyn SharedBucket>>,
    /// The per-contact sendFlow count, when the deployment keeps one.
    flows: Option<Arc<dyn FlowCounter>>,
    /// Normal waiters queue here (a fair mutex) and only the one at the head watches the bucket:
    /// a backlog of N requests costs one wake-up per slot, not N, and is served in arrival order.
    queue: Arc<tokio::sync::Mutex<()>>,
    /// Background waiters queue here the same way.
    background: Arc<tokio::sync::Mutex<()>>,
    /// Held by the one waiter (the head of either queue) asking the bucket.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// How many normal requests wait for a slot: background ones go only while it reads 0.
    normal_waiting: Arc<tokio::sync::watch::Sender<usize>>,
    /// Until when ManyChat's last `Retry-After` holds this process's requests.
    held_until: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
    /// When this process's latest requests (at most [`PER_SECOND`]) were let go, oldest first:
    /// the sliding second.
    recent: Arc<std::sync::Mutex<std::collections::VecDeque<tokio::time::Instant>>>,
}

impl ManyChatLimiter {
    /// A fresh bucket with ManyChat's quota, full (a burst of 5 is available at once).
    pub fn new() -> Self {
        let quota = Quota::per_second(PER_SECOND).allow_burst(BURST);
        Self {
            bucket: Arc::new(RateLimiter::direct_with_clock(quota, TokioClock)),
            shared: None,
            flows: None,
            queue: Arc::new(tokio::sync::Mutex::new(())),
            background: Arc::new(tokio::sync::Mutex::new(())),
            turn: Arc::new(tokio::sync::Mutex::new(())),
            normal_waiting: Arc::new(tokio::sync::watch::Sender::new(0)),
            held_until: Arc::default(),
            recent: Arc::default(),
        }
    }

    /// A fresh bucket with ManyChat's quota, empty: the first request waits one interval and
    /// the burst refills only as time passes. What a process whose bucket is its own (SQLite)
    /// starts with, since it cannot know how much of the account's second the process before it
    /// spent (a restart right after a burst would otherwise double it).
    pub fn starting_empty() -> Self {
        let limiter = Self::new();
        while limiter.bucket.check().is_ok() {}
        limiter
    }

    /// A limiter drawing from `shared` (every replica's bucket) instead of its own, keeping its
    /// own only as the fallback for when `shared` cannot answer.
    pub fn with_shared_bucket(mut self, shared: Arc<dyn SharedBucket>) -> Self {
        self.shared = Some(shared);
        self
    }

    /// A limiter that counts every sendFlow per contact in `flows` and refuses the one past
    /// [`FLOW_SENDS_PER_HOUR`].
    pub fn with_flow_counter(mut self, flows: Arc<dyn FlowCounter>) -> Self {
        self.flows = Some(flows);
        self
    }

    /// Whether the requests draw from a bucket every replica shares.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Waits until one more request may be sent, then takes its slot ([`Priority::Normal`]).
    pub async fn acquire(&self) {
        self.acquire_as(Priority::Normal).await;
    }

    /// Waits until one more request of `priority` may be sent, then takes its slot. A
    /// background request goes only when no normal one waits.
    pub async fn acquire_as(&self, priority: Priority) {
        match priority {
            Priority::Normal => {
                // Counted from before it queues, so a background waiter steps back at once.
                let _waiting = NormalWaiting::enter(&self.normal_waiting);
                // A waiter given up (its caller's deadline passed) leaves the queue when dropped.
                let _head = self.queue.lock().await;
                let _turn = self.turn.lock().await;
                let mut never = None;
                self.take_slot(&mut never).await;
            }
            Priority::Background => {
                let _head = self.background.lock().await;
                let mut normal = self.normal_waiting.subscribe();
                loop {
                    if normal.wait_for(|n| *n == 0).await.is_err() {
                        // The sender lives as long as `self`: unreachable, but never spin.
                        return;
                    }
                    let _turn = self.turn.lock().await;
                    if *normal.borrow_and_update() > 0 {
                        continue;
                    }
                    if self.take_slot(&mut Some(&mut normal)).await {
                        return;
                    }
                }
            }
        }
    }

    /// Waits out a hold, then for room in the sliding second, then for the bucket's slot. With
    /// `yield_to` (a background waiter) it gives up waiting as soon as a normal request waits
    /// (`false`: nothing taken); once the bucket's slot is taken the request goes.
    async fn take_slot(
        &self,
        yield_to: &mut Option<&mut tokio::sync::watch::Receiver<usize>>,
    ) -> bool {
        loop {
            // The sliding second is checked before the bucket is asked, so the burst never goes
            // on top of the rate and a slot taken is never held back after.
            let wait = match self.hold_left().or_else(|| self.sliding_wait()) {
                Some(left) => Some(Wait::Process(left)),
                None => self.bucket_wait().await,
            };
            let Some(wait) = wait else {
                self.note_sent();
                return true;
            };
            match yield_to {
                None => self.wait(wait).await,
                Some(normal) => {
                    tokio::select! {
                        _ = self.wait(wait) => {}
                        _ = normal.wait_for(|n| *n > 0) => return false,
                    }
                }
            }
        }
    }

    /// Takes a slot of the shared bucket, or of this process's when there is none or it does not
    /// answer (`None`), or says how long until one is free.
    async fn bucket_wait(&self) -> Option<Wait> {
        match &self.shared {
            Some(shared) => match shared.take(SHARED_QUOTA).await {
                Ok(wait) => wait.map(Wait::Shared),
                Err(error) => {
                    tracing::warn!(
                        error = %error,
                        "the shared ManyChat rate budget did not answer; pacing this replica alone"
                    );
                    self.local_wait().map(Wait::Process)
                }
            },
            None => self.local_wait().map(Wait::Process),
        }
    }

    /// Waits out `wait` on the clock that measured it.
    async fn wait(&self, wait: Wait) {
        match (wait, &self.shared) {
            (Wait::Shared(left), Some(shared)) => shared.wait(left).await,
            (Wait::Shared(left) | Wait::Process(left), _) => tokio::time::sleep(left).await,
        }
    }

    /// Holds every request for `wait` from now (ManyChat's `Retry-After`): this process's, and
    /// with a shared bucket every replica's. A shorter hold never cuts a longer one short.
    pub async fn hold(&self, wait: Duration) {
        let until = tokio::time::Instant::now() + wait;
        {
            let mut held = self
                .held_until
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *held = Some(held.map_or(until, |h| h.max(until)));
        }
        if let Some(shared) = &self.shared
            && let Err(error) = shared.hold(SHARED_QUOTA, wait).await
        {
            tracing::warn!(
                error = %error,
                "the shared ManyChat rate budget did not take the hold; only this replica waits"
            );
        }
    }

    /// How long this process's hold still lasts; `None` when there is none or it has passed.
    fn hold_left(&self) -> Option<Duration> {
        let until = (*self
            .held_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))?;
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// `None` when the sliding second has room for one more request, or how long until the
    /// oldest of the latest [`PER_SECOND`] requests is a second old.
    fn sliding_wait(&self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while recent
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= SLIDING_SECOND)
        {
            recent.pop_front();
        }
        if recent.len() >= PER_SECOND.get() as usize {
            let oldest = *recent.front()?;
            return Some(SLIDING_SECOND - now.saturating_duration_since(oldest));
        }
        None
    }

    /// Notes a request let go now, in the sliding second.
    fn note_sent(&self) {
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back(tokio::time::Instant::now());
    }

    /// Takes a slot of the in-process bucket (`None`), or says how long until one is free.
    fn local_wait(&self) -> Option<Duration> {
        match self.bucket.check() {
            Ok(()) => None,
            Err(not_until) => Some(not_until.wait_time_from(TokioClock.now())),
        }
    }

    /// Counts one sendFlow for `subscriber`, or refuses it when the contact already had
    /// [`FLOW_SENDS_PER_HOUR`] in the past hour. Without a counter, every trigger passes.
    pub async fn admit_flow(&self, subscriber: &SubscriberId) -> Result<(), ManyChatError> {
        let Some(flows) = &self.flows else {
            return Ok(());
        };
        match flows.count(subscriber, FLOW_SENDS_PER_HOUR).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ManyChatError::FlowCapReached),
            Err(error) => {
                tracing::warn!(
                    error = %error,
                    "the per-contact sendFlow count did not answer; sending uncounted"
                );
                Ok(())
            }
        }
    }
}

/// One normal request waiting for a slot, counted until it has one or is given up (dropped).
struct NormalWaiting<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> NormalWaiting<'a> {
    fn enter(count: &'a tokio::sync::watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count)
    }
}

impl Drop for NormalWaiting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
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
            .field("shared", &self.shared.is_some())
            .field("flow_counter", &self.flows.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    /// Takes `n` permits one after another; how long they took.
    async fn take(limiter: &ManyChatLimiter, n: usize) -> Duration {
        let start = Instant::now();
        for _ in 0..n {
            limiter.acquire().await;
        }
        start.elapsed()
    }

    /// `n` waiters, each queued before the next arrives: in the order they were served, each
    /// with when.
    async fn served_waiters(limiter: &ManyChatLimiter, n: usize) -> Vec<(usize, Instant)> {
        let served = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..n {
            let limiter = limiter.clone();
            let served = served.clone();
            waiters.push(tokio::spawn(async move {
                limiter.acquire().await;
                served.lock().unwrap().push((i, Instant::now()));
            }));
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
        }
        for waiter in waiters {
            waiter.await.unwrap();
        }
        served.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn fault_a_limiter_starting_empty_never_bursts_before_its_quota_refills() {
        let limiter = ManyChatLimiter::starting_empty();
        let first = take(&limiter, 1).await;
        assert_eq!(
            first,
            Duration::from_millis(100),
            "the first request waits an interval"
        );
        assert_eq!(
            first + take(&limiter, 9).await,
            Duration::from_secs(1),
            "10 in the first second, never the burst on top"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_lets_a_burst_of_five_through_then_paces_at_ten_per_second() {
        let limiter = ManyChatLimiter::new();
        let start = Instant::now();
        assert_eq!(
            take(&limiter, 5).await,
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

    /// Never more than 10 requests in any sliding second: the burst of 5 does not go on top of
    /// the rate of 10 a second (with a bucket alone, 15 went in the first second).
    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_never_lets_more_than_ten_requests_go_in_any_sliding_second() {
        for limiter in [
            ManyChatLimiter::new(),
            ManyChatLimiter::new().with_shared_bucket(FakeShared::new(false)),
        ] {
            let mut at = Vec::new();
            for round in 0..3 {
                for _ in 0..25 {
                    limiter.acquire().await;
                    at.push(Instant::now());
                }
                // Idle long enough for the burst to refill.
                tokio::time::sleep(Duration::from_secs(2 + round)).await;
            }
            for (i, window) in at.windows(11).enumerate() {
                assert!(
                    window[10] - window[0] >= Duration::from_secs(1),
                    "requests {i} to {} went within {:?}",
                    i + 10,
                    window[10] - window[0]
                );
            }
            // Still 10 a second sustained: 25 requests take about 2 s (2.4 s without a
            // burst, on the shared bucket), not more.
            let first_round = at[24] - at[0];
            assert!(
                first_round <= Duration::from_millis(2_410),
                "{first_round:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_is_shared_between_clones() {
        let limiter = ManyChatLimiter::new();
        let other = limiter.clone();
        let burst = take(&other, 5).await;
        assert!(
            burst + take(&limiter, 1).await >= Duration::from_millis(100),
            "a clone draws from the same bucket"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_serves_waiters_in_arrival_order() {
        let limiter = ManyChatLimiter::new();
        take(&limiter, 5).await;
        let served = served_waiters(&limiter, 12).await;
        assert_eq!(
            served.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            (0..12).collect::<Vec<_>>()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_5_limiter_refills_after_idle_time() {
        let limiter = ManyChatLimiter::new();
        take(&limiter, 5).await;
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(
            take(&limiter, 5).await,
            Duration::ZERO,
            "half a second refills the burst of 5"
        );
    }

    /// An in-memory stand-in for the store's bucket: the same GCRA arithmetic, on tokio's clock,
    /// counting how often it was asked.
    struct FakeShared {
        arrival: std::sync::Mutex<tokio::time::Instant>,
        asked: std::sync::atomic::AtomicUsize,
        broken: bool,
    }

    impl FakeShared {
        fn new(broken: bool) -> Arc<Self> {
            Arc::new(Self {
                arrival: std::sync::Mutex::new(Instant::now()),
                asked: std::sync::atomic::AtomicUsize::new(0),
                broken,
            })
        }
    }

    #[async_trait]
    impl SharedBucket for FakeShared {
        async fn take(&self, quota: BucketQuota) -> Result<Option<Duration>, String> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.broken {
                return Err("database unavailable".into());
            }
            let now = Instant::now();
            let mut arrival = self.arrival.lock().unwrap();
            let at = (*arrival).max(now);
            let tolerance = quota.interval * (quota.burst - 1);
            if at - now <= tolerance {
                *arrival = at + quota.interval;
                Ok(None)
            } else {
                Ok(Some(at - tolerance - now))
            }
        }

        async fn hold(&self, quota: BucketQuota, wait: Duration) -> Result<(), String> {
            if self.broken {
                return Err("database unavailable".into());
            }
            let tolerance = quota.interval * (quota.burst - 1);
            let mut arrival = self.arrival.lock().unwrap();
            *arrival = (*arrival).max(Instant::now() + wait + tolerance);
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_bucket_paces_requests_in_arrival_order_one_question_per_slot() {
        let shared = FakeShared::new(false);
        let limiter = ManyChatLimiter::new().with_shared_bucket(shared.clone());
        let start = Instant::now();
        assert_eq!(
            take(&limiter, 1).await,
            Duration::ZERO,
            "the first goes at once"
        );
        let served = served_waiters(&limiter, 10).await;
        assert_eq!(
            served.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        let last = served[9].1 - start;
        assert!(
            last >= Duration::from_millis(1000) && last <= Duration::from_millis(1010),
            "10 after the first take 1 s at 10/s: {last:?}"
        );
        let asked = shared.asked.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            asked <= 1 + 2 * 10,
            "one question per slot and wake-up: {asked}"
        );
    }

    /// Two replicas' limiters on one shared bucket: the bucket has no burst, so the requests of
    /// both together never exceed 10 in any sliding second, even after an idle time (with a
    /// burst of 5 each replica's own sliding second let 14 through combined).
    #[tokio::test(start_paused = true)]
    async fn system_3_5_two_replicas_on_a_shared_bucket_never_send_more_than_ten_in_a_sliding_second()
     {
        let shared = FakeShared::new(false);
        let one = ManyChatLimiter::new().with_shared_bucket(shared.clone());
        let two = ManyChatLimiter::new().with_shared_bucket(shared.clone());
        let at = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for limiter in [one, two] {
            let at = at.clone();
            tasks.push(tokio::spawn(async move {
                for round in 0..2 {
                    for _ in 0..15 {
                        limiter.acquire().await;
                        at.lock().unwrap().push(Instant::now());
                    }
                    tokio::time::sleep(Duration::from_secs(3 + round)).await;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let mut at = at.lock().unwrap().clone();
        at.sort();
        assert_eq!(at.len(), 60);
        for (i, window) in at.windows(11).enumerate() {
            assert!(
                window[10] - window[0] >= Duration::from_secs(1),
                "requests {i} to {} of both replicas went within {:?}",
                i + 10,
                window[10] - window[0]
            );
        }
    }

    /// ManyChat's `Retry-After`, seen by one replica, holds the other replica's requests on the
    /// shared bucket until it passes.
    #[tokio::test(start_paused = true)]
    async fn system_3_5_a_retry_after_seen_by_one_replica_holds_every_replica() {
        let shared = FakeShared::new(false);
        let one = ManyChatLimiter::new().with_shared_bucket(shared.clone());
        let two = ManyChatLimiter::new().with_shared_bucket(shared.clone());
        let start = Instant::now();
        one.hold(Duration::from_secs(20)).await;
        two.acquire().await;
        assert!(
            start.elapsed() >= Duration::from_secs(20),
            "the other replica waited {:?}",
            start.elapsed()
        );
        let start = Instant::now();
        one.hold(Duration::from_secs(5)).await;
        one.acquire().await;
        assert!(
            start.elapsed() >= Duration::from_secs(5),
            "and the one that saw it"
        );
    }

    /// Without a shared bucket (SQLite, one process) a hold keeps every request of the process
    /// back, background ones included.
    #[tokio::test(start_paused = true)]
    async fn system_3_5_a_retry_after_holds_every_request_of_the_process() {
        let limiter = ManyChatLimiter::new();
        let start = Instant::now();
        limiter.hold(Duration::from_secs(20)).await;
        limiter.acquire_as(Priority::Background).await;
        assert!(start.elapsed() >= Duration::from_secs(20));
        limiter.hold(Duration::from_secs(3)).await;
        limiter.hold(Duration::from_secs(1)).await;
        let start = Instant::now();
        limiter.acquire().await;
        assert!(
            start.elapsed() >= Duration::from_secs(3),
            "a shorter hold does not cut a longer one short"
        );
    }

    /// A backlog of token writes (background) waiting for slots does not delay a reply beyond
    /// one slot: the reply arriving behind 50 of them takes the next slot, and the token writes
    /// use the slots after it.
    #[tokio::test(start_paused = true)]
    async fn system_3_5_a_reply_waits_at_most_one_slot_behind_a_backlog_of_token_writes() {
        for limiter in [
            ManyChatLimiter::new(),
            ManyChatLimiter::new().with_shared_bucket(FakeShared::new(false)),
        ] {
            // Spend the burst, so every request below waits for its slot.
            take(&limiter, 10).await;
            let served = Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for n in 0..50 {
                let limiter = limiter.clone();
                let served = served.clone();
                tasks.push(tokio::spawn(async move {
                    limiter.acquire_as(Priority::Background).await;
                    served
                        .lock()
                        .unwrap()
                        .push((format!("token {n}"), Instant::now()));
                }));
            }
            // Let the token writes queue and the first few go.
            tokio::time::sleep(Duration::from_millis(1_350)).await;
            let asked = Instant::now();
            limiter.acquire().await;
            let reply_waited = asked.elapsed();
            served
                .lock()
                .unwrap()
                .push(("reply".into(), Instant::now()));
            for task in tasks {
                task.await.unwrap();
            }
            let served = served.lock().unwrap();
            let reply = served.iter().position(|(n, _)| n == "reply").unwrap();
            let ahead = served[..reply].iter().filter(|(_, at)| *at > asked).count();
            assert!(
                ahead <= 1 && reply_waited <= Duration::from_millis(200),
                "{ahead} token writes went while the reply waited {reply_waited:?}"
            );
            assert!(
                reply >= 2,
                "token writes went before the reply came: {reply}"
            );
            assert_eq!(served.len(), 51, "every token write still went");
        }
    }

    /// Background requests still go, in arrival order, when no reply waits.
    #[tokio::test(start_paused = true)]
    async fn background_requests_use_the_slots_no_reply_waits_for() {
        let limiter = ManyChatLimiter::new();
        let start = Instant::now();
        for _ in 0..15 {
            limiter.acquire_as(Priority::Background).await;
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took <= Duration::from_millis(1_010),
            "15 at 10/s after a burst of 5: {took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_bucket_that_fails_falls_back_to_pacing_this_process() {
        let limiter = ManyChatLimiter::new().with_shared_bucket(FakeShared::new(true));
        let took = take(&limiter, 6).await;
        assert!(
            took >= Duration::from_millis(100),
            "the local bucket still paces: {took:?}"
        );
    }

    struct FullCounter;

    #[async_trait]
    impl FlowCounter for FullCounter {
        async fn count(&self, _: &SubscriberId, per_hour: u32) -> Result<bool, String> {
            assert_eq!(per_hour, 100, "ManyChat's documented limit");
            Ok(false)
        }
    }

    #[tokio::test]
    async fn a_contact_past_the_hourly_flow_limit_is_refused() {
        let contact = SubscriberId::parse("5550001").unwrap();
        let limiter = ManyChatLimiter::new().with_flow_counter(Arc::new(FullCounter));
        assert_eq!(
            limiter.admit_flow(&contact).await,
            Err(ManyChatError::FlowCapReached)
        );
        assert_eq!(ManyChatLimiter::new().admit_flow(&contact).await, Ok(()));
    }
}
