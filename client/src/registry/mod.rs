//! Harness-side environments: an [`EnvironmentRegistry`] maps stable environment ids to a state —
//! Starting, Ready (with an [`Environment`] handle) or Failed — that a background task per environment
//! keeps current (connect, health watch, reconnect and session resume).
//!
//! A model step takes a [`StepSnapshot`] (an `Arc` clone, no RPC) and uses exactly its handles, even
//! if the registry replaces a handle meanwhile. [`EnvironmentRegistry::wait_for_environment`] waits,
//! bounded, for an environment to be Ready or Failed; many callers may wait at once.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use outpost_client::registry::{EnvironmentRegistry, EnvironmentSpec, WaitOutcome};
//! let registry = EnvironmentRegistry::new();
//! registry.register(EnvironmentSpec::new("local".parse()?).with_target("exec:".parse()?));
//! if let WaitOutcome::Ready(env) = registry.wait_for_environment("local", Duration::from_secs(10)).await? {
//!     println!("cwd on the executor: {}", env.fs_context().cwd);
//! }
//! let step = registry.snapshot();
//! let handle = step.ready("local"); // use this handle for the whole step
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`config`]: ids, [`EnvironmentSpec`], `environments.toml`.
//! - `state`: [`EnvironmentState`], [`StepSnapshot`], [`WaitOutcome`].
//! - `environment`: [`Environment`], [`FsContext`], [`EnvironmentCache`].
//! - `supervisor`: the per-environment connect / health / reconnect task.
//! - `follow`: following a process's output across reconnects.
//! - [`error`]: [`RegistryError`], [`ConfigError`].

pub mod config;
mod environment;
pub mod error;
mod follow;
mod registry_impl;
mod state;
mod supervisor;

pub use config::{EnvironmentId, EnvironmentSpec, EnvironmentsConfig, StartMode};
pub use environment::{Environment, EnvironmentCache, FsContext};
pub use error::{ConfigError, InvalidEnvironmentId, RegistryError};
pub use registry_impl::EnvironmentRegistry;
pub(crate) use registry_impl::Inner;
pub use state::{EnvironmentState, StepSnapshot, WaitOutcome};

#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests;
