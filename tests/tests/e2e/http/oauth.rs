//! A full OAuth flow through the executor, driven by rmcp's `OAuthState`: metadata discovery, dynamic
//! client registration, PKCE authorization code, token exchange, then a protected resource called
//! with a credential provider that asks the authorization manager for a token on every request, and
//! a refresh after a 401. Also oauth2's `AsyncHttpClient` against the same token endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::FutureExt;
use http::{HeaderMap, HeaderValue};
use outpost_client::http::{BoxError, CredentialProvider, ExecutorHttpClient};
use outpost_tests::oauth_server::OAuthServer;
use rmcp::transport::auth::{AuthorizationManager, AuthorizationRequest, OAuthState};

use super::{get, proxy};

/// Redirect URI of the "native app"; never dialled (the test reads the code from the Location).
const REDIRECT_URI: &str = "http://127.0.0.1:1/callback";

/// Query parameter `name` of `url`.
fn param(url: &str, name: &str) -> anyhow::Result<String> {
    url::Url::parse(url)?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| anyhow::anyhow!("{url} has no {name}"))
}

/// Runs discovery, registration, PKCE authorization and the code exchange through `http`.
async fn authorize(
    http: &Arc<ExecutorHttpClient>,
    resource: &str,
) -> anyhow::Result<AuthorizationManager> {
    let mut state = OAuthState::new_with_oauth_http_client(resource, http.clone()).await?;
    let request = AuthorizationRequest::new(REDIRECT_URI)
        .with_client_name("outpost-e2e")
        .with_scopes(["mcp"]);
    state.start_authorization(request).await?;
    let authorize_url = state.get_authorization_url().await?;
    assert!(
        authorize_url.contains("code_challenge_method=S256"),
        "{authorize_url}"
    );
    // The user's browser step, done through the executor (the server approves at once).
    let response = get(http, &authorize_url).await?;
    assert_eq!(response.status, 302);
    let location = response.headers["location"].to_str()?.to_owned();
    state
        .handle_callback(&param(&location, "code")?, &param(&location, "state")?)
        .await?;
    state
        .into_authorization_manager()
        .ok_or_else(|| anyhow::anyhow!("not authorized after the callback"))
}

/// A provider that asks the manager for the current token on every request, and counts the calls.
fn provider(
    manager: Arc<AuthorizationManager>,
    calls: Arc<AtomicU32>,
) -> Arc<dyn CredentialProvider> {
    Arc::new(move |_url: &str| {
        let (manager, calls) = (manager.clone(), calls.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let token = manager.get_access_token().await?;
            let mut headers = HeaderMap::new();
            headers.insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {token}"))?,
            );
            Ok::<_, BoxError>(headers)
        }
        .boxed()
    })
}

#[tokio::test]
async fn oauth_flow_runs_through_the_executor() -> anyhow::Result<()> {
    let server = OAuthServer::start().await?;
    let (_executor, client) = proxy().await?;
    let http = Arc::new(client);
    let manager = Arc::new(authorize(&http, &server.resource_url()).await?);
    let counts = server.counts();
    assert_eq!((counts.registrations, counts.code_exchanges), (1, 1));

    let calls = Arc::new(AtomicU32::new(0));
    let authed = http
        .as_ref()
        .clone()
        .with_credentials(provider(manager.clone(), calls.clone()));
    assert_eq!(get(&authed, &server.resource_url()).await?.status, 200);

    // The token dies on the server: the next call is refused, a refresh fixes it, and the provider
    // hands out the new token on the very next request.
    server.revoke_access_tokens();
    let refused = get(&authed, &server.resource_url()).await?;
    assert_eq!(refused.status, 401);
    assert!(refused.headers.contains_key("www-authenticate"));
    manager.refresh_token().await?;
    assert_eq!(get(&authed, &server.resource_url()).await?.status, 200);

    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the provider is asked on every request"
    );
    let counts = server.counts();
    assert_eq!((counts.refreshes, counts.authorized_resource_calls), (1, 2));
    Ok(())
}

#[tokio::test]
async fn oauth2_async_http_client_goes_through_the_executor() -> anyhow::Result<()> {
    use oauth2::AsyncHttpClient;
    let server = OAuthServer::start().await?;
    let (_executor, client) = proxy().await?;
    let request = http::Request::get(format!(
        "http://{}/.well-known/oauth-authorization-server",
        server.addr
    ))
    .body(Vec::new())?;
    let response = client.call(request).await?;
    assert_eq!(response.status(), 200);
    let metadata: serde_json::Value = serde_json::from_slice(response.body())?;
    assert_eq!(metadata["issuer"], format!("http://{}", server.addr));
    Ok(())
}
