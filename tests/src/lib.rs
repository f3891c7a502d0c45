//! Test harness shared by the end-to-end tests and the benchmark: start real executors (in-process on
//! a bound socket, or as `outpost serve` child processes), generate throwaway TLS material, and locate
//! the built `outpost` binary.
//!
//! # Layout
//! - [`InProcessExecutor`]: `outpost_exec_server::serve` on a temp unix socket or loopback port, stopped
//!   on drop.
//! - [`TlsMaterial`]: a CA, a server certificate for 127.0.0.1/localhost and a client certificate.
//! - [`outpost_bin`]: the `outpost` binary built next to the test binary.
//! - [`ServeProcess`]: a real `outpost serve` child process, killed on drop.
//! - [`bench`]: the sections of the `outpost-bench` binary.
//! - [`delay_proxy`]: a TCP proxy that adds latency each way, since there is no netem here.
//! - [`mcp_server`]: an rmcp streamable-HTTP MCP server (also the `outpost-test-mcp-server` binary).
//! - [`oauth_server`]: an OAuth authorization server with a protected resource.
//! - [`upstream`]: an HTTP server for proxy tests (redirects, SSE, big and slow bodies, close
//!   detection) that records what it received.
//! - [`sshd`]: a throwaway OpenSSH server on loopback for `ssh://` tests.
//! - [`relay`]: a TCP relay whose connections can be cut while the executor behind it lives on.

pub mod bench;
pub mod delay_proxy;
mod executor;
pub mod mcp_server;
pub mod oauth_server;
pub mod procfs;
pub mod relay;
mod serve_process;
pub mod sshd;
mod tls;
pub mod upstream;

pub use executor::{InProcessExecutor, TEST_TOKEN, Transport};
pub use serve_process::{ServeProcess, free_port, nested_dirs};
pub use tls::TlsMaterial;

use std::path::PathBuf;

/// The `outpost` binary of this build (`target/<profile>/outpost`). Cargo builds every binary of the
/// workspace before running tests, so it is there; if not, the panic says how to build it.
pub fn outpost_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("OUTPOST_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    // target/<profile>/deps/e2e-HASH or target/<profile>/outpost-bench
    let mut dir = exe
        .parent()
        .expect("the test binary lives in a directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("outpost");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p outpost-cli` first",
        bin.display()
    );
    bin
}

/// Installs a test subscriber once (logs are captured per test by the harness).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("OUTPOST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}
