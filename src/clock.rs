//! The one clock every deadline, backoff, pacing wait and stored timestamp reads.
//!
//! Wall time is derived from tokio's clock (`base_utc + (tokio::now - base_instant)`), so a test
//! that pauses and advances tokio's time (`tokio::time::pause`) moves the timestamps written to the
//! store, the outbox's due times and the race deadline together. No test sleeps real time.

use chrono::{DateTime, Utc};
use tokio::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base_utc: DateTime<Utc>,
    base_instant: Instant,
}

impl Clock {
    /// A clock anchored at the current wall time.
    pub fn system() -> Self {
        Self::starting_at(Utc::now())
    }

    /// A clock that reads `start` now and advances with tokio's clock.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self {
            base_utc: start,
            base_instant: Instant::now(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        let elapsed = Instant::now().saturating_duration_since(self.base_instant);
        self.base_utc + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::zero())
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
