//! `outpost`, the command users run. `outpost sandbox` is served here, by an image that links little
//! more than the sandbox crate: a launcher sits on the hot path of every sandboxed command, and
//! loading the full binary (its dynamic relocations and page faults) would cost more than the
//! sandbox layers themselves. Every other subcommand, `--help` and `--version` included, is handed to
//! `outpost-core`, the full binary installed next to this one, by exec (same pid, same arguments).
//!
//! The C runtime calls [`main`] directly (`no_main`): std's own start-up (a read of
//! `/proc/self/maps` to place the main thread's stack guard, an alternate signal stack and its
//! handlers, `SIGPIPE` set to ignored) cost 0.2–0.3 ms per sandboxed launch in side-by-side
//! `perf stat` runs. None of it serves a process that prepares one command and execs it; the one
//! step that does, reopening closed standard fds on `/dev/null`, is kept.
#![cfg_attr(not(test), no_main)]

mod sandbox_cmd;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use clap::{Parser, Subcommand};

/// File name of the full binary, looked up next to this one.
const CORE: &str = "outpost-core";

/// The part of the `outpost` command line this binary parses itself.
#[derive(Debug, Parser)]
#[command(
    name = "outpost",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Front {
    #[command(subcommand)]
    command: FrontCommand,
}

#[derive(Debug, Subcommand)]
enum FrontCommand {
    /// Run a command inside the sandbox (Landlock, seccomp, namespaces) under a permission profile.
    Sandbox(sandbox_cmd::SandboxArgs),
}

/// The process entry point, called by the C runtime (std reads the arguments on its own).
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    reopen_closed_standard_fds();
    // Without std's runtime nothing else catches a panic: it would abort instead of exiting 101
    // (the panic message is printed either way).
    let code = std::panic::catch_unwind(front).map_or(101, i32::from);
    // `exit` flushes std's stdout buffer (returning from here would not).
    std::process::exit(code)
}

/// Serves `outpost sandbox` or hands the command line to the full binary; returns the exit code.
#[cfg_attr(test, allow(dead_code))]
fn front() -> u8 {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "sandbox") {
        let FrontCommand::Sandbox(sandbox) = Front::parse().command;
        return sandbox_cmd::main(sandbox);
    }
    let core = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(CORE),
        Err(err) => {
            eprintln!("outpost: cannot locate this executable to find {CORE}: {err}");
            return 1;
        }
    };
    let mut cmd = std::process::Command::new(&core);
    cmd.args(args.iter().skip(1));
    if let Some(arg0) = args.first() {
        cmd.arg0(arg0);
    }
    let err = cmd.exec();
    eprintln!(
        "outpost: cannot run {}: {err} (it is installed next to `outpost`; \
         `cargo build -p outpost-cli` builds both)",
        core.display()
    );
    1
}

/// Opens `/dev/null` on any of fds 0, 1 and 2 that is closed, as std's start-up does: otherwise the
/// first file this process opens would take that number and be mistaken for a standard stream.
#[cfg_attr(test, allow(dead_code))]
fn reopen_closed_standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of three pollfd; a zero timeout only reports their state.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for pfd in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
        let flags = if pfd.fd == 0 {
            libc::O_RDONLY
        } else {
            libc::O_WRONLY
        };
        // SAFETY: open with a static NUL-terminated path; the lowest free fd is the closed one.
        unsafe { libc::open(c"/dev/null".as_ptr(), flags) };
    }
}
