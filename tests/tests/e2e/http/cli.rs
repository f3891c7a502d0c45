//! `outpost http` and `outpost forward` as a user runs them, and the executor honouring
//! `HTTP(S)_PROXY` / `NO_PROXY` from its environment except for literal loopback URLs.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use outpost_client::http::ExecutorHttpClient;
use outpost_client::{ConnectOptions, Target};
use outpost_tests::upstream::Upstream;
use outpost_tests::{InProcessExecutor, Transport};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::get;

fn outpost(executor: &InProcessExecutor) -> Command {
    let mut cmd = Command::new(outpost_tests::outpost_bin());
    cmd.env("OUTPOST_TARGET", &executor.target)
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn outpost_http_prints_streams_and_fails() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let executor = InProcessExecutor::start(Transport::Unix).await?;
    let out = outpost(&executor)
        .args(["http", "-i", &upstream.url("/hello")])
        .output()
        .await?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    assert!(
        text.starts_with("HTTP 200 OK\n") && text.ends_with("\n\nhello"),
        "{text:?}"
    );

    let out = outpost(&executor)
        .args(["http", "--fail", &upstream.url("/nope")])
        .output()
        .await?;
    assert_eq!(out.status.code(), Some(22));

    let out = outpost(&executor)
        .args(["http", "http://169.254.169.254/"])
        .output()
        .await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allow_metadata"));

    // `--data -` streams stdin as the body.
    let mut child = outpost(&executor)
        .args([
            "http",
            "-X",
            "POST",
            "--data",
            "-",
            &upstream.url("/upload"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin is piped")?;
    stdin.write_all(&vec![b'a'; 300_000]).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout)?, "300000");
    Ok(())
}

/// Starts `outpost forward` and returns the child and its local base URL.
async fn forward(
    executor: &InProcessExecutor,
    to: &str,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let mut child = outpost(executor)
        .args(["forward", "--listen", "127.0.0.1:0", "--to", to])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout is piped")?;
    let line = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::BufReader::new(stdout).lines().next_line(),
    )
    .await??
    .context("outpost forward exited")?;
    let local = line
        .strip_prefix("forwarding ")
        .and_then(|l| l.split(' ').next())
        .with_context(|| format!("unexpected banner {line:?}"))?
        .to_owned();
    Ok((child, local))
}

fn plain_client() -> anyhow::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder().no_proxy().build()?)
}

#[tokio::test]
async fn outpost_forward_streams_both_ways() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let executor = InProcessExecutor::start(Transport::Unix).await?;
    let (_child, local) = forward(&executor, &upstream.url("")).await?;
    let http = plain_client()?;
    assert_eq!(
        http.get(format!("{local}/hello"))
            .send()
            .await?
            .text()
            .await?,
        "hello"
    );
    let body = vec![b'z'; 2 * 1024 * 1024];
    let uploaded = http
        .post(format!("{local}/upload"))
        .body(body)
        .send()
        .await?
        .text()
        .await?;
    assert_eq!(uploaded, (2 * 1024 * 1024).to_string());

    let started = Instant::now();
    let response = http
        .get(format!("{local}/sse?n=3&interval_ms=400"))
        .send()
        .await?;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = response.bytes_stream();
    let first = events.next().await.context("an event")??;
    assert!(first.starts_with(b"id: 0\n"), "{first:?}");
    assert!(
        started.elapsed() < Duration::from_millis(350),
        "first SSE event was held back"
    );

    let (_denied_child, denied) = forward(&executor, "http://169.254.169.254").await?;
    let refused = http.get(format!("{denied}/latest")).send().await?;
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await?.contains("allow_metadata"));
    Ok(())
}

/// `outpost serve` on a unix socket with extra environment.
async fn serve_with_env(
    env: &[(&str, &str)],
) -> anyhow::Result<(tokio::process::Child, tempfile::TempDir, ExecutorHttpClient)> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("run").join("outpost.sock");
    let mut cmd = Command::new(outpost_tests::outpost_bin());
    cmd.args(["serve", "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("NO_PROXY")
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn()?;
    let target: Target = format!("unix:{}", socket.display()).parse()?;
    for _ in 0..500 {
        if let Ok(executor) = outpost_client::connect(&target, &ConnectOptions::default()).await
            && executor.info().await.is_ok()
        {
            return Ok((child, dir, ExecutorHttpClient::new(executor)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("outpost serve did not come up")
}

#[tokio::test]
async fn proxy_variables_are_honoured_except_for_literal_loopback() -> anyhow::Result<()> {
    // The recording upstream doubles as a forward proxy: it answers absolute-form requests by path.
    let proxy = Upstream::start().await?;
    let direct = Upstream::start().await?;
    let proxy_url = proxy.url("");
    let (_child, _dir, client) =
        serve_with_env(&[("HTTP_PROXY", &proxy_url), ("HTTPS_PROXY", &proxy_url)]).await?;
    // A name nobody can resolve works only because the request went to the proxy.
    let response = get(&client, "http://outpost-test.invalid/hello").await?;
    assert_eq!(&response.bytes(1024).await?[..], b"hello");
    let seen = proxy.recorded();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["host"], "outpost-test.invalid");
    // A literal loopback URL bypasses the proxy.
    assert_eq!(get(&client, &direct.url("/hello")).await?.status, 200);
    assert_eq!((proxy.recorded().len(), direct.recorded().len()), (1, 1));

    // NO_PROXY takes a host off the proxy.
    let (_child2, _dir2, client) = serve_with_env(&[
        ("HTTP_PROXY", &proxy_url),
        ("NO_PROXY", "outpost-test.invalid"),
    ])
    .await?;
    let err = get(&client, "http://outpost-test.invalid/hello")
        .await
        .expect_err("no proxy, no DNS");
    assert_eq!(err.code(), Some(tonic::Code::Unavailable), "{err}");
    assert_eq!(proxy.recorded().len(), 1);
    Ok(())
}
