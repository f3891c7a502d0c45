//! HTTP proxy section: a real `outpost serve` process on a unix socket proxies to an upstream server
//! in the bench process; each figure is measured side by side with direct reqwest to the same
//! upstream. Small-request latency (added p50), SSE event latency (time from the upstream writing an
//! event to the client holding it, same clock) and 1 GiB download throughput.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use outpost_client::http::{ExecutorHttpClient, HttpRequest};

use super::report::Row;
use super::{ms, percentile};
use crate::ServeProcess;
use crate::upstream::Upstream;

const SECTION: &str = "http proxy";
/// Size of the throughput download.
const DOWNLOAD_BYTES: u64 = 1 << 30;

/// Runs the section; `quick` cuts iterations (the download stays 1 GiB).
///
/// # Errors
/// When a server cannot be started or a request fails.
pub async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let upstream = Upstream::start().await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("outpost.toml");
    std::fs::write(&config, "[http]\nmax_response_bytes = 4294967296\n")?;
    let config = config.display().to_string();
    let executor = ServeProcess::unix(&["--config", &config]).await?;
    let proxied = ExecutorHttpClient::new(executor.connect().await?);
    let direct = reqwest::Client::builder().no_proxy().build()?;
    let iterations = if quick { 300 } else { 3000 };
    let mut rows = latency(&upstream, &proxied, &direct, iterations).await?;
    rows.extend(sse(&upstream, &proxied, &direct, if quick { 50 } else { 300 }).await?);
    rows.extend(throughput(&upstream, &proxied, &direct).await?);
    Ok(rows)
}

async fn latency(
    upstream: &Upstream,
    proxied: &ExecutorHttpClient,
    direct: &reqwest::Client,
    iterations: usize,
) -> anyhow::Result<Vec<Row>> {
    let url = upstream.url("/hello");
    let mut via = Vec::with_capacity(iterations);
    let mut base = Vec::with_capacity(iterations);
    for i in 0..iterations + iterations / 10 {
        let t = Instant::now();
        let body = proxied
            .fetch(HttpRequest::new(http::Method::GET, &url))
            .await?
            .bytes(1024)
            .await?;
        let through = t.elapsed();
        anyhow::ensure!(&body[..] == b"hello", "unexpected body");
        let t = Instant::now();
        direct.get(&url).send().await?.bytes().await?;
        let straight = t.elapsed();
        // The first tenth warms connections and caches.
        if i >= iterations / 10 {
            via.push(through);
            base.push(straight);
        }
    }
    let (p50, direct_p50) = (percentile(&mut via, 50.0), percentile(&mut base, 50.0));
    let added = ms(p50) - ms(direct_p50);
    Ok(vec![
        Row::new(SECTION, "small GET p50 through executor", ms(p50), "ms")
            .baseline("direct reqwest p50", ms(direct_p50)),
        Row::new(SECTION, "small GET added p50", added, "ms").target("<= 0.5 ms", added <= 0.5),
        Row::new(
            SECTION,
            "small GET p99 through executor",
            ms(percentile(&mut via, 99.0)),
            "ms",
        ),
    ])
}

/// Per-event latency: the event's data is the microseconds since the upstream epoch when it was
/// written; the client subtracts that from the time it holds the event (same process, same clock).
async fn event_latencies(
    epoch: tokio::time::Instant,
    mut chunks: impl futures_util::Stream<Item = anyhow::Result<bytes::Bytes>> + Unpin,
) -> anyhow::Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    let mut pending = String::new();
    while let Some(chunk) = chunks.next().await {
        let now = epoch.elapsed();
        pending.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let sent = event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .and_then(|d| d.parse::<u64>().ok())
                .ok_or_else(|| anyhow::anyhow!("malformed event {event:?}"))?;
            latencies.push(now.saturating_sub(Duration::from_micros(sent)));
        }
    }
    Ok(latencies)
}

async fn sse(
    upstream: &Upstream,
    proxied: &ExecutorHttpClient,
    direct: &reqwest::Client,
    events: usize,
) -> anyhow::Result<Vec<Row>> {
    let url = upstream.url(&format!("/sse?n={events}&interval_ms=10"));
    let response = proxied
        .fetch(HttpRequest::new(http::Method::GET, &url))
        .await?;
    let mut via = event_latencies(upstream.epoch(), response.body.map(|c| Ok(c?))).await?;
    let response = direct.get(&url).send().await?;
    let stream = response.bytes_stream().map(|c| Ok(c?));
    let mut base = event_latencies(upstream.epoch(), stream).await?;
    anyhow::ensure!(
        via.len() == events && base.len() == events,
        "events were lost"
    );
    let (p50, direct_p50) = (percentile(&mut via, 50.0), percentile(&mut base, 50.0));
    let added = ms(p50) - ms(direct_p50);
    Ok(vec![
        Row::new(
            SECTION,
            "SSE event latency p50 through executor",
            ms(p50),
            "ms",
        )
        .baseline("direct reqwest p50", ms(direct_p50)),
        Row::new(SECTION, "SSE event added latency p50", added, "ms")
            .target("< 1 ms (no batching)", added < 1.0),
        Row::new(
            SECTION,
            "SSE event latency p99 through executor",
            ms(percentile(&mut via, 99.0)),
            "ms",
        ),
    ])
}

async fn throughput(
    upstream: &Upstream,
    proxied: &ExecutorHttpClient,
    direct: &reqwest::Client,
) -> anyhow::Result<Vec<Row>> {
    let path = format!("/bytes?n={DOWNLOAD_BYTES}");
    let url = upstream.url(&path);
    let t = Instant::now();
    let body = proxied
        .fetch(HttpRequest::new(http::Method::GET, &url))
        .await?
        .body;
    let total = drain(body).await?;
    let via = t.elapsed();
    anyhow::ensure!(
        total == DOWNLOAD_BYTES,
        "short download through the executor: {total}"
    );
    let straight = timed_direct(direct, &url).await?;
    // The same download through one extra hop that only copies bytes: the ceiling any proxy (one
    // more receive and send per byte) can reach on this machine.
    let relay = crate::relay::Relay::start(upstream.addr).await?;
    let relayed = timed_direct(direct, &format!("http://{}{path}", relay.addr)).await?;
    let mib = (DOWNLOAD_BYTES >> 20) as f64;
    let rate = |d: std::time::Duration| mib / d.as_secs_f64();
    let (via_rate, direct_rate, relay_rate) = (rate(via), rate(straight), rate(relayed));
    let ratio = via_rate / direct_rate;
    Ok(vec![
        Row::new(
            SECTION,
            "1 GiB download through executor",
            via_rate,
            "MiB/s",
        )
        .baseline("direct reqwest", direct_rate),
        Row::new(
            SECTION,
            "1 GiB download, fraction of direct",
            ratio * 100.0,
            "%",
        )
        .target(">= 70%", ratio >= 0.7),
        Row::new(
            SECTION,
            "1 GiB download through a bare TCP relay (ceiling for one extra hop), fraction of direct",
            relay_rate / direct_rate * 100.0,
            "%",
        ),
    ])
}

/// Reads a body to its end; returns its size.
async fn drain<E: Into<anyhow::Error>>(
    mut body: impl futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
) -> anyhow::Result<u64> {
    let mut total = 0u64;
    while let Some(chunk) = body.next().await {
        total += chunk.map_err(Into::into)?.len() as u64;
    }
    Ok(total)
}

/// Times a direct reqwest download of `url`, checking its size.
async fn timed_direct(direct: &reqwest::Client, url: &str) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let total = drain(direct.get(url).send().await?.bytes_stream()).await?;
    let took = t.elapsed();
    anyhow::ensure!(total == DOWNLOAD_BYTES, "short direct download: {total}");
    Ok(took)
}
