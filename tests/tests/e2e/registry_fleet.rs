//! A fleet: one registry over 32 real `outpost serve` processes, all Ready, snapshot cost, concurrent
//! calls across all of them, and no file descriptor or task left behind once they are gone.
//!
//! File descriptor and task counts are process-wide while the other tests run in parallel threads,
//! so the test runs its body alone in a child copy of this test binary.

use std::time::{Duration, Instant};

use outpost_client::{EnvironmentRegistry, EnvironmentState};
use outpost_tests::ServeProcess;

use crate::registry::{ready, spec};

const FLEET: usize = 32;
const ALONE: &str = "OUTPOST_TEST_FLEET_ALONE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_of_32_executors_all_ready_and_nothing_leaks() -> anyhow::Result<()> {
    if std::env::var_os(ALONE).is_some() {
        return fleet().await;
    }
    let name = "registry_fleet::fleet_of_32_executors_all_ready_and_nothing_leaks";
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE, "1")
        .output()
        .await?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "fleet run failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the fleet test did not run:\n{text}"
    );
    Ok(())
}

fn open_fds() -> anyhow::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

async fn fleet() -> anyhow::Result<()> {
    let mut spawning = tokio::task::JoinSet::new();
    for _ in 0..FLEET {
        spawning.spawn(ServeProcess::unix(&[]));
    }
    let mut servers = Vec::new();
    while let Some(server) = spawning.join_next().await {
        servers.push(server??);
    }
    // Let the readiness probes' connections wind down before taking the baseline.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (fds_before, tasks_before) = (open_fds()?, alive_tasks());

    let registry = EnvironmentRegistry::new();
    for (i, server) in servers.iter().enumerate() {
        registry.register(spec(&format!("ws-{i}"), &server.target, &server.options));
    }
    for i in 0..FLEET {
        ready(&registry, &format!("ws-{i}")).await?;
    }
    let step = registry.snapshot();
    assert_eq!(step.len(), FLEET);
    assert!(
        step.iter()
            .all(|(_, s)| matches!(s, EnvironmentState::Ready(_)))
    );

    let rounds = 10_000u32;
    let timer = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(registry.snapshot());
    }
    let per_snapshot = timer.elapsed() / rounds;
    println!("snapshot of {FLEET} environments: {per_snapshot:?}");
    assert!(per_snapshot < Duration::from_micros(20), "{per_snapshot:?}");

    let mut calls = tokio::task::JoinSet::new();
    for (_, state) in step.iter() {
        let env = state.ready().expect("all ready").clone();
        calls.spawn(async move {
            let info = env.executor().info().await?;
            let root = env.executor().metadata("/", true).await?;
            anyhow::ensure!(info.executor_id == env.info().executor_id, "wrong executor");
            anyhow::ensure!(
                root.kind() == outpost_client::pb::FileKind::Directory,
                "{root:?}"
            );
            Ok(())
        });
    }
    while let Some(call) = calls.join_next().await {
        call??;
    }

    drop(step);
    drop(registry);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (fds, tasks) = (open_fds()?, alive_tasks());
        if fds <= fds_before && tasks <= tasks_before {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "leak after dropping the registry: fds {fds_before} -> {fds}, tasks {tasks_before} -> {tasks}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(servers);
    Ok(())
}
