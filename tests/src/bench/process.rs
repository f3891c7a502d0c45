//! Process section: exec round trip of `true` over a warm channel (unsandboxed and `:workspace`)
//! against a local spawn, 1 GiB of output against a local pipe, and 1,000 concurrent short processes
//! with the executor's idle and peak RSS, all against a real `outpost serve` process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outpost_client::{Session, pb};
use tokio::io::AsyncReadExt;

use super::report::Row;
use super::{ms, percentile};
use crate::ServeProcess;

const SECTION: &str = "process";

/// Runs the section.
///
/// # Errors
/// When the executor cannot be started or a call fails.
pub async fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let managed = dir.path().join("requirements.toml");
    std::fs::write(&managed, "allow_unsandboxed = true\n")?;
    let managed_arg = managed.to_string_lossy().into_owned();
    let server = ServeProcess::unix(&["--managed-config", &managed_arg]).await?;
    let idle_rss = rss_kib(server.pid().unwrap_or(0));
    let client = server.connect().await?;
    let session = Arc::new(client.attach(None, None).await?);
    let n = if quick { 50 } else { 300 };
    let mut rows = Vec::new();
    let local = local_spawn_median(n).await?;
    let ssh = crate::sshd::Sshd::start().await?;
    let master = match &ssh {
        Some(sshd) => Some(SshMaster::start(sshd).await?),
        None => {
            eprintln!(
                "outpost-bench: WARNING: sshd is not installed (apt-get install openssh-server); ssh comparisons skipped"
            );
            None
        }
    };
    let ssh_rtt = match &master {
        Some(m) => Some(m.true_median(if quick { 20 } else { 100 }).await?),
        None => None,
    };
    for profile in [":danger-full-access", ":workspace"] {
        let took = exec_median(&session, profile, n).await?;
        rows.push(
            Row::new(
                SECTION,
                format!("exec `true` round trip, warm channel, {profile}"),
                ms(took),
                "ms",
            )
            .baseline("local spawn+wait", ms(local))
            .target("median <= 3 ms", ms(took) <= 3.0),
        );
        if let Some(ssh_rtt) = ssh_rtt {
            let speedup = ssh_rtt.as_secs_f64() / took.as_secs_f64();
            rows.push(
                Row::new(
                    SECTION,
                    format!("exec `true` round trip, {profile}, vs warm ssh"),
                    ms(took),
                    "ms",
                )
                .baseline("ssh with a warm ControlMaster", ms(ssh_rtt))
                .target(">= 30x faster than ssh", speedup >= 30.0),
            );
        }
    }
    let mib = if quick { 256 } else { 1024 };
    let (tput, ssh_gbps) = throughput(&session, master.as_ref(), mib).await?;
    if let Some(ssh_gbps) = ssh_gbps {
        rows.push(
            Row::new(
                SECTION,
                format!("output throughput, {mib} MiB, vs ssh"),
                tput.value,
                "GB/s",
            )
            .baseline("ssh with a warm ControlMaster", ssh_gbps)
            .target(">= 2x ssh", tput.value >= 2.0 * ssh_gbps),
        );
    }
    rows.push(tput);
    rows.extend(concurrent(&session, &server, if quick { 200 } else { 1000 }).await?);
    rows.push(
        Row::new(
            SECTION,
            "executor idle RSS",
            idle_rss as f64 / 1024.0,
            "MiB",
        )
        .target("<= 20 MB", idle_rss as f64 * 1024.0 <= 20e6),
    );
    Ok(rows)
}

/// A warm ssh ControlMaster to the throwaway loopback sshd, the baseline for round trips and
/// throughput.
struct SshMaster {
    config: std::path::PathBuf,
    control: std::path::PathBuf,
}

impl SshMaster {
    async fn start(sshd: &crate::sshd::Sshd) -> anyhow::Result<Self> {
        let master = Self {
            config: sshd.client_config.clone(),
            control: sshd.dir.path().join("ctl"),
        };
        let status = master
            .ssh()
            .args([
                "-o",
                "ControlMaster=yes",
                "-o",
                "ControlPersist=300",
                "-N",
                "-f",
                crate::sshd::SSH_HOST,
            ])
            .status()
            .await?;
        anyhow::ensure!(status.success(), "cannot start the ssh ControlMaster");
        Ok(master)
    }

    fn ssh(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("ssh");
        cmd.arg("-F")
            .arg(&self.config)
            .arg("-o")
            .arg(format!("ControlPath={}", self.control.display()));
        cmd.stdin(std::process::Stdio::null());
        cmd
    }

    async fn true_median(&self, n: usize) -> anyhow::Result<Duration> {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let status = self
                .ssh()
                .args([crate::sshd::SSH_HOST, "true"])
                .status()
                .await?;
            samples.push(t.elapsed());
            anyhow::ensure!(status.success(), "ssh true failed");
        }
        Ok(percentile(&mut samples, 50.0))
    }

    async fn throughput_gbps(&self, mib: u64) -> anyhow::Result<f64> {
        let bytes = mib * 1024 * 1024;
        let t = Instant::now();
        let mut command = self.ssh();
        command.args([crate::sshd::SSH_HOST, &format!("head -c {bytes} /dev/zero")]);
        let total = drain_stdout(command).await?;
        anyhow::ensure!(total == bytes, "ssh delivered {total} of {bytes} bytes");
        Ok(bytes as f64 / t.elapsed().as_secs_f64() / 1e9)
    }
}

/// Runs `command`, reads its stdout to the end and waits for it; returns the bytes read.
async fn drain_stdout(mut command: tokio::process::Command) -> anyhow::Result<u64> {
    let mut child = command.stdout(std::process::Stdio::piped()).spawn()?;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    child.wait().await?;
    Ok(total)
}

impl Drop for SshMaster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ssh")
            .arg("-F")
            .arg(&self.config)
            .arg("-o")
            .arg(format!("ControlPath={}", self.control.display()))
            .args(["-O", "exit", crate::sshd::SSH_HOST])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Resident set size of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

async fn local_spawn_median(n: usize) -> anyhow::Result<Duration> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        tokio::process::Command::new("true").status().await?;
        samples.push(t.elapsed());
    }
    Ok(percentile(&mut samples, 50.0))
}

fn request(argv: &[&str], profile: &str) -> pb::StartRequest {
    pb::StartRequest {
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        cwd: std::env::temp_dir().to_string_lossy().into_owned(),
        sandbox: Some(pb::start_request::Sandbox::Profile(profile.to_owned())),
        ..Default::default()
    }
}

async fn exec_median(session: &Session, profile: &str, n: usize) -> anyhow::Result<Duration> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let pid = session.start(request(&["true"], profile)).await?.process_id;
        let exit = session.follow(&pid, 0, |_| Ok(())).await?;
        anyhow::ensure!(
            exit.code == Some(0),
            "true failed under {profile}: {exit:?}"
        );
        samples.push(t.elapsed());
    }
    Ok(percentile(&mut samples, 50.0))
}

/// Rounds of the throughput measurement; each figure is the median, taken interleaved with its
/// baselines (the local pipe and, when there is an sshd, ssh) so all of them see the same machine.
const THROUGHPUT_ROUNDS: usize = 3;

/// The executor's output throughput row (against the local pipe) and ssh's median throughput.
async fn throughput(
    session: &Session,
    ssh: Option<&SshMaster>,
    mib: u64,
) -> anyhow::Result<(Row, Option<f64>)> {
    let bytes = mib * 1024 * 1024;
    let script = format!("head -c {bytes} /dev/zero");
    let gbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    let (mut local, mut remote, mut over_ssh) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        local.push(gbps(local_pipe(&script, bytes).await?));
        remote.push(gbps(remote_output(session, &script, bytes).await?));
        if let Some(m) = ssh {
            over_ssh.push(m.throughput_gbps(mib).await?);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let (local, remote) = (
        median(&mut local).unwrap_or(0.0),
        median(&mut remote).unwrap_or(0.0),
    );
    let row = Row::new(
        SECTION,
        format!("output throughput, {mib} MiB of /dev/zero (median of {THROUGHPUT_ROUNDS})"),
        remote,
        "GB/s",
    )
    .baseline("local pipe", local)
    .target(">= 1 GB/s", remote >= 1.0);
    Ok((row, median(&mut over_ssh)))
}

/// Time to read `script`'s output through a local pipe.
async fn local_pipe(script: &str, bytes: u64) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", script]);
    let total = drain_stdout(command).await?;
    anyhow::ensure!(total == bytes, "short local output: {total} of {bytes}");
    Ok(t.elapsed())
}

/// Time to follow `script`'s output through the executor (sandboxed, `:workspace`).
async fn remote_output(session: &Session, script: &str, bytes: u64) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let pid = session
        .start(request(&["sh", "-c", script], ":workspace"))
        .await?
        .process_id;
    let mut total = 0u64;
    session
        .follow(&pid, 0, |e| {
            if let Some(pb::process_event::Event::Output(o)) = &e.event {
                total += o.data.len() as u64;
            }
            Ok(())
        })
        .await?;
    anyhow::ensure!(total == bytes, "short output: {total} of {bytes}");
    Ok(t.elapsed())
}

async fn concurrent(
    session: &Arc<Session>,
    server: &ServeProcess,
    n: usize,
) -> anyhow::Result<Vec<Row>> {
    let pid = server.pid().unwrap_or(0);
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(rss_kib(pid)));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let session = session.clone();
        tasks.spawn(async move {
            let pid = session
                .start(request(&["sh", "-c", "echo hi"], ":workspace"))
                .await?
                .process_id;
            let exit = session.follow(&pid, 0, |_| Ok(())).await?;
            anyhow::ensure!(exit.code == Some(0), "{exit:?}");
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(result) = tasks.join_next().await {
        result??;
    }
    let took = t.elapsed();
    sampler.abort();
    Ok(vec![
        Row::new(
            SECTION,
            format!("{n} concurrent short processes (:workspace), total"),
            ms(took),
            "ms",
        ),
        Row::new(
            SECTION,
            format!("executor peak RSS during {n} concurrent processes"),
            peak.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0,
            "MiB",
        ),
    ])
}
