//! Sessions and sandboxed processes: the `Session` and `Process` services.
//!
//! # Layout
//! - [`manager`]: sessions (attach, detach TTL, shutdown) and starting processes.
//! - [`sandbox`]: the executor's sandbox settings; a request's profile becomes a prepared launch.
//! - `validate`: Start request validation; `spawn`: building and spawning the child;
//!   `handle`: a running process; `log`: its bounded, resumable event log; `pty`: terminals.
//! - [`guard`]: the orphan guard that kills process groups left behind by a dead executor.
//! - [`service`]: the gRPC services.
//! - [`error`]: [`ProcessError`] and its mapping to gRPC codes.

pub mod error;
pub mod guard;
mod handle;
mod log;
pub mod manager;
mod pty;
pub mod sandbox;
pub mod service;
mod spawn;
mod validate;

pub use error::ProcessError;
pub use manager::{ProcessConfig, ProcessManager};
pub use sandbox::SandboxSettings;
pub use service::ProcessService;
