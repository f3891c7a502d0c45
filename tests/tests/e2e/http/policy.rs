//! Destination policy and limits as a user sees them: PERMISSION_DENIED naming the rule for metadata
//! addresses, hostnames that resolve to denied addresses, redirects to denied hosts and operator deny
//! rules; credentials never crossing origins; the 1 MiB cap; timeouts; per-connection concurrency.

use std::time::Duration;

use http::HeaderValue;
use outpost_client::http::{HttpClientError, HttpRequest, ResponseBody};
use outpost_exec_server::http::{HttpOptions, UrlMatcher};
use outpost_tests::upstream::Upstream;

use super::{get, proxy, proxy_with, refusal};

#[tokio::test]
async fn cloud_metadata_address_is_denied_naming_the_rule() -> anyhow::Result<()> {
    let (_executor, client) = proxy().await?;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
    ] {
        let (code, message) = refusal(get(&client, url).await);
        assert_eq!(code, tonic::Code::PermissionDenied, "{url}");
        assert!(
            message.contains("allow_metadata = false"),
            "{url}: {message}"
        );
    }
    let (code, message) = refusal(get(&client, "http://169.254.10.1/").await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert!(message.contains("allow_link_local"), "{message}");
    Ok(())
}

#[tokio::test]
async fn hostname_resolving_to_a_denied_address_is_denied() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut options = HttpOptions::default();
    options.addresses.loopback = false;
    let (_executor, client) = proxy_with(options).await?;
    // `localhost` is a name: it is checked on the addresses the resolver returns.
    let url = format!("http://localhost:{}/hello", upstream.addr.port());
    let (code, message) = refusal(get(&client, &url).await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert!(message.contains("allow_loopback = false"), "{message}");
    assert!(
        message.contains("localhost (127.0.0.1)") || message.contains("localhost (::1)"),
        "{message}"
    );
    assert!(
        upstream.recorded().is_empty(),
        "the denied host was contacted"
    );
    Ok(())
}

#[tokio::test]
async fn redirect_to_a_denied_host_is_denied() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let (_executor, client) = proxy().await?;
    let url = upstream.url("/redirect?to=http://169.254.169.254/latest");
    let mut request = HttpRequest::new(http::Method::GET, &url);
    request.follow_redirects = 5;
    let (code, message) = refusal(client.fetch(request).await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert!(message.contains("allow_metadata"), "{message}");
    // Without following, the redirect itself comes back.
    let response = get(&client, &url).await?;
    assert_eq!(response.status, 302);
    Ok(())
}

#[tokio::test]
async fn operator_deny_rule_is_named() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let options = HttpOptions {
        deny: vec![UrlMatcher::new(
            "regex",
            r"http://127\.0\.0\.1:\d+/secret.*",
        )?],
        ..HttpOptions::default()
    };
    let (_executor, client) = proxy_with(options).await?;
    let (code, message) = refusal(get(&client, &upstream.url("/secret/x")).await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert!(message.contains("deny regex"), "{message}");
    assert_eq!(get(&client, &upstream.url("/hello")).await?.status, 200);
    Ok(())
}

#[tokio::test]
async fn credentials_never_cross_origins() -> anyhow::Result<()> {
    let (a, b) = (Upstream::start().await?, Upstream::start().await?);
    let (_executor, client) = proxy().await?;
    let hop = a.url(&format!("/redirect?to={}", b.url("/headers")));
    // With Authorization, the redirect is returned, not followed: B never sees the token.
    let mut request = HttpRequest::new(http::Method::GET, &hop);
    request.follow_redirects = 5;
    request
        .headers
        .insert("authorization", HeaderValue::from_static("Bearer s3cret"));
    let response = client.fetch(request).await?;
    assert_eq!(response.status, 302);
    assert!(b.recorded().is_empty(), "the other origin was contacted");
    // Without credentials the hop is followed, and the cookie for A is stripped on the way to B.
    let mut request = HttpRequest::new(http::Method::GET, &hop);
    request.follow_redirects = 5;
    request
        .headers
        .insert("cookie", HeaderValue::from_static("session=for-a"));
    let response = client.fetch(request).await?;
    assert_eq!((response.status.as_u16(), response.redirects), (200, 1));
    assert_eq!(response.final_url, b.url("/headers"));
    let seen: serde_json::Value = serde_json::from_slice(&response.bytes(65536).await?)?;
    assert!(
        seen.get("cookie").is_none() && seen.get("authorization").is_none(),
        "{seen}"
    );
    Ok(())
}

async fn body_error(body: ResponseBody) -> HttpClientError {
    body.collect(u64::MAX)
        .await
        .expect_err("the transfer must fail")
}

#[tokio::test]
async fn one_mib_response_cap_is_enforced() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let (_executor, client) = proxy().await?;
    let cap = 1024 * 1024;
    // Content-Length over the cap: refused before the head.
    let mut request = HttpRequest::new(http::Method::GET, upstream.url("/bytes?n=2097152"));
    request.max_response_bytes = cap;
    let (code, message) = refusal(client.fetch(request).await);
    assert_eq!(code, tonic::Code::ResourceExhausted);
    assert!(message.contains("1048576"), "{message}");
    // No Content-Length: the transfer fails once past the cap.
    let mut request = HttpRequest::new(http::Method::GET, upstream.url("/chunked?n=2097152"));
    request.max_response_bytes = cap;
    let err = body_error(client.fetch(request).await?.body).await;
    assert_eq!(err.code(), Some(tonic::Code::ResourceExhausted), "{err}");
    // Exactly at the cap is fine.
    let mut request = HttpRequest::new(http::Method::GET, upstream.url("/chunked?n=1048576"));
    request.max_response_bytes = cap;
    assert_eq!(
        client.fetch(request).await?.bytes(cap).await?.len() as u64,
        cap
    );
    // The OAuth adapter caps at 1 MiB on its own.
    let oauth = http::Request::get(upstream.url("/chunked?n=1048577")).body(Vec::new())?;
    let err = client
        .oauth_exchange(oauth, 0, None)
        .await
        .expect_err("over the OAuth cap");
    assert!(
        matches!(
            err,
            HttpClientError::Transfer { .. } | HttpClientError::TooLarge { .. }
        ),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn slow_upstream_times_out() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let options = HttpOptions {
        idle_timeout: Duration::from_millis(300),
        ..HttpOptions::default()
    };
    let (_executor, client) = proxy_with(options).await?;
    let mut request = HttpRequest::new(http::Method::GET, upstream.url("/slow-head?ms=5000"));
    request.timeout = Some(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let (code, message) = refusal(client.fetch(request).await);
    assert_eq!(code, tonic::Code::DeadlineExceeded);
    assert!(message.contains("total timeout"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // A body that stalls hits the idle timeout.
    let response = get(&client, &upstream.url("/hang")).await?;
    let err = body_error(response.body).await;
    assert_eq!(err.code(), Some(tonic::Code::DeadlineExceeded), "{err}");
    assert!(err.to_string().contains("idle timeout"), "{err}");
    Ok(())
}

#[tokio::test]
async fn concurrent_fetches_are_limited_per_connection() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let options = HttpOptions {
        max_concurrent_fetches: 1,
        ..HttpOptions::default()
    };
    let (executor, client) = proxy_with(options).await?;
    let held = get(&client, &upstream.url("/hang")).await?;
    let (code, message) = refusal(get(&client, &upstream.url("/hello")).await);
    assert_eq!(code, tonic::Code::ResourceExhausted);
    assert!(message.contains("limit 1"), "{message}");
    // Another connection has its own budget.
    let other = outpost_client::http::ExecutorHttpClient::new(executor.connect().await?);
    assert_eq!(get(&other, &upstream.url("/hello")).await?.status, 200);
    drop(held);
    // The slot frees once the first fetch is gone (the executor notices the cancel promptly).
    for _ in 0..100 {
        if let Ok(response) = get(&client, &upstream.url("/hello")).await {
            assert_eq!(response.status, 200);
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the slot was never freed")
}
