//! Shared harness for the sandbox integration tests: a workspace and an "outside" directory (both
//! under /var/tmp, which no built-in profile makes writable), a launcher built on the public API, and
//! the kernel-feature gate that refuses to skip silently.

#![allow(dead_code, unreachable_pub)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use outpost_sandbox::{
    Capabilities, FsContext, LaunchOptions, PreparedLaunch, Profile, ResolvedPolicy, resolve,
};

pub const EPERM: i32 = libc::EPERM;
pub const EACCES: i32 = libc::EACCES;
pub const EROFS: i32 = libc::EROFS;
pub const EXDEV: i32 = libc::EXDEV;
pub const EBUSY: i32 = libc::EBUSY;
pub const ENOSYS: i32 = libc::ENOSYS;

/// Path of the probe binary (built by cargo for this package's tests).
pub fn probe() -> &'static str {
    env!("CARGO_BIN_EXE_outpost-escape-probe")
}

/// Whether this host can run the sandbox tests; prints a loud notice (or panics when
/// `OUTPOST_TEST_REQUIRE_SANDBOX=1`) when it cannot. Never skips silently.
pub fn sandbox_available(test: &str) -> bool {
    let caps = Capabilities::detect();
    let root = nix::unistd::geteuid().is_root();
    let missing = if caps.landlock_abi == 0 {
        Some("Landlock")
    } else if !caps.seccomp {
        Some("seccomp")
    } else if root && caps.landlock_abi < 6 {
        Some("Landlock ABI 6 (signal scoping, required as root)")
    } else if !root && !caps.user_namespaces {
        Some("user namespaces")
    } else {
        None
    };
    let Some(missing) = missing else { return true };
    let msg = format!("!!! SANDBOX TEST {test} NOT RUN: this kernel lacks {missing} !!!");
    if std::env::var_os("OUTPOST_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") {
        panic!("{msg} (OUTPOST_TEST_REQUIRE_SANDBOX=1)");
    }
    eprintln!("{msg}");
    false
}

/// A workspace (with `.git/{config,HEAD,hooks}` and `file.txt`) and an outside directory holding
/// `secret.txt`.
pub struct Dirs {
    pub ws: tempfile::TempDir,
    pub outside: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        let mk = || {
            tempfile::Builder::new()
                .prefix("outpost-sbx-")
                .tempdir_in("/var/tmp")
                .expect("create test dir under /var/tmp")
        };
        let (ws, outside) = (mk(), mk());
        std::fs::create_dir_all(ws.path().join(".git/hooks")).expect("mkdir .git/hooks");
        std::fs::write(ws.path().join(".git/config"), "[core]\n").expect("write .git/config");
        std::fs::write(ws.path().join(".git/HEAD"), "ref: refs/heads/main\n").expect("write HEAD");
        std::fs::write(ws.path().join("file.txt"), "workspace\n").expect("write file.txt");
        std::fs::create_dir(ws.path().join("tmp")).expect("mkdir tmp");
        std::fs::write(outside.path().join("secret.txt"), "secret\n").expect("write secret");
        Self { ws, outside }
    }

    pub fn ws(&self, rel: &str) -> String {
        self.ws.path().join(rel).display().to_string()
    }

    pub fn out(&self, rel: &str) -> String {
        self.outside.path().join(rel).display().to_string()
    }

    pub fn context(&self) -> FsContext {
        FsContext {
            cwd: self.ws.path().to_owned(),
            home: PathBuf::from("/root"),
            tmp: self.ws.path().join("tmp"),
            workspace_roots: vec![self.ws.path().to_owned()],
        }
    }

    pub fn policy(&self, profile: &Profile) -> ResolvedPolicy {
        resolve(profile, &self.context(), None).expect("resolve profile")
    }
}

/// Prepares a launch of `policy` on this host with default options and the given inherited
/// environment.
pub fn prepare<I>(policy: &ResolvedPolicy, env: I) -> PreparedLaunch
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    PreparedLaunch::prepare(
        policy,
        &Capabilities::detect(),
        &LaunchOptions::default(),
        env,
    )
    .expect("prepare launch")
}

/// Runs `program args` under `policy` with the given inherited environment.
pub fn run_policy(
    policy: &ResolvedPolicy,
    env: Vec<(OsString, OsString)>,
    program: &str,
    args: &[&str],
) -> Output {
    let launch = prepare(policy, env);
    let mut cmd = Command::new(program);
    cmd.args(args);
    launch.apply(&mut cmd);
    cmd.output().expect("spawn sandboxed command")
}

/// Runs the probe under a built-in profile; returns (exit code, stdout).
pub fn probe_in(profile: &str, dirs: &Dirs, args: &[&str]) -> (i32, String) {
    let policy = dirs.policy(&Profile::builtin(profile).expect("built-in profile"));
    let out = run_policy(&policy, std::env::vars_os().collect(), probe(), args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout)
}

/// Runs `sh -c script` under a built-in profile.
pub fn sh_in(profile: &str, dirs: &Dirs, script: &str) -> Output {
    let policy = dirs.policy(&Profile::builtin(profile).expect("built-in profile"));
    run_policy(
        &policy,
        std::env::vars_os().collect(),
        "/bin/sh",
        &["-c", script],
    )
}

/// A process outside the sandbox to attack (ptrace, signals, /proc/PID/mem); killed on drop.
pub struct Sibling(pub std::process::Child);

impl Sibling {
    pub fn spawn() -> Self {
        Self(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("spawn sleep"),
        )
    }

    pub fn pid(&self) -> String {
        self.0.id().to_string()
    }

    /// Whether it is still alive (a successful kill from inside would have ended it).
    pub fn alive(&mut self) -> bool {
        self.0.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Sibling {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Asserts that the outside secret is untouched.
pub fn assert_secret_intact(dirs: &Dirs) {
    let s =
        std::fs::read_to_string(Path::new(&dirs.out("secret.txt"))).expect("secret still readable");
    assert_eq!(s, "secret\n", "outside file was modified");
}

/// As root, re-runs the current test binary as `nobody` (through setpriv) so the unprivileged path
/// (user namespace, no capabilities to drop) is covered too; `skip` is this test's own name.
pub fn rerun_as_nobody(skip: &str) {
    if std::env::var_os("OUTPOST_TEST_NOBODY_RUN").is_some() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("NOTE: {skip}: already unprivileged; the suite itself covers this path");
        return;
    }
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() || !Capabilities::detect().user_namespaces {
        let msg = format!("!!! {skip} NOT RUN: needs /usr/bin/setpriv and user namespaces !!!");
        if std::env::var_os("OUTPOST_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") {
            panic!("{msg}");
        }
        eprintln!("{msg}");
        return;
    }
    let exe = std::env::current_exe().expect("current test binary");
    let out = Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            "HOME=/tmp",
        ])
        .arg("OUTPOST_TEST_NOBODY_RUN=1")
        .arg(exe)
        .args(["--skip", skip])
        .current_dir("/tmp")
        .output()
        .expect("run the suite as nobody");
    assert!(
        out.status.success(),
        "suite failed as nobody:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
