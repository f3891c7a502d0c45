//! The `outpost` binary. (Minimal wiring for `outpost sandbox`; the full CLI lands on main.)

use clap::{Parser, Subcommand};

mod sandbox_cmd;

#[derive(Debug, Parser)]
#[command(
    name = "outpost",
    version,
    about = "Remote exec-server and sandbox launcher"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a command inside the sandbox.
    Sandbox(sandbox_cmd::SandboxArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Sandbox(args) => sandbox_cmd::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("outpost sandbox: error: {e:#}");
            std::process::exit(1);
        }
    }
}
