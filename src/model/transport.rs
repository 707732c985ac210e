//! The HTTP exchange every provider shares: one POST of a JSON body, at most one retry, and the
//! mapping of failures to `ModelError`.
//!
//! Invariants:
//! - A request is sent at most twice. The race gives a turn about eight seconds, so a second
//!   retry would rarely finish in time; the caller's deadline (dropping the future) bounds the
//!   whole exchange, retry wait included.
//! - Only 408, 429 and 5xx are retried, and only when the wait is at most one second
//!   (`retry-after-ms`, else `retry-after` in seconds, else a short default).
//! - Nothing from a request or response body reaches a log line or an error: logs carry sizes and
//!   status codes; an error body is summarised to its `error.type`/`error.code` token, and only
//!   when that token looks like an identifier (free text may quote the prompt).

use std::time::Duration;

use hyper::body::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, StatusCode};
use serde_json::Value;

use super::ModelError;

/// How long establishing a connection may take. The model call as a whole is bounded by the
/// caller (the race's abort), not here.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A last-resort bound for callers without their own deadline (the eval command, a slow local
/// Ollama). The serving path aborts much earlier (`MODEL_ABORT_MS`, 30 s by default); this bound
/// is far above it so that an abort is always the caller's, never a transport timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The wait before the one retry when the provider does not say how long to wait.
const DEFAULT_RETRY_WAIT: Duration = Duration::from_millis(250);

/// The longest provider-requested wait we honour; a longer one fails the call instead.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(1);

/// Builds the one HTTP client a provider keeps for its lifetime (connection reuse).
pub(crate) fn build_client() -> Result<Client, ModelError> {
    Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|_| ModelError::Config("the HTTP client for the model could not be built".into()))
}

/// The headers of a request that carries a credential, `name: value` alone: refused if `value`
/// (from `variable`) is not a valid header value, and marked sensitive so HTTP-level debugging
/// never prints it.
pub(crate) fn secret_headers(
    name: HeaderName,
    value: &str,
    variable: &str,
) -> Result<HeaderMap, ModelError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        ModelError::Config(format!(
            "{variable} contains characters that are not allowed in an HTTP header"
        ))
    })?;
    header.set_sensitive(true);
    Ok(HeaderMap::from_iter([(name, header)]))
}

/// Checks a base URL from the environment and strips its trailing slashes, so `{base}/path`
/// never holds `//`.
pub(crate) fn normalise_base_url(raw: &str, variable: &str) -> Result<String, ModelError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed)
        .map_err(|_| ModelError::Config(format!("{variable} is not a valid URL")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ModelError::Config(format!(
            "{variable} must be an http or https URL"
        )));
    }
    Ok(trimmed.to_owned())
}

/// Sends `body` as JSON to `url` and returns the response body of a 2xx answer.
///
/// `provider` names the provider in log lines (`openai`, `anthropic`, `google`, `ollama`).
/// The body is serialised once and its tree dropped before the request goes: a call waiting on
/// its provider holds the bytes alone, and a retry sends the same bytes again.
pub(crate) async fn post_json(
    client: &Client,
    provider: &'static str,
    url: &str,
    headers: &HeaderMap,
    body: Value,
) -> Result<Vec<u8>, ModelError> {
    let payload = serialise(body)?;
    let mut attempt = 1u8;
    loop {
        let started = tokio::time::Instant::now();
        let response = client
            .post(url)
            .headers(headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(payload.clone())
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        let retry_wait = retry_wait(status, response.headers());
        let bytes = response.bytes().await.map_err(transport_error)?;
        tracing::debug!(
            provider,
            status = status.as_u16(),
            attempt,
            request_bytes = payload.len(),
            response_bytes = bytes.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "model http exchange"
        );
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        if attempt == 1
            && let Some(wait) = retry_wait
        {
            tracing::warn!(
                provider,
                status = status.as_u16(),
                wait_ms = wait.as_millis() as u64,
                "model call failed, retrying once"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
            continue;
        }
        return Err(status_error(status, &bytes));
    }
}

/// `body` as JSON bytes, sized to fit (a waiting call keeps them), its tree dropped.
fn serialise(body: Value) -> Result<Bytes, ModelError> {
    let mut payload = serde_json::to_vec(&body)
        .map_err(|_| ModelError::Malformed("request body could not be serialised".into()))?;
    drop(body);
    payload.shrink_to_fit();
    Ok(Bytes::from(payload))
}

/// The wait before retrying a failed answer, or `None` when it must not be retried: the status
/// is not transient, or the provider asks for longer than we can afford inside the race.
pub(crate) fn retry_wait(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    let transient = status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error();
    if !transient {
        return None;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let wait = if let Some(ms) = header("retry-after-ms") {
        seconds_from(ms.trim(), 1000.0)?
    } else if let Some(secs) = header("retry-after") {
        // An HTTP-date is not parsed: providers use it for long waits, which we would refuse.
        seconds_from(secs.trim(), 1.0)?
    } else {
        DEFAULT_RETRY_WAIT
    };
    (wait <= MAX_RETRY_WAIT).then_some(wait)
}

/// `value / per_second` seconds, for a non-negative finite number; `None` otherwise.
fn seconds_from(value: &str, per_second: f64) -> Option<Duration> {
    let n: f64 = value.parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(n / per_second).ok()
}

/// A non-2xx answer as an error. 429 is `RateLimited`; anything else carries the status and the
/// provider's error token.
pub(crate) fn status_error(status: StatusCode, body: &[u8]) -> ModelError {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return ModelError::RateLimited;
    }
    ModelError::Http {
        status: status.as_u16(),
        kind: error_kind(body),
    }
}

/// The provider's error token: `error.type`, else `error.status` (Google's `INVALID_ARGUMENT`,
/// `RESOURCE_EXHAUSTED`…), else `error.code` (OpenAI, Anthropic and Google all nest it under
/// `error`), if it looks like an identifier; `"unknown"` otherwise. Free text is never
/// returned because a provider's message may quote the request.
pub(crate) fn error_kind(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return "unknown".into();
    };
    let error = &value["error"];
    [&error["type"], &error["status"], &error["code"]]
        .into_iter()
        .find_map(|candidate| match candidate {
            Value::String(s) if is_identifier(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "unknown".into())
}

fn is_identifier(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// A failure below HTTP, summarised to its kind. reqwest's own message is not used: it carries
/// the URL, which for a compatible server may hold a credential in its query.
fn transport_error(error: reqwest::Error) -> ModelError {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_body() || error.is_decode() {
        "response body could not be read"
    } else {
        "request failed"
    };
    ModelError::Transport(kind.into())
}

/// Reads a field that a compatible server may send as `null` as its default (an empty list,
/// zero): `#[serde(default, deserialize_with = "null_as_default")]`.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    let value: Option<T> = serde::Deserialize::deserialize(deserializer)?;
    Ok(value.unwrap_or_default())
}

/// A conversation as the provider's role messages: each entry is a role and its blocks (parts);
/// empty entries are dropped and consecutive entries of one role merged into one message, its
/// blocks under `content_key` (Anthropic's `content`, Gemini's `parts`), as both APIs want
/// the results of one step in a single message.
pub(crate) fn merged_by_role(
    entries: impl IntoIterator<Item = (&'static str, Vec<Value>)>,
    content_key: &str,
) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (role, blocks) in entries {
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, blocks)| serde_json::json!({"role": role, content_key: blocks}))
        .collect()
}

/// A temperature as the JSON number a person would write: `0.3f32` widened to `f64` would print
/// as `0.30000001192092896`.
pub(crate) fn temperature_json(temperature: f32) -> Value {
    let widened: f64 = temperature
        .to_string()
        .parse()
        .unwrap_or(f64::from(temperature));
    serde_json::Number::from_f64(widened)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_request_body_is_sent_as_its_json_text_exactly() {
        let body =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "é\n"}]});
        let expected = serde_json::to_vec(&body).unwrap();
        assert_eq!(&serialise(body).unwrap()[..], &expected[..]);
    }

    #[test]
    fn retry_wait_honours_retry_after_ms_then_retry_after_then_default() {
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(
            retry_wait(too_many, &headers(&[("retry-after-ms", "120")])),
            Some(Duration::from_millis(120))
        );
        assert_eq!(
            retry_wait(too_many, &headers(&[("retry-after", "1")])),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            retry_wait(StatusCode::BAD_GATEWAY, &HeaderMap::new()),
            Some(DEFAULT_RETRY_WAIT)
        );
        assert_eq!(
            retry_wait(StatusCode::REQUEST_TIMEOUT, &HeaderMap::new()),
            Some(DEFAULT_RETRY_WAIT)
        );
    }

    #[test]
    fn retry_wait_refuses_long_waits_dates_and_non_transient_statuses() {
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(
            retry_wait(too_many, &headers(&[("retry-after", "5")])),
            None
        );
        assert_eq!(
            retry_wait(too_many, &headers(&[("retry-after-ms", "1500")])),
            None
        );
        assert_eq!(
            retry_wait(
                too_many,
                &headers(&[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")])
            ),
            None
        );
        assert_eq!(retry_wait(StatusCode::BAD_REQUEST, &HeaderMap::new()), None);
        assert_eq!(
            retry_wait(StatusCode::UNAUTHORIZED, &HeaderMap::new()),
            None
        );
    }

    #[test]
    fn c5_error_kind_takes_type_then_code_and_never_free_text() {
        assert_eq!(
            error_kind(br#"{"error":{"type":"invalid_request_error","code":"x"}}"#),
            "invalid_request_error"
        );
        assert_eq!(
            error_kind(br#"{"error":{"type":null,"code":"context_length_exceeded"}}"#),
            "context_length_exceeded"
        );
        assert_eq!(
            error_kind(br#"{"type":"error","error":{"type":"overloaded_error"}}"#),
            "overloaded_error"
        );
        assert_eq!(
            error_kind(br#"{"error":{"type":"the contact said Hi I am Jane Doe"}}"#),
            "unknown"
        );
        assert_eq!(error_kind(br#"{"error":"model not found"}"#), "unknown");
        assert_eq!(
            error_kind(br#"{"error":{"code":400,"message":"x","status":"INVALID_ARGUMENT"}}"#),
            "INVALID_ARGUMENT"
        );
        assert_eq!(error_kind(b"<html>bad gateway</html>"), "unknown");
    }

    #[test]
    fn temperature_is_written_as_its_decimal_value() {
        assert_eq!(temperature_json(0.3).to_string(), "0.3");
        assert_eq!(temperature_json(1.0).to_string(), "1.0");
    }

    #[test]
    fn base_url_loses_trailing_slashes_and_must_be_http() {
        assert_eq!(
            normalise_base_url("https://api.example.test/v1/", "X_BASE_URL").unwrap(),
            "https://api.example.test/v1"
        );
        let err = normalise_base_url("ftp://example.test", "X_BASE_URL").unwrap_err();
        assert!(err.to_string().contains("X_BASE_URL"));
        let err = normalise_base_url("not a url", "X_BASE_URL").unwrap_err();
        assert!(err.to_string().contains("X_BASE_URL"));
    }
}
