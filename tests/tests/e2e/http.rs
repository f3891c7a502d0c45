//! End-to-end tests of the HTTP proxy: `Http.Fetch` on a real executor against real upstream servers
//! (policy, redirects, limits, timeouts, cancellation, streaming), MCP and OAuth through the rmcp and
//! oauth2 adapters, the network-namespace scenario, and the `outpost http` / `outpost forward` CLI.

mod cli;
mod fetch;
mod mcp;
mod netns;
mod oauth;
mod policy;

use outpost_client::http::{ExecutorHttpClient, HttpClientError, HttpRequest, HttpResponse};
use outpost_exec_server::ExecutorOptions;
use outpost_exec_server::http::HttpOptions;
use outpost_tests::{InProcessExecutor, Transport};

/// An in-process executor on a unix socket with `http` options, and a client over it.
pub(crate) async fn proxy_with(
    http: HttpOptions,
) -> anyhow::Result<(InProcessExecutor, ExecutorHttpClient)> {
    let options = ExecutorOptions {
        http,
        ..ExecutorOptions::default()
    };
    let executor = InProcessExecutor::start_with(Transport::Unix, options).await?;
    let client = ExecutorHttpClient::new(executor.connect().await?);
    Ok((executor, client))
}

/// An executor with the default policy.
pub(crate) async fn proxy() -> anyhow::Result<(InProcessExecutor, ExecutorHttpClient)> {
    proxy_with(HttpOptions::default()).await
}

/// GET `url` through `client`.
pub(crate) async fn get(
    client: &ExecutorHttpClient,
    url: &str,
) -> Result<HttpResponse, HttpClientError> {
    client.fetch(HttpRequest::new(http::Method::GET, url)).await
}

/// The gRPC code and message of a refused fetch (panics with the error when it was something else).
pub(crate) fn refusal(result: Result<HttpResponse, HttpClientError>) -> (tonic::Code, String) {
    match result {
        Err(err) => match err.code() {
            Some(code) => (code, err.to_string()),
            None => panic!("expected an executor refusal, got {err:?}"),
        },
        Ok(response) => panic!("expected a refusal, got HTTP {}", response.status),
    }
}
