//! Process faults: a client dropping mid-stream and resuming, detach TTL expiry, executor death,
//! and a slow reader behind a fast writer.

use std::time::Duration;

use outpost_client::pb;
use outpost_exec_server::ExecutorOptions;
use outpost_exec_server::process::ProcessConfig;
use outpost_tests::bench::process::rss_kib;
use outpost_tests::{InProcessExecutor, ServeProcess, Transport};

const PATTERN: &[u8] = b"0123456789abcdef\n";

fn cmd(script: &str) -> pb::StartRequest {
    pb::StartRequest {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: std::env::temp_dir().to_string_lossy().into_owned(),
        ..Default::default()
    }
}

/// Starts a process that writes `total` bytes of the repeating [`PATTERN`]; returns its id.
async fn start_pattern(session: &outpost_client::Session, total: u64) -> anyhow::Result<String> {
    Ok(session
        .start(cmd(&format!("yes 0123456789abcdef | head -c {total}")))
        .await?
        .process_id)
}

/// Checks that `data` continues the repeating pattern at `offset`.
fn check_pattern(data: &[u8], offset: u64) -> bool {
    data.iter().enumerate().all(|(i, b)| {
        let at = usize::try_from((offset + i as u64) % PATTERN.len() as u64).unwrap_or(0);
        *b == PATTERN[at]
    })
}

/// Checks that an output event continues the pattern at `received` (no loss, no duplicate) and
/// counts it; a gap fails the test.
fn check_event(event: &pb::ProcessEvent, received: &mut u64) {
    match &event.event {
        Some(pb::process_event::Event::Output(out)) => {
            assert!(
                check_pattern(&out.data, *received),
                "corrupt, lost or duplicated data at {received}"
            );
            *received += out.data.len() as u64;
        }
        Some(pb::process_event::Event::Gap(gap)) => panic!("lost events: {gap:?}"),
        _ => {}
    }
}

#[tokio::test]
async fn resume_after_a_dropped_stream_loses_and_duplicates_nothing() -> anyhow::Result<()> {
    const TOTAL: u64 = 100 * 1024 * 1024;
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    let session = client.attach(None, None).await?;
    let pid = start_pattern(&session, TOTAL).await?;
    let (mut received, mut last_seq, mut since_ack) = (0u64, 0u64, 0usize);
    // First connection: read about a third, acknowledging as a well-behaved reader does, then vanish
    // without acknowledging the tail (it was delivered but, as far as the executor knows, maybe lost).
    {
        let mut stream = session.events(&pid, 0, true).await?;
        while received < TOTAL / 3 {
            let event = stream.message().await?.expect("stream continues");
            if let Some(pb::process_event::Event::Output(out)) = &event.event {
                assert!(
                    check_pattern(&out.data, received),
                    "corrupt data at {received}"
                );
                received += out.data.len() as u64;
                since_ack += out.data.len();
            }
            last_seq = event.seq;
            if since_ack > 256 * 1024 {
                // Acknowledge what we are sure we have, minus the current event, to leave an unacked tail.
                session.ack(&pid, last_seq - 1).await?;
                since_ack = 0;
            }
        }
    }
    let mut exit = None;
    session
        .follow(&pid, last_seq, |event| {
            check_event(event, &mut received);
            if let Some(pb::process_event::Event::Exit(e)) = &event.event {
                exit = Some(e.clone());
            }
            Ok(())
        })
        .await?;
    assert_eq!(received, TOTAL);
    assert_eq!(exit.and_then(|e| e.code), Some(0));
    Ok(())
}

/// An operator may configure a ring smaller than the client's ack cadence: the producer then waits
/// for an ack the reader only sends once the stream goes quiet. Following must still finish.
#[tokio::test]
async fn follow_finishes_with_a_ring_smaller_than_the_ack_cadence() -> anyhow::Result<()> {
    const TOTAL: u64 = 4 * 1024 * 1024;
    let options = ExecutorOptions {
        process: ProcessConfig {
            output_ring_bytes: 16 * 1024,
            ..ProcessConfig::default()
        },
        ..ExecutorOptions::default()
    };
    let server = InProcessExecutor::start_with(Transport::Unix, options).await?;
    let client = server.connect().await?;
    let session = client.attach(None, None).await?;
    let pid = start_pattern(&session, TOTAL).await?;
    let mut received = 0u64;
    let followed = tokio::time::timeout(
        Duration::from_secs(60),
        session.follow(&pid, 0, |event| {
            check_event(event, &mut received);
            Ok(())
        }),
    )
    .await;
    let exit = followed.map_err(|_| {
        anyhow::anyhow!("follow stalled after {received} bytes with a 16 KiB ring")
    })??;
    assert_eq!(received, TOTAL);
    assert_eq!(exit.code, Some(0));
    Ok(())
}

fn alive(pid: u32) -> bool {
    // A zombie has exited already; only count processes that still run.
    outpost_tests::procfs::stat(pid).is_some_and(|s| !s.is_zombie())
}

/// Processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    outpost_tests::procfs::processes()
        .filter(|(_, s)| s.pgrp == pgid && !s.is_zombie())
        .map(|(pid, _)| pid)
        .collect()
}

async fn wait_until(mut cond: impl FnMut() -> bool, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

#[tokio::test]
async fn detach_ttl_expiry_kills_the_whole_process_group() -> anyhow::Result<()> {
    let options = ExecutorOptions {
        process: ProcessConfig {
            detach_ttl: Duration::from_millis(400),
            ..ProcessConfig::default()
        },
        ..ExecutorOptions::default()
    };
    let server = InProcessExecutor::start_with(Transport::Unix, options).await?;
    let client = server.connect().await?;
    let session = client.attach(None, None).await?;
    let started = session.start(cmd("sleep 300 & sleep 300 & wait")).await?;
    let pgid = started.pid;
    assert!(
        wait_until(|| group_members(pgid).len() >= 3, Duration::from_secs(5)).await,
        "shell and two sleeps run"
    );
    drop(session);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        group_members(pgid).len() >= 3,
        "still running within the TTL"
    );
    assert!(
        wait_until(|| group_members(pgid).is_empty(), Duration::from_secs(5)).await,
        "survivors after TTL expiry: {:?}",
        group_members(pgid)
    );
    Ok(())
}

#[tokio::test]
async fn executor_sigkill_leaves_no_sandboxed_process() -> anyhow::Result<()> {
    let server = ServeProcess::unix(&[]).await?;
    let client = server.connect().await?;
    let session = client.attach(None, None).await?;
    let started = session.start(cmd("exec sleep 300")).await?;
    assert!(
        started.sandbox.as_ref().is_some_and(|s| s.sandboxed),
        "the default profile sandboxes"
    );
    assert!(alive(started.pid));
    let executor = nix::unistd::Pid::from_raw(i32::try_from(server.pid().expect("running"))?);
    nix::sys::signal::kill(executor, nix::sys::signal::Signal::SIGKILL)?;
    assert!(
        wait_until(|| !alive(started.pid), Duration::from_secs(5)).await,
        "child {} survived its executor",
        started.pid
    );
    Ok(())
}

#[tokio::test]
async fn slow_reader_with_fast_writer_keeps_executor_memory_bounded() -> anyhow::Result<()> {
    let server = ServeProcess::unix(&[]).await?;
    let pid = server.pid().expect("running");
    let client = server.connect().await?;
    let session = client.attach(None, None).await?;
    let before = rss_kib(pid);
    let process = session
        .start(cmd("head -c 2000000000 /dev/zero"))
        .await?
        .process_id;
    let mut stream = session.events(&process, 0, false).await?;
    let mut peak = before;
    for _ in 0..40 {
        let _ = stream.message().await?;
        tokio::time::sleep(Duration::from_millis(25)).await;
        peak = peak.max(rss_kib(pid));
    }
    session.signal(&process, pb::SignalKind::Kill).await?;
    let grown_mib = (peak.saturating_sub(before)) / 1024;
    // Bound: the 1 MiB ring plus HTTP/2 windows (4 MiB stream, 16 MiB connection) and allocator slack.
    assert!(
        grown_mib < 48,
        "executor grew by {grown_mib} MiB while the writer produced far more"
    );
    Ok(())
}

#[tokio::test]
async fn graceful_shutdown_terminates_every_process() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    let session = client.attach(None, None).await?;
    let started = session.start(cmd("sleep 300 & exec sleep 300")).await?;
    assert!(
        wait_until(
            || group_members(started.pid).len() == 2,
            Duration::from_secs(5)
        )
        .await
    );
    drop(session);
    server.shutdown().await;
    assert!(
        wait_until(
            || group_members(started.pid).is_empty(),
            Duration::from_secs(5)
        )
        .await,
        "survivors after shutdown: {:?}",
        group_members(started.pid)
    );
    Ok(())
}
