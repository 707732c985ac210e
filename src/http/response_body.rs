//! A JSON response body that reports when hyper has finished with it, so staged actions run
//! only after the Dynamic Block response has been written (012 § Actions follow the text).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

/// A response body's JSON, written into a buffer sized for a Dynamic Block (about 600 bytes
/// with one message), so it is not regrown several times on the way.
pub fn to_json(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(1024);
    serde_json::to_writer(&mut bytes, value)?;
    Ok(bytes)
}

/// The body, and a receiver that resolves once the body was fully sent or dropped.
pub fn json_with_notice(value: &impl serde::Serialize) -> (Response, oneshot::Receiver<()>) {
    let (tx, rx) = oneshot::channel();
    let bytes = Bytes::from(to_json(value).unwrap_or_else(|_| b"{}".to_vec()));
    let body = NoticeBody {
        bytes: Some(bytes),
        notice: Some(tx),
    };
    let mut response = Body::new(body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    (response, rx)
}

struct NoticeBody {
    bytes: Option<Bytes>,
    notice: Option<oneshot::Sender<()>>,
}

impl http_body::Body for NoticeBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        match self.bytes.take() {
            Some(bytes) => Poll::Ready(Some(Ok(http_body::Frame::data(bytes)))),
            None => {
                if let Some(notice) = self.notice.take() {
                    let _ = notice.send(());
                }
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.bytes {
            Some(bytes) => http_body::SizeHint::with_exact(bytes.len() as u64),
            None => http_body::SizeHint::with_exact(0),
        }
    }
}

impl Drop for NoticeBody {
    fn drop(&mut self) {
        if let Some(notice) = self.notice.take() {
            let _ = notice.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use http_body::Body as _;

    use super::*;

    fn body() -> (NoticeBody, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let body = NoticeBody {
            bytes: Some(Bytes::from_static(b"{\"version\":\"v2\"}")),
            notice: Some(tx),
        };
        (body, rx)
    }

    #[tokio::test]
    async fn spec_012_verification_6_notice_fires_only_after_the_last_frame_is_taken() {
        let (mut body, mut notice) = body();
        let mut body = Pin::new(&mut body);
        assert!(notice.try_recv().is_err(), "nothing sent yet");
        let frame = poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        let data = frame.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&data[..], b"{\"version\":\"v2\"}");
        assert!(
            notice.try_recv().is_err(),
            "the data frame is out, but hyper has not finished with the body"
        );
        assert!(body.is_end_stream());
        assert!(poll_fn(|cx| body.as_mut().poll_frame(cx)).await.is_none());
        assert_eq!(notice.try_recv(), Ok(()));
    }

    #[tokio::test]
    async fn spec_012_verification_6_notice_fires_when_the_body_is_dropped_unsent() {
        let (body, mut notice) = body();
        assert!(notice.try_recv().is_err());
        drop(body);
        assert_eq!(notice.try_recv(), Ok(()));
    }
}
