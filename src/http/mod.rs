//! The HTTP surface (SYSTEM 3.1–3.3): `POST /v1/channels/manychat/message`, `GET /health`,
//! `GET /ready`, `GET /metrics`, and `POST /v1/channels/manychat/release` (`release`: a contact
//! held for a person handed back to the assistant).
//!
//! Only the message route takes the shared secret (it is pasted into every Dynamic Block): the
//! release route has its own `RELEASE_TOKEN` and is off without it, `/metrics` needs
//! `METRICS_TOKEN` unless the listener is on the loopback or `METRICS_OPEN` is set, and `/ready`
//! answers in fixed words, its version and wiring details for a `METRICS_TOKEN` holder only.
//!
//! The message route runs its checks in a fixed order: authentication **before the body is read**
//! (a request without a valid secret is counted against its address's limit, then refused), then
//! the 64 KiB body limit and the body timeout, then the strict inbound parse, then the contact's
//! limit, all before the store is touched. An authenticated request never gets
//! a 500: any failure after authentication answers 200 with the tenant's escalation copy as a
//! Dynamic Block (C6). `server` runs the connections these routes are served on.
//!
//! Files: `auth` (the secret), `rate_limit` and `client_ip` (per address and per contact),
//! `inbound` (the strict body: `subscriber_id` or `user_id`), `wiring` (unsubstituted ManyChat
//! variables, answered and reported, also in `/ready`), `response_body` (the body that tells
//! us the response was written), `server` (the accept loop, connection caps, graceful drain),
//! `connections` (each connection's phase and its header and idle timeouts).

pub mod auth;
pub mod client_ip;
pub mod connections;
pub mod eviction;
mod framing;
pub mod inbound;
pub mod rate_limit;
mod release;
mod response_body;
mod scrape;
pub mod server;
mod wiring;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::channel::{self, Callback, Channel};
use crate::config::ConfigHandle;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::turn::{Inbound, TurnEngine};

/// The route ManyChat's Dynamic Block calls.
pub const MESSAGE_PATH: &str = channel::MESSAGE_ROUTE;
/// The operator's release route (`crate::handoff`).
pub const RELEASE_PATH: &str = release::RELEASE_PATH;
/// SYSTEM 3.2: the inbound body limit.
pub const BODY_LIMIT: usize = 64 * 1024;

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub turns: TurnEngine,
    /// The application's clock (the outbox gauges' "now" at scrape time).
    pub clock: crate::clock::Clock,
    pub store: Arc<dyn Store>,
    pub config: Arc<ConfigHandle>,
    pub metrics: Arc<Metrics>,
    pub auth: Arc<auth::Authenticator>,
    pub trust_proxy: Arc<client_ip::TrustProxy>,
    pub rate_limit: Arc<rate_limit::RateLimiter>,
    pub channel: Channel,
    /// `PUBLIC_BASE_URL` + the route: where ManyChat's callback sends the next message.
    pub callback_url: String,
    /// `MANYCHAT_TOKEN_FIELD`, named in the callback payload.
    pub token_field: String,
    /// Beyond: turns in flight (`MAX_TURNS_IN_FLIGHT`) and each contact's share of them
    /// (`turn::place`); a turn that could start when none is free gets the escalation copy
    /// without a model call (`load shed`).
    pub places: Arc<crate::turn::TurnPlaces>,
    /// `HTTP_BODY_TIMEOUT_MS`: the message body must arrive within this of the request's head.
    pub body_timeout: Duration,
    /// Who may read `GET /metrics` (`startup::metrics_auth`): `None` is anyone; an
    /// authenticator without a token refuses everyone.
    pub metrics_auth: Option<Arc<auth::Authenticator>>,
    /// `RELEASE_TOKEN`: the release route's own bearer token (`None`: the route is off, 404).
    /// Never the shared secret: that is pasted into every Dynamic Block.
    pub release_auth: Option<Arc<auth::Authenticator>>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(MESSAGE_PATH, post(message))
        .route(release::RELEASE_PATH, post(release::release))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        // Shared, not cloned per request: the state holds strings.
        .with_state(Arc::new(state))
}

async fn health() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// `GET /ready`: ready or not, and why, in fixed words. The version, the wiring details and the
/// replica that saw them (host and pid) go only to a caller who may read `/metrics` (its token,
/// or where the metrics are open): they tell an outsider what runs where.
async fn ready(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let trusted = state
        .metrics_auth
        .as_ref()
        .is_none_or(|auth| auth.check(headers.get(header::AUTHORIZATION)));
    match state.store.ping().await {
        // A wiring problem is flagged, not made a 503: it is in ManyChat's setup, the same for
        // every replica, and taking them all out of rotation would answer nobody at all.
        Ok(()) => match wiring::problems(&state.metrics, &state.token_field) {
            None if trusted => {
                axum::Json(json!({"status": "ready", "version": crate::VERSION})).into_response()
            }
            None => axum::Json(json!({"status": "ready"})).into_response(),
            Some(details) if trusted => axum::Json(
                json!({"status": "ready", "version": crate::VERSION, "details": details}),
            )
            .into_response(),
            Some(_) => axum::Json(json!({"status": "ready", "warning": "wiring"})).into_response(),
        },
        Err(error) => {
            tracing::warn!(error = %error, "not ready: store does not answer");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({"status": "unavailable", "reason": "store"})),
            )
                .into_response()
        }
    }
}

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Some(auth) = &state.metrics_auth
        && !auth.check(headers.get(header::AUTHORIZATION))
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(json!({"error": "unauthorized"})),
        )
            .into_response();
    }
    // The store's gauges are read here, per scrape, never on a turn.
    let config = state.config.snapshot();
    let budget = config.rules.budget.clone();
    let now = state.clock.now();
    let hold = crate::handoff::hold_hours(&config);
    let held_since = (hold > 0).then(|| now - chrono::Duration::hours(i64::from(hold)));
    scrape::sample_store(
        &state.metrics,
        state.store.as_ref(),
        &budget,
        held_since,
        now,
    )
    .await;
    // The plugin tools in force have their series, a reloaded one included.
    state.metrics.plugin_tools(
        config
            .plugins
            .iter()
            .flat_map(|p| p.tools.iter().map(|t| t.name.as_str())),
    );
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        state.metrics.render(),
    )
        .into_response()
}

fn error(status: StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}

async fn message(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let arrived_at = tokio::time::Instant::now();
    let bytes = match authorized_body(&state, &state.auth, peer, &headers, body, arrived_at).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    // The caller's own Authorization goes back in the callback, so secret rotation keeps
    // working for conversations already in progress.
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut message = match inbound::InboundMessage::parse(&bytes) {
        Ok(message) => message,
        Err(inbound::InboundError::NotSubstituted { field }) => {
            // Not the contact's fault and no 400: the contact gets the escalation copy.
            wiring::report_id_not_substituted(&state.metrics, field);
            let callback = Callback {
                url: &state.callback_url,
                authorization,
                token_field: &state.token_field,
            };
            return escalation_response(&state, &callback);
        }
        Err(e) => {
            state.metrics.bad_requests.inc();
            // The caller is told which key; the log only that one was unknown (its name is
            // the sender's text).
            tracing::info!(field = e.logged_field(), "inbound request refused");
            return error(
                StatusCode::BAD_REQUEST,
                json!({"error": "invalid_request", "field": e.field(), "message": e.to_string()}),
            );
        }
    };
    if let Err(retry) = state.rate_limit.check_contact(&message.subscriber_id) {
        return too_many_requests(&state, retry);
    }

    wiring::id_substituted(&state.metrics);
    if message.token_not_substituted {
        wiring::report_token_not_substituted(&state, &message.subscriber_id);
    } else if message.ai_token.is_some() {
        wiring::token_substituted(&state.metrics);
    }
    message.detect_media(state.turns.media_host());

    let callback = Callback {
        url: &state.callback_url,
        authorization,
        token_field: &state.token_field,
    };
    // The turn takes a slot when it can start (a load-shed one is recorded and handed to a
    // person, and answered with the copy); one waiting behind its contact's turns holds none.
    let place = state.places.place(&message.subscriber_id);
    let subscriber = message.subscriber_id.clone();
    let inbound = Inbound {
        subscriber_id: message.subscriber_id,
        text: message.text,
        ai_token: message.ai_token,
        channel: message.channel,
        offering: message.offering,
        media: message.media,
        arrived_at,
    };
    match state.turns.handle(inbound, place).await {
        Ok(turn) => {
            // 019: a token issued on this request rides on its block.
            let set = turn.token.as_ref().map(|token| channel::SetField {
                field_name: &state.token_field,
                value: token.expose(),
            });
            let rendered = channel::render_setting(state.channel, &turn.messages, &callback, set);
            match turn.after {
                None => block_response(&rendered),
                Some(after) => {
                    // Actions run once the response has been written (012): the body tells
                    // us when hyper has taken its last byte.
                    let (body, written) = response_body::json_with_notice(&rendered);
                    let turns = state.turns.clone();
                    state.turns.tasks().spawn(async move {
                        let _ = written.await;
                        turns.run_after(after).await;
                    });
                    body
                }
            }
        }
        Err(e) => {
            match &e {
                crate::turn::TurnError::Store(error) => crate::store_failure!(
                    state.store,
                    error,
                    "turn failed; answering with the escalation copy"
                ),
                other => {
                    tracing::error!(error = %other, "turn failed; answering with the escalation copy")
                }
            }
            // C6: nothing recorded it, so no outbox row hands the contact over; the handoff
            // goes directly once the copy is written.
            let copy = [state.turns.escalation_copy()];
            let rendered = channel::render(state.channel, &copy, &callback);
            let (body, written) = response_body::json_with_notice(&rendered);
            let turns = state.turns.clone();
            state.turns.tasks().spawn(async move {
                let _ = written.await;
                turns.hand_off_without_store(&subscriber).await;
            });
            body
        }
    }
}

/// 429 with `Retry-After`: the whole seconds until the key has budget again.
fn too_many_requests(state: &AppState, retry: rate_limit::RetryAfter) -> Response {
    state.metrics.rate_limited.inc();
    let mut response = error(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"error": "rate_limited"}),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry.seconds()));
    response
}

/// The body of a request that carries the valid secret, checked before the body is read; `Err`
/// is the refusal to answer, counted. A request without the secret is limited per address
/// (429), then answered 401: only such requests are limited per address, since ManyChat's real
/// traffic comes from a few addresses and is limited per contact.
async fn authorized_body(
    state: &AppState,
    auth: &auth::Authenticator,
    peer: SocketAddr,
    headers: &HeaderMap,
    body: Body,
    arrived_at: tokio::time::Instant,
) -> Result<axum::body::Bytes, Response> {
    if !auth.check(headers.get(header::AUTHORIZATION)) {
        let client = state.trust_proxy.client_ip(peer.ip(), headers);
        if let Err(retry) = state.rate_limit.check_address(client) {
            return Err(too_many_requests(state, retry));
        }
        state.metrics.unauthorized.inc();
        return Err(error(
            StatusCode::UNAUTHORIZED,
            json!({"error": "unauthorized"}),
        ));
    }
    read_body(state, headers, body, arrived_at).await
}

/// An authenticated request's body, within `BODY_LIMIT` (declared or read) and the body
/// timeout from its arrival; `Err` is the refusal to answer (413, 408), counted.
async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    arrived_at: tokio::time::Instant,
) -> Result<axum::body::Bytes, Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT) {
        state.metrics.bad_requests.inc();
        return Err(too_large());
    }
    let read = axum::body::to_bytes(body, BODY_LIMIT);
    match tokio::time::timeout_at(arrived_at + state.body_timeout, read).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => {
            state.metrics.bad_requests.inc();
            Err(too_large())
        }
        Err(_) => {
            state.metrics.bad_requests.inc();
            tracing::info!("inbound request refused: the body did not arrive in time");
            Err(error(
                StatusCode::REQUEST_TIMEOUT,
                json!({"error": "request_timeout", "message": "body: did not arrive in time"}),
            ))
        }
    }
}

fn too_large() -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        json!({"error": "payload_too_large", "message": format!("body: must be at most {BODY_LIMIT} bytes")}),
    )
}

/// The tenant's escalation copy as a Dynamic Block, or `{"error":"internal"}` if even that
/// cannot be rendered (SYSTEM 3.3).
fn escalation_response(state: &AppState, callback: &Callback<'_>) -> Response {
    let copy = [state.turns.escalation_copy()];
    block_response(&channel::render(state.channel, &copy, callback))
}

/// A rendered Dynamic Block as a 200 response; `{"error":"internal"}` in the (so far
/// impossible) case that it does not serialise, never a 500 (SYSTEM 3.3).
fn block_response(block: &channel::DynamicBlock<'_>) -> Response {
    match response_body::to_json(block) {
        Ok(bytes) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(_) => error(StatusCode::OK, json!({"error": "internal"})),
    }
}
