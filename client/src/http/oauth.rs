//! OAuth through the executor: rmcp's [`OAuthHttpClient`] (so `OAuthState` / `AuthorizationManager`
//! run discovery, dynamic registration, PKCE token exchange and refresh on the executor's network) and
//! oauth2's [`AsyncHttpClient`]. Bodies are buffered (OAuth exchanges are small) and capped at
//! [`OAUTH_MAX_RESPONSE_BYTES`]; the executor enforces the same cap.
//!
//! ```no_run
//! # async fn demo(executor: outpost_client::Executor) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let http = Arc::new(outpost_client::http::ExecutorHttpClient::new(executor));
//! let state = rmcp::transport::auth::OAuthState::new_with_oauth_http_client(
//!     "http://127.0.0.1:9000/mcp",
//!     http,
//! )
//! .await?;
//! # let _ = state; Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use oauth2::{AsyncHttpClient, HttpRequest as OAuthRequest, HttpResponse as OAuthResponse};
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientFuture, OAuthHttpRedirectPolicy, OAuthHttpRequest,
};

use super::{ExecutorHttpClient, HttpClientError, HttpRequest, RequestBody};

/// Response cap for OAuth traffic.
pub const OAUTH_MAX_RESPONSE_BYTES: u64 = 1024 * 1024;
/// Redirect hops followed when rmcp asks to follow.
const OAUTH_MAX_REDIRECTS: u32 = 10;

impl ExecutorHttpClient {
    /// One buffered exchange for OAuth: at most [`OAUTH_MAX_RESPONSE_BYTES`] of body.
    ///
    /// # Errors
    /// As [`ExecutorHttpClient::fetch`], and [`HttpClientError::TooLarge`].
    pub async fn oauth_exchange(
        &self,
        request: http::Request<Vec<u8>>,
        follow_redirects: u32,
        timeout: Option<Duration>,
    ) -> Result<http::Response<Vec<u8>>, HttpClientError> {
        let (parts, body) = request.into_parts();
        let mut outgoing = HttpRequest::new(parts.method, parts.uri.to_string());
        outgoing.headers = parts.headers;
        outgoing.body = if body.is_empty() {
            RequestBody::Empty
        } else {
            RequestBody::Bytes(Bytes::from(body))
        };
        outgoing.follow_redirects = follow_redirects;
        outgoing.timeout = timeout;
        outgoing.max_response_bytes = OAUTH_MAX_RESPONSE_BYTES;
        let response = self.fetch(outgoing).await?;
        let mut builder = http::Response::builder().status(response.status);
        if let Some(headers) = builder.headers_mut() {
            headers.extend(response.headers.clone());
        }
        let body = response.bytes(OAUTH_MAX_RESPONSE_BYTES).await?;
        builder
            .body(body.to_vec())
            .map_err(|_| HttpClientError::Protocol("response head could not be rebuilt"))
    }
}

impl OAuthHttpClient for ExecutorHttpClient {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        let follow = match request.redirect_policy {
            OAuthHttpRedirectPolicy::Stop => 0,
            _ => OAUTH_MAX_REDIRECTS,
        };
        Box::pin(async move {
            self.oauth_exchange(request.request, follow, request.timeout)
                .await
                .map_err(Into::into)
        })
    }
}

impl<'c> AsyncHttpClient<'c> for ExecutorHttpClient {
    type Error = HttpClientError;
    type Future = Pin<Box<dyn Future<Output = Result<OAuthResponse, HttpClientError>> + Send + 'c>>;

    /// oauth2 expects redirects not to be followed (token endpoints must not redirect).
    fn call(&'c self, request: OAuthRequest) -> Self::Future {
        Box::pin(self.oauth_exchange(request, 0, None))
    }
}
