//! `ManyChatClient`: the six ManyChat API calls this service makes, and the three read-only
//! page calls of the wiring check, and nothing else.
//!
//! Invariants:
//! - Every request first takes a slot from the shared [`ManyChatLimiter`]; there is no path
//!   around it.
//! - A call succeeds only when the HTTP status is 2xx **and** the body's `status` is `"success"`:
//!   ManyChat has been seen answering errors with HTTP 200.
//! - The API token travels only in the `Authorization` header, marked sensitive; redirects are not
//!   followed, so the header is never replayed to another host.
//! - Log lines carry the endpoint's name, request and response sizes, the HTTP status and the
//!   error kind. Never a body, a URL (getInfo's carries the subscriber id), an id or the token.
//! - getInfo's subscriber is reduced to a [`ContactRecord`] before it is returned (024).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use tracing::{debug, warn};

use super::account::{Account, parse_fields, parse_flows, parse_tags};
use super::contact::{ContactRecord, parse_get_info};
use super::error::ManyChatError;
use super::limiter::{ManyChatLimiter, Priority};
use super::recorder::Recorder;
use crate::ids::{Secret, SubscriberId};
use crate::metrics::Metrics;

/// The timeout of every request but getInfo, whose caller chooses its own.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most custom fields ManyChat's setCustomFields takes in one request.
pub const MAX_FIELDS_PER_WRITE: usize = 20;

/// The most of a response body that is read. ManyChat's envelopes are a few KiB; anything
/// larger is not one of them.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// The calls we make, named as ManyChat names them (the name is what logs carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    SendFlow,
    AddTagByName,
    RemoveTagByName,
    SetCustomFieldByName,
    SetCustomFields,
    GetInfo,
    GetFlows,
    GetTags,
    GetCustomFields,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Self::SendFlow => "/fb/sending/sendFlow",
            Self::AddTagByName => "/fb/subscriber/addTagByName",
            Self::RemoveTagByName => "/fb/subscriber/removeTagByName",
            Self::SetCustomFieldByName => "/fb/subscriber/setCustomFieldByName",
            Self::SetCustomFields => "/fb/subscriber/setCustomFields",
            Self::GetInfo => "/fb/subscriber/getInfo",
            Self::GetFlows => "/fb/page/getFlows",
            Self::GetTags => "/fb/page/getTags",
            Self::GetCustomFields => "/fb/page/getCustomFields",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::SendFlow => "sendFlow",
            Self::AddTagByName => "addTagByName",
            Self::RemoveTagByName => "removeTagByName",
            Self::SetCustomFieldByName => "setCustomFieldByName",
            Self::SetCustomFields => "setCustomFields",
            Self::GetInfo => "getInfo",
            Self::GetFlows => "getFlows",
            Self::GetTags => "getTags",
            Self::GetCustomFields => "getCustomFields",
        }
    }
}

/// The parts of ManyChat's envelope that say whether a call worked. `data` is not named, so a
/// write's or getInfo's payload is skipped unread here.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    status: Value,
    /// ManyChat's numeric error code (e.g. 3011), on some endpoints' errors.
    #[serde(default)]
    code: Value,
}

impl Envelope {
    /// The error `code`, as a number or a digit string; anything else is no code.
    fn code(&self) -> Option<i64> {
        match &self.code {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        // A code is a few digits; a long number is the shape of an id, never kept (C5).
        .filter(|code| (0..1_000_000).contains(code))
    }
}

/// The ManyChat API client. Cloning is cheap and shares the connection pool and the limiter.
#[derive(Clone)]
pub struct ManyChatClient {
    http: reqwest::Client,
    /// `MANYCHAT_API_BASE` without a trailing slash (`https://api.manychat.com` in production,
    /// the sandbox's or a test server's address otherwise).
    base_url: Arc<str>,
    limiter: ManyChatLimiter,
    /// Where each request's time is observed; none in tools and tests that build a
    /// bare client.
    metrics: Option<Arc<Metrics>>,
    /// Until when ManyChat asked to be left alone (`Retry-After` on a 429 or 5xx), on tokio's
    /// clock; read by the outbox to time its retries.
    retry_after: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
    /// The limiter priority of this handle's requests ([`ManyChatClient::background`]).
    priority: Priority,
    /// Where a test contact's calls go instead (`SubscriberId::is_test_contact`).
    test_contacts: Recorder,
}

impl fmt::Debug for ManyChatClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManyChatClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl ManyChatClient {
    /// Builds a client for `base_url` (http or https) authenticating with `api_token`.
    pub fn new(
        base_url: &str,
        api_token: &Secret,
        limiter: ManyChatLimiter,
    ) -> Result<Self, ManyChatError> {
        let base = base_url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base)
            .map_err(|_| ManyChatError::Config("MANYCHAT_API_BASE is not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(ManyChatError::Config(
                "MANYCHAT_API_BASE must be an http(s) URL with a host",
            ));
        }
        if api_token.expose().trim().is_empty() {
            return Err(ManyChatError::Config("MANYCHAT_API_TOKEN is empty"));
        }
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", api_token.expose().trim()))
            .map_err(|_| {
                ManyChatError::Config("MANYCHAT_API_TOKEN is not a valid HTTP header value")
            })?;
        auth.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, auth);
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));

        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|_| ManyChatError::Config("the HTTP client could not be built"))?;
        Ok(Self {
            http,
            base_url: Arc::from(base),
            limiter,
            metrics: None,
            retry_after: Arc::default(),
            priority: Priority::Normal,
            test_contacts: Recorder::default(),
        })
    }

    /// Where this client sends a test contact's calls: the console shows them.
    pub fn recorder(&self) -> &Recorder {
        &self.test_contacts
    }

    /// How long ManyChat's last `Retry-After` (on a 429 or 5xx) still asks to wait; `None` when
    /// it asked nothing or the time has passed.
    pub fn retry_after(&self) -> Option<Duration> {
        let until = (*self
            .retry_after
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))?;
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// The same client (connection pool, limiter, `Retry-After`) whose requests wait for a slot
    /// as [`Priority::Background`]: they go only when no other request waits. For contact-token
    /// writes, which no contact is waiting for.
    pub fn background(&self) -> Self {
        Self {
            priority: Priority::Background,
            ..self.clone()
        }
    }

    /// Waits until ManyChat's last `Retry-After` has passed (every request of the process,
    /// whatever sends it, stays behind it), then for a slot of the shared limiter.
    async fn slot(&self) {
        while let Some(left) = self.retry_after() {
            tokio::time::sleep(left).await;
        }
        self.limiter.acquire_as(self.priority).await;
    }

    /// Keeps a `Retry-After` of whole seconds from a 429 or 5xx answer, and holds the limiter
    /// (every replica's requests, when they share a bucket) until it passes.
    async fn note_retry_after(&self, status: u16, headers: &reqwest::header::HeaderMap) {
        if status != 429 && !(500..=599).contains(&status) {
            return;
        }
        let Some(seconds) = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
        else {
            return;
        };
        let wait = Duration::from_secs(seconds.min(3600));
        let until = tokio::time::Instant::now() + wait;
        *self
            .retry_after
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(until);
        self.limiter.hold(wait).await;
    }

    /// This client, its requests timed and its actions counted into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The metrics this client reports to, if any.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_deref()
    }

    /// Triggers the tenant flow `flow_ns` for the contact.
    /// Refused without a request ([`ManyChatError::FlowCapReached`]) when the contact already
    /// had ManyChat's per-contact limit of flows in the past hour.
    pub async fn send_flow(&self, sub: &SubscriberId, flow_ns: &str) -> Result<(), ManyChatError> {
        let body = serde_json::json!({"subscriber_id": sub.to_json(), "flow_ns": flow_ns});
        if sub.is_test_contact() {
            return self.post(Endpoint::SendFlow, sub, &body).await;
        }
        if let Err(error) = self.limiter.admit_flow(sub).await {
            warn!(
                endpoint = Endpoint::SendFlow.name(),
                kind = error.kind(),
                "manychat request refused before sending"
            );
            return Err(error);
        }
        self.post(Endpoint::SendFlow, sub, &body).await
    }

    /// Adds the tag named `tag_name` to the contact.
    pub async fn add_tag(&self, sub: &SubscriberId, tag_name: &str) -> Result<(), ManyChatError> {
        self.post_tag(Endpoint::AddTagByName, sub, tag_name).await
    }

    /// Removes the tag named `tag_name` from the contact.
    pub async fn remove_tag(
        &self,
        sub: &SubscriberId,
        tag_name: &str,
    ) -> Result<(), ManyChatError> {
        self.post_tag(Endpoint::RemoveTagByName, sub, tag_name)
            .await
    }

    /// addTagByName and removeTagByName take one body: the contact and the tag's name.
    async fn post_tag(
        &self,
        endpoint: Endpoint,
        sub: &SubscriberId,
        tag_name: &str,
    ) -> Result<(), ManyChatError> {
        let body = serde_json::json!({"subscriber_id": sub.to_json(), "tag_name": tag_name});
        self.post(endpoint, sub, &body).await
    }

    /// Writes `value` (typed as ManyChat expects: string, number, boolean, date string) into the
    /// contact's custom field `field_name`.
    pub async fn set_field(
        &self,
        sub: &SubscriberId,
        field_name: &str,
        value: &Value,
    ) -> Result<(), ManyChatError> {
        let body = serde_json::json!({
            "subscriber_id": sub.to_json(),
            "field_name": field_name,
            "field_value": value,
        });
        self.post(Endpoint::SetCustomFieldByName, sub, &body).await
    }

    /// Writes several of the contact's custom fields in one request (setCustomFields: each field
    /// by its name, each value typed as for [`Self::set_field`]). ManyChat takes at most
    /// [`MAX_FIELDS_PER_WRITE`] fields a request; more is refused here without a request.
    pub async fn set_fields(
        &self,
        sub: &SubscriberId,
        fields: &[(&str, Value)],
    ) -> Result<(), ManyChatError> {
        if fields.is_empty() || fields.len() > MAX_FIELDS_PER_WRITE {
            return Err(ManyChatError::Config(
                "setCustomFields takes from 1 to 20 fields a request",
            ));
        }
        let fields: Vec<Value> = fields
            .iter()
            .map(|(name, value)| serde_json::json!({"field_name": name, "field_value": value}))
            .collect();
        let body = serde_json::json!({"subscriber_id": sub.to_json(), "fields": fields});
        self.post(Endpoint::SetCustomFields, sub, &body).await
    }

    /// Reads the contact's tags and custom fields. `timeout` bounds the whole read, the wait for
    /// the limiter included, so a slow read cannot consume the caller's budget (024: 1500 ms).
    pub async fn get_contact(
        &self,
        sub: &SubscriberId,
        timeout: Duration,
    ) -> Result<ContactRecord, ManyChatError> {
        let endpoint = Endpoint::GetInfo;
        let read = async {
            let body = if sub.is_test_contact() {
                let query = format!("{}?subscriber_id={}", endpoint.path(), sub.as_str());
                self.recorded(endpoint, Method::GET, &query, Vec::new())
                    .await?
            } else {
                self.slot().await;
                let request = self
                    .http
                    .get(self.url(endpoint))
                    .query(&[("subscriber_id", sub.as_str())])
                    .timeout(timeout);
                self.execute(endpoint, request, 0, timeout).await?
            };
            parse_get_info(&body).map_err(|e| {
                let error = ManyChatError::Decode(match e {
                    super::contact::ContactParseError::NotJson => "getInfo body is not JSON",
                    super::contact::ContactParseError::NoData => "getInfo body has no data object",
                });
                warn!(
                    endpoint = endpoint.name(),
                    kind = error.kind(),
                    "manychat request failed"
                );
                error
            })
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(result) => result,
            Err(_) => {
                let error = ManyChatError::Timeout(timeout);
                warn!(
                    endpoint = endpoint.name(),
                    kind = error.kind(),
                    timeout_ms = timeout.as_millis() as u64,
                    "manychat request failed"
                );
                Err(error)
            }
        }
    }

    /// Reads the account's flows, tags and custom fields (`manychat check`): three
    /// GETs of the page API, each after the limiter. Writes nothing.
    pub async fn account(&self) -> Result<Account, ManyChatError> {
        let flows = self.page_data(Endpoint::GetFlows).await?;
        let tags = self.page_data(Endpoint::GetTags).await?;
        let fields = self.page_data(Endpoint::GetCustomFields).await?;
        Ok(Account {
            flows: parse_flows(&flows)
                .ok_or(ManyChatError::Decode("getFlows data has no flows list"))?,
            tags: parse_tags(&tags).ok_or(ManyChatError::Decode("getTags data is not a list"))?,
            fields: parse_fields(&fields)
                .ok_or(ManyChatError::Decode("getCustomFields data is not a list"))?,
        })
    }

    /// A page API GET's `data`.
    async fn page_data(&self, endpoint: Endpoint) -> Result<Value, ManyChatError> {
        self.slot().await;
        let request = self.http.get(self.url(endpoint));
        let body = self.execute(endpoint, request, 0, REQUEST_TIMEOUT).await?;
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|mut envelope| envelope.get_mut("data").map(Value::take))
            .ok_or(ManyChatError::Decode("page API body has no data"))
    }

    fn url(&self, endpoint: Endpoint) -> String {
        format!("{}{}", self.base_url, endpoint.path())
    }

    /// A POST with a JSON body for the contact `sub`, after the limiter; a test contact's goes
    /// to the recorder instead.
    async fn post(
        &self,
        endpoint: Endpoint,
        sub: &SubscriberId,
        body: &Value,
    ) -> Result<(), ManyChatError> {
        // `Value`'s Display is its JSON form and cannot fail.
        let bytes = body.to_string().into_bytes();
        if sub.is_test_contact() {
            return self
                .recorded(endpoint, Method::POST, endpoint.path(), bytes)
                .await
                .map(drop);
        }
        let request_bytes = bytes.len();
        self.slot().await;
        let request = self
            .http
            .post(self.url(endpoint))
            .header(CONTENT_TYPE, "application/json")
            .body(bytes);
        self.execute(endpoint, request, request_bytes, REQUEST_TIMEOUT)
            .await
            .map(drop)
    }

    /// A test contact's call, answered by the recorder and classified as ManyChat's answer would
    /// be; no limiter slot, no metric (it reaches no ManyChat account).
    async fn recorded(
        &self,
        endpoint: Endpoint,
        method: Method,
        path_and_query: &str,
        bytes: Vec<u8>,
    ) -> Result<Vec<u8>, ManyChatError> {
        let (status, body) = self.test_contacts.call(method, path_and_query, bytes).await;
        let result = classify(endpoint, status, &body).map(|()| body);
        debug!(
            endpoint = endpoint.name(),
            status,
            ok = result.is_ok(),
            "a test contact's manychat call went to the recorder"
        );
        result
    }

    /// Sends the request and classifies the answer; on success returns the body.
    async fn execute(
        &self,
        endpoint: Endpoint,
        request: reqwest::RequestBuilder,
        request_bytes: usize,
        timeout: Duration,
    ) -> Result<Vec<u8>, ManyChatError> {
        let started = tokio::time::Instant::now();
        let result = self
            .execute_untimed(endpoint, request, request_bytes, timeout)
            .await;
        if let Some(metrics) = &self.metrics {
            metrics.manychat_request(endpoint.name(), result.1, started.elapsed());
        }
        result.0
    }

    /// [`Self::execute`] without the timing; also returns the HTTP status, if one came.
    async fn execute_untimed(
        &self,
        endpoint: Endpoint,
        request: reqwest::RequestBuilder,
        request_bytes: usize,
        timeout: Duration,
    ) -> (Result<Vec<u8>, ManyChatError>, Option<u16>) {
        // Sending or reading the answer failed below HTTP (the status, once one came).
        let transport_failed = |e: &reqwest::Error, status: Option<u16>| {
            let error = transport_error(e, timeout);
            warn!(
                endpoint = endpoint.name(),
                request_bytes,
                status,
                kind = error.kind(),
                "manychat request failed"
            );
            (Err(error), status)
        };
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(e) => return transport_failed(&e, None),
        };
        let status = response.status().as_u16();
        self.note_retry_after(status, response.headers()).await;
        let body = match read_body(&mut response).await {
            Ok(body) => body,
            Err(e) => return transport_failed(&e, Some(status)),
        };
        let result = match classify(endpoint, status, &body) {
            Ok(()) => {
                debug!(
                    endpoint = endpoint.name(),
                    request_bytes,
                    response_bytes = body.len(),
                    status,
                    "manychat request succeeded"
                );
                Ok(body)
            }
            Err(error) => {
                warn!(
                    endpoint = endpoint.name(),
                    request_bytes,
                    response_bytes = body.len(),
                    status,
                    kind = error.kind(),
                    code = error.code(),
                    "manychat request failed"
                );
                Err(error)
            }
        };
        (result, Some(status))
    }
}

/// Reads at most [`MAX_RESPONSE_BYTES`]; a longer body is cut, which makes it undecodable.
async fn read_body(response: &mut reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_RESPONSE_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_RESPONSE_BYTES {
            break;
        }
    }
    Ok(body)
}

/// A transport failure, described without reqwest's message (it can carry the URL).
///
/// A failure to connect (even one that timed out) comes first: the request never left, so
/// ManyChat surely did not perform it. A timeout after that is one ManyChat may have performed
/// (`ManyChatError::outcome_unknown`).
fn transport_error(error: &reqwest::Error, timeout: Duration) -> ManyChatError {
    if error.is_connect() {
        ManyChatError::Network("connect")
    } else if error.is_timeout() {
        ManyChatError::Timeout(timeout)
    } else if error.is_body() || error.is_decode() {
        ManyChatError::Network("response body")
    } else if error.is_request() {
        ManyChatError::Network("request")
    } else {
        ManyChatError::Network("transport")
    }
}

/// Decides from the HTTP status and the body's `status` whether the call worked. A refusal keeps
/// the status and ManyChat's numeric `code`, never its message (C5: it may quote the contact).
fn classify(endpoint: Endpoint, status: u16, body: &[u8]) -> Result<(), ManyChatError> {
    let envelope: Option<Envelope> = serde_json::from_slice(body).ok();
    let endpoint = endpoint.name();
    let code = envelope.as_ref().and_then(Envelope::code);
    match status {
        429 => Err(ManyChatError::RateLimited),
        500..=599 => Err(ManyChatError::Server { status }),
        200..=299 => {
            let Some(envelope) = envelope.as_ref() else {
                return Err(ManyChatError::Decode("success body is not a JSON object"));
            };
            match envelope.status.as_str() {
                Some("success") => Ok(()),
                Some("error") => Err(ManyChatError::Api {
                    status,
                    code,
                    endpoint,
                }),
                _ => Err(ManyChatError::Decode("success body has no success status")),
            }
        }
        _ => Err(ManyChatError::Http {
            status,
            code,
            endpoint,
        }),
    }
}

#[cfg(test)]
mod tests;
