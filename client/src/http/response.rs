//! [`HttpResponse`] and its streaming [`ResponseBody`].

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use outpost_proto::pb;
use tonic::Streaming;

use super::error::HttpClientError;

/// A response whose head has arrived; the body streams.
#[derive(Debug)]
pub struct HttpResponse {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// URL that produced this response (after followed redirects).
    pub final_url: String,
    /// Redirects followed.
    pub redirects: u32,
    /// The body, as it arrives. Dropping it cancels the call and aborts the upstream transfer.
    pub body: ResponseBody,
}

impl HttpResponse {
    pub(super) fn from_head(
        head: pb::ResponseHead,
        inbound: Streaming<pb::FetchResponse>,
    ) -> Result<Self, HttpClientError> {
        let status = u16::try_from(head.status)
            .ok()
            .and_then(|s| StatusCode::from_u16(s).ok())
            .ok_or(HttpClientError::Protocol("invalid status code"))?;
        let mut headers = HeaderMap::with_capacity(head.headers.len());
        for h in head.headers {
            let name = HeaderName::from_bytes(h.name.as_bytes())
                .map_err(|_| HttpClientError::Protocol("invalid response header name"))?;
            let value = HeaderValue::from_bytes(&h.value)
                .map_err(|_| HttpClientError::Protocol("invalid response header value"))?;
            headers.append(name, value);
        }
        Ok(Self {
            status,
            headers,
            final_url: head.final_url,
            redirects: head.redirects,
            body: ResponseBody {
                inbound: Some(inbound),
            },
        })
    }

    /// The whole body, refusing more than `limit` bytes.
    ///
    /// # Errors
    /// [`HttpClientError::TooLarge`] past `limit`; transfer failures.
    pub async fn bytes(self, limit: u64) -> Result<Bytes, HttpClientError> {
        self.body.collect(limit).await
    }
}

/// The streaming body of an [`HttpResponse`]: yields chunks as the executor forwards them, ends at the
/// executor's end frame, and fails with [`HttpClientError::Transfer`] when the transfer failed.
#[derive(Debug)]
pub struct ResponseBody {
    inbound: Option<Streaming<pb::FetchResponse>>,
}

impl ResponseBody {
    /// Collects the body, refusing more than `limit` bytes.
    ///
    /// # Errors
    /// [`HttpClientError::TooLarge`] past `limit`; transfer failures.
    pub async fn collect(mut self, limit: u64) -> Result<Bytes, HttpClientError> {
        use futures_util::StreamExt;
        let mut out = Vec::new();
        while let Some(chunk) = self.next().await {
            let chunk = chunk?;
            if (out.len() + chunk.len()) as u64 > limit {
                return Err(HttpClientError::TooLarge { limit });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(out))
    }
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, HttpClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(inbound) = self.inbound.as_mut() else {
            return Poll::Ready(None);
        };
        let item = match Pin::new(inbound).poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(item) => item,
        };
        let frame = match item {
            None => {
                self.inbound = None;
                return Poll::Ready(Some(Err(HttpClientError::Protocol(
                    "the response ended without an end frame",
                ))));
            }
            Some(Err(status)) => {
                self.inbound = None;
                return Poll::Ready(Some(Err(status.into())));
            }
            Some(Ok(message)) => message.frame,
        };
        match frame {
            Some(pb::fetch_response::Frame::Body(data)) => Poll::Ready(Some(Ok(data))),
            Some(pb::fetch_response::Frame::End(end)) => {
                self.inbound = None;
                if end.error.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(HttpClientError::Transfer {
                        message: end.error,
                        code: tonic::Code::from_i32(end.error_code),
                        body_bytes: end.body_bytes,
                    })))
                }
            }
            Some(pb::fetch_response::Frame::Head(_)) | None => {
                self.inbound = None;
                Poll::Ready(Some(Err(HttpClientError::Protocol(
                    "unexpected frame in the response body",
                ))))
            }
        }
    }
}
