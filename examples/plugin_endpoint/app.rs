//! The example endpoint's handler: one URL per tool, each call's Standard Webhooks signature
//! verified with the `standardwebhooks` crate before anything is read. Shared by the runnable
//! example (`main.rs`) and the integration test that drives the agent against it.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// What the endpoint keeps: the leads it was sent (a real one would write to its CRM), and the
/// `webhook-id`s it has accepted (a real one would keep them, with their time, at least as long
/// as a signature's 5-minute tolerance, in its database).
#[derive(Clone)]
pub struct Studio {
    webhook: Arc<standardwebhooks::Webhook>,
    pub leads: Arc<Mutex<Vec<Value>>>,
    seen: Arc<Mutex<std::collections::HashSet<String>>>,
}

/// The endpoint for `secret` (`whsec_…`, the value of the tools' `secretEnv`).
pub fn router(secret: &str) -> (Router, Studio) {
    let studio = Studio {
        webhook: Arc::new(standardwebhooks::Webhook::new(secret).expect("a whsec_ secret")),
        leads: Arc::default(),
        seen: Arc::default(),
    };
    let router = Router::new()
        .route("/seats_left", post(seats_left))
        .route("/create_lead", post(create_lead))
        .with_state(studio.clone());
    (router, studio)
}

/// The call's JSON once its signature (and timestamp, within 5 minutes) verified and its
/// `webhook-id` never seen before: a captured call sent again within the 5 minutes (a replay)
/// is refused, so a write is never made twice by someone who copied it.
fn verified(studio: &Studio, headers: &HeaderMap, body: &Bytes) -> Result<Value, StatusCode> {
    studio
        .webhook
        .verify(body, headers)
        .map_err(|_| StatusCode::UNAUTHORIZED)?;
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let first = studio
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.to_owned());
    if !first {
        return Err(StatusCode::CONFLICT);
    }
    serde_json::from_slice(body).map_err(|_| StatusCode::BAD_REQUEST)
}

/// A read: the seats left in a class, as the tool's `result` declares them.
async fn seats_left(State(studio): State<Studio>, headers: HeaderMap, body: Bytes) -> Response {
    let call = match verified(&studio, &headers, &body) {
        Ok(call) => call,
        Err(refused) => return refused.into_response(),
    };
    let (seats, next_date) = match call["arguments"]["class"].as_str() {
        Some("wheel_basics") => (3, "Wednesday 7pm"),
        Some("handbuilding") => (0, "First Saturday of next month"),
        _ => return StatusCode::UNPROCESSABLE_ENTITY.into_response(),
    };
    axum::Json(json!({"seats": seats, "next_date": next_date})).into_response()
}

/// A write: record the lead, answer 204.
async fn create_lead(State(studio): State<Studio>, headers: HeaderMap, body: Bytes) -> Response {
    let call = match verified(&studio, &headers, &body) {
        Ok(call) => call,
        Err(refused) => return refused.into_response(),
    };
    studio
        .leads
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(call);
    StatusCode::NO_CONTENT.into_response()
}
