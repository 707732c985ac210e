//! `POST /v1/channels/manychat/release`: an operator (or a ManyChat "External Request" action in
//! the team's flow) hands a contact held for a person back to the assistant (`crate::handoff`).
//!
//! The same checks as the message route, in the same order, with its own bearer token
//! (`RELEASE_TOKEN`, never the shared secret, which is pasted into every Dynamic Block; unset,
//! the route is off and answers 404 as an unknown route does): the token before the body is
//! read (a request without it is limited per address, then answered 401), the body limit and
//! timeout, then the strict body `{"subscriber_id": "<digits>"}`, parsed as the message route's
//! (400 naming the field). The
//! answer is `{"released": true}`, or `{"released": false}` when the contact was unknown or not
//! held; nothing is sent to ManyChat.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

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
    // Off without its own token: indistinguishable from a route that does not exist.
    let Some(auth) = state.release_auth.clone() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let bytes = match super::authorized_body(&state, &auth, peer, &headers, body, arrived_at).await
    {
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

/// The strict body: an object with exactly `subscriber_id`, the contact's id, parsed by the
/// message route's parser (`inbound::strict_object`: no unknown key, no key given twice) and
/// under its id rule. `Err` names the field and the rule (never the value: it is the caller's
/// text).
fn parse(bytes: &[u8]) -> Result<SubscriberId, (&'static str, String)> {
    let named = |e: super::inbound::InboundError| {
        let field = match e.field() {
            Some("subscriber_id") => "subscriber_id",
            _ => "body",
        };
        (field, e.to_string())
    };
    let entries = super::inbound::strict_object(bytes, &["subscriber_id"]).map_err(named)?;
    let id = entries.first().map(|(_, value)| value);
    super::inbound::one_contact_id("subscriber_id", id).map_err(named)
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
        // The message route's rule: a number of digits is the same id.
        assert_eq!(
            parse(br#"{"subscriber_id": 4400100}"#).unwrap().as_str(),
            "4400100"
        );
        assert_eq!(field(br#"{"subscriber_id": true}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": "12ab"}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": ""}"#), "subscriber_id");
        assert_eq!(field(br#"{"subscriber_id": "1", "x": 1}"#), "body");
    }

    #[test]
    fn release_route_refuses_duplicate_keys() {
        let refused = parse(br#"{"subscriber_id":"1","subscriber_id":"77001"}"#).unwrap_err();
        assert_eq!(refused.0, "subscriber_id");
        assert_eq!(refused.1, "subscriber_id: given more than once");
    }
}
