//! Registry section: time from registering an `exec:` environment to Ready (baseline: a bare connect
//! plus Info), snapshot cost with 64 Ready environments (target < 1 µs), how fast waiters wake after
//! the environment becomes Ready (target < 1 ms), and a 64-executor fleet of real `outpost serve` processes:
//! time until all are Ready and the harness's RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outpost_client::registry::EnvironmentSpec;
use outpost_client::{ConnectOptions, EnvironmentRegistry, Target, WaitOutcome};

use super::report::Row;
use super::{ms, percentile};
use crate::ServeProcess;

const SECTION: &str = "registry";
const FLEET: usize = 64;
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Runs the section; `quick` cuts iterations for smoke runs.
///
/// # Errors
/// When an executor cannot be started or an environment does not become Ready.
pub async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let mut rows = exec_to_ready(if quick { 3 } else { 10 }).await?;
    rows.extend(wake_up(if quick { 5 } else { 30 }).await?);
    rows.extend(fleet(if quick { 1_000_000 } else { 10_000_000 }).await?);
    Ok(rows)
}

fn spec(id: &str, target: &str, options: &ConnectOptions) -> anyhow::Result<EnvironmentSpec> {
    Ok(EnvironmentSpec::new(id.parse()?)
        .with_target(target.parse::<Target>()?)
        .with_connect(options.clone()))
}

async fn exec_to_ready(rounds: usize) -> anyhow::Result<Vec<Row>> {
    let target = format!("exec:{}", crate::outpost_bin().display());
    let (mut registered, mut bare) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let client = outpost_client::connect(&target.parse()?, &ConnectOptions::default()).await?;
        client.info().await?;
        bare.push(t.elapsed());
        drop(client);
        let registry = EnvironmentRegistry::new();
        let t = Instant::now();
        registry.register(spec("local", &target, &ConnectOptions::default())?);
        match registry.wait_for_environment("local", READY_WITHIN).await? {
            WaitOutcome::Ready(_) => registered.push(t.elapsed()),
            other => anyhow::bail!("exec: environment not ready: {other:?}"),
        }
    }
    Ok(vec![
        Row::new(
            SECTION,
            "register exec: environment -> Ready (spawn, health SERVING, Info, attach), p50",
            ms(percentile(&mut registered, 50.0)),
            "ms",
        )
        .baseline("connect + Info p50", ms(percentile(&mut bare, 50.0))),
    ])
}

/// Waiters blocked in `wait_for_environment` on a deferred environment; once its `exec:` target is
/// attached, the time from the connection being complete (just before it is published as Ready) to
/// each waiter running again.
async fn wake_up(rounds: usize) -> anyhow::Result<Vec<Row>> {
    const WAITERS: usize = 16;
    let target: Target = format!("exec:{}", crate::outpost_bin().display()).parse()?;
    let mut samples = Vec::with_capacity(rounds * WAITERS);
    for _ in 0..rounds {
        let registry = Arc::new(EnvironmentRegistry::new());
        registry.register(EnvironmentSpec::new("deferred".parse()?));
        let mut waiters = tokio::task::JoinSet::new();
        for _ in 0..WAITERS {
            let registry = registry.clone();
            waiters.spawn(async move {
                let outcome = registry
                    .wait_for_environment("deferred", READY_WITHIN)
                    .await;
                (Instant::now(), outcome)
            });
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        registry.attach_target("deferred", target.clone())?;
        while let Some(joined) = waiters.join_next().await {
            match joined? {
                (woke, Ok(WaitOutcome::Ready(env))) => {
                    samples.push(woke.saturating_duration_since(env.connected_at()));
                }
                (_, other) => anyhow::bail!("deferred environment not ready: {other:?}"),
            }
        }
    }
    let p50 = percentile(&mut samples, 50.0);
    let p99 = percentile(&mut samples, 99.0);
    let name =
        |p: &str| format!("wait_for_environment wake-up after Ready ({WAITERS} waiters), {p}");
    Ok(vec![
        Row::new(SECTION, name("p50"), ms(p50), "ms")
            .target("< 1 ms", p50 < Duration::from_millis(1)),
        Row::new(SECTION, name("p99"), ms(p99), "ms")
            .target("< 1 ms", p99 < Duration::from_millis(1)),
    ])
}

/// The harness's resident set size in KiB.
fn vm_rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/self/status"))?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("malformed VmRSS line"))?
        .parse()?)
}

async fn fleet(snapshots: u32) -> anyhow::Result<Vec<Row>> {
    let mut spawning = tokio::task::JoinSet::new();
    for _ in 0..FLEET {
        spawning.spawn(ServeProcess::unix(&[]));
    }
    let mut servers = Vec::with_capacity(FLEET);
    while let Some(server) = spawning.join_next().await {
        servers.push(server??);
    }
    let rss_before = vm_rss_kib()?;
    let registry = EnvironmentRegistry::new();
    let t = Instant::now();
    for (i, server) in servers.iter().enumerate() {
        registry.register(spec(&format!("ws-{i}"), &server.target, &server.options)?);
    }
    for i in 0..FLEET {
        match registry
            .wait_for_environment(&format!("ws-{i}"), READY_WITHIN)
            .await?
        {
            WaitOutcome::Ready(_) => {}
            other => anyhow::bail!("ws-{i} not ready: {other:?}"),
        }
    }
    let all_ready = t.elapsed();
    let rss_after = vm_rss_kib()?;
    let t = Instant::now();
    for _ in 0..snapshots {
        std::hint::black_box(registry.snapshot());
    }
    let per_snapshot = t.elapsed().as_nanos() as f64 / f64::from(snapshots);
    let shared = Arc::new(0u64);
    let t = Instant::now();
    for _ in 0..snapshots {
        std::hint::black_box(shared.clone());
    }
    let per_arc_clone = t.elapsed().as_nanos() as f64 / f64::from(snapshots);
    Ok(vec![
        Row::new(
            SECTION,
            format!("snapshot() with {FLEET} Ready environments"),
            per_snapshot,
            "ns",
        )
        .baseline("Arc clone", per_arc_clone)
        .target("< 1 µs", per_snapshot < 1000.0),
        Row::new(
            SECTION,
            format!("{FLEET}-executor fleet: register -> all Ready"),
            ms(all_ready),
            "ms",
        ),
        Row::new(
            SECTION,
            format!("harness RSS with {FLEET} Ready environments"),
            rss_after as f64 / 1024.0,
            "MiB",
        )
        .baseline("before registering", rss_before as f64 / 1024.0),
    ])
}
