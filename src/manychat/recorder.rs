//! The test contacts' ManyChat: the owner's console tries the agent as a test contact
//! (`SubscriberId::is_test_contact`), and every ManyChat call the service makes for such a
//! contact comes here instead of to ManyChat. The client decides, per call, in one place
//! (`ManyChatClient::send`); a webhook request from ManyChat carrying such an id is treated the
//! same way, so its writes are harmless.
//!
//! The recorder is the demo's sandbox ([`super::sandbox`]) served in process, without a socket
//! and without printing: the same checks and envelopes, getInfo reflecting earlier writes. Its
//! calls take no slot of the shared limiter and count in no metric (they reach no ManyChat
//! account); the sandbox keeps the last few thousand calls and contacts only.

use std::future::poll_fn;

use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::Value;
use tower_service::Service;

use super::sandbox::{AppState, SandboxRequest};
use crate::ids::SubscriberId;

/// The in-process recorder; clones share its calls and contacts.
#[derive(Clone)]
pub struct Recorder {
    state: AppState,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            state: AppState::quiet(),
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder(..)")
    }
}

impl Recorder {
    /// Answers one call as ManyChat would: the HTTP status and the body.
    pub(super) async fn call(
        &self,
        method: Method,
        path_and_query: &str,
        body: Vec<u8>,
    ) -> (u16, Vec<u8>) {
        let mut router = self.state.router();
        let request = Request::builder()
            .method(method)
            .uri(path_and_query)
            .header("authorization", "Bearer recorder")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("a request of a path and bytes");
        let Ok(()) = poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut router, cx)).await;
        let Ok(response) = router.call(request).await;
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1024 * 1024)
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        (status, bytes)
    }

    /// The calls recorded for `contact`, oldest first: what ManyChat would have received.
    pub fn calls_for(&self, contact: &SubscriberId) -> Vec<SandboxRequest> {
        self.state.calls_for(contact.as_str())
    }

    /// The contact's custom field `name` as ManyChat would hold it now.
    pub fn field(&self, contact: &SubscriberId, name: &str) -> Option<Value> {
        self.state.field(contact.as_str(), name)
    }

    /// What ManyChat does with a Dynamic Block's `set_field_value` action: sets the field.
    pub fn set_field(&self, contact: &SubscriberId, name: &str, value: Value) {
        self.state.set_field(contact.as_str(), name, value);
    }
}
