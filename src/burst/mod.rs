//! A message sent in pieces gets one answer (`rules.json` `burst.windowMs`). A bound contact's
//! text message opens a burst for its contact; the turn waits until `windowMs` pass without a
//! new piece, never past [`latest_start`], then closes it and gives the model every piece in
//! order as one message. A piece that finds its contact's burst open joins it: its own write
//! (the caller's `record`) commits while the burst is held, so a piece is either recorded and
//! in the merged message, or neither and its own turn.
//!
//! The first piece's turn leaves `F` with its burst: what a joining piece needs to put the
//! gathering turn on disk (its first piece and its promise) before the piece is answered
//! silently (`turn::burst`).
//!
//! Invariants: a closed burst takes no piece (one that comes after the model started is a new
//! turn); a burst is known only to the process that opened it, so on PostgreSQL a piece that
//! reaches another replica is its own turn, queued behind this one (`docs/DEPLOYMENT.md`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::ids::SubscriberId;

/// The mark on the first piece's contact message when others joined it (its `outcome`; a
/// contact message has none otherwise).
pub const MERGED: &str = "burst_merged";
/// The mark on a piece that joined an earlier piece's turn.
pub const JOINED: &str = "burst_joined";

/// How long before the race deadline the model must start at the latest: the burst never waits
/// into it.
pub const MODEL_HEADROOM: Duration = Duration::from_secs(2);

/// The latest moment a burst whose first piece arrived at `arrived_at` may keep waiting:
/// `race_deadline − 2 s` after it.
pub fn latest_start(arrived_at: Instant, race_deadline: Duration) -> Instant {
    arrived_at + race_deadline.saturating_sub(MODEL_HEADROOM)
}

/// The pieces as the model reads them: one message, in arrival order, a line each.
pub fn merged_text(first: &str, joined: &[String]) -> String {
    let mut text = first.to_owned();
    for piece in joined {
        text.push('\n');
        text.push_str(piece);
    }
    text
}

/// The bursts open in this process, one per contact at most; `F` is what each one's first
/// piece leaves for the pieces that join it.
pub struct Bursts<F> {
    open: Arc<Mutex<HashMap<SubscriberId, Arc<Burst<F>>>>>,
    /// How many bursts are open (the `bursts_open` gauge), kept with the map.
    gauge: Gauge,
}

impl<F> Clone for Bursts<F> {
    fn clone(&self) -> Self {
        Self {
            open: self.open.clone(),
            gauge: self.gauge.clone(),
        }
    }
}

impl<F> Default for Bursts<F> {
    fn default() -> Self {
        Self::new(Gauge::default())
    }
}

/// One contact's open burst.
pub struct Burst<F> {
    pieces: tokio::sync::Mutex<Pieces>,
    joined: Notify,
    first: F,
}

struct Pieces {
    closed: bool,
    texts: Vec<String>,
    /// When the latest piece was recorded: each later piece is recorded after it.
    last_at: DateTime<Utc>,
}

/// The first piece's hold on its burst: [`OpenBurst::collect`] waits for the rest. Dropped
/// without collecting (the turn ended early), the burst closes and takes no more pieces.
pub struct OpenBurst<F> {
    bursts: Bursts<F>,
    contact: SubscriberId,
    burst: Arc<Burst<F>>,
}

impl<F> Bursts<F> {
    /// No burst open yet; `gauge` reads how many are open from now on.
    pub fn new(gauge: Gauge) -> Self {
        Self {
            open: Arc::default(),
            gauge,
        }
    }

    /// Opens `contact`'s burst for the turn about to wait for its pieces. The caller holds the
    /// contact's place in the turn order, so no other burst of theirs is open here.
    /// `first_at` is when the first piece is recorded; `first`, what the pieces that join get
    /// ([`Burst::first`]).
    pub fn open(&self, contact: &SubscriberId, first_at: DateTime<Utc>, first: F) -> OpenBurst<F> {
        let burst = Arc::new(Burst {
            pieces: tokio::sync::Mutex::new(Pieces {
                closed: false,
                texts: Vec::new(),
                last_at: first_at,
            }),
            joined: Notify::new(),
            first,
        });
        let mut open = self.lock();
        open.insert(contact.clone(), burst.clone());
        self.gauge.set(open.len() as i64);
        drop(open);
        OpenBurst {
            bursts: self.clone(),
            contact: contact.clone(),
            burst,
        }
    }

    /// `contact`'s burst, when one is open (it may close before a piece joins it).
    pub fn find(&self, contact: &SubscriberId) -> Option<Arc<Burst<F>>> {
        self.lock().get(contact).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SubscriberId, Arc<Burst<F>>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets `burst` if it is still `contact`'s entry.
    fn remove(&self, contact: &SubscriberId, burst: &Arc<Burst<F>>) {
        let mut open = self.lock();
        if open.get(contact).is_some_and(|b| Arc::ptr_eq(b, burst)) {
            open.remove(contact);
            self.gauge.set(open.len() as i64);
        }
    }
}

impl<F> Burst<F> {
    /// What the burst's first piece left for the pieces that join it.
    pub fn first(&self) -> &F {
        &self.first
    }

    /// Joins `text` while the burst is open: `record` (the piece's own write, given the time
    /// to record it at: `now`, or just after the piece before it, so the pieces keep their
    /// order) runs first, with the burst held, and the piece joins only once it succeeded.
    /// `None`: the burst had closed (nothing ran; the piece is a turn of its own).
    pub async fn join<T, E, R, Fut>(
        &self,
        text: &str,
        now: DateTime<Utc>,
        record: R,
    ) -> Option<Result<T, E>>
    where
        R: FnOnce(DateTime<Utc>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut pieces = self.pieces.lock().await;
        if pieces.closed {
            return None;
        }
        let at = now.max(pieces.last_at + chrono::Duration::milliseconds(1));
        let recorded = record(at).await;
        if recorded.is_ok() {
            pieces.last_at = at;
            pieces.texts.push(text.to_owned());
            drop(pieces);
            self.joined.notify_one();
        }
        Some(recorded)
    }
}

impl<F> OpenBurst<F> {
    /// Waits until `window` passes without a new piece, or until `latest`, then closes the
    /// burst and gives back the pieces that joined it, in order.
    pub async fn collect(self, window: Duration, latest: Instant) -> Vec<String> {
        let burst = self.burst.clone();
        let mut until = (Instant::now() + window).min(latest);
        loop {
            tokio::select! {
                () = burst.joined.notified() => until = (Instant::now() + window).min(latest),
                () = tokio::time::sleep_until(until) => break,
            }
        }
        let mut pieces = burst.pieces.lock().await;
        pieces.closed = true;
        std::mem::take(&mut pieces.texts)
    }
}

impl<F> Drop for OpenBurst<F> {
    fn drop(&mut self) {
        self.bursts.remove(&self.contact, &self.burst);
        if let Ok(mut pieces) = self.burst.pieces.try_lock() {
            pieces.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact() -> SubscriberId {
        SubscriberId::parse("42").unwrap()
    }

    async fn ok(_at: DateTime<Utc>) -> Result<(), ()> {
        Ok(())
    }

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_700_000_000_000).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_piece_within_the_window_joins_and_restarts_it() {
        let bursts = Bursts::<()>::default();
        let open = bursts.open(&contact(), t0(), ());
        let started = Instant::now();
        let joiner = bursts.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            let burst = joiner.find(&contact()).unwrap();
            assert!(burst.join("two", t0(), ok).await.unwrap().is_ok());
        });
        let pieces = open
            .collect(
                Duration::from_millis(1500),
                started + Duration::from_secs(6),
            )
            .await;
        assert_eq!(pieces, ["two"]);
        assert_eq!(started.elapsed(), Duration::from_millis(2500));
        assert!(
            bursts.find(&contact()).is_none(),
            "a collected burst is forgotten"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_burst_never_waits_past_its_latest_start() {
        let bursts = Bursts::<()>::default();
        let open = bursts.open(&contact(), t0(), ());
        let started = Instant::now();
        let joiner = bursts.clone();
        tokio::spawn(async move {
            for i in 0..10 {
                tokio::time::sleep(Duration::from_millis(1000)).await;
                if let Some(burst) = joiner.find(&contact()) {
                    let _ = burst.join(&format!("p{i}"), t0(), ok).await;
                }
            }
        });
        let latest = latest_start(started, Duration::from_millis(5500));
        let pieces = open.collect(Duration::from_millis(1500), latest).await;
        assert_eq!(started.elapsed(), Duration::from_millis(3500));
        assert_eq!(pieces, ["p0", "p1", "p2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_burst_takes_no_piece_and_runs_no_write() {
        let bursts = Bursts::<()>::default();
        let open = bursts.open(&contact(), t0(), ());
        let burst = bursts.find(&contact()).unwrap();
        let pieces = open
            .collect(
                Duration::from_millis(10),
                Instant::now() + Duration::from_secs(1),
            )
            .await;
        assert!(pieces.is_empty());
        let ran = std::sync::atomic::AtomicBool::new(false);
        let joined = burst
            .join("late", t0(), |_| async {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok::<(), ()>(())
            })
            .await;
        assert!(joined.is_none());
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_piece_is_recorded_after_the_one_before_it() {
        let bursts = Bursts::<()>::default();
        let _open = bursts.open(&contact(), t0(), ());
        let burst = bursts.find(&contact()).unwrap();
        let at = |text: &'static str| {
            let burst = burst.clone();
            async move {
                burst
                    .join(text, t0(), |at| async move { Ok::<_, ()>(at) })
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let ms = chrono::Duration::milliseconds;
        assert_eq!(at("two").await, t0() + ms(1), "after the first piece");
        assert_eq!(at("three").await, t0() + ms(2));
    }

    #[test]
    fn pieces_merge_in_order_a_line_each() {
        let joined = ["I saw your ad".to_owned(), "how much?".to_owned()];
        assert_eq!(merged_text("hi", &joined), "hi\nI saw your ad\nhow much?");
    }

    #[test]
    fn a_deadline_under_two_seconds_leaves_no_wait() {
        let now = Instant::now();
        assert_eq!(latest_start(now, Duration::from_millis(1500)), now);
    }
}
