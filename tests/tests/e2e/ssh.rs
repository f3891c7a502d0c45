//! `ssh://` targets against a real sshd on loopback (throwaway keys): the registry and the CLI reach
//! an executor started over ssh, a reconnect spawns ssh again, and a nested sandbox runs over ssh
//! from a trusted wrapper inside a workspace sandbox (with network, since ssh must connect).

use std::path::Path;
use std::time::Duration;

use outpost_client::registry::EnvironmentSpec;
use outpost_client::{ConnectOptions, EnvironmentRegistry, pb};
use outpost_tests::sshd::Sshd;

use crate::registry::ready;

#[tokio::test]
async fn registry_reaches_an_executor_over_ssh_and_reconnects() -> anyhow::Result<()> {
    let Some(sshd) = Sshd::start().await? else {
        return Ok(());
    };
    let bin = outpost_tests::outpost_bin();
    let registry = EnvironmentRegistry::new();
    let options = ConnectOptions {
        ssh_command: Some(sshd.ssh_command()),
        ..ConnectOptions::default()
    };
    registry.register(
        EnvironmentSpec::new("remote".parse()?)
            .with_target(sshd.target(&bin).parse()?)
            .with_connect(options),
    );
    let env = match ready(&registry, "remote").await {
        Ok(env) => env,
        Err(err) => anyhow::bail!("{err:#}\nsshd log:\n{}", sshd.log()),
    };
    assert!(env.fs_context().home.starts_with('/'));
    let session = env.session();
    let started = session
        .start(pb::StartRequest {
            argv: ["sh", "-c", "echo over-ssh"].map(String::from).to_vec(),
            cwd: env.fs_context().tmp.clone(),
            ..Default::default()
        })
        .await?;
    let mut out = Vec::new();
    let exit = session
        .follow(&started.process_id, 0, |event| {
            if let Some(pb::process_event::Event::Output(o)) = &event.event {
                out.extend_from_slice(&o.data);
            }
            Ok(())
        })
        .await?;
    assert_eq!((exit.code, out.as_slice()), (Some(0), &b"over-ssh\n"[..]));
    // A fresh connection runs ssh again: a new executor process on the "remote" host.
    registry.reconnect("remote")?;
    let again = ready(&registry, "remote").await?;
    assert_ne!(again.info().executor_id, env.info().executor_id);
    Ok(())
}

#[tokio::test]
async fn cli_target_ssh_uses_outpost_ssh_command() -> anyhow::Result<()> {
    let Some(sshd) = Sshd::start().await? else {
        return Ok(());
    };
    let bin = outpost_tests::outpost_bin();
    let out = tokio::process::Command::new(&bin)
        .args(["info", "--json", "--target", &sshd.target(&bin)])
        .env("OUTPOST_SSH_COMMAND", sshd.ssh_command())
        .output()
        .await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nsshd log:\n{}", sshd.log());
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(info["os"], std::env::consts::OS);
    // Without the custom command, plain ssh has no idea who outpost-test is: a clear failure.
    let plain = tokio::process::Command::new(&bin)
        .args(["info", "--target", &sshd.target(&bin)])
        .env_remove("OUTPOST_SSH_COMMAND")
        .output()
        .await?;
    assert!(!plain.status.success());
    Ok(())
}

/// Runs `outpost sandbox` locally with `args`, with `env` set, and returns (status, stdout, stderr).
async fn sandbox(
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> anyhow::Result<(Option<i32>, String, String)> {
    let mut cmd = tokio::process::Command::new(outpost_tests::outpost_bin());
    cmd.arg("sandbox").args(args).envs(env.iter().copied());
    let out = tokio::time::timeout(timeout, cmd.output()).await??;
    Ok((
        out.status.code(),
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

fn write_executable(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The profile the trusted wrapper runs under locally: `:workspace`'s filesystem with the network
/// enabled. It cannot be `:workspace` itself: a restricted network denies every `connect()`, unix
/// sockets included, so no ssh could leave that sandbox.
const WRAPPER_PROFILES: &str = r#"
[permissions.workspace-ssh]
network = "enabled"
filesystem = [
  { special = "root", access = "read" },
  { special = "project_roots", access = "write" },
  { special = "tmpdir", access = "write" },
  { special = "slash_tmp", access = "write" },
]
"#;

/// The trusted wrapper: validates the profile it runs under against its own allow-list (which maps
/// it to the profile for the remote command), then runs the command remotely. Every layer is an
/// argument vector; the one string ssh sends is built by quoting each element (`printf %q`), so the
/// remote shell rebuilds exactly that vector.
fn wrapper_script(remote_bin: &Path, ssh_config: &Path, host: &str) -> String {
    format!(
        r#"#!/bin/bash
set -euo pipefail
profile="${{CODEX_PERMISSION_PROFILE-}}"
case "$profile" in
  workspace-ssh|:workspace) remote_profile=:workspace ;;
  :read-only) remote_profile=:read-only ;;
  *) echo "wrapper: refusing permission profile '$profile'" >&2; exit 97 ;;
esac
remote=({remote_bin} sandbox -P "$remote_profile" --include-managed-config -- bash -lc "$1")
printf -v line '%q ' "${{remote[@]}}"
exec ssh -F {ssh_config} -T -o BatchMode=yes {host} "$line"
"#,
        remote_bin = remote_bin.display(),
        ssh_config = ssh_config.display(),
    )
}

#[tokio::test]
async fn nested_sandbox_over_ssh_from_a_trusted_wrapper() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Some(sshd) = Sshd::start().await? else {
        return Ok(());
    };
    let d = sshd.dir.path();
    // Readable by anyone (the temp dir itself is 0700, which a sandbox's user namespace cannot
    // traverse), so only the managed requirements can keep the remote command out.
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
    let secret = d.join("secret");
    std::fs::write(&secret, "s3cret\n")?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644))?;
    let wrapper = d.join("wrapper.sh");
    let bin = outpost_tests::outpost_bin();
    let host = outpost_tests::sshd::SSH_HOST;
    write_executable(&wrapper, &wrapper_script(&bin, &sshd.client_config, host))?;
    let profiles = d.join("profiles.toml");
    std::fs::write(&profiles, WRAPPER_PROFILES)?;
    let local_managed = d.join("local-requirements.toml");
    std::fs::write(&local_managed, "")?;

    let command = format!(
        "echo profile=$CODEX_PERMISSION_PROFILE; \
         cat {} >/dev/null 2>&1 && echo secret-read || echo secret-denied; \
         touch /usr/outpost-nested-$$ 2>/dev/null && echo wrote-usr || echo usr-denied",
        secret.display()
    );
    let (wrapper_arg, dir_arg) = (wrapper.display().to_string(), d.display().to_string());
    let (profiles_arg, managed_env) = (
        profiles.display().to_string(),
        local_managed.display().to_string(),
    );
    // The outer command forges the profile variable; the sandbox overrides it with the real one.
    let env = [
        ("CODEX_PERMISSION_PROFILE", ":danger-full-access"),
        ("OUTPOST_MANAGED_CONFIG", managed_env.as_str()),
    ];
    let args = [
        "-P",
        "workspace-ssh",
        "--config",
        &profiles_arg,
        "--include-managed-config",
        "-C",
        &dir_arg,
        "--",
        &wrapper_arg,
        &command,
    ];
    for (requirements, want) in [
        (String::new(), "secret-read"),
        // The remote operator's managed requirements: the secret is off limits in every sandbox.
        (
            format!("deny_paths = [{:?}]\n", secret.display().to_string()),
            "secret-denied",
        ),
    ] {
        std::fs::write(&sshd.requirements, requirements)?;
        let (code, stdout, stderr) = sandbox(&args, &env, Duration::from_secs(60)).await?;
        let log = sshd.log();
        assert_eq!(
            code,
            Some(0),
            "stdout:\n{stdout}\nstderr:\n{stderr}\nsshd:\n{log}"
        );
        let expected = format!("profile=:workspace\n{want}\nusr-denied\n");
        assert_eq!(stdout, expected, "{stderr}");
    }

    // Run outside any sandbox with a forged profile: the wrapper refuses, ssh never runs.
    let forged = tokio::process::Command::new(&wrapper)
        .arg("echo should-not-run")
        .env("CODEX_PERMISSION_PROFILE", ":danger-full-access")
        .output()
        .await?;
    assert_eq!(forged.status.code(), Some(97));
    assert!(forged.stdout.is_empty());
    let refusal = String::from_utf8_lossy(&forged.stderr);
    assert!(
        refusal.contains("refusing permission profile ':danger-full-access'"),
        "{refusal}"
    );
    Ok(())
}
