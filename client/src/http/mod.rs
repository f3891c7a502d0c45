//! HTTP through an executor's network: [`ExecutorHttpClient`] speaks `outpost.v1.Http.Fetch`, so MCP
//! servers and OAuth endpoints that only the executor can reach are reachable from the harness.
//!
//! Request bodies stream up as they are produced, response bodies stream down as they arrive (an SSE
//! event is delivered as soon as the executor sees it), and dropping a [`ResponseBody`] cancels the
//! call, which aborts the upstream request. A [`CredentialProvider`] is asked for headers on every
//! request, so a refreshed token is used as soon as it exists.
//!
//! # Layout
//! - this file: [`ExecutorHttpClient`], [`HttpRequest`], [`HttpResponse`], [`ResponseBody`].
//! - [`mcp`]: rmcp's `StreamableHttpClient` (MCP streamable HTTP, SSE, sessions, resumption).
//! - [`oauth`]: rmcp's `OAuthHttpClient` and oauth2's `AsyncHttpClient` (1 MiB response cap).
//! - [`error`]: the error type, [`HttpClientError`].

pub mod error;
pub mod mcp;
pub mod oauth;
mod response;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::{HeaderMap, Method};
use outpost_proto::pb;
use tokio::sync::mpsc;

pub use error::{BoxError, HttpClientError};
pub use response::{HttpResponse, ResponseBody};

use crate::Executor;

/// Supplies headers (typically `Authorization`) for each request; called once per request, so the
/// value is always current. Headers the request already has are not overridden.
pub trait CredentialProvider: Send + Sync {
    /// Headers to add to a request for `url`.
    ///
    /// # Errors
    /// Whatever the provider fails with; the request is not sent.
    fn headers(&self, url: &str) -> BoxFuture<'_, Result<HeaderMap, BoxError>>;
}

impl<F> CredentialProvider for F
where
    F: Fn(&str) -> BoxFuture<'static, Result<HeaderMap, BoxError>> + Send + Sync,
{
    fn headers(&self, url: &str) -> BoxFuture<'_, Result<HeaderMap, BoxError>> {
        self(url)
    }
}

/// A request body.
pub enum RequestBody {
    /// No body.
    Empty,
    /// A body already in memory.
    Bytes(Bytes),
    /// A body produced as it is sent (uploads are never buffered whole).
    Stream(BoxStream<'static, Result<Bytes, std::io::Error>>),
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("Empty"),
            Self::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
            Self::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// One request to fetch through the executor.
#[derive(Debug)]
pub struct HttpRequest {
    /// Method.
    pub method: Method,
    /// Absolute http(s) URL.
    pub url: String,
    /// Literal headers.
    pub headers: HeaderMap,
    /// Headers whose value the executor takes from its own environment (name, variable).
    pub env_headers: Vec<(String, String)>,
    /// Body.
    pub body: RequestBody,
    /// Total timeout; `None`: the executor's default.
    pub timeout: Option<Duration>,
    /// Redirect hops to follow (0: return the redirect).
    pub follow_redirects: u32,
    /// Response cap in bytes; 0: the client's default.
    pub max_response_bytes: u64,
}

impl HttpRequest {
    /// A request with no headers and no body.
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: HeaderMap::new(),
            env_headers: Vec::new(),
            body: RequestBody::Empty,
            timeout: None,
            follow_redirects: 0,
            max_response_bytes: 0,
        }
    }
}

/// An HTTP client whose requests run on an executor.
#[derive(Clone)]
pub struct ExecutorHttpClient {
    executor: Executor,
    credentials: Option<Arc<dyn CredentialProvider>>,
    max_response_bytes: u64,
}

impl std::fmt::Debug for ExecutorHttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorHttpClient")
            .field("target", &self.executor.target())
            .field("credentials", &self.credentials.is_some())
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

/// Frames buffered between the request body producer and the gRPC stream.
const REQUEST_CHANNEL: usize = 8;

impl ExecutorHttpClient {
    /// A client over `executor` with the executor's response cap.
    pub fn new(executor: Executor) -> Self {
        Self {
            executor,
            credentials: None,
            max_response_bytes: 0,
        }
    }

    /// Asks `provider` for headers on every request.
    pub fn with_credentials(mut self, provider: Arc<dyn CredentialProvider>) -> Self {
        self.credentials = Some(provider);
        self
    }

    /// Default response cap for requests that set none (0: the executor's limit).
    pub fn with_max_response_bytes(mut self, limit: u64) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// The executor handle.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Sends `request` through the executor and returns once the response head has arrived; the body
    /// streams from [`HttpResponse::body`].
    ///
    /// # Errors
    /// [`HttpClientError::Executor`] for refusals (PERMISSION_DENIED naming the policy rule,
    /// INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNAVAILABLE) and
    /// transport failures; [`HttpClientError::Credentials`] when the provider fails.
    pub async fn fetch(&self, mut request: HttpRequest) -> Result<HttpResponse, HttpClientError> {
        if let Some(provider) = &self.credentials {
            let extra = provider
                .headers(&request.url)
                .await
                .map_err(HttpClientError::Credentials)?;
            for (name, value) in &extra {
                if !request.headers.contains_key(name) {
                    request.headers.insert(name.clone(), value.clone());
                }
            }
        }
        let head = self.head(&request)?;
        let (tx, rx) = mpsc::channel(REQUEST_CHANNEL);
        let frame = |f| pb::FetchRequest { frame: Some(f) };
        // Fresh channel with room: the head is always the first frame.
        let _ = tx.try_send(frame(pb::fetch_request::Frame::Head(head)));
        tokio::spawn(pump_body(request.body, tx));
        let mut inbound = self
            .executor
            .http_client()
            .fetch(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        match inbound.message().await? {
            Some(pb::FetchResponse {
                frame: Some(pb::fetch_response::Frame::Head(head)),
            }) => HttpResponse::from_head(head, inbound),
            _ => Err(HttpClientError::Protocol(
                "the first response frame was not the head",
            )),
        }
    }

    fn head(&self, request: &HttpRequest) -> Result<pb::RequestHead, HttpClientError> {
        let mut headers = Vec::with_capacity(request.headers.len());
        for (name, value) in &request.headers {
            let text = value.to_str().map_err(|_| HttpClientError::InvalidHeader {
                name: name.to_string(),
            })?;
            headers.push(pb::Header {
                name: name.to_string(),
                value: Some(pb::header::Value::Text(text.to_owned())),
            });
        }
        for (name, var) in &request.env_headers {
            headers.push(pb::Header {
                name: name.clone(),
                value: Some(pb::header::Value::ValueFromEnv(var.clone())),
            });
        }
        let max = match request.max_response_bytes {
            0 => self.max_response_bytes,
            n => n,
        };
        Ok(pb::RequestHead {
            method: request.method.to_string(),
            url: request.url.clone(),
            headers,
            timeout_ms: request
                .timeout
                .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            redirect: Some(pb::RedirectPolicy {
                follow_max: request.follow_redirects,
            }),
            max_response_bytes: max,
            has_body: !matches!(request.body, RequestBody::Empty),
        })
    }
}

/// Sends the body as frames, then `end_body`. A failed send means the call is over.
async fn pump_body(body: RequestBody, tx: mpsc::Sender<pb::FetchRequest>) {
    let frame = |f| pb::FetchRequest { frame: Some(f) };
    match body {
        RequestBody::Empty => return,
        RequestBody::Bytes(bytes) => {
            for chunk in bytes.chunks(1024 * 1024) {
                let data = pb::fetch_request::Frame::Body(bytes.slice_ref(chunk));
                if tx.send(frame(data)).await.is_err() {
                    return;
                }
            }
        }
        RequestBody::Stream(mut stream) => {
            while let Some(chunk) = stream.next().await {
                let Ok(chunk) = chunk else {
                    tracing::warn!("request body stream failed; aborting the fetch");
                    // Dropping the sender without end_body fails the upstream body.
                    return;
                };
                if tx
                    .send(frame(pb::fetch_request::Frame::Body(chunk)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
    let _ = tx
        .send(frame(pb::fetch_request::Frame::EndBody(pb::BodyEnd {})))
        .await;
}
