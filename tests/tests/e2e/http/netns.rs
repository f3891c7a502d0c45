//! The executor-only scenario for real: the MCP server and `outpost serve` run inside a network
//! namespace the test creates (loopback only), so the harness cannot reach the server; the executor is
//! reached over a unix socket (a filesystem path, so it crosses network namespaces), and rmcp talks
//! MCP through it. Needs root and `ip netns`; without them the test says so loudly, and fails when
//! `OUTPOST_TEST_REQUIRE_NETNS=1`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use outpost_client::http::ExecutorHttpClient;
use outpost_client::{ConnectOptions, Target};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

use super::mcp::exercise_mcp;

/// A network namespace deleted on drop.
struct Netns(String);

impl Netns {
    fn create() -> anyhow::Result<Self> {
        let name = format!("outpost-test-{}-{}", std::process::id(), rand_suffix());
        run("ip", &["netns", "add", &name])?;
        let ns = Self(name);
        run(
            "ip",
            &["netns", "exec", &ns.0, "ip", "link", "set", "lo", "up"],
        )?;
        Ok(ns)
    }

    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0]).arg(program);
        cmd.kill_on_drop(true).stdin(Stdio::null());
        cmd
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let output = std::process::Command::new(program).args(args).output()?;
    anyhow::ensure!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// Reads the fixture's `listening URL` line.
async fn mcp_url(child: &mut Child) -> anyhow::Result<String> {
    let stdout = child.stdout.take().context("stdout is piped")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .context("the MCP server did not start within 10 s")??
        .context("the MCP server exited")?;
    Ok(line.trim_start_matches("listening ").to_owned())
}

async fn connect(socket: &Path) -> anyhow::Result<outpost_client::Executor> {
    let target: Target = format!("unix:{}", socket.display()).parse()?;
    for _ in 0..500 {
        if let Ok(executor) = outpost_client::connect(&target, &ConnectOptions::default()).await
            && executor.info().await.is_ok()
        {
            return Ok(executor);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the executor in the namespace did not come up")
}

#[tokio::test]
async fn mcp_server_reachable_only_inside_a_network_namespace() -> anyhow::Result<()> {
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(err) if std::env::var("OUTPOST_TEST_REQUIRE_NETNS").as_deref() == Ok("1") => {
            return Err(err.context(
                "OUTPOST_TEST_REQUIRE_NETNS=1 but a network namespace cannot be created",
            ));
        }
        Err(err) => {
            eprintln!(
                "\n!!! SKIPPED mcp_server_reachable_only_inside_a_network_namespace: cannot create a \
                 network namespace ({err:#}); needs root and iproute2. The loopback variant still ran. \
                 Set OUTPOST_TEST_REQUIRE_NETNS=1 to make this a failure.\n"
            );
            return Ok(());
        }
    };
    let mcp_bin = Path::new(env!("CARGO_BIN_EXE_outpost-test-mcp-server"));
    let mut server = ns
        .command(mcp_bin)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()?;
    let url = mcp_url(&mut server).await?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("run").join("outpost.sock");
    let _executor = ns
        .command(&outpost_tests::outpost_bin())
        .args(["serve", "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let executor = connect(&socket).await?;

    // The harness's own network cannot reach the server.
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let direct =
        tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await;
    assert!(
        !matches!(direct, Ok(Ok(_))),
        "the harness reached {addr} directly; the namespace is not isolating"
    );
    exercise_mcp(ExecutorHttpClient::new(executor), &url).await
}
