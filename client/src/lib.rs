//! outpost client library: connect to executors and call them with typed wrappers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), outpost_client::ClientError> {
//! let executor = outpost_client::connect(&"exec:".parse()?, &Default::default()).await?;
//! let info = executor.info().await?;
//! println!("executor {} on {}", info.executor_id, info.os);
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`agents_md`]: AGENTS.md discovery from the project root down to cwd.
//! - [`target`]: target strings (`exec:`, `unix:`, `http://`, `https://`, `ssh://`).
//! - [`connect`](mod@connect): transports, the spawned `exec:` child, TLS, bearer tokens.
//! - [`executor`]: [`Executor`], the connected handle with typed calls.
//! - [`http`]: [`http::ExecutorHttpClient`], HTTP through the executor's network, with rmcp and
//!   oauth2 adapters.
//! - [`find_up`]: windowed client-side find-up over `GetMetadata`, same semantics as the RPC.
//! - [`registry`]: [`EnvironmentRegistry`]: environments by id with readiness, per-step snapshots,
//!   waiting, deferred attach, reconnect and session resume, `environments.toml`.
//! - [`process`]: sessions ([`Session`]) and processes: start, events, stdin, signals.
//! - [`error`]: [`ClientError`], which tells transport failures from server answers.

pub mod agents_md;
pub mod connect;
pub mod error;
pub mod executor;
pub mod find_up;
pub mod http;
pub mod process;
pub mod registry;
pub mod target;

pub use connect::{ConnectOptions, connect};
pub use error::ClientError;
pub use executor::Executor;
pub use outpost_proto::pb;
pub use process::Session;
pub use registry::{
    Environment, EnvironmentRegistry, EnvironmentState, EnvironmentsConfig, StepSnapshot,
    WaitOutcome,
};
pub use target::Target;

/// Tunes glibc's allocator for streaming, for binaries that move bulk data through outpost (the
/// `outpost` CLI and the bench call it first thing in `main`). Streaming moves data in 256 KiB chunks;
/// glibc serves allocations that large with a fresh `mmap` each (page faults and zeroing per chunk)
/// until its dynamic threshold adapts. Fixed thresholds keep those buffers on the heap and reused.
/// Measured: 1 GiB through `outpost exec -- head -c 1G /dev/zero` went from 1.76 s to 1.05 s.
///
/// Call it before other threads exist. A no-op on non-glibc targets.
pub fn tune_allocator_for_streaming() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only adjusts allocator parameters; the caller runs it before other threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 8 * 1024 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 * 1024 * 1024);
    }
}
