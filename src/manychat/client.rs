//! `ManyChatClient`: the five ManyChat API calls this service makes, and the three read-only
//! page calls of the wiring check (issue 21), and nothing else.
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

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use tracing::{debug, warn};

use super::account::{Account, parse_fields, parse_flows, parse_tags};
use super::contact::{ContactRecord, parse_get_info};
use super::error::ManyChatError;
use super::limiter::ManyChatLimiter;
use crate::ids::{Secret, SubscriberId};
use crate::metrics::Metrics;

/// The timeout of every request but getInfo, whose caller chooses its own.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Where each request's time is observed (issue 18); none in tools and tests that build a
    /// bare client.
    metrics: Option<Arc<Metrics>>,
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
        })
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
    /// had ManyChat's per-contact limit of flows in the past hour (issue 21).
    pub async fn send_flow(&self, sub: &SubscriberId, flow_ns: &str) -> Result<(), ManyChatError> {
        if let Err(error) = self.limiter.admit_flow(sub).await {
            warn!(
                endpoint = Endpoint::SendFlow.name(),
                kind = error.kind(),
                "manychat request refused before sending"
            );
            return Err(error);
        }
        let body = serde_json::json!({"subscriber_id": sub.to_json(), "flow_ns": flow_ns});
        self.post(Endpoint::SendFlow, &body).await
    }

    /// Adds the tag named `tag_name` to the contact.
    pub async fn add_tag(&self, sub: &SubscriberId, tag_name: &str) -> Result<(), ManyChatError> {
        let body = serde_json::json!({"subscriber_id": sub.to_json(), "tag_name": tag_name});
        self.post(Endpoint::AddTagByName, &body).await
    }

    /// Removes the tag named `tag_name` from the contact.
    pub async fn remove_tag(
        &self,
        sub: &SubscriberId,
        tag_name: &str,
    ) -> Result<(), ManyChatError> {
        let body = serde_json::json!({"subscriber_id": sub.to_json(), "tag_name": tag_name});
        self.post(Endpoint::RemoveTagByName, &body).await
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
        self.post(Endpoint::SetCustomFieldByName, &body).await
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
            self.limiter.acquire().await;
            let request = self
                .http
                .get(self.url(endpoint))
                .query(&[("subscriber_id", sub.as_str())])
                .timeout(timeout);
            let body = self
                .execute(endpoint, request, 0, timeout)
                .await?;
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

    /// Reads the account's flows, tags and custom fields (issue 21, `manychat check`): three
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
        self.limiter.acquire().await;
        let request = self.http.get(self.url(endpoint));
        let body = self
            .execute(endpoint, request, 0, REQUEST_TIMEOUT)
            .await?;
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|mut envelope| envelope.get_mut("data").map(Value::take))
            .ok_or(ManyChatError::Decode("page API body has no data"))
    }

    fn url(&self, endpoint: Endpoint) -> String {
        format!("{}{}", self.base_url, endpoint.path())
    }

    /// A POST with a JSON body, after the limiter.
    async fn post(&self, endpoint: Endpoint, body: &Value) -> Result<(), ManyChatError> {
        // `Value`'s Display is its JSON form and cannot fail.
        let bytes = body.to_string().into_bytes();
        let request_bytes = bytes.len();
        self.limiter.acquire().await;
        let request = self
            .http
            .post(self.url(endpoint))
            .header(CONTENT_TYPE, "application/json")
            .body(bytes);
        self.execute(endpoint, request, request_bytes, REQUEST_TIMEOUT)
            .await
            .map(drop)
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
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                let error = transport_error(&e, timeout);
                warn!(
                    endpoint = endpoint.name(),
                    request_bytes,
                    kind = error.kind(),
                    "manychat request failed"
                );
                return (Err(error), None);
            }
        };
        let status = response.status().as_u16();
        let body = match read_body(&mut response).await {
            Ok(body) => body,
            Err(e) => {
                let error = transport_error(&e, timeout);
                warn!(
                    endpoint = endpoint.name(),
                    request_bytes,
                    status,
                    kind = error.kind(),
                    "manychat request failed"
                );
                return (Err(error), Some(status));
            }
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
/// (`ManyChatError::outcome_unknown`, issue 13).
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
mod tests {
    use super::*;
    use crate::manychat::contact::{INVENTED_IDENTIFIERS, full_get_info_fixture};
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    const TOKEN: &str = "4400001:not-a-real-token";
    const SUB: &str = "5550001";

    fn sub() -> SubscriberId {
        SubscriberId::parse(SUB).expect("valid id")
    }

    fn client_for(base_url: &str) -> ManyChatClient {
        ManyChatClient::new(base_url, &Secret::new(TOKEN), ManyChatLimiter::new())
            .expect("client builds")
    }

    /// A fake ManyChat answering every request with `status` and `body`.
    async fn server_answering(status: u16, body: Value) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::any())
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .mount(&server)
            .await;
        server
    }

    async fn success_server() -> MockServer {
        server_answering(200, json!({"status": "success", "data": {}})).await
    }

    /// The one request the server received, checked for the headers every call carries.
    async fn only_request(server: &MockServer) -> wiremock::Request {
        let mut requests = server.received_requests().await.expect("recording is on");
        assert_eq!(requests.len(), 1, "exactly one request");
        let request = requests.remove(0);
        assert_eq!(
            request.headers.get("authorization").map(|v| v.as_bytes()),
            Some(format!("Bearer {TOKEN}").as_bytes())
        );
        request
    }

    async fn assert_posted(server: &MockServer, expected_path: &str, expected_body: Value) {
        let request = only_request(server).await;
        assert_eq!(request.method.as_str(), "POST");
        assert_eq!(request.url.path(), expected_path);
        assert_eq!(request.url.query(), None);
        assert_eq!(
            request.headers.get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );
        let body: Value = request.body_json().expect("JSON body");
        assert_eq!(body, expected_body);
    }

    #[tokio::test]
    async fn spec_012_verification_5_send_flow_body_carries_subscriber_and_flow() {
        let server = success_server().await;
        client_for(&server.uri())
            .send_flow(&sub(), "content20260101000000_000001")
            .await
            .expect("sent");
        assert_posted(
            &server,
            "/fb/sending/sendFlow",
            json!({"subscriber_id": 5550001, "flow_ns": "content20260101000000_000001"}),
        )
        .await;
    }

    #[tokio::test]
    async fn spec_012_verification_5_add_tag_body_carries_subscriber_and_tag_name() {
        let server = success_server().await;
        client_for(&server.uri())
            .add_tag(&sub(), "interested-foundation")
            .await
            .expect("tagged");
        assert_posted(
            &server,
            "/fb/subscriber/addTagByName",
            json!({"subscriber_id": 5550001, "tag_name": "interested-foundation"}),
        )
        .await;
    }

    #[tokio::test]
    async fn spec_012_verification_5_remove_tag_body_carries_subscriber_and_tag_name() {
        let server = success_server().await;
        client_for(&server.uri())
            .remove_tag(&sub(), "interested-foundation")
            .await
            .expect("untagged");
        assert_posted(
            &server,
            "/fb/subscriber/removeTagByName",
            json!({"subscriber_id": 5550001, "tag_name": "interested-foundation"}),
        )
        .await;
    }

    #[tokio::test]
    async fn spec_012_verification_5_set_field_body_carries_configured_value() {
        let server = success_server().await;
        client_for(&server.uri())
            .set_field(&sub(), "sales_stage", &json!("qualifying"))
            .await
            .expect("set");
        assert_posted(
            &server,
            "/fb/subscriber/setCustomFieldByName",
            json!({
                "subscriber_id": 5550001,
                "field_name": "sales_stage",
                "field_value": "qualifying"
            }),
        )
        .await;
    }

    #[tokio::test]
    async fn spec_012_verification_5_set_field_keeps_the_value_typed() {
        let server = success_server().await;
        let client = client_for(&server.uri());
        client
            .set_field(&sub(), "seats", &json!(3))
            .await
            .expect("set");
        client
            .set_field(&sub(), "opted_in", &json!(true))
            .await
            .expect("set");
        let requests = server.received_requests().await.expect("recording is on");
        let values: Vec<Value> = requests
            .iter()
            .map(|r| r.body_json::<Value>().expect("JSON")["field_value"].clone())
            .collect();
        assert_eq!(values, vec![json!(3), json!(true)]);
    }

    #[tokio::test]
    async fn spec_024_get_contact_sends_getinfo_with_the_subscriber_query() {
        let server = success_server().await;
        client_for(&server.uri())
            .get_contact(&sub(), Duration::from_millis(1500))
            .await
            .expect("read");
        let request = only_request(&server).await;
        assert_eq!(request.method.as_str(), "GET");
        assert_eq!(request.url.path(), "/fb/subscriber/getInfo");
        assert_eq!(request.url.query(), Some("subscriber_id=5550001"));
        assert!(request.body.is_empty());
    }

    #[tokio::test]
    async fn spec_024_verification_1_getinfo_identifiers_never_leave_the_client() {
        let server = server_answering(200, full_get_info_fixture()).await;
        let record = client_for(&server.uri())
            .get_contact(&sub(), Duration::from_millis(1500))
            .await
            .expect("read");
        assert_eq!(record.tags, vec!["interested_foundation", "source-ad"]);
        assert_eq!(record.field("experience"), Some(&json!("none")));
        let everything = format!("{record:?} {:?} {:?}", record.tags, record.fields);
        for identifier in INVENTED_IDENTIFIERS {
            assert!(
                !everything.contains(identifier),
                "{identifier} left the client"
            );
        }
    }

    #[tokio::test]
    async fn system_3_5_http_400_error_envelope_is_not_retryable() {
        let server = server_answering(
            400,
            json!({"status": "error", "message": "Validation error",
                   "details": {"messages": [{"message": "Tag not found"}]}}),
        )
        .await;
        let error = client_for(&server.uri())
            .add_tag(&sub(), "missing-tag")
            .await
            .expect_err("refused");
        assert_eq!(
            error,
            ManyChatError::Http {
                status: 400,
                code: None,
                endpoint: "addTagByName"
            }
        );
        assert!(!error.is_retryable());
        assert_eq!(error.kind(), "http_4xx");
    }

    #[tokio::test]
    async fn c5_a_manychat_refusal_keeps_its_code_and_never_its_text() {
        let server = server_answering(
            400,
            json!({"status": "error", "code": 2400,
                   "message": "Invalid value for Jane Quokka (+1 555 014 2267, jane@quokka.test)",
                   "details": {"messages": [{"message": "Jane Quokka already has this tag"}]}}),
        )
        .await;
        let error = client_for(&server.uri())
            .add_tag(&sub(), "vip")
            .await
            .expect_err("refused");
        assert_eq!(
            error,
            ManyChatError::Http {
                status: 400,
                code: Some(2400),
                endpoint: "addTagByName"
            }
        );
        assert_eq!(
            error.to_string(),
            "ManyChat refused addTagByName (HTTP 400, code 2400)"
        );
    }

    #[tokio::test]
    async fn system_3_5_http_429_is_retryable() {
        let server = server_answering(429, json!({"status": "error"})).await;
        let error = client_for(&server.uri())
            .send_flow(&sub(), "content1")
            .await
            .expect_err("limited");
        assert_eq!(error, ManyChatError::RateLimited);
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn system_3_5_http_500_is_retryable() {
        let server = server_answering(500, json!({})).await;
        let error = client_for(&server.uri())
            .send_flow(&sub(), "content1")
            .await
            .expect_err("server error");
        assert_eq!(error, ManyChatError::Server { status: 500 });
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn system_3_5_http_200_with_status_error_is_an_error_and_not_retryable() {
        let server = server_answering(
            200,
            json!({"status": "error", "message": "Flow is not published", "code": 3011}),
        )
        .await;
        let error = client_for(&server.uri())
            .send_flow(&sub(), "content1")
            .await
            .expect_err("a 200 carrying an error is an error");
        assert_eq!(
            error,
            ManyChatError::Api {
                status: 200,
                code: Some(3011),
                endpoint: "sendFlow"
            }
        );
        assert!(!error.is_retryable());
    }

    #[tokio::test]
    async fn system_3_5_http_200_without_success_envelope_is_undecodable() {
        let server = MockServer::start().await;
        Mock::given(path("/fb/sending/sendFlow"))
            .respond_with(ResponseTemplate::new(200).set_body_string("<html>ok</html>"))
            .mount(&server)
            .await;
        let error = client_for(&server.uri())
            .send_flow(&sub(), "content1")
            .await
            .expect_err("not an envelope");
        assert_eq!(error.kind(), "decode");
        assert!(!error.is_retryable());
    }

    #[tokio::test]
    async fn system_3_5_connection_refused_is_a_retryable_network_error() {
        // Bind to learn a free port, then close it so the connection is refused.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        drop(listener);
        let error = client_for(&format!("http://{address}"))
            .send_flow(&sub(), "content1")
            .await
            .expect_err("refused");
        assert_eq!(error, ManyChatError::Network("connect"));
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn c5_error_message_never_keeps_the_subscriber_id_or_the_field_text() {
        let server = server_answering(
            400,
            json!({"status": "error",
                   "message": "Subscriber 5550001 rejected value 'Hello Alex, see you'"}),
        )
        .await;
        let error = client_for(&server.uri())
            .set_field(&sub(), "ai_message", &json!("Hello Alex, see you"))
            .await
            .expect_err("refused");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(SUB), "{shown}");
        assert!(!shown.contains("Hello Alex"), "{shown}");
        assert!(!shown.contains("rejected value"), "{shown}");

        let escaping = server_answering(
            400,
            json!({"status": "error", "message": "bad value \"Line \\\"one\\\"\\nHello Alex\""}),
        )
        .await;
        let error = client_for(&escaping.uri())
            .set_field(&sub(), "ai_message", &json!("Line \"one\"\nHello Alex"))
            .await
            .expect_err("refused");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("Hello Alex"), "{shown}");
        assert!(!shown.contains("bad value"), "{shown}");
    }

    #[tokio::test]
    async fn spec_024_get_contact_timeout_is_honoured() {
        // Real time: reqwest's IO does not run under a paused tokio clock. Kept under 300 ms.
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"status": "success", "data": {}}))
                    .set_delay(Duration::from_millis(250)),
            )
            .mount(&server)
            .await;
        let started = std::time::Instant::now();
        let error = client_for(&server.uri())
            .get_contact(&sub(), Duration::from_millis(50))
            .await
            .expect_err("too slow");
        assert_eq!(error, ManyChatError::Timeout(Duration::from_millis(50)));
        assert!(error.is_retryable());
        assert!(
            started.elapsed() < Duration::from_millis(240),
            "gave up at the timeout, not at the server's answer: {:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn system_3_5_every_request_waits_for_the_shared_limiter() {
        let server = success_server().await;
        let limiter = ManyChatLimiter::new();
        let client = ManyChatClient::new(&server.uri(), &Secret::new(TOKEN), limiter.clone())
            .expect("client builds");
        // Another user of the same bucket takes the whole burst.
        for _ in 0..5 {
            limiter.acquire().await;
        }
        let started = std::time::Instant::now();
        client.add_tag(&sub(), "vip").await.expect("tagged");
        assert!(
            started.elapsed() >= Duration::from_millis(90),
            "the request waited for a slot: {:?}",
            started.elapsed()
        );
    }

    /// Collects everything the fmt layer writes, without timestamps (digits in a timestamp could
    /// match an identifier by chance).
    #[derive(Clone, Default)]
    struct CapturedLogs(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for CapturedLogs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// One success, one refusal quoting the id and the text, and one getInfo of the fixture.
    async fn exercise_every_log_path() {
        let ok = success_server().await;
        client_for(&ok.uri())
            .set_field(&sub(), "ai_message", &json!("Hello Alex, see you"))
            .await
            .expect("set");
        let refusing = server_answering(
            400,
            json!({"status": "error", "message": "Subscriber 5550001: 'Hello Alex, see you'"}),
        )
        .await;
        client_for(&refusing.uri())
            .set_field(&sub(), "ai_message", &json!("Hello Alex, see you"))
            .await
            .expect_err("refused");
        let info = server_answering(200, full_get_info_fixture()).await;
        client_for(&info.uri())
            .get_contact(&sub(), Duration::from_millis(1500))
            .await
            .expect("read");
    }

    #[tokio::test]
    async fn c5_client_logs_carry_endpoint_sizes_status_and_kind_only() {
        let logs = CapturedLogs::default();
        let writer = logs.clone();
        // Only this crate's events: a library's (hyper prints the server's port) could match an
        // identifier's digits by chance.
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("manychat_agent=trace"))
            .without_time()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        // A callsite first reached by a parallel test without a subscriber can cache "never"
        // while this one is being installed; once every callsite is registered, rebuilding the
        // cache makes the second pass deterministic.
        exercise_every_log_path().await;
        tracing::callsite::rebuild_interest_cache();
        logs.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
        exercise_every_log_path().await;
        drop(guard);

        let text =
            String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
        assert!(text.contains("setCustomFieldByName"), "{text}");
        assert!(text.contains("http_4xx"), "{text}");
        assert!(text.contains("getInfo"), "{text}");
        assert!(text.contains("request_bytes"), "{text}");
        let forbidden = [
            SUB,
            "Hello Alex",
            TOKEN,
            "not-a-real-token",
            "subscriber_id=",
        ];
        for needle in forbidden.iter().chain(INVENTED_IDENTIFIERS.iter()) {
            assert!(!text.contains(needle), "{needle} in the logs: {text}");
        }
    }

    #[tokio::test]
    async fn issue_21_item_5_error_code_is_kept_in_the_error_its_text_and_the_log_line() {
        let server = server_answering(
            400,
            json!({"status": "error", "message": "Flow is not published", "code": 3011,
                   "details": {"messages": [{"message": "Flow is not published"}]}}),
        )
        .await;
        let logs = CapturedLogs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("manychat_agent=trace"))
            .without_time()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        // Twice, as in the test above: the second pass runs with every callsite registered.
        let _ = client_for(&server.uri())
            .send_flow(&sub(), "content1")
            .await;
        tracing::callsite::rebuild_interest_cache();
        logs.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let error = client_for(&server.uri())
            .send_flow(&sub(), "content1")
            .await
            .expect_err("refused");
        drop(guard);
        assert_eq!(error.code(), Some(3011));
        assert_eq!(
            error.to_string(),
            "ManyChat refused sendFlow (HTTP 400, code 3011)"
        );
        let text =
            String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
        assert!(text.contains("code=3011"), "{text}");

        // A long number in `code` is the shape of an id, not a code: dropped.
        let odd = server_answering(
            400,
            json!({"status": "error", "message": "x", "code": 5550001}),
        )
        .await;
        let error = client_for(&odd.uri())
            .send_flow(&sub(), "content1")
            .await
            .expect_err("refused");
        assert_eq!(error.code(), None);
    }

    #[tokio::test]
    async fn issue_21_item_2_account_reads_flows_tags_and_fields_with_gets() {
        let server = MockServer::start().await;
        for (route, data) in [
            (
                "/fb/page/getFlows",
                json!({"flows": [{"ns": "content1", "name": "Guide", "folder_id": 3}], "folders": []}),
            ),
            ("/fb/page/getTags", json!([{"id": 1, "name": "vip"}])),
            (
                "/fb/page/getCustomFields",
                json!([{"id": 1, "name": "ai_message", "type": "text", "description": ""}]),
            ),
        ] {
            Mock::given(method("GET"))
                .and(path(route))
                .respond_with(
                    ResponseTemplate::new(200)
                        .set_body_json(json!({"status": "success", "data": data})),
                )
                .mount(&server)
                .await;
        }
        let account = client_for(&server.uri()).account().await.expect("read");
        assert_eq!(account.flows[0].ns, "content1");
        assert_eq!(account.tags, vec!["vip"]);
        assert_eq!(account.fields[0].kind, "text");
        let requests = server.received_requests().await.expect("recording is on");
        assert_eq!(requests.len(), 3);
        assert!(requests.iter().all(|r| r.method.as_str() == "GET"));
    }

    #[test]
    fn client_refuses_a_bad_base_url_or_token_and_never_prints_the_token() {
        let limiter = ManyChatLimiter::new();
        let refused = |base: &str, token: &str| {
            ManyChatClient::new(base, &Secret::new(token), limiter.clone())
                .expect_err("refused")
                .kind()
        };
        assert_eq!(refused("api.manychat.com", TOKEN), "config");
        assert_eq!(refused("ftp://api.manychat.com", TOKEN), "config");
        assert_eq!(refused("https://api.manychat.com", "  "), "config");
        assert_eq!(refused("https://api.manychat.com", "bad\ntoken"), "config");

        let client = ManyChatClient::new("https://api.manychat.com/", &Secret::new(TOKEN), limiter)
            .expect("valid");
        let debug = format!("{client:?}");
        assert!(!debug.contains("not-a-real-token"), "{debug}");
        assert_eq!(
            client.url(Endpoint::SendFlow),
            "https://api.manychat.com/fb/sending/sendFlow"
        );
    }
}
