//! The outpost executor: serves the `outpost.v1` gRPC services next to a workspace.
//!
//! The entry point is [`serve`]: it takes an already-bound [`Listener`], an [`ExecutorOptions`] and a
//! shutdown future, which keeps it testable (tests bind port 0 or a temp socket and stop it by signal).
//!
//! # Layout
//! - [`config`]: the `outpost.toml` file format and the limits it sets.
//! - [`listen`]: listen targets (`unix:`, `tcp://`, `stdio`) and binding them safely.
//! - [`auth`]: bearer-token check as a tower layer (health stays open).
//! - [`tls`]: rustls server configuration, optionally with client certificates (mTLS).
//! - [`fs`]: the `outpost.v1.FileSystem` service.
//! - [`http`]: the `outpost.v1.Http` service (HTTP proxy with destination policy).
//! - [`process`]: sessions and sandboxed processes.
//! - [`info`]: the `Executor.Info` service.
//! - [`server`]: routes, HTTP/2 connection handling, health, draining.
//! - [`error`]: start-up and serving errors.

pub mod auth;
pub mod config;
pub mod error;
pub mod fs;
pub mod http;
pub mod info;
pub mod listen;
pub mod process;
pub mod server;
mod stdio;
pub mod tls;

pub use config::{Limits, ServerConfig};
pub use error::ServerError;
pub use listen::{ListenTarget, Listener};
pub use server::{ExecutorOptions, serve};
