//! `outpost`, the command users run. `outpost sandbox` is served here, by an image that links little
//! more than the sandbox crate: a launcher sits on the hot path of every sandboxed command, and
//! loading the full binary (its dynamic relocations and page faults) would cost more than the
//! sandbox layers themselves. Every other subcommand, `--help` and `--version` included, is handed to
//! `outpost-core`, the full binary installed next to this one, by exec (same pid, same arguments).

mod sandbox_cmd;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

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

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "sandbox") {
        let FrontCommand::Sandbox(sandbox) = Front::parse().command;
        return sandbox_cmd::main(sandbox);
    }
    let core = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(CORE),
        Err(err) => {
            eprintln!("outpost: cannot locate this executable to find {CORE}: {err}");
            return ExitCode::FAILURE;
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
    ExitCode::FAILURE
}
