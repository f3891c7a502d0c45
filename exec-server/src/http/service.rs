//! [`HttpService`]: the thin tonic implementation of `outpost.v1.Http`. `Fetch` converts the head,
//! takes a per-connection slot, waits for the upstream response head (so a refusal or a connect failure
//! is the call's status), then streams the body from a spawned task.

use std::sync::Arc;

use futures_util::StreamExt;
use outpost_proto::pb;
use outpost_proto::pb::http_server::{Http, HttpServer};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::config::HttpOptions;
use super::connection::{ConnectionId, FetchSlots};
use super::error::HttpError;
use super::fetch::{Fetcher, Upstream};
use super::request::{FetchSpec, resolve_headers};
use super::stream::{BodyLimits, forward_response, request_body};

/// Response frames buffered per call; small, so a slow client pushes back on the upstream.
const RESPONSE_CHANNEL: usize = 16;

/// The `outpost.v1.Http` service.
#[derive(Debug, Clone)]
pub struct HttpService {
    fetcher: Arc<Fetcher>,
    slots: FetchSlots,
}

impl HttpService {
    /// A service enforcing `options`.
    ///
    /// # Errors
    /// [`HttpError::ClientBuild`] when the HTTP clients cannot be built.
    pub fn new(options: HttpOptions) -> Result<Self, HttpError> {
        let slots = FetchSlots::new(options.max_concurrent_fetches);
        Ok(Self {
            fetcher: Arc::new(Fetcher::new(Arc::new(options))?),
            slots,
        })
    }

    /// The tonic server for this service.
    pub fn into_server(self) -> HttpServer<Self> {
        HttpServer::new(self)
    }

    async fn start(
        &self,
        spec: &FetchSpec,
        inbound: Streaming<pb::FetchRequest>,
        deadline: Instant,
        total: std::time::Duration,
    ) -> Result<Upstream, HttpError> {
        let headers = resolve_headers(spec, self.fetcher.options())?;
        let body = spec.has_body.then(|| request_body(inbound));
        tokio::time::timeout_at(deadline, self.fetcher.send(spec, headers, body))
            .await
            .map_err(|_| HttpError::Timeout {
                which: "total",
                after: total,
            })?
    }
}

#[tonic::async_trait]
impl Http for HttpService {
    type FetchStream = ReceiverStream<Result<pb::FetchResponse, Status>>;

    #[tracing::instrument(skip_all)]
    async fn fetch(
        &self,
        request: Request<Streaming<pb::FetchRequest>>,
    ) -> Result<Response<Self::FetchStream>, Status> {
        let slot = self
            .slots
            .acquire(request.extensions().get::<ConnectionId>().copied())?;
        let mut inbound = request.into_inner();
        let head = match inbound.next().await.transpose()?.and_then(|f| f.frame) {
            Some(pb::fetch_request::Frame::Head(head)) => head,
            _ => {
                return Err(HttpError::Invalid {
                    field: "frame",
                    reason: "the first frame must be the request head",
                }
                .into());
            }
        };
        let spec = FetchSpec::try_from(head)?;
        let options = self.fetcher.options();
        let total = spec
            .timeout
            .map_or(options.total_timeout, |t| t.min(options.total_timeout));
        let deadline = Instant::now() + total;
        let max_bytes = match spec.max_response_bytes {
            0 => options.max_response_bytes,
            n => n.min(options.max_response_bytes),
        };
        let upstream = self.start(&spec, inbound, deadline, total).await?;
        if upstream
            .response
            .content_length()
            .is_some_and(|n| n > max_bytes)
        {
            return Err(HttpError::ResponseTooLarge { limit: max_bytes }.into());
        }
        let (tx, rx) = mpsc::channel(RESPONSE_CHANNEL);
        let head = response_head(&upstream);
        // The channel is fresh and has room: the head is always the first frame.
        let _ = tx.try_send(Ok(pb::FetchResponse {
            frame: Some(pb::fetch_response::Frame::Head(head)),
        }));
        let limits = BodyLimits {
            max_bytes,
            idle: options.idle_timeout,
            deadline,
            total,
        };
        tokio::spawn(async move {
            let _slot = slot;
            forward_response(upstream.response, tx, limits).await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

fn response_head(upstream: &Upstream) -> pb::ResponseHead {
    let headers = upstream
        .response
        .headers()
        .iter()
        .map(|(name, value)| pb::ResponseHeader {
            name: name.as_str().to_owned(),
            value: value.as_bytes().to_vec(),
        })
        .collect();
    pb::ResponseHead {
        status: u32::from(upstream.response.status().as_u16()),
        headers,
        final_url: upstream.final_url.to_string(),
        redirects: upstream.redirects,
    }
}
