//! The two directions of body streaming: [`request_body`] pumps the client's body frames into a
//! reqwest body as they arrive (never buffering a whole upload), and [`forward_response`] forwards the
//! upstream body chunk by chunk (an SSE event goes out as soon as its bytes arrive) under the size cap
//! and the idle and total timeouts, stopping the upstream transfer as soon as the client goes away.

use bytes::Bytes;
use futures_util::StreamExt;
use outpost_proto::pb;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::{Status, Streaming};

use super::error::HttpError;

/// Frames buffered between the client's stream and the upstream request body.
const BODY_CHANNEL: usize = 8;

/// A reqwest body fed by the remaining frames of `inbound`. The pump task ends at `end_body`; a
/// half-close before it or a stream error fails the upstream request body, so a truncated upload is
/// never presented as complete.
pub fn request_body(mut inbound: Streaming<pb::FetchRequest>) -> reqwest::Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(BODY_CHANNEL);
    tokio::spawn(async move {
        while let Some(frame) = inbound.next().await {
            let chunk = match frame.map(|f| f.frame) {
                Ok(Some(pb::fetch_request::Frame::Body(data))) => Ok(data),
                Ok(Some(pb::fetch_request::Frame::EndBody(_))) => return,
                Ok(Some(pb::fetch_request::Frame::Head(_)) | None) => {
                    Err(std::io::Error::other(HttpError::Invalid {
                        field: "frame",
                        reason: "only body frames may follow the head",
                    }))
                }
                Err(status) => Err(std::io::Error::other(HttpError::RequestBody(status))),
            };
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
        }
        let aborted = HttpError::Invalid {
            field: "frame",
            reason: "the request stream ended before end_body",
        };
        let _ = tx.send(Err(std::io::Error::other(aborted))).await;
    });
    reqwest::Body::wrap_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Limits applied while forwarding a response body.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Bytes allowed.
    pub max_bytes: u64,
    /// Longest wait for the next chunk.
    pub idle: std::time::Duration,
    /// End of the whole exchange.
    pub deadline: Instant,
    /// The total timeout, for the error message.
    pub total: std::time::Duration,
}

type Outbound = mpsc::Sender<Result<pb::FetchResponse, Status>>;

/// Forwards `response`'s body to `tx` as body frames, then an end frame. Returns when the body is done,
/// a limit is hit, or the client has gone (the response is then dropped, which aborts the upstream
/// transfer).
pub async fn forward_response(response: reqwest::Response, tx: Outbound, limits: BodyLimits) {
    // Each upstream chunk goes out as it is, one message per chunk: `Bytes` all the way, no copy
    // (merging ready chunks cost a copy and measured slower), and an SSE event leaves as soon as it
    // arrives.
    let mut body = response.bytes_stream();
    let mut sent = 0u64;
    let result = loop {
        let next = tokio::select! {
            () = tx.closed() => {
                tracing::debug!(sent, "client went away; aborting upstream transfer");
                return;
            }
            () = tokio::time::sleep_until(limits.deadline) => {
                break Err(HttpError::Timeout { which: "total", after: limits.total });
            }
            next = tokio::time::timeout(limits.idle, body.next()) => next,
        };
        let data = match next {
            Err(_) => {
                break Err(HttpError::Timeout {
                    which: "idle",
                    after: limits.idle,
                });
            }
            Ok(None) => break Ok(()),
            Ok(Some(Err(err))) => break Err(HttpError::Upstream(err)),
            Ok(Some(Ok(data))) => data,
        };
        sent += data.len() as u64;
        if sent > limits.max_bytes {
            break Err(HttpError::ResponseTooLarge {
                limit: limits.max_bytes,
            });
        }
        if !data.is_empty() {
            let frame = pb::fetch_response::Frame::Body(data);
            if tx
                .send(Ok(pb::FetchResponse { frame: Some(frame) }))
                .await
                .is_err()
            {
                return;
            }
        }
    };
    let end = match &result {
        Ok(()) => pb::FetchEnd {
            error: String::new(),
            body_bytes: sent,
            error_code: 0,
        },
        Err(err) => {
            tracing::debug!(cause = %err.client_message(), "fetch ended with an error");
            pb::FetchEnd {
                error: err.client_message(),
                body_bytes: sent,
                error_code: err.code() as i32,
            }
        }
    };
    let frame = pb::fetch_response::Frame::End(end);
    let _ = tx.send(Ok(pb::FetchResponse { frame: Some(frame) })).await;
}
