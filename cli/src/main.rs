//! `outpost-core`, the full `outpost` binary: the executor (`serve`), the sandbox launcher
//! (`sandbox`) and the client commands (`exec`, `info`, `fs`, `http`, `forward`). Parses arguments,
//! installs tracing on stderr, and calls the libraries. Users run it through `outpost` (`front.rs`),
//! which execs it for everything but `sandbox`.

mod exec_cmd;
mod forward_cmd;
mod fs_cmd;
mod http_cmd;
mod info_cmd;
mod sandbox_cmd;
mod serve_cmd;
mod target_args;
mod tty;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// outpost: a remote exec-server and sandbox launcher.
///
/// Run `outpost serve` next to a workspace; talk to it with `outpost info`, `outpost fs ...` and the
/// client library. Every client command takes `--target` (default `exec:`, which spawns a private
/// executor over stdin/stdout, so nothing needs to be started by hand).
#[derive(Debug, Parser)]
#[command(
    name = "outpost",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a command on an executor under a permission profile; exits with its exit code.
    Exec(exec_cmd::ExecArgs),
    /// Run an executor: serve the gRPC API on a unix socket, TCP (+TLS) or stdio.
    Serve(serve_cmd::ServeArgs),
    /// Show an executor's version, platform, filesystem context, sandbox capabilities and limits.
    Info(info_cmd::InfoArgs),
    /// Filesystem operations on the executor's host.
    #[command(subcommand)]
    Fs(fs_cmd::FsCommand),
    /// Fetch a URL through the executor's network (curl-like; streams the body to stdout).
    Http(http_cmd::HttpArgs),
    /// Serve a local HTTP listener that forwards every request through the executor to a base URL.
    Forward(forward_cmd::ForwardArgs),
    /// Run a command inside the sandbox (Landlock, seccomp, namespaces) under a permission profile.
    Sandbox(sandbox_cmd::SandboxArgs),
    /// Internal: the executor's orphan guard (reads process groups on stdin, kills them at EOF).
    #[command(name = "__orphan-guard", hide = true)]
    OrphanGuard,
}

fn main() -> ExitCode {
    outpost_client::tune_allocator_for_streaming();
    let cli = Cli::parse();
    if let Command::OrphanGuard = cli.command {
        outpost_exec_server::process::guard::run_orphan_guard();
        return ExitCode::SUCCESS;
    }
    if let Command::Sandbox(args) = cli.command {
        return ExitCode::from(sandbox_cmd::main(args));
    }
    let default_level = match cli.command {
        Command::Serve(_) => "info",
        _ => "warn",
    };
    init_tracing(default_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("outpost: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve_cmd::run(args).await,
            Command::Info(args) => info_cmd::run(args).await,
            Command::Exec(args) => exec_cmd::run(args).await,
            Command::Fs(cmd) => fs_cmd::run(cmd).await,
            Command::Http(args) => http_cmd::run(args).await,
            Command::Forward(args) => forward_cmd::run(args).await,
            Command::Sandbox(_) | Command::OrphanGuard => {
                unreachable!("handled before the runtime starts")
            }
        }
    });
    // Blocking stdin readers (stdio transport) must not keep the process alive after we are done.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("outpost: {}", outpost_proto::error_chain(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr only (stdout carries data, or the HTTP/2 stream with `--listen stdio`).
/// `OUTPOST_LOG` takes `tracing` filter directives, e.g. `OUTPOST_LOG=debug`.
fn init_tracing(default_level: &str) {
    let filter =
        EnvFilter::try_from_env("OUTPOST_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
