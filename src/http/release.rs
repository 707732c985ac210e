//! `POST /v1/channels/manychat/release`: an operator (or a ManyChat "External Request" action in
//! the team's flow) hands a contact held for a person back to the assistant (`crate::handoff`).
//!
//! The same checks as the message route, in the same order: the bearer secret before the body
//! is read (a request without it is limited per address, then answered 401), the body limit and
//! timeout, then the strict body `{"subscriber_id": "<digits>"}` (400 naming the field). The
//! answer is `{"released": true}`, or `{"released": false}` when the contact was unknown or not
//! held; nothing is sent to ManyChat.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{AppState, error};
use crate::ids::SubscriberId;

/// The route beside the message route.
pub const RELEASE_PATH: &str = "/v1/channels/manychat/release";

pub(super) async fn release(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let arrived_at = tokio::time::Instant::now();
    let bytes = match super::authorized_body(&state, peer, &headers, body, arrived_at).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let subscriber = match parse(&bytes) {
        Ok(subscriber) => subscriber,
        Err((field, message)) => {
            state.metrics.bad_requests.inc();
            return error(
                StatusCode::BAD_REQUEST,
                json!({"error": "invalid_request", "field": field, "message": message}),
            );
        }
    };
    let config = state.config.snapshot();
    let now = state.clock.now();
    match crate::handoff::release::release_contact(state.store.as_ref(), &config, &subscriber, now)
        .await
    {
        Ok(released) => {
            if let Some(why) = released {
                state.metrics.hold_release(why.as_str());
            }
            axum::Json(json!({"released": released.is_some()})).into_response()
        }
        Err(failure) => {
            crate::store_failure!(
                state.store,
                failure.during("releasing a held contact"),
                "release: the store failed"
            );
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "unavailable", "message": "the store did not answer; try again"}),
            )
        }
    }
}

/// The strict body: an object with exactly `subscriber_id`, the contact's digits. `Err` names
/// the field and the rule (never the value: it is the caller's text).
fn parse(bytes: &[u8]) -> Result<SubscriberId, (&'static str, String)> {
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(bytes) else {
        return Err(("body", "body: must be a JSON object".to_owned()));
    };
    let id = body.remove("subscriber_id");
    if !body.is_empty() {
        return Err(("body", "body: only subscriber_id is accepted".to_owned()));
    }
    match id {
        Some(Value::String(raw)) => SubscriberId::parse(raw.trim()).map_err(|_| {
            (
                "subscriber_id",
                "subscriber_id: must be the contact's digits".to_owned(),
            )
        }),
        Some(_) => Err((
            "subscriber_id",
            "subscriber_id: must be a string of digits".to_owned(),
        )),
        None => Err(("subscriber_id", "subscriber_id: is required".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_release_body_is_strict_and_names_the_field() {
        assert_eq!(
            parse(br#"{"subscriber_id": "4400100"}"#).unwrap().as_str(),
            "4400100"
        );
        let field = |body: &[u8]| parse(body).unwrap_err().0;
        assert_eq!(field(b"not json"), "body");
        assert_eq!(field(b"[1]"), "body");
        assert_eq!(field(br#"{}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": 4400100}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": "12ab"}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": ""}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": "1", "x": 1}"#), "body");
    }
}
