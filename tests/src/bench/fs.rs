//! Filesystem section: GetMetadata round trips over unix and TCP against a real `outpost serve`
//! process, and find-up for a root 12 levels up through a delay proxy (50 ms RTT): sequential vs
//! windowed-8 vs the server-side FindUp RPC, against the proxy's measured RTT.

use std::time::{Duration, Instant};

use outpost_client::{Executor, pb};

use super::report::Row;
use super::{ms, percentile};
use crate::{ServeProcess, delay_proxy, free_port, nested_dirs};

const SECTION: &str = "filesystem";

/// Runs the section; `quick` cuts iterations for smoke runs.
///
/// # Errors
/// When an executor cannot be started or a call fails.
pub async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let iterations = if quick { 200 } else { 3000 };
    let local = local_stat_p50(iterations);
    let unix = ServeProcess::unix(&[]).await?;
    rows.extend(metadata_rtt("unix", &unix.connect().await?, iterations, local).await?);
    let tcp = ServeProcess::tcp(free_port()?, &[]).await?;
    rows.extend(metadata_rtt("tcp", &tcp.connect().await?, iterations, local).await?);
    rows.extend(find_up_under_latency(&tcp, if quick { 1 } else { 5 }).await?);
    Ok(rows)
}

fn local_stat_p50(iterations: usize) -> Duration {
    let mut samples: Vec<_> = (0..iterations)
        .map(|_| {
            let t = Instant::now();
            let _ = std::hint::black_box(std::fs::metadata("/"));
            t.elapsed()
        })
        .collect();
    percentile(&mut samples, 50.0)
}

async fn metadata_rtt(
    transport: &str,
    client: &Executor,
    iterations: usize,
    local: Duration,
) -> anyhow::Result<Vec<Row>> {
    for _ in 0..iterations / 10 {
        client.metadata("/", true).await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        client.metadata("/", true).await?;
        samples.push(t.elapsed());
    }
    let p50 = percentile(&mut samples, 50.0);
    let p99 = percentile(&mut samples, 99.0);
    Ok(vec![
        Row::new(
            SECTION,
            format!("GetMetadata round trip p50 ({transport})"),
            ms(p50),
            "ms",
        )
        .baseline("local stat() p50", ms(local)),
        Row::new(
            SECTION,
            format!("GetMetadata round trip p99 ({transport})"),
            ms(p99),
            "ms",
        ),
    ])
}

async fn find_up_under_latency(tcp: &ServeProcess, runs: usize) -> anyhow::Result<Vec<Row>> {
    let upstream = tcp.target.trim_start_matches("http://").parse()?;
    let proxy = delay_proxy::start(upstream, Duration::from_millis(25)).await?;
    let client = tcp.connect_via(&format!("http://{}", proxy.addr)).await?;
    let tree = tempfile::tempdir()?;
    std::fs::write(tree.path().join("Cargo.toml"), "")?;
    let cwd = nested_dirs(tree.path(), 12)?;
    let request = pb::FindUpRequest {
        cwd: cwd.to_string_lossy().into_owned(),
        markers: vec!["Cargo.toml".to_owned()],
        ..Default::default()
    };
    let rtt = median(runs.max(3), || async {
        client.info().await?;
        Ok(())
    })
    .await?;
    let mut rows = vec![Row::new(
        SECTION,
        "simulated RTT (Info through the delay proxy)",
        ms(rtt),
        "ms",
    )];
    let expect_root = tree.path().to_string_lossy().into_owned();
    for (name, window) in [
        ("sequential", Some(1)),
        ("windowed-8", Some(8)),
        ("server FindUp", None),
    ] {
        let took = median(runs, || async {
            let response = match window {
                Some(w) => outpost_client::find_up::find_up(&client, request.clone(), w).await?,
                None => client.find_up_server(request.clone()).await?,
            };
            anyhow::ensure!(
                response.root.as_deref() == Some(expect_root.as_str()),
                "find-up found {:?}",
                response.root
            );
            Ok(())
        })
        .await?;
        let rtts = took.as_secs_f64() / rtt.as_secs_f64();
        let mut row = Row::new(
            SECTION,
            format!("find-up 12 levels up (13 probes), {name}"),
            ms(took),
            "ms",
        )
        .baseline("1 RTT", ms(rtt));
        row = match name {
            "windowed-8" => row.target("<= 2 RTT + 10%", rtts <= 2.2),
            "server FindUp" => row.target("<= 1 RTT + 10%", rtts <= 1.1),
            _ => row,
        };
        rows.push(row);
    }
    Ok(rows)
}

async fn median<F, Fut>(runs: usize, mut f: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f().await?;
        samples.push(t.elapsed());
    }
    Ok(percentile(&mut samples, 50.0))
}
