//! `outpost sandbox` end to end: argument errors, exit-code forwarding, sandbox-state JSON, managed
//! requirements, `--explain`. Runs the real binary.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Output};

fn outpost(args: &[&str], cwd: &Path) -> Output {
    outpost_command(args, cwd).output().expect("run outpost")
}

fn outpost_command(args: &[&str], cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_outpost"));
    c.args(args).current_dir(cwd).env(
        "OUTPOST_MANAGED_CONFIG",
        "/nonexistent/outpost-requirements.toml",
    );
    c
}

/// `outpost sandbox -P :workspace -- sh -c SCRIPT`.
fn workspace_sh(script: &str) -> [&str; 7] {
    ["sandbox", "-P", ":workspace", "--", "sh", "-c", script]
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sandbox_ok() -> bool {
    let caps = outpost_sandbox::Capabilities::detect();
    if caps.landlock_abi >= 6 && caps.seccomp {
        return true;
    }
    let msg = "!!! outpost sandbox CLI TEST NOT RUN: kernel lacks Landlock ABI 6 or seccomp !!!";
    assert!(
        std::env::var_os("OUTPOST_TEST_REQUIRE_SANDBOX").is_none_or(|v| v != "1"),
        "{msg}"
    );
    eprintln!("{msg}");
    false
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::Builder::new()
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    std::fs::create_dir(ws.path().join(".git")).expect("mkdir .git");
    ws
}

#[test]
fn argument_errors() {
    let ws = workspace();
    let o = outpost(
        &["sandbox", "--sandbox-state-json", "{nope", "--", "true"],
        ws.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("invalid --sandbox-state-json value: "),
        "{}",
        stderr(&o)
    );
    let o = outpost(&["sandbox", "-P", ":workspace"], ws.path());
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no command"), "{}", stderr(&o));
    let state = r#"{"permissionProfile":{"type":"external"},"sandboxCwd":"relative/dir"}"#;
    let o = outpost(
        &["sandbox", "--sandbox-state-json", state, "--", "true"],
        ws.path(),
    );
    assert!(stderr(&o).contains("sandboxCwd"), "{}", stderr(&o));
    let state = r#"{"permissionProfile":{"type":"external"},"sandboxCwd":"https://x/y"}"#;
    let o = outpost(
        &["sandbox", "--sandbox-state-json", state, "--", "true"],
        ws.path(),
    );
    assert!(stderr(&o).contains("sandboxCwd"), "{}", stderr(&o));
    let o = outpost(
        &[
            "sandbox",
            "--sandbox-state-json",
            "{}",
            "-P",
            ":workspace",
            "--",
            "true",
        ],
        ws.path(),
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "clap must reject the conflict: {}",
        stderr(&o)
    );
    let o = outpost(&["sandbox", "-P", ":nope", "--", "true"], ws.path());
    assert!(
        stderr(&o).contains("unknown permission profile"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn exit_codes_are_forwarded() {
    if !sandbox_ok() {
        return;
    }
    let ws = workspace();
    let o = outpost(&workspace_sh("exit 5"), ws.path());
    assert_eq!(o.status.code(), Some(5));
    let o = outpost(&workspace_sh("kill -9 $$"), ws.path());
    assert_eq!(o.status.signal(), Some(libc::SIGKILL), "{:?}", o.status);
    let o = outpost(
        &[
            "sandbox",
            "-P",
            ":workspace",
            "--",
            "/nonexistent/outpost-cmd",
        ],
        ws.path(),
    );
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(stderr(&o).contains("command not found"), "{}", stderr(&o));
}

/// Started with stdin closed, the launcher (which skips std's runtime start-up) still reopens it on
/// `/dev/null` before opening anything, so no file it opens can pose as the command's stdin.
#[test]
fn a_closed_stdin_becomes_dev_null() {
    if !sandbox_ok() {
        return;
    }
    let ws = workspace();
    let mut c = outpost_command(&workspace_sh("readlink /proc/self/fd/0"), ws.path());
    // SAFETY: close(2) on fd 0 between fork and exec; async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::close(0);
            Ok(())
        });
    }
    let o = c.output().expect("run outpost");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "/dev/null");
}

/// A launcher that does not lead a process group becomes the command (same pid); one that does (a
/// job of an interactive shell, where `setsid` is refused) stays as its parent. Both give the command
/// its own session, the same sandbox and the same exit status.
#[test]
fn both_launch_modes_enforce_the_same_sandbox_and_status() {
    if !sandbox_ok() {
        return;
    }
    let script = "echo $$ $(cut -d' ' -f6 /proc/$$/stat) $CODEX_PERMISSION_PROFILE; \
                  (echo x > /etc/outpost-escape) 2>/dev/null || echo denied; exit 7";
    for group_leader in [false, true] {
        let ws = workspace();
        let mut c = outpost_command(&workspace_sh(script), ws.path());
        if group_leader {
            c.process_group(0);
        }
        let child = c
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn outpost");
        let launcher = child.id();
        let o = child.wait_with_output().expect("wait");
        let out = String::from_utf8_lossy(&o.stdout);
        let fields: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(
            fields.len(),
            4,
            "group leader {group_leader}: {out:?} {}",
            stderr(&o)
        );
        let (pid, sid) = (
            fields[0].parse::<u32>().unwrap(),
            fields[1].parse::<u32>().unwrap(),
        );
        assert_eq!(
            sid, pid,
            "the command leads its own session ({group_leader})"
        );
        assert_eq!(
            pid == launcher,
            !group_leader,
            "exec in place unless group leader"
        );
        assert_eq!(
            &fields[2..],
            [":workspace", "denied"],
            "group leader {group_leader}"
        );
        assert_eq!(o.status.code(), Some(7), "group leader {group_leader}");
        let mut c = outpost_command(&workspace_sh("kill -TERM $$"), ws.path());
        if group_leader {
            c.process_group(0);
        }
        let o = c.output().expect("run outpost");
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGTERM),
            "group leader {group_leader}: {:?}",
            o.status
        );
    }
}

#[test]
fn workspace_profile_end_to_end() {
    if !sandbox_ok() {
        return;
    }
    let ws = workspace();
    let o = outpost(
        &workspace_sh(
            "echo ok > out.txt && (echo x > .git/config) 2>/dev/null; echo $? $CODEX_PERMISSION_PROFILE",
        ),
        ws.path(),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "2 :workspace\n",
        "{}",
        stderr(&o)
    );
    assert!(ws.path().join("out.txt").exists());
}

#[test]
fn sandbox_state_json_runs_in_sandbox_cwd() {
    if !sandbox_ok() {
        return;
    }
    let ws = workspace();
    let state = format!(
        r#"{{"permissionProfile":{{"type":"managed","file_system":{{"type":"restricted","entries":[{{"path":{{"type":"special","value":{{"kind":"root"}}}},"access":"read"}},{{"path":{{"type":"special","value":{{"kind":"project_roots"}}}},"access":"write"}}]}},"network":"enabled"}},"sandboxCwd":"file://{}","codexLinuxSandboxExe":null,"useLegacyLandlock":false}}"#,
        ws.path().display()
    );
    let o = outpost(
        &[
            "sandbox",
            "--sandbox-state-json",
            &state,
            "--sandbox-state-disable-network",
            "--",
            "sh",
            "-c",
            "pwd; echo hi > f; echo ${CODEX_PERMISSION_PROFILE-unset} $CODEX_SANDBOX_NETWORK_DISABLED",
        ],
        Path::new("/"),
    );
    let expected = format!("{}\nunset 1\n", ws.path().display());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        expected,
        "{}",
        stderr(&o)
    );
    let disabled = format!(
        r#"{{"permissionProfile":{{"type":"disabled"}},"sandboxCwd":"{}"}}"#,
        ws.path().display()
    );
    let o = outpost(
        &["sandbox", "--sandbox-state-json", &disabled, "--", "true"],
        ws.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("allow_unsandboxed"), "{}", stderr(&o));
}

#[test]
fn managed_requirements_refuse_with_rule_name() {
    let ws = workspace();
    let req = ws.path().join("requirements.toml");
    std::fs::write(&req, "allowed_profiles = [\":read-only\"]\n").expect("write requirements");
    let o = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args([
            "sandbox",
            "-P",
            ":workspace",
            "--include-managed-config",
            "--",
            "true",
        ])
        .current_dir(ws.path())
        .env("OUTPOST_MANAGED_CONFIG", &req)
        .output()
        .expect("run outpost");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("allowed_profiles"), "{}", stderr(&o));
}

#[test]
fn explain_prints_policy_and_report() {
    let ws = workspace();
    let o = outpost(&["sandbox", "-P", ":workspace", "--explain"], ws.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("protected:"), "{out}");
    assert!(
        out.contains("CODEX_PERMISSION_PROFILE: :workspace"),
        "{out}"
    );
    assert!(
        out.contains("landlock:") || out.contains("REFUSED"),
        "{out}"
    );
    if out.contains("landlock:") {
        let env = out
            .lines()
            .find(|l| l.starts_with("environment: "))
            .expect("environment line");
        assert!(env.contains("CODEX_PERMISSION_PROFILE"), "{env}");
    }
}

#[test]
fn config_profiles_and_unknown_keys() {
    let ws = workspace();
    let cfg = ws.path().join("outpost.toml");
    std::fs::write(
        &cfg,
        "[permissions.dev]\nnetwork = \"enabled\"\nfilesytem = []\n",
    )
    .expect("write config");
    let o = outpost(
        &[
            "sandbox",
            "--config",
            cfg.to_str().expect("utf-8"),
            "-P",
            "dev",
            "--",
            "true",
        ],
        ws.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("filesytem"), "{}", stderr(&o));
}

/// The unprivileged path (user namespace for the mount layer): as root, run the launcher as `nobody`
/// through setpriv; otherwise the test already runs unprivileged.
#[test]
fn unprivileged_launch_protects_git_and_outside() {
    let caps = outpost_sandbox::Capabilities::detect();
    if !sandbox_ok() {
        return;
    }
    let root = nix::unistd::geteuid().is_root();
    if !caps.user_namespaces || (root && !Path::new("/usr/bin/setpriv").exists()) {
        let msg = "!!! unprivileged_launch NOT RUN: needs user namespaces (and setpriv when run as root) !!!";
        assert!(
            std::env::var_os("OUTPOST_TEST_REQUIRE_SANDBOX").is_none_or(|v| v != "1"),
            "{msg}"
        );
        eprintln!("{msg}");
        return;
    }
    let ws = workspace();
    if root {
        for p in [ws.path().to_owned(), ws.path().join(".git")] {
            nix::unistd::chown(&p, Some(65534.into()), Some(65534.into()))
                .expect("chown to nobody");
        }
    }
    let script = "echo ok > in-ws && (echo x > .git/config) 2>/dev/null; a=$?; \
        (echo x > /var/tmp/outpost-unpriv-escape) 2>/dev/null; b=$?; \
        grep -c '^CapEff:\t0000000000000000' /proc/self/status; echo $a $b";
    let exe = env!("CARGO_BIN_EXE_outpost");
    let mut cmd = if root {
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", exe]);
        c
    } else {
        Command::new(exe)
    };
    let o = cmd
        .args(workspace_sh(script))
        .current_dir(ws.path())
        .output()
        .expect("run outpost unprivileged");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1\n2 2\n",
        "{}",
        stderr(&o)
    );
    assert!(ws.path().join("in-ws").exists());
    assert!(!Path::new("/var/tmp/outpost-unpriv-escape").exists());
}

#[test]
fn named_profile_from_config_end_to_end() {
    if !sandbox_ok() {
        return;
    }
    let ws = workspace();
    std::fs::write(ws.path().join(".env"), "TOKEN=1\n").expect("write .env");
    let cfg = ws.path().join("outpost.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[permissions.build]
network = "restricted"
filesystem = [
  {{ special = "minimal", access = "read" }},
  {{ special = "project_roots", access = "write" }},
  {{ path = "{}/.env", access = "deny" }},
  {{ special = "from_the_future", access = "read" }},
]
[permissions.build.env]
inherit = "core"
set = {{ BUILD_MODE = "ci" }}
[permissions.build.rlimits]
nofile = 128
"#,
            ws.path().display()
        ),
    )
    .expect("write config");
    let script = "echo $CODEX_PERMISSION_PROFILE $BUILD_MODE $(ulimit -n); echo ok > out; \
        (cat .env) 2>/dev/null || echo env-hidden; (ls /home) 2>/dev/null || echo home-unreadable";
    let o = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args([
            "sandbox",
            "--config",
            cfg.to_str().expect("utf-8"),
            "-P",
            "build",
            "--",
        ])
        .args(["/bin/sh", "-c", script])
        .current_dir(ws.path())
        .env("OUTPOST_MANAGED_CONFIG", "/nonexistent/req.toml")
        .env("MY_API_TOKEN", "leak")
        .output()
        .expect("run outpost");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "build ci 128\nenv-hidden\nhome-unreadable\n",
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("from_the_future"),
        "unknown kind is warned about: {}",
        stderr(&o)
    );
    assert!(ws.path().join("out").exists());
}
