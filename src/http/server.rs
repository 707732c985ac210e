//! The accept loop: every connection is served by hyper's HTTP/1 connection
//! under the bounds of [`ConnectionLimits`], so slow or idle clients cannot hold the process's
//! file descriptors.
//!
//! - At most `HTTP_MAX_CONNECTIONS` connections are open. A connection that arrives at the cap
//!   makes the open one that has gone longest without a complete request give way
//!   (`eviction`), so slow or silent clients cannot keep ManyChat out; only when every open
//!   connection is serving a request does the newcomer wait for a place (and the loop stop
//!   accepting, new connections waiting in the kernel's listen backlog; logged once per
//!   episode).
//! - At most `HTTP_MAX_CONNECTIONS_PER_ADDRESS` from one client address (trusted proxies
//!   excepted); one over it is closed as soon as it is accepted.
//! - A request head must arrive whole within `HTTP_HEADER_TIMEOUT_MS` of its first byte (or of
//!   the accept), however slowly it trickles, a kept-alive connection is
//!   closed after `HTTP_IDLE_TIMEOUT_MS` without a request (`connections::Watchdog`), and the
//!   message route reads its body within `HTTP_BODY_TIMEOUT_MS` (408 otherwise, in `http::message`).
//! - Shutdown: the listener is closed first (new connections are refused), then every
//!   connection finishes the request it is serving and closes; idle ones close at once. The
//!   loop returns when the last connection has closed.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::client_ip::TrustProxy;
use super::connections::{Activity, AddressSlot, AddressSlots, Watchdog, Watched};
use super::eviction::{Registered, Registry};
use crate::metrics::Metrics;

/// How long and how many connections may be held (see the module doc). Read from the
/// environment in `settings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A request head must arrive whole within this, from the connection's start or from the
    /// first byte of a kept-alive connection's next request.
    pub header_timeout: Duration,
    /// A kept-alive connection with no request is closed after this. Keep it above the idle
    /// timeout of a proxy or load balancer in front, so the proxy closes first and never sends
    /// a request on a connection we are closing.
    pub idle_timeout: Duration,
    /// The message route's body must arrive within this of its head.
    pub body_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one client address.
    pub max_connections_per_address: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            body_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_connections_per_address: 256,
        }
    }
}

/// Pause after an accept error that is not the client's doing (out of file descriptors):
/// retrying at once would spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `shutdown` fires, then drains (see the module doc).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    trust_proxy: Arc<TrustProxy>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_address = AddressSlots::new(limits.max_connections_per_address);
    let registry = Registry::new();
    let connections = TaskTracker::new();
    let mut at_cap = false;
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    tracing::error!(error = %error, "accept failed; pausing before the next");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => continue,
                    }
                }
            },
        };
        let Some(slot) = per_address.claim(peer.ip(), &trust_proxy) else {
            metrics.connections_refused.inc();
            tracing::debug!("connection closed: its address is at its connection cap");
            drop(stream);
            continue;
        };
        let permit = match open.clone().try_acquire_owned() {
            Ok(permit) => {
                if at_cap {
                    at_cap = false;
                    tracing::info!("connection cap no longer reached");
                }
                permit
            }
            Err(_) => {
                if registry.evict_longest_waiting() {
                    metrics.connections_evicted.inc();
                    tracing::debug!(
                        "connection cap reached: the connection longest without a request gives way"
                    );
                } else if !at_cap {
                    at_cap = true;
                    tracing::warn!(
                        max = limits.max_connections,
                        "connection cap reached with every connection serving a request; new connections wait in the listen backlog"
                    );
                }
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break,
                    permit = open.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        // Registered before its task runs, so the next arrival at the cap already sees it.
        let (activity, watchdog) = Activity::new(limits.header_timeout, limits.idle_timeout);
        let registered = registry.register(activity.clone());
        metrics.connections_accepted.inc();
        connections.spawn(serve_connection(
            Connection {
                stream,
                peer,
                activity,
                watchdog,
                registered,
                _permit: permit,
                _slot: slot,
            },
            router.clone(),
            metrics.clone(),
            shutdown.clone(),
        ));
    }
    // Refuse new connections at once, then let those open finish. Logged now, not when the
    // last connection has closed: requests in flight (and idle keep-alive connections) may take
    // seconds to finish.
    drop(listener);
    tracing::info!("stopped accepting; finishing requests in flight");
    connections.close();
    connections.wait().await;
    Ok(())
}

/// An accepted connection, its phase, and its places under the caps and in the eviction
/// registry, released when it is dropped.
struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    activity: Activity,
    watchdog: Watchdog,
    registered: Registered,
    _permit: OwnedSemaphorePermit,
    _slot: AddressSlot,
}

async fn serve_connection(
    connection: Connection,
    router: Router,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let Connection {
        stream,
        peer,
        activity,
        mut watchdog,
        registered,
        _permit,
        _slot,
    } = connection;
    let give_way = registered.close.clone();
    let io = TokioIo::new(Watched::new(stream, activity.clone()));
    let in_flight = metrics.requests_in_flight.clone();
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        activity.request_started();
        let served = InFlight::start(&in_flight);
        // What `into_make_service_with_connect_info` would insert: the handler reads the peer.
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        let activity = activity.clone();
        async move {
            // A body framed any other way than plain chunked or a length never reaches a route.
            let response = match super::framing::refusal(request.headers()) {
                Some(refused) => refused,
                None => tower_service::Service::call(&mut router, request).await?,
            };
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                Body::new(ResponseEnd {
                    body,
                    activity: Some(activity),
                    served: Some(served),
                })
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog bounds the head; hyper's own timer would also close idle connections early.
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);

    let expired = tokio::select! {
        result = conn.as_mut() => return log_end(result),
        expiry = watchdog.expired() => Some(expiry),
        () = give_way.cancelled() => return gave_way(),
        () = shutdown.cancelled() => None,
    };
    let expiry = match expired {
        Some(expiry) => expiry,
        None => {
            // Draining: finish the request in hand (an idle connection closes at once), still
            // under the watchdog so a half-sent head cannot hold the shutdown.
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                result = conn.as_mut() => return log_end(result),
                expiry = watchdog.expired() => expiry,
                () = give_way.cancelled() => return gave_way(),
            }
        }
    };
    metrics.connections_timed_out.inc();
    tracing::debug!(reason = expiry.label(), "connection closed");
}

/// The connection was closed at the cap to make room (`eviction`); counted by the accept loop.
fn gave_way() {
    tracing::debug!(reason = "connection cap", "connection closed");
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        // Clients resetting or sending garbage: not ours to act on.
        tracing::debug!(error = %error, "connection ended with an error");
    }
}

/// Errors about one connection that leave the listener healthy (the client went away between
/// its SYN and our accept).
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A response body that marks its connection idle once hyper has finished with it.
struct ResponseEnd {
    body: Body,
    activity: Option<Activity>,
    served: Option<InFlight>,
}

impl ResponseEnd {
    fn finish(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.response_finished();
        }
        self.served = None;
    }
}

/// One request counted in `requests_in_flight` from the moment it is handed to the router until
/// its response is written, or its handling is dropped (the client went away).
struct InFlight(Gauge);

impl InFlight {
    fn start(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl http_body::Body for ResponseEnd {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for ResponseEnd {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Raises the soft limit on open file descriptors to the hard limit, so the connection caps,
/// not the process's default (often 1024), decide how many clients are served. Logs both
/// numbers, and warns when the limit is still below the connection cap.
pub fn raise_fd_limit(limits: &ConnectionLimits) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    let mut after = before;
    if let Some(hard) = before.maximum
        && before.current.is_none_or(|soft| soft < hard)
    {
        after.current = Some(hard);
        if let Err(error) = setrlimit(Resource::Nofile, after) {
            tracing::warn!(error = %error, "could not raise the file-descriptor limit");
            after = before;
        }
    }
    let shown =
        |limit: Option<u64>| limit.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    tracing::info!(
        soft_before = %shown(before.current),
        soft = %shown(after.current),
        hard = %shown(after.maximum),
        "file-descriptor limit"
    );
    // Connections, plus the database, the log and the outbound clients.
    let needed = limits.max_connections as u64 + 64;
    if after.current.is_some_and(|soft| soft < needed) {
        tracing::warn!(
            soft = %shown(after.current),
            max_connections = limits.max_connections,
            "the file-descriptor limit is below HTTP_MAX_CONNECTIONS plus headroom; lower the cap or raise the hard limit"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::process::{Resource, getrlimit, setrlimit};

    #[test]
    fn soft_fd_limit_is_raised_to_the_hard_limit() {
        let start = getrlimit(Resource::Nofile);
        let Some(hard) = start.maximum else {
            // An unlimited hard limit leaves nothing to raise to.
            return;
        };
        // Lowered by one, so other tests running beside this one never run short.
        let mut lowered = start;
        lowered.current = Some(hard - 1);
        setrlimit(Resource::Nofile, lowered).expect("lowering the soft limit is allowed");
        raise_fd_limit(&ConnectionLimits::default());
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
    }
}
