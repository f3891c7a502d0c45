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

/// Most already-buffered upstream chunks merged into one body frame.
const READY_CHUNKS: usize = 32;

/// Concatenates ready chunks up to the first error, which is returned separately.
fn merge(mut chunks: Vec<reqwest::Result<Bytes>>) -> (Bytes, Option<reqwest::Error>) {
    if chunks.len() == 1 {
        // A lone chunk becomes the frame as it is: `Bytes` all the way, no copy.
        return match chunks.pop() {
            Some(Ok(bytes)) => (bytes, None),
            Some(Err(err)) => (Bytes::new(), Some(err)),
            None => (Bytes::new(), None),
        };
    }
    let size = chunks
        .iter()
        .map(|c| c.as_ref().map_or(0, Bytes::len))
        .sum();
    let mut data = bytes::BytesMut::with_capacity(size);
    for chunk in chunks {
        match chunk {
            Ok(bytes) => data.extend_from_slice(&bytes),
            Err(err) => return (data.freeze(), Some(err)),
        }
    }
    (data.freeze(), None)
}

/// Forwards `response`'s body to `tx` as body frames, then an end frame. Returns when the body is done,
/// a limit is hit, or the client has gone (the response is then dropped, which aborts the upstream
/// transfer).
pub async fn forward_response(response: reqwest::Response, tx: Outbound, limits: BodyLimits) {
    // Chunks that are already buffered go out as one message (never waiting for more), which keeps
    // per-message costs off bulk downloads while an SSE event still leaves as soon as it arrives.
    let mut body = response.bytes_stream().ready_chunks(READY_CHUNKS);
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
        let chunks = match next {
            Err(_) => {
                break Err(HttpError::Timeout {
                    which: "idle",
                    after: limits.idle,
                });
            }
            Ok(None) => break Ok(()),
            Ok(Some(chunks)) => chunks,
        };
        let (data, failure) = merge(chunks);
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
        if let Some(err) = failure {
            break Err(HttpError::Upstream(err));
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
