//! rmcp's [`StreamableHttpClient`] over [`ExecutorHttpClient`]: MCP streamable HTTP through the
//! executor, with the status semantics rmcp expects (401 with `WWW-Authenticate` is `AuthRequired`,
//! 403 with it is `InsufficientScope`, 404 on a session is `SessionExpired`, 405 on GET means no SSE,
//! 202/204 is `Accepted`), session ids, and `Last-Event-ID` resumption. SSE responses are parsed as
//! the bytes arrive; a raw event larger than the transport's limit fails the stream.
//!
//! ```no_run
//! # async fn demo(executor: outpost_client::Executor) -> Result<(), Box<dyn std::error::Error>> {
//! use rmcp::transport::StreamableHttpClientTransport;
//! use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
//! let client = outpost_client::http::ExecutorHttpClient::new(executor);
//! let config = StreamableHttpClientTransportConfig::with_uri("http://127.0.0.1:8080/mcp");
//! let transport = StreamableHttpClientTransport::with_client(client, config);
//! # let _ = transport; Ok(()) }
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use super::{ExecutorHttpClient, HttpClientError, HttpRequest, HttpResponse, RequestBody};

type McpError = StreamableHttpError<HttpClientError>;
type SseResult = BoxStream<'static, Result<Sse, sse_stream::Error>>;

/// Default raw SSE event cap (rmcp's default).
const DEFAULT_MAX_SSE_EVENT: usize = 16 * 1024 * 1024;

impl ExecutorHttpClient {
    async fn mcp_send(
        &self,
        method: Method,
        uri: &str,
        mut headers: HeaderMap,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
        body: RequestBody,
    ) -> Result<HttpResponse, McpError> {
        if let Some(token) = auth {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                McpError::Client(HttpClientError::InvalidHeader {
                    name: "authorization".into(),
                })
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in custom {
            if [ACCEPT, CONTENT_TYPE, AUTHORIZATION].contains(&name)
                || name.as_str().eq_ignore_ascii_case(HEADER_SESSION_ID)
            {
                return Err(McpError::ReservedHeaderConflict(name.to_string()));
            }
            headers.insert(name, value);
        }
        let mut request = HttpRequest::new(method, uri);
        request.headers = headers;
        request.body = body;
        self.fetch(request).await.map_err(McpError::Client)
    }
}

fn header_str(headers: &HeaderMap, name: impl http::header::AsHeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The `scope="..."` parameter of a `WWW-Authenticate` challenge.
fn challenge_scope(challenge: &str) -> Option<String> {
    let start = challenge.find("scope=")? + "scope=".len();
    let rest = &challenge[start..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_owned())
}

/// rmcp's mapping of 401/403 challenges.
fn auth_errors(response: &HttpResponse) -> Result<(), McpError> {
    let challenge = header_str(&response.headers, WWW_AUTHENTICATE);
    match (response.status, challenge) {
        (StatusCode::UNAUTHORIZED, Some(header)) => {
            Err(McpError::AuthRequired(AuthRequiredError::new(header)))
        }
        (StatusCode::FORBIDDEN, Some(header)) => {
            let scope = challenge_scope(&header);
            Err(McpError::InsufficientScope(InsufficientScopeError::new(
                header, scope,
            )))
        }
        _ => Ok(()),
    }
}

fn is_media(headers: &HeaderMap, mime: &str) -> bool {
    header_str(headers, CONTENT_TYPE).is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case(mime))
    })
}

/// Parses the body as SSE as it arrives, failing when one raw event grows past `max_event` bytes.
fn sse(response: HttpResponse, max_event: usize) -> SseResult {
    let mut pending = 0usize;
    let bytes = response.body.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        // Bytes since the last blank line (event boundary) bound the size of the event being built.
        pending = match memchr_last_boundary(&chunk) {
            Some(after) => chunk.len() - after,
            None => pending + chunk.len(),
        };
        if pending > max_event {
            return Err(std::io::Error::other(HttpClientError::TooLarge {
                limit: max_event as u64,
            }));
        }
        Ok::<Bytes, std::io::Error>(chunk)
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

/// Index just past the last `\n\n` in `chunk`.
fn memchr_last_boundary(chunk: &[u8]) -> Option<usize> {
    chunk.windows(2).rposition(|w| w == b"\n\n").map(|i| i + 2)
}

impl StreamableHttpClient for ExecutorHttpClient {
    type Error = HttpClientError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, McpError> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, McpError> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, McpError> {
        let body = Bytes::from(serde_json::to_vec(&message)?);
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON_MIME_TYPE));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        let had_session = session_id.is_some();
        if let Some(sid) = &session_id {
            let value = HeaderValue::from_str(sid).map_err(|_| {
                McpError::Client(HttpClientError::InvalidHeader {
                    name: HEADER_SESSION_ID.into(),
                })
            })?;
            headers.insert(HEADER_SESSION_ID, value);
        }
        let response = self
            .mcp_send(
                Method::POST,
                &uri,
                headers,
                auth_header,
                custom_headers,
                RequestBody::Bytes(body),
            )
            .await?;
        auth_errors(&response)?;
        let status = response.status;
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(McpError::SessionExpired);
        }
        let new_session = header_str(&response.headers, HEADER_SESSION_ID);
        if !status.is_success() {
            return post_failure(response, limits).await;
        }
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        let empty = header_str(&response.headers, CONTENT_LENGTH).as_deref() == Some("0");
        if awaits_nothing && empty {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if is_media(&response.headers, EVENT_STREAM_MIME_TYPE) {
            let stream = sse(response, limits.max_sse_event_size);
            return Ok(StreamableHttpPostResponse::Sse(stream, new_session));
        }
        if is_media(&response.headers, JSON_MIME_TYPE) {
            let body = read_limited(response, limits.max_json_response_size).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, new_session)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(McpError::Deserialize(e)),
            };
        }
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let content_type = header_str(&response.headers, CONTENT_TYPE);
        Err(McpError::UnexpectedContentType(content_type))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), McpError> {
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(&session_id) {
            headers.insert(HEADER_SESSION_ID, value);
        }
        let response = self
            .mcp_send(
                Method::DELETE,
                &uri,
                headers,
                auth_header,
                custom_headers,
                RequestBody::Empty,
            )
            .await?;
        match response.status {
            StatusCode::METHOD_NOT_ALLOWED => Ok(()),
            s if s.is_success() => Ok(()),
            s => Err(McpError::UnexpectedServerResponse(Cow::Owned(format!(
                "delete_session returned {s}"
            )))),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseResult, McpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            DEFAULT_MAX_SSE_EVENT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseResult, McpError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        for (name, value) in [
            (HEADER_SESSION_ID, session_id.as_deref()),
            (HEADER_LAST_EVENT_ID, last_event_id.as_deref()),
        ] {
            if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, value);
            }
        }
        let response = self
            .mcp_send(
                Method::GET,
                &uri,
                headers,
                auth_header,
                custom_headers,
                RequestBody::Empty,
            )
            .await?;
        if response.status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(McpError::ServerDoesNotSupportSse);
        }
        auth_errors(&response)?;
        if !response.status.is_success() {
            return Err(McpError::UnexpectedServerResponse(Cow::Owned(format!(
                "get_stream returned {}",
                response.status
            ))));
        }
        if !is_media(&response.headers, EVENT_STREAM_MIME_TYPE)
            && !is_media(&response.headers, JSON_MIME_TYPE)
        {
            return Err(McpError::UnexpectedContentType(header_str(
                &response.headers,
                CONTENT_TYPE,
            )));
        }
        Ok(sse(response, max_sse_event_size))
    }
}

async fn read_limited(response: HttpResponse, limit: usize) -> Result<Bytes, McpError> {
    response.bytes(limit as u64).await.map_err(|e| match e {
        HttpClientError::TooLarge { .. } => McpError::ResponseBodyTooLarge { max_size: limit },
        other => McpError::Client(other),
    })
}

/// A non-success POST: a JSON-RPC error body is a message for rmcp; anything else is an error that
/// carries the status and a bounded prefix of the body.
async fn post_failure(
    response: HttpResponse,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, McpError> {
    let status = response.status;
    let session = header_str(&response.headers, HEADER_SESSION_ID);
    let json = is_media(&response.headers, JSON_MIME_TYPE);
    let body = read_limited(
        response,
        limits
            .max_json_response_size
            .max(limits.max_error_response_size),
    )
    .await
    .unwrap_or_default();
    if json
        && let Ok(message @ ServerJsonRpcMessage::Error(_)) =
            serde_json::from_slice::<ServerJsonRpcMessage>(&body)
    {
        return Ok(StreamableHttpPostResponse::Json(message, session));
    }
    let shown = &body[..body.len().min(limits.max_error_response_size)];
    Err(McpError::UnexpectedServerResponse(Cow::Owned(format!(
        "HTTP {status}: {}",
        String::from_utf8_lossy(shown)
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_from_challenge() {
        assert_eq!(
            challenge_scope(r#"Bearer error="insufficient_scope", scope="a b""#).as_deref(),
            Some("a b")
        );
        assert_eq!(
            challenge_scope("Bearer scope=x, realm=y").as_deref(),
            Some("x")
        );
        assert_eq!(challenge_scope("Bearer realm=y"), None);
    }

    #[test]
    fn event_boundaries() {
        assert_eq!(memchr_last_boundary(b"data: a\n\ndata: b"), Some(9));
        assert_eq!(memchr_last_boundary(b"data: a"), None);
    }
}
