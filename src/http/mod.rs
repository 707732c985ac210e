//! The HTTP surface (SYSTEM 3.1–3.3): `POST /v1/channels/manychat/message`, `GET /health`,
//! `GET /ready`, `GET /metrics`.
//!
//! The message route runs its checks in a fixed order: the per-address limit (counted before
//! authentication, with separate budgets for requests with and without a valid secret), then
//! authentication **before the body is read**, then the 64 KiB body limit, then the strict
//! inbound parse. An authenticated request never gets a 500: any failure after authentication
//! answers 200 with the tenant's escalation copy as a Dynamic Block (C6).

pub mod auth;
pub mod client_ip;
pub mod inbound;
pub mod rate_limit;
mod response_body;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::channel::{self, Callback, Channel};
use crate::config::ConfigHandle;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::turn::{Inbound, TurnEngine};

/// The route ManyChat's Dynamic Block calls.
pub const MESSAGE_PATH: &str = channel::MESSAGE_ROUTE;
/// SYSTEM 3.2: the inbound body limit.
pub const BODY_LIMIT: usize = 64 * 1024;

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub turns: TurnEngine,
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
    /// Beyond: turns in flight; when none is free the escalation copy is returned without
    /// calling the model (`load shed`).
    pub in_flight: Arc<Semaphore>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(MESSAGE_PATH, post(message))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        // Shared, not cloned per request: the state holds strings.
        .with_state(Arc::new(state))
}

async fn health() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    match state.store.ping().await {
        Ok(()) => axum::Json(json!({"status": "ready"})).into_response(),
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

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
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
    let client = state.trust_proxy.client_ip(peer.ip(), &headers);
    let authorization = headers.get(header::AUTHORIZATION);
    let authenticated = state.auth.check(authorization);
    if !state.rate_limit.check(client, authenticated) {
        state.metrics.rate_limited.inc();
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": "rate_limited"}),
        );
    }
    if !authenticated {
        state.metrics.unauthorized.inc();
        return error(StatusCode::UNAUTHORIZED, json!({"error": "unauthorized"}));
    }
    // The caller's own Authorization goes back in the callback, so secret rotation keeps
    // working for conversations already in progress.
    let authorization = authorization
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();

    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT) {
        state.metrics.bad_requests.inc();
        return too_large();
    }
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(bytes) => bytes,
        Err(_) => {
            state.metrics.bad_requests.inc();
            return too_large();
        }
    };
    let mut message = match inbound::InboundMessage::parse(&bytes) {
        Ok(message) => message,
        Err(e) => {
            state.metrics.bad_requests.inc();
            tracing::info!(
                field = e.field().unwrap_or("body"),
                "inbound request refused"
            );
            return error(
                StatusCode::BAD_REQUEST,
                json!({"error": "invalid_request", "field": e.field(), "message": e.to_string()}),
            );
        }
    };

    message.detect_media(state.turns.media_host());

    let callback = Callback {
        url: &state.callback_url,
        authorization,
        token_field: &state.token_field,
    };
    let Ok(permit) = state.in_flight.clone().try_acquire_owned() else {
        state.metrics.load_shed.inc();
        tracing::warn!("load shed: too many turns in flight");
        // Recorded and handed to a person (issue 13), not only answered with the copy.
        state
            .turns
            .shed(
                &message.subscriber_id,
                &message.text,
                message.channel.as_deref(),
            )
            .await;
        return escalation_response(&state, &callback);
    };

    let inbound = Inbound {
        subscriber_id: message.subscriber_id,
        text: message.text,
        ai_token: message.ai_token,
        channel: message.channel,
        offering: message.offering,
        media: message.media,
        arrived_at,
    };
    match state.turns.handle(inbound, Some(Arc::new(permit))).await {
        Ok(turn) => {
            let rendered = channel::render(state.channel, &turn.messages, &callback);
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
            tracing::error!(error = %e, "turn failed; answering with the escalation copy");
            escalation_response(&state, &callback)
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
