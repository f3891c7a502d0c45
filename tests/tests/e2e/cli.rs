//! The `outpost` binary as a user runs it.

use std::process::Command;

fn outpost() -> Command {
    Command::new(outpost_tests::outpost_bin())
}

#[test]
fn info_on_default_exec_target() -> anyhow::Result<()> {
    let out = outpost()
        .args(["info", "--json"])
        .env("OUTPOST_BIN", outpost_tests::outpost_bin())
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(info["os"], std::env::consts::OS);
    Ok(())
}

#[test]
fn non_loopback_tcp_without_tls_refuses_to_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n")?;
    let out = outpost()
        .args(["serve", "--listen", "tcp://0.0.0.0:0", "--token-file"])
        .arg(&token)
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without TLS"), "{stderr}");
    Ok(())
}

#[test]
fn tcp_without_token_refuses_to_start() -> anyhow::Result<()> {
    let out = outpost()
        .args(["serve", "--listen", "tcp://127.0.0.1:0"])
        .env_remove("OUTPOST_TOKEN_FILE")
        .output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("requires a bearer token"));
    Ok(())
}

#[test]
fn bad_config_key_is_named() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cfg = dir.path().join("outpost.toml");
    std::fs::write(&cfg, "listen = \"stdio\"\nworkspace_rots = []\n")?;
    let out = outpost().args(["serve", "--config"]).arg(&cfg).output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("workspace_rots"), "{stderr}");
    Ok(())
}

#[test]
fn unknown_target_is_a_clear_error() -> anyhow::Result<()> {
    let out = outpost().args(["info", "--target", "ftp://x"]).output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid target"));
    Ok(())
}

/// A socket that is not there: one line that names the target and the OS error, each once.
#[test]
fn unreachable_target_names_target_and_cause_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let target = format!("unix:{}", dir.path().join("missing.sock").display());
    let out = outpost()
        .args(["exec", "--target", &target, "--", "true"])
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr
            .matches(&format!("cannot connect to {target}"))
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    Ok(())
}

#[test]
fn stdio_executor_exits_cleanly_when_the_peer_closes() -> anyhow::Result<()> {
    use std::process::Stdio;
    let child = outpost()
        .args(["serve", "--listen", "stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Dropping our end of stdin is the peer going away.
    let out = child.wait_with_output()?;
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // stdout carries HTTP/2 only: at most the server's SETTINGS frame (type 4), never log text.
    let settings_only = out.stdout.is_empty() || (out.stdout.len() >= 9 && out.stdout[3] == 4);
    assert!(
        settings_only,
        "stdio mode wrote non-HTTP/2 bytes: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stdio"),
        "logs go to stderr"
    );
    Ok(())
}

#[tokio::test]
async fn sigterm_drains_and_removes_the_socket() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("run").join("o.sock");
    let mut child = tokio::process::Command::new(outpost_tests::outpost_bin())
        .arg("serve")
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let target: outpost_client::Target = format!("unix:{}", sock.display()).parse()?;
    let mut client = None;
    for _ in 0..200 {
        if let Ok(c) = outpost_client::connect(&target, &Default::default()).await {
            client = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let client = client.expect("executor came up within 2 s");
    client.info().await?;
    let pid =
        nix::unistd::Pid::from_raw(i32::try_from(child.id().expect("running child has a pid"))?);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
    let status = tokio::time::timeout(std::time::Duration::from_secs(15), child.wait()).await??;
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "socket removed after drain");
    Ok(())
}
