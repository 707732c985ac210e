//! How a request's body is framed, checked before any route sees it.
//!
//! A body is framed by `Content-Length`, or by `Transfer-Encoding: chunked` and nothing else.
//! A proxy in front and this server must agree on where a request ends, or bytes of one body can
//! be read here as a second request (request smuggling): so a `Transfer-Encoding` that is not
//! exactly one `chunked` (`identity, chunked`, `gzip, chunked`, two header lines, …) is refused
//! with a 400 that names the header, and the connection is closed without reading the body.
//!
//! `Content-Length` beside `Transfer-Encoding: chunked` never reaches this check: hyper frames
//! such a body by its chunks (RFC 9112 § 6.3), drops the length and marks the connection to
//! close, so the route answers that one request as usual and nothing after the chunks is read as
//! another (`tests/api/hardening.rs` holds both). The check below still refuses the pair should
//! it ever arrive.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::json;

/// The 400 for a request whose framing is refused, or `None` when it is plain.
pub fn refusal(headers: &HeaderMap) -> Option<Response<Body>> {
    let mut encodings = headers.get_all(header::TRANSFER_ENCODING).iter();
    let first = encodings.next()?;
    let exactly_chunked = first
        .to_str()
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("chunked"));
    let message = if !exactly_chunked || encodings.next().is_some() {
        "transfer-encoding: only chunked is accepted"
    } else if headers.contains_key(header::CONTENT_LENGTH) {
        "transfer-encoding: not accepted with content-length"
    } else {
        return None;
    };
    let body =
        json!({"error": "invalid_request", "field": "transfer-encoding", "message": message});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn framing_only_exactly_chunked_is_accepted_as_a_transfer_encoding() {
        for plain in [
            headers(&[]),
            headers(&[("content-length", "12")]),
            headers(&[("transfer-encoding", "chunked")]),
            headers(&[("transfer-encoding", " Chunked ")]),
        ] {
            assert!(refusal(&plain).is_none(), "{plain:?}");
        }
        for refused in [
            headers(&[("transfer-encoding", "identity, chunked")]),
            headers(&[("transfer-encoding", "gzip, chunked")]),
            headers(&[
                ("transfer-encoding", "chunked"),
                ("transfer-encoding", "chunked"),
            ]),
            headers(&[("transfer-encoding", "identity")]),
            headers(&[("transfer-encoding", "chunked"), ("content-length", "5")]),
        ] {
            let response = refusal(&refused).unwrap_or_else(|| panic!("{refused:?}"));
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            assert_eq!(response.headers()[header::CONNECTION], "close");
        }
    }
}
