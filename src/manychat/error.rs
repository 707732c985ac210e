//! `ManyChatError`: every way a ManyChat request can fail, and whether trying again can help.
//!
//! Invariants:
//! - No variant carries a subscriber id, a token, a request body or a URL (the getInfo URL holds
//!   the subscriber id), so an error can be logged whole (C5).
//! - ManyChat's own error text is never kept (C5): a refusal can quote the contact's name, phone
//!   or email, or the value written, and no scrubbing can know every shape of personal data. An
//!   error keeps what is ours or a number: the endpoint's name, the HTTP status and ManyChat's
//!   numeric error `code` (what ManyChat's support and documentation search by), under a fixed
//!   description, the way model errors keep only a status and a fixed kind.
//! - [`ManyChatError::is_retryable`] is the single classification the outbox uses (SYSTEM 3.5):
//!   429, 5xx, network and timeout retry; any other 4xx, an error in a 200 body and an
//!   undecodable body fail at once.
//! - [`ManyChatError::outcome_unknown`] tells a request ManyChat may have performed without
//!   answering (a timeout, a connection lost after the request went out) from one it surely did
//!   not perform (a refused connection, any answer): the outbox retries a trigger of the first
//!   kind at most once.

use std::time::Duration;

/// ManyChat's documented limit of sendFlow requests per contact per hour.
pub const FLOW_SENDS_PER_HOUR: u32 = 100;

/// `, code N` when ManyChat named an error code, else nothing.
fn code_suffix(code: Option<i64>) -> String {
    code.map(|c| format!(", code {c}")).unwrap_or_default()
}

/// A fixed explanation of a status an operator can act on without ManyChat's message.
fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => ": the API token was refused (MANYCHAT_API_TOKEN)",
        _ => "",
    }
}

/// A ManyChat request that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManyChatError {
    /// A 4xx other than 429 (ManyChat's error envelope comes with HTTP 400), or an unexpected
    /// non-success status such as a redirect. `code` is the envelope's numeric `code` (e.g.
    /// 3011); `endpoint` is the API method's name (`sendFlow`). ManyChat's message is not kept.
    #[error("ManyChat refused {endpoint} (HTTP {status}{}){}", code_suffix(*.code), status_hint(*.status))]
    Http {
        status: u16,
        code: Option<i64>,
        endpoint: &'static str,
    },
    /// A 2xx whose body says `"status": "error"`: ManyChat refused the request.
    #[error("ManyChat reported an error for {endpoint} (HTTP {status}{})", code_suffix(*.code))]
    Api {
        status: u16,
        code: Option<i64>,
        endpoint: &'static str,
    },
    /// The contact already had [`FLOW_SENDS_PER_HOUR`] flows sent in the past hour,
    /// ManyChat's documented per-contact limit for sendFlow; the trigger was not sent.
    #[error(
        "sendFlow refused before sending: the contact already had {FLOW_SENDS_PER_HOUR} flows in the past hour (ManyChat's per-contact limit)"
    )]
    FlowCapReached,
    /// HTTP 429.
    #[error("ManyChat rate limited the request (HTTP 429)")]
    RateLimited,
    /// HTTP 5xx.
    #[error("ManyChat server error (HTTP {status})")]
    Server { status: u16 },
    /// The request did not complete at the transport level (refused, reset, DNS, TLS).
    #[error("network error talking to ManyChat ({0})")]
    Network(&'static str),
    /// No answer within the request's timeout.
    #[error("ManyChat did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// A success status whose body is not ManyChat's success envelope.
    #[error("ManyChat's response could not be decoded ({0})")]
    Decode(&'static str),
    /// The client could not be built (an API token that is not a valid header value, a base URL
    /// that is not http(s)).
    #[error("invalid ManyChat client configuration: {0}")]
    Config(&'static str),
}

impl ManyChatError {
    /// Whether the same request may succeed later (SYSTEM 3.5): 429, 5xx, network and timeout.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimited | Self::Server { .. } | Self::Network(_) | Self::Timeout(_) => true,
            Self::Http { .. }
            | Self::Api { .. }
            | Self::FlowCapReached
            | Self::Decode(_)
            | Self::Config(_) => false,
        }
    }

    /// Whether ManyChat may have performed the request although it did not say so: no answer
    /// within the timeout, or the connection lost once the request could have reached it. A
    /// refused connection never reached ManyChat, and an answer (even an error) is an outcome.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            Self::Timeout(_) => true,
            Self::Network(stage) => *stage != "connect",
            Self::Http { .. }
            | Self::Api { .. }
            | Self::RateLimited
            | Self::Server { .. }
            | Self::FlowCapReached
            | Self::Decode(_)
            | Self::Config(_) => false,
        }
    }

    /// A fixed label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http { status, .. } if (400..500).contains(status) => "http_4xx",
            Self::Http { .. } => "http_other",
            Self::Api { .. } => "api_error",
            Self::RateLimited => "rate_limited",
            Self::Server { .. } => "http_5xx",
            Self::Network(_) => "network",
            Self::Timeout(_) => "timeout",
            Self::Decode(_) => "decode",
            Self::Config(_) => "config",
            Self::FlowCapReached => "flow_cap",
        }
    }

    /// The HTTP status ManyChat answered with, when it answered.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Http { status, .. } | Self::Api { status, .. } | Self::Server { status } => {
                Some(*status)
            }
            Self::RateLimited => Some(429),
            Self::Network(_)
            | Self::Timeout(_)
            | Self::Decode(_)
            | Self::Config(_)
            | Self::FlowCapReached => None,
        }
    }

    /// ManyChat's numeric error `code`, when its error envelope carried one.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Http { code, .. } | Self::Api { code, .. } => *code,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_3_5_retry_classification_per_error_kind() {
        let table = [
            (
                ManyChatError::Http {
                    status: 400,
                    code: None,
                    endpoint: "sendFlow",
                },
                false,
                "http_4xx",
            ),
            (
                ManyChatError::Api {
                    status: 200,
                    code: Some(3011),
                    endpoint: "sendFlow",
                },
                false,
                "api_error",
            ),
            (ManyChatError::RateLimited, true, "rate_limited"),
            (ManyChatError::Server { status: 502 }, true, "http_5xx"),
            (ManyChatError::Network("connect"), true, "network"),
            (
                ManyChatError::Timeout(Duration::from_secs(10)),
                true,
                "timeout",
            ),
            (ManyChatError::Decode("not json"), false, "decode"),
            (ManyChatError::Config("token"), false, "config"),
            (ManyChatError::FlowCapReached, false, "flow_cap"),
        ];
        for (error, retryable, kind) in table {
            assert_eq!(error.is_retryable(), retryable, "{kind}");
            assert_eq!(error.kind(), kind);
        }
    }

    #[test]
    fn only_a_timeout_or_a_lost_connection_leaves_the_outcome_unknown() {
        let unknown = [
            ManyChatError::Timeout(Duration::from_secs(10)),
            ManyChatError::Network("response body"),
            ManyChatError::Network("request"),
            ManyChatError::Network("transport"),
        ];
        for error in unknown {
            assert!(error.outcome_unknown(), "{error:?}");
        }
        let known = [
            ManyChatError::Network("connect"),
            ManyChatError::RateLimited,
            ManyChatError::Server { status: 503 },
            ManyChatError::Http {
                status: 400,
                code: None,
                endpoint: "sendFlow",
            },
            ManyChatError::Api {
                status: 200,
                code: None,
                endpoint: "sendFlow",
            },
            ManyChatError::FlowCapReached,
            ManyChatError::Decode("not json"),
        ];
        for error in known {
            assert!(!error.outcome_unknown(), "{error:?}");
        }
    }
}
