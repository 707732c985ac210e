//! The one clock every deadline, backoff, pacing wait and stored timestamp reads.
//!
//! Wall time is derived from tokio's clock (`base_utc + (tokio::now - base_instant)`), so a test
//! that pauses and advances tokio's time (`tokio::time::pause`) moves the timestamps written to the
//! store, the outbox's due times and the race deadline together. No test sleeps real time.
//!
//! The wall clock is followed: a clock that reads the wall ([`Clock::system`]) compares, on each
//! read, how far the wall moved since the start with how far the machine's monotonic clock moved;
//! when they drift apart by more than [`WALL_STEP`] (an NTP step, a suspended VM) it re-anchors
//! to the wall, logged once per step, so timestamps, holds and the budget's day follow it without
//! a restart. Both are real clocks, so a test's paused tokio clock never looks like a step.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// How far the wall may drift from the monotonic clock before the clock re-anchors to it.
pub const WALL_STEP: chrono::Duration = chrono::Duration::seconds(1);

/// Where the wall time is read (the system's; a test's stepped one).
pub type WallSource = fn() -> DateTime<Utc>;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base_utc: DateTime<Utc>,
    base_instant: Instant,
    /// The wall this clock follows (`None`: it only advances with tokio's clock).
    wall: Option<&'static Wall>,
}

/// A wall followed by a clock and its copies: the offset they agree on.
#[derive(Debug)]
struct Wall {
    read: WallSource,
    at_start: DateTime<Utc>,
    monotonic_start: std::time::Instant,
    /// How far the wall has stepped away from the monotonic clock since the start, as followed.
    offset_ms: AtomicI64,
}

impl Wall {
    /// The offset to add: the wall's step since the start, re-anchored (and logged) when it moved
    /// by more than [`WALL_STEP`] since the last anchor.
    fn offset(&self) -> chrono::Duration {
        let walked = (self.read)() - self.at_start;
        let ticked = chrono::Duration::from_std(self.monotonic_start.elapsed())
            .unwrap_or(chrono::Duration::zero());
        let drift = (walked - ticked).num_milliseconds();
        let followed = self.offset_ms.load(Ordering::Relaxed);
        if (drift - followed).abs() <= WALL_STEP.num_milliseconds() {
            return chrono::Duration::milliseconds(followed);
        }
        if self
            .offset_ms
            .compare_exchange(followed, drift, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            tracing::warn!(
                step_ms = drift - followed,
                "the wall clock stepped; timestamps, holds and the budget's day follow it"
            );
        }
        chrono::Duration::milliseconds(drift)
    }
}

impl Clock {
    /// A clock anchored at the current wall time, following the system's wall clock.
    pub fn system() -> Self {
        Self::following(Utc::now)
    }

    /// A clock anchored at `wall`'s time now that follows it when it steps. Each such clock
    /// keeps its small shared state for the life of the process (a process makes a handful).
    pub fn following(wall: WallSource) -> Self {
        let start = wall();
        let followed: &'static Wall = Box::leak(Box::new(Wall {
            read: wall,
            at_start: start,
            monotonic_start: std::time::Instant::now(),
            offset_ms: AtomicI64::new(0),
        }));
        Self {
            wall: Some(followed),
            ..Self::starting_at(start)
        }
    }

    /// A clock that reads `start` now and advances with tokio's clock.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self {
            base_utc: start,
            base_instant: Instant::now(),
            wall: None,
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        let elapsed = Instant::now().saturating_duration_since(self.base_instant);
        let stepped = self.wall.map_or(chrono::Duration::zero(), Wall::offset);
        self.base_utc
            + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::zero())
            + stepped
    }

    /// tokio's monotonic instant, for deadlines.
    pub fn instant(&self) -> Instant {
        Instant::now()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static STEP_MS: AtomicI64 = AtomicI64::new(0);

    fn stepped_wall() -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(STEP_MS.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_follows_a_wall_step_over_a_second_and_ignores_less() {
        let clock = Clock::following(stepped_wall);
        let copy = clock;
        let before = clock.now();
        assert!((before - Utc::now()).num_seconds().abs() <= 1);

        // Under a second apart: not followed.
        STEP_MS.store(800, Ordering::SeqCst);
        assert!((clock.now() - before).num_milliseconds() < 100);

        // NTP steps the wall 26 hours ahead: the clock and its copies follow.
        STEP_MS.store(26 * 3_600_000, Ordering::SeqCst);
        let after = clock.now();
        assert!(
            (after - before - chrono::Duration::hours(26))
                .num_seconds()
                .abs()
                <= 1,
            "{before} → {after}"
        );
        assert!((copy.now() - after).num_seconds().abs() <= 1);

        // tokio's clock still moves it (a paused test's time is not a step).
        tokio::time::advance(std::time::Duration::from_secs(30)).await;
        assert!(
            ((copy.now() - after) - chrono::Duration::seconds(30))
                .num_seconds()
                .abs()
                <= 1
        );
        STEP_MS.store(0, Ordering::SeqCst);
    }
}
