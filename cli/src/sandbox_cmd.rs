//! `outpost sandbox`: run one command under a permission profile (`-P NAME`) or a Codex sandbox state
//! (`--sandbox-state-json`), or explain what would be enforced (`--explain`).
//!
//! The launcher normally becomes the command: it applies the layers to itself (new session, mount
//! namespace, Landlock, seccomp, no capabilities) and execs, so a launch costs no second process and
//! the caller sees the command's own exit status. `setsid` fails for a process-group leader (a job of
//! an interactive shell), so such a launcher instead spawns the command in its own session with a
//! parent-death signal, waits, and mirrors its status: the exit code, or the same signal raised on
//! itself. Either way the command runs in its own session and the caller observes the same outcome.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;
use outpost_sandbox::{
    Capabilities, FsContext, LaunchOptions, ManagedRequirements, PreparedLaunch, ProfileConfig,
    ResolvedPolicy, SandboxState, resolve,
};

/// Run a command inside the outpost sandbox.
#[derive(Debug, Args)]
#[command(after_help = "\
Profiles:
  :read-only           read everything, write nothing, network restricted to AF_UNIX
  :workspace           also write the working directory (-C), $TMPDIR and /tmp;
                       .git, .codex and .agents inside them stay read-only
  :danger-full-access  no sandbox at all
  NAME                 a [permissions.NAME] table from --config

Layers: mount namespace (read-only binds), Landlock, seccomp, no capabilities, no_new_privs.
A layer the profile needs but this kernel lacks refuses the launch; --allow-degraded accepts a
weaker sandbox explicitly. Use --explain to see what this host enforces.

The exit status is the command's (a command killed by signal N kills the launcher with N too);
a refused launch exits 1, a command that does not exist 127. The command runs in its own session:
the launcher becomes the command (exec), or, when it leads a process group (a job of an
interactive shell), it stays as the command's parent, which dies with it.

Examples:
  outpost sandbox -P :workspace -- cargo build
  outpost sandbox -P :read-only --explain
  outpost sandbox -C ~/src/app --include-managed-config -P :workspace -- make test
  outpost sandbox --sandbox-state-json \"$STATE\" -- python tool.py")]
pub(crate) struct SandboxArgs {
    /// Permission profile: :read-only, :workspace, :danger-full-access or a name from --config.
    #[arg(short = 'P', long = "profile", value_name = "NAME")]
    profile: Option<String>,
    /// Apply the operator's managed requirements ($OUTPOST_MANAGED_CONFIG or
    /// /etc/outpost/requirements.toml).
    #[arg(long)]
    include_managed_config: bool,
    /// Working directory and workspace root (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Profile config file with [permissions.NAME] tables.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Run even when a sandbox layer the profile needs is missing on this host (listed on stderr).
    #[arg(long)]
    allow_degraded: bool,
    /// Print the resolved policy and what this kernel would enforce, then exit without running.
    #[arg(long)]
    explain: bool,
    /// Codex sandbox state JSON (permissionProfile, sandboxCwd, ...). Replaces -P, -C and
    /// --include-managed-config; managed requirements always apply to it.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["profile", "cwd", "include_managed_config", "config"])]
    sandbox_state_json: Option<String>,
    /// Extra read-only root for --sandbox-state-json (repeatable).
    #[arg(long, value_name = "PATH", requires = "sandbox_state_json")]
    sandbox_state_readable_root: Vec<PathBuf>,
    /// Restrict the network for --sandbox-state-json whatever the state says.
    #[arg(long, requires = "sandbox_state_json")]
    sandbox_state_disable_network: bool,
    /// The command and its arguments (after `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// Runs `outpost sandbox` and reports a failure the way both binaries do; returns the exit code.
pub(crate) fn main(args: SandboxArgs) -> u8 {
    // The launcher runs without an async runtime: it prepares the sandbox and runs one command.
    match run(args) {
        Ok(code) => u8::try_from(code).unwrap_or(1),
        Err(err) => {
            eprintln!(
                "outpost sandbox: error: {}",
                outpost_proto::error_chain(err.as_ref())
            );
            1
        }
    }
}

/// Runs `outpost sandbox`; returns the exit code to exit with.
///
/// # Errors
/// Invalid arguments, an unknown or refused profile, a missing sandbox layer, or a failed spawn.
fn run(args: SandboxArgs) -> anyhow::Result<i32> {
    let policy = match &args.sandbox_state_json {
        Some(json) => state_policy(&args, json)?,
        None => profile_policy(&args)?,
    };
    for w in &policy.warnings {
        eprintln!("outpost sandbox: warning: {w}");
    }
    let in_place = can_exec_in_place(&policy);
    let opts = LaunchOptions {
        allow_degraded: args.allow_degraded,
        // In place there is no launcher left to die: the command is the process the caller started.
        parent_death_signal: !in_place,
    };
    let caps = Capabilities::detect();
    if args.explain {
        print!("{}", explain_policy(&policy));
        return match PreparedLaunch::prepare(&policy, &caps, &opts, std::env::vars_os()) {
            Ok(launch) => {
                print!("{}", launch.report());
                // Names only: values may be secrets the env policy lets through on purpose.
                let names: Vec<_> = launch
                    .env()
                    .iter()
                    .map(|(k, _)| k.to_string_lossy())
                    .collect();
                println!("environment: {}", names.join(" "));
                Ok(0)
            }
            Err(e) => {
                println!("launch: REFUSED: {e:#}");
                Ok(1)
            }
        };
    }
    let Some((program, rest)) = args.command.split_first() else {
        bail!(
            "no command given: pass the command after `--`, for example `outpost sandbox -P :workspace -- make`"
        );
    };
    let launch = PreparedLaunch::prepare(&policy, &caps, &opts, std::env::vars_os())
        .context("cannot prepare the sandbox")?;
    for d in &launch.report().degraded {
        eprintln!("outpost sandbox: DEGRADED (--allow-degraded): {d}");
    }
    let mut cmd = Command::new(program);
    cmd.args(rest);
    launch.apply(&mut cmd);
    let result = if in_place {
        // Returns only when the set-up or the exec failed.
        Err(cmd.exec())
    } else {
        cmd.status()
    };
    let status = match result {
        Ok(status) => status,
        // Like a shell: 127 when the command does not exist.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "outpost sandbox: {}: command not found",
                program.to_string_lossy()
            );
            return Ok(127);
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot start {}", program.to_string_lossy()));
        }
    };
    if let Some(signal) = status.signal() {
        die_by(signal);
    }
    Ok(status.code().unwrap_or(1))
}

/// Whether the launcher can become the command: always when unsandboxed; when sandboxed only if
/// `setsid` can succeed here, that is when this process does not lead a process group.
fn can_exec_in_place(policy: &ResolvedPolicy) -> bool {
    !policy.sandboxed || nix::unistd::getpgrp() != nix::unistd::getpid()
}

/// Terminates the launcher with `signal`, as its command was, so the caller observes the same
/// status in both launch modes. Falls back to exiting 128+`signal` if the signal does not kill.
fn die_by(signal: i32) -> ! {
    use nix::sys::resource::{Resource, setrlimit};
    use nix::sys::signal::{SigHandler, SigSet, Signal, raise, signal as set_handler};
    if let Ok(sig) = Signal::try_from(signal) {
        // The command's own core dump (if any) is the one that matters, not the launcher's.
        let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
        // SAFETY: restoring the default disposition installs no handler code.
        let _ = unsafe { set_handler(sig, SigHandler::SigDfl) };
        let mut set = SigSet::empty();
        set.add(sig);
        let _ = set.thread_unblock();
        let _ = raise(sig);
    }
    std::process::exit(128 + signal)
}

fn profile_policy(args: &SandboxArgs) -> anyhow::Result<ResolvedPolicy> {
    let config = match &args.config {
        Some(path) => ProfileConfig::load(path)?,
        None => ProfileConfig::default(),
    };
    let name = args
        .profile
        .clone()
        .or_else(|| config.default_profile.clone())
        .context("no profile: pass -P NAME (for example -P :workspace) or --sandbox-state-json")?;
    let profile = config.profile(&name)?;
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir)
            .with_context(|| format!("invalid -C directory {}", dir.display()))?,
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    if !cwd.is_dir() {
        bail!("working directory {} is not a directory", cwd.display());
    }
    let managed = if args.include_managed_config {
        Some(ManagedRequirements::load_default()?)
    } else {
        None
    };
    Ok(resolve(
        &profile,
        &FsContext::for_cwd(cwd),
        managed.as_ref(),
    )?)
}

fn state_policy(args: &SandboxArgs, json: &str) -> anyhow::Result<ResolvedPolicy> {
    let state = SandboxState::parse(json)
        .map_err(|e| anyhow::anyhow!("invalid --sandbox-state-json value: {e:#}"))?;
    let profile = &state.permission_profile;
    for kind in &profile.unknown_kinds {
        eprintln!("outpost sandbox: warning: unknown special path kind {kind:?} ignored");
    }
    if !state.sandbox_cwd.is_dir() {
        bail!(
            "invalid --sandbox-state-json value: sandboxCwd {} is not a directory",
            state.sandbox_cwd.display()
        );
    }
    let managed = ManagedRequirements::load_default()?;
    let mut policy = resolve(
        &profile.profile,
        &FsContext::for_cwd(state.sandbox_cwd.clone()),
        Some(&managed),
    )?;
    for root in &args.sandbox_state_readable_root {
        if !root.is_absolute() {
            bail!(
                "--sandbox-state-readable-root {} must be absolute",
                root.display()
            );
        }
        policy.readable.push(root.clone());
    }
    if args.sandbox_state_disable_network {
        policy.network = outpost_sandbox::NetworkPolicy::Restricted;
    }
    Ok(policy)
}

fn explain_policy(p: &ResolvedPolicy) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let list = |out: &mut String, label: &str, paths: &[PathBuf]| {
        for path in paths {
            let _ = writeln!(out, "  {label}: {}", path.display());
        }
    };
    let _ = writeln!(out, "policy:");
    let _ = writeln!(out, "  sandboxed: {}", p.sandboxed);
    let _ = writeln!(out, "  cwd: {}", p.cwd.display());
    list(&mut out, "read", &p.readable);
    list(&mut out, "write", &p.writable);
    list(&mut out, "deny", &p.denied);
    list(&mut out, "protected", &p.protected);
    let _ = writeln!(out, "  network: {:?}", p.network);
    let _ = writeln!(
        out,
        "  CODEX_PERMISSION_PROFILE: {}",
        p.profile_name.as_deref().unwrap_or("<removed>")
    );
    out
}
