//! What one client connection may hold: how long it may wait in each phase,
//! and how many connections one address may keep open.
//!
//! An HTTP/1 connection, seen from the server, is always in one of three phases:
//! - **awaiting a head**: a new connection, or bytes of a next request have arrived; the whole
//!   request head must follow within the header timeout;
//! - **busy**: a request was handed to the router and its response is not yet written; the
//!   handler bounds this itself (the body timeout, the race deadline);
//! - **idle**: a kept-alive connection between requests; it is closed after the idle timeout.
//!
//! [`Activity`] records the phase (the socket wrapper [`Watched`] sees the bytes, the server loop
//! sees the request start and the response end) and [`Watchdog`] resolves when the phase has
//! lasted too long. Both run on tokio's clock, so tests advance time instead of sleeping.
//!
//! Invariants: a connection is never closed while a request is busy; the idle timeout applies
//! only when no byte of a next request has arrived; per-address counts are released when the
//! connection ends (the slot is dropped with its task), so the map holds only open connections.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

use super::client_ip::TrustProxy;
use super::rate_limit::bucket_address;

/// Where a connection is in its request cycle (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHead { since: Instant },
    Busy,
    Idle { since: Instant },
}

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// A request head did not arrive whole within the header timeout.
    Header,
    /// A kept-alive connection sent nothing within the idle timeout.
    Idle,
}

impl Expiry {
    /// A label for the log line.
    pub fn label(self) -> &'static str {
        match self {
            Expiry::Header => "header timeout",
            Expiry::Idle => "idle timeout",
        }
    }
}

/// The phase of one connection, shared by its socket, its service and its watchdog.
#[derive(Debug, Clone)]
pub struct Activity {
    phase: Arc<watch::Sender<Phase>>,
    /// When its last complete request head arrived, or the connection was accepted.
    last_request: Arc<Mutex<Instant>>,
}

impl Activity {
    /// A new connection: it awaits its first request head from now.
    pub fn new(header_timeout: Duration, idle_timeout: Duration) -> (Self, Watchdog) {
        let (phase, watched) = watch::channel(Phase::AwaitingHead {
            since: Instant::now(),
        });
        let activity = Self {
            phase: Arc::new(phase),
            last_request: Arc::new(Mutex::new(Instant::now())),
        };
        let watchdog = Watchdog {
            phase: watched,
            header_timeout,
            idle_timeout,
        };
        (activity, watchdog)
    }

    /// Bytes arrived. On an idle connection they start a request head, which must now arrive
    /// whole within the header timeout (a kept-alive connection's clock restarts here).
    fn bytes_read(&self) {
        self.phase.send_if_modified(|phase| match phase {
            Phase::Idle { .. } => {
                *phase = Phase::AwaitingHead {
                    since: Instant::now(),
                };
                true
            }
            Phase::AwaitingHead { .. } | Phase::Busy => false,
        });
    }

    /// The request head was read and the request handed to the router.
    pub fn request_started(&self) {
        *self
            .last_request
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.phase.send_replace(Phase::Busy);
    }

    /// Since when the connection has had no complete request (its last one, else its accept);
    /// `None` while it serves one (`eviction`: it never gives way then).
    pub fn waiting_since(&self) -> Option<Instant> {
        match *self.phase.borrow() {
            Phase::Busy => None,
            Phase::AwaitingHead { .. } | Phase::Idle { .. } => Some(
                *self
                    .last_request
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            ),
        }
    }

    /// The response was written (its body taken or dropped): the connection is idle from now.
    pub fn response_finished(&self) {
        self.phase.send_replace(Phase::Idle {
            since: Instant::now(),
        });
    }
}

/// Resolves when a connection has waited too long for a request head or sat idle too long.
#[derive(Debug)]
pub struct Watchdog {
    phase: watch::Receiver<Phase>,
    header_timeout: Duration,
    idle_timeout: Duration,
}

impl Watchdog {
    /// Waits until the current phase outlives its bound. A change of phase restarts the wait,
    /// so a busy connection is never timed out here.
    pub async fn expired(&mut self) -> Expiry {
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        loop {
            let deadline = match *self.phase.borrow_and_update() {
                Phase::AwaitingHead { since } => {
                    Some((since + self.header_timeout, Expiry::Header))
                }
                Phase::Idle { since } => Some((since + self.idle_timeout, Expiry::Idle)),
                Phase::Busy => None,
            };
            match deadline {
                None => {
                    if self.phase.changed().await.is_err() {
                        // The connection is gone; its task ends by another branch.
                        std::future::pending::<()>().await;
                    }
                }
                Some((at, expiry)) => {
                    sleep.as_mut().reset(at);
                    tokio::select! {
                        // A change that came with the deadline wins: it restarts the wait.
                        biased;
                        changed = self.phase.changed() => {
                            if changed.is_err() {
                                std::future::pending::<()>().await;
                            }
                        }
                        () = sleep.as_mut() => return expiry,
                    }
                }
            }
        }
    }
}

/// A socket that tells its connection's [`Activity`] when bytes arrive.
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    activity: Activity,
}

impl<S> Watched<S> {
    pub fn new(inner: S, activity: Activity) -> Self {
        Self { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Open connections per client address, against `HTTP_MAX_CONNECTIONS_PER_ADDRESS`.
///
/// The address is the peer's: a connection carries no `X-Forwarded-For` yet. A trusted proxy
/// (`TRUST_PROXY`) relays every client over its own connections, so its connections count only
/// against the total cap. IPv6 addresses count per /64, as in the request limit.
#[derive(Debug)]
pub struct AddressSlots {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl AddressSlots {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for one more connection from `peer`, or `None` when the address is at its cap.
    pub fn claim(self: &Arc<Self>, peer: IpAddr, trust_proxy: &TrustProxy) -> Option<AddressSlot> {
        if trust_proxy.is_trusted(peer) {
            return Some(AddressSlot { held: None });
        }
        let key = bucket_address(peer);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            held: Some((self.clone(), key)),
        })
    }

    /// Addresses with at least one open connection (for tests).
    pub fn addresses(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One connection's place under its address's cap; released when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    held: Option<(Arc<AddressSlots>, IpAddr)>,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some((slots, key)) = self.held.take() else {
            return;
        };
        let mut open = slots.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_holds_at_most_its_cap_and_a_closed_connection_frees_its_slot() {
        let slots = AddressSlots::new(2);
        let none = TrustProxy::default();
        let first = slots.claim(ip("203.0.113.7"), &none).expect("first");
        let _second = slots.claim(ip("203.0.113.7"), &none).expect("second");
        assert!(slots.claim(ip("203.0.113.7"), &none).is_none());
        // Another address, and another host of the same IPv6 /64, are counted apart / together.
        assert!(slots.claim(ip("203.0.113.8"), &none).is_some());
        let _v6 = slots.claim(ip("2001:db8::1"), &none).expect("v6");
        let _v6b = slots.claim(ip("2001:db8::2"), &none).expect("v6 second");
        assert!(slots.claim(ip("2001:db8::3"), &none).is_none());
        drop(first);
        assert!(slots.claim(ip("203.0.113.7"), &none).is_some());
    }

    #[test]
    fn a_trusted_proxy_is_bounded_only_by_the_total_cap() {
        let slots = AddressSlots::new(1);
        let proxy = TrustProxy::parse("loopback").unwrap();
        let held: Vec<_> = (0..10)
            .map(|_| slots.claim(ip("127.0.0.1"), &proxy).expect("trusted"))
            .collect();
        assert_eq!(held.len(), 10);
        assert_eq!(slots.addresses(), 0, "a trusted proxy holds no count");
        drop(held);
        let only = slots.claim(ip("203.0.113.7"), &proxy).expect("one");
        assert!(slots.claim(ip("203.0.113.7"), &proxy).is_none());
        drop(only);
        assert_eq!(slots.addresses(), 0, "released counts leave the map");
    }

    #[tokio::test(start_paused = true)]
    async fn phases_time_out_by_their_own_bounds() {
        let header = Duration::from_secs(10);
        let idle = Duration::from_secs(75);
        let started = Instant::now();
        let (activity, mut watchdog) = Activity::new(header, idle);
        // A new connection that sends nothing is cut at the header timeout.
        assert_eq!(watchdog.expired().await, Expiry::Header);
        assert_eq!(started.elapsed(), header);

        // A busy connection is never timed out; an idle one after the idle timeout.
        activity.request_started();
        let busy = tokio::time::timeout(Duration::from_secs(3600), watchdog.expired()).await;
        assert!(busy.is_err(), "a busy connection has no deadline here");
        activity.response_finished();
        let idle_from = Instant::now();
        assert_eq!(watchdog.expired().await, Expiry::Idle);
        assert_eq!(idle_from.elapsed(), idle);

        // Bytes on an idle connection start a head: the header bound applies from then.
        activity.response_finished();
        advance(Duration::from_secs(70)).await;
        activity.bytes_read();
        let head_from = Instant::now();
        assert_eq!(watchdog.expired().await, Expiry::Header);
        assert_eq!(head_from.elapsed(), header);
    }
}
