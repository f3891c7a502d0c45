//! outpost sandbox: permission profiles, managed requirements, env policy, and the Linux enforcement
//! layers (mount namespace, Landlock, seccomp, process hygiene) used by `outpost sandbox` and the executor.
//!
//! # Layout
//! - [`capabilities`]: what the running kernel offers (Landlock ABI, seccomp, user namespaces).

pub mod capabilities;

pub use capabilities::Capabilities;
