//! Fetch basics: heads and bodies, streaming uploads, SSE delivered event by event, cancellation that
//! reaches the upstream server, `value_from_env`, and input validation naming the field.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use outpost_client::http::{HttpRequest, RequestBody};
use outpost_exec_server::http::HttpOptions;
use outpost_proto::pb;
use outpost_tests::upstream::Upstream;

use super::{get, proxy, proxy_with, refusal};

#[tokio::test]
async fn get_returns_status_headers_and_body() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let (_executor, client) = proxy().await?;
    let response = get(&client, &upstream.url("/hello")).await?;
    assert_eq!(response.status, 200);
    assert_eq!(response.final_url, upstream.url("/hello"));
    assert_eq!(&response.bytes(1024).await?[..], b"hello");
    let missing = get(&client, &upstream.url("/nope")).await?;
    assert_eq!(missing.status, 404);
    Ok(())
}

#[tokio::test]
async fn request_body_streams_without_buffering_whole() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let (_executor, client) = proxy().await?;
    const CHUNKS: usize = 32;
    let chunk = Bytes::from(vec![7u8; 256 * 1024]);
    let body = futures_util::stream::iter((0..CHUNKS).map(move |_| Ok(chunk.clone())));
    let mut request = HttpRequest::new(http::Method::POST, upstream.url("/upload"));
    request.body = RequestBody::Stream(body.boxed());
    let response = client.fetch(request).await?;
    let text = response.bytes(1024).await?;
    assert_eq!(
        std::str::from_utf8(&text)?,
        (CHUNKS * 256 * 1024).to_string()
    );
    Ok(())
}

#[tokio::test]
async fn sse_events_arrive_one_by_one() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let (_executor, client) = proxy().await?;
    let start = Instant::now();
    let response = get(&client, &upstream.url("/sse?n=3&interval_ms=400")).await?;
    let mut body = response.body;
    let first = body.next().await.expect("a first event")?;
    let first_at = start.elapsed();
    assert!(
        String::from_utf8_lossy(&first).starts_with("id: 0\n"),
        "{first:?}"
    );
    // The stream lasts 800 ms; the first event must not wait for the rest.
    assert!(
        first_at < Duration::from_millis(350),
        "first event after {first_at:?}"
    );
    let mut rest = Vec::new();
    while let Some(chunk) = body.next().await {
        rest.push(chunk?);
    }
    let all = String::from_utf8_lossy(&rest.concat()).into_owned();
    assert!(all.contains("id: 1\n") && all.contains("id: 2\n"), "{all}");
    Ok(())
}

#[tokio::test]
async fn dropping_the_response_closes_the_upstream_connection() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let (_executor, client) = proxy().await?;
    let response = get(&client, &upstream.url("/hang")).await?;
    let mut body = response.body;
    assert_eq!(&body.next().await.expect("first line")?[..], b"start\n");
    let closed = upstream.closed();
    drop(body);
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .map_err(|_| anyhow::anyhow!("the upstream never saw the connection close"))?;
    Ok(())
}

#[tokio::test]
async fn header_value_from_allow_listed_env_var() -> anyhow::Result<()> {
    // Cargo sets CARGO_PKG_NAME for the test process, which is also the in-process executor.
    let expected = std::env::var("CARGO_PKG_NAME")?;
    let upstream = Upstream::start().await?;
    let options = HttpOptions {
        env_allow: vec!["CARGO_PKG_NAME".into()],
        ..HttpOptions::default()
    };
    let (_executor, client) = proxy_with(options).await?;
    let mut request = HttpRequest::new(http::Method::GET, upstream.url("/headers"));
    request
        .env_headers
        .push(("x-secret".into(), "CARGO_PKG_NAME".into()));
    let body = client.fetch(request).await?.bytes(64 * 1024).await?;
    let seen: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(seen["x-secret"], expected.as_str());

    let mut request = HttpRequest::new(http::Method::GET, upstream.url("/headers"));
    request.env_headers.push(("x-secret".into(), "HOME".into()));
    let (code, message) = refusal(client.fetch(request).await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert!(
        message.contains("HOME") && message.contains("env_allow"),
        "{message}"
    );
    Ok(())
}

/// Sends a raw head, to exercise validation the typed client would refuse to build.
async fn raw_fetch(
    executor: &outpost_client::Executor,
    head: pb::RequestHead,
) -> Result<(), tonic::Status> {
    let frame = pb::FetchRequest {
        frame: Some(pb::fetch_request::Frame::Head(head)),
    };
    let mut client = executor.http_client();
    let mut stream = client
        .fetch(tokio_stream::iter(vec![frame]))
        .await?
        .into_inner();
    stream.message().await.map(|_| ())
}

#[tokio::test]
async fn invalid_input_is_invalid_argument_naming_the_field() -> anyhow::Result<()> {
    let (executor, _client) = proxy().await?;
    let executor = executor.connect().await?;
    let cases = [
        ("GET", "ftp://example.com/", "x", "head.url"),
        ("GET", "not a url", "x", "head.url"),
        ("G(T", "http://127.0.0.1/", "x", "head.method"),
        (
            "GET",
            "http://127.0.0.1/",
            "a\r\nInjected: yes",
            "head.headers.text",
        ),
    ];
    for (method, url, value, field) in cases {
        let head = pb::RequestHead {
            method: method.into(),
            url: url.into(),
            headers: vec![pb::Header {
                name: "x-test".into(),
                value: Some(pb::header::Value::Text(value.into())),
            }],
            ..Default::default()
        };
        let status = raw_fetch(&executor, head)
            .await
            .expect_err("must be refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().contains(field),
            "{field}: {}",
            status.message()
        );
    }
    let long = format!("http://127.0.0.1/{}", "a".repeat(9000));
    let head = pb::RequestHead {
        method: "GET".into(),
        url: long,
        ..Default::default()
    };
    let status = raw_fetch(&executor, head).await.expect_err("too long");
    assert!(status.message().contains("head.url"), "{status:?}");
    Ok(())
}
