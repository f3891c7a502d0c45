//! Turning a validated Start request and a prepared launch into a running child: program lookup,
//! stdio (pipes or a terminal), the extra child set-up outpost adds to the sandbox's, and spawning.

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use outpost_sandbox::PreparedLaunch;

use super::error::ProcessError;
use super::handle::{ProcessHandle, Stdin};
use super::log::OutputLog;
use super::pty;
use super::validate::StartSpec;

/// PATH used to find the program when the child's environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Spawns the child described by `spec` under `launch`.
pub(crate) fn spawn(
    spec: &StartSpec,
    launch: &PreparedLaunch,
    log_cap: usize,
) -> Result<Arc<ProcessHandle>, ProcessError> {
    let program = find_program(&spec.argv[0], &spec.cwd, launch)?;
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&spec.argv[1..]);
    if let Some(arg0) = &spec.arg0 {
        cmd.arg0(arg0);
    }
    launch.apply(&mut cmd);
    cmd.current_dir(&spec.cwd);
    let mut pty_master = None;
    match spec.tty {
        Some((rows, cols)) => {
            let (master, slave) = pty::open(rows, cols).map_err(|source| ProcessError::Setup {
                what: "a terminal",
                source,
            })?;
            let clone = |fd: &std::os::fd::OwnedFd| {
                fd.try_clone().map_err(|source| ProcessError::Setup {
                    what: "terminal descriptors",
                    source,
                })
            };
            cmd.stdin(Stdio::from(clone(&slave)?))
                .stdout(Stdio::from(clone(&slave)?))
                .stderr(Stdio::from(slave));
            pty_master = Some(Arc::new(master));
        }
        None => {
            cmd.stdin(if spec.pipe_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        }
    }
    let sandboxed = launch.report().sandboxed;
    let tty = spec.tty.is_some();
    // SAFETY: the hook only makes async-signal-safe syscalls (setsid, prctl, getppid, ioctl) on
    // values captured by copy; it neither allocates nor locks nor panics.
    unsafe {
        cmd.pre_exec(move || outpost_child_setup(sandboxed, tty));
    }
    let mut child = tokio::process::Command::from(cmd)
        .spawn()
        .map_err(ProcessError::Spawn)?;
    let pid = child.id().unwrap_or(0);
    if let Some(out) = &child.stdout {
        grow_pipe(out.as_raw_fd());
    }
    if let Some(err) = &child.stderr {
        grow_pipe(err.as_raw_fd());
    }
    let stdin = match (&pty_master, child.stdin.take()) {
        (Some(master), _) => Some(Stdin::Pty(master.clone())),
        (None, Some(pipe)) => Some(Stdin::Pipe(pipe)),
        (None, None) => None,
    };
    let log = Arc::new(OutputLog::new(log_cap));
    let handle = ProcessHandle::new(
        spec.process_id.clone(),
        pid,
        spec.argv.clone(),
        log,
        stdin,
        pty_master,
    );
    handle.supervise(child, spec.timeout);
    Ok(handle)
}

/// Pipe buffer outpost asks for: fewer, larger reads for bulk output.
const PIPE_BYTES: libc::c_int = 1024 * 1024;

/// Enlarges a pipe's buffer (best effort: the system limit may be lower for unprivileged users).
fn grow_pipe(fd: std::os::fd::RawFd) {
    // SAFETY: F_SETPIPE_SZ takes an integer; the fd is an open pipe end we own.
    let _ = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_BYTES) };
}

/// Child set-up outpost adds after the sandbox's own (which already made the child a session leader
/// with a parent-death signal when sandboxed).
fn outpost_child_setup(sandboxed: bool, tty: bool) -> std::io::Result<()> {
    if !sandboxed {
        // SAFETY: setsid and prctl take no pointers; a new session makes the child its own process
        // group leader, so signals and kills reach its whole group.
        unsafe {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    if tty {
        // SAFETY: TIOCSCTTY with argument 0 on fd 0 (the terminal slave, set up by Command before this
        // hook) makes it our controlling terminal; we are a session leader without one.
        if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Resolves argv[0] like execvp would, with the child's PATH, so a missing program is a clear
/// NOT_FOUND instead of an opaque spawn failure.
fn find_program(name: &str, cwd: &Path, launch: &PreparedLaunch) -> Result<PathBuf, ProcessError> {
    let not_found = |reason| ProcessError::NotExecutable {
        program: name.to_owned(),
        reason,
    };
    if name.contains('/') {
        let path = cwd.join(name);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(not_found("no such executable file"))
        };
    }
    let path_var = launch
        .env()
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or_else(|| DEFAULT_PATH.into(), |(_, v)| v.clone());
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| not_found("not found on the child's PATH"))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
