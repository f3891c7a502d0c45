//! outpost sandbox: permission profiles, managed requirements, env policy, and the Linux enforcement
//! layers (mount namespace, Landlock, seccomp, process hygiene) used by `outpost sandbox` and the executor.
//!
//! Typical use: pick a [`Profile`] (built-in, from a [`ProfileConfig`], or from Codex JSON), [`resolve()`]
//! it against a [`FsContext`] and the [`ManagedRequirements`], [`PreparedLaunch::prepare`] it for this
//! host, then [`PreparedLaunch::apply`] it to a command and spawn.
//!
//! ```no_run
//! use std::process::Command;
//!
//! use outpost_sandbox::{
//!     Capabilities, FsContext, LaunchOptions, ManagedRequirements, PreparedLaunch, Profile, resolve,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let profile = Profile::builtin(":workspace").expect("a built-in profile");
//! let ctx = FsContext::for_cwd("/work/repo".into());
//! let managed = ManagedRequirements::load_default()?;
//! let policy = resolve(&profile, &ctx, Some(&managed))?;
//! let caps = Capabilities::detect();
//! let launch = PreparedLaunch::prepare(&policy, &caps, &LaunchOptions::default(), std::env::vars_os())?;
//! eprint!("{}", launch.report());
//! let mut cmd = Command::new("make");
//! launch.apply(&mut cmd); // tokio: launch.apply(cmd.as_std_mut())
//! let status = cmd.status()?;
//! # let _ = status;
//! # Ok(())
//! # }
//! ```
//!
//! # Security model and known limits
//! - Filesystem: Landlock allow-list (hard requirement) plus, in a private mount namespace, a
//!   read-only and `nodev` view of everything outside the writable roots (stops chmod, chown, xattrs
//!   and utimes, which Landlock does not cover), read-only protected subpaths and hidden deny paths.
//!   Device nodes are reachable only under `/dev` and only for the allowed ones (null, zero, full,
//!   random, urandom, tty, ptmx, pts).
//! - Protected subpaths and deny paths are applied when they exist at launch; a `.git` created later
//!   inside a writable root is writable.
//! - Restricted network: only `AF_UNIX` sockets, no `connect` and no addressed `sendto` (socketpair
//!   IPC works). With the network enabled, root launches hide the well-known daemon control sockets
//!   (`mounts::ROOT_HIDDEN_SOCKETS`); other pathname sockets stay reachable until Landlock ABI 9
//!   (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`); operators can deny more with managed `deny_paths`.
//! - Unprivileged launches need user namespaces for the mount layer; without them, profiles with
//!   protected or denied paths are refused (unless degraded runs are allowed) and the read-only system
//!   view is skipped.
//! - [`restrict_current_thread`] needs `CAP_SYS_ADMIN` for the mount layer (a thread of a
//!   multi-threaded process cannot create a user namespace); otherwise it refuses unless degraded.
//! - The parent-death signal fires when the *spawning thread* exits.
//!
//! # Layout
//! - [`capabilities`]: what the running kernel offers (Landlock ABI, seccomp, user namespaces).
//! - [`profile`]: built-in and TOML-configured permission profiles.
//! - [`codex_json`]: Codex `PermissionProfile` and sandbox-state JSON, kept verbatim for forwarding.
//! - [`managed`]: operator requirements (`/etc/outpost/requirements.toml`).
//! - [`env_policy`]: the child's environment and `CODEX_PERMISSION_PROFILE`.
//! - [`resolve`](mod@resolve): profile + context + requirements -> [`ResolvedPolicy`].
//! - [`launch`]: preparing and applying a sandboxed launch; [`report`]: what it enforces.
//! - [`thread`]: restricting the current thread (filesystem calls on per-profile worker threads).
//! - [`landlock_layer`], [`seccomp_layer`], [`mounts`]: the enforcement layers; `child`: the
//!   async-signal-safe code that runs between fork and exec.
//! - [`mcp`]: MCP `_meta` sandbox entries, launcher invocation and authority binding.

#![warn(missing_docs)]

pub mod capabilities;
mod child;
pub mod codex_json;
pub mod env_policy;
pub mod landlock_layer;
pub mod launch;
pub mod managed;
pub mod mcp;
pub mod mounts;
pub mod profile;
pub mod report;
pub mod resolve;
pub mod seccomp_layer;
pub mod thread;

pub use capabilities::Capabilities;
pub use codex_json::{PermissionProfileJson, SandboxState};
pub use env_policy::EnvPolicy;
pub use launch::{LaunchError, LaunchOptions, PreparedLaunch};
pub use managed::ManagedRequirements;
pub use profile::{NetworkPolicy, Profile, ProfileConfig};
pub use report::SandboxReport;
pub use resolve::{FsContext, ResolvedPolicy, resolve};
pub use thread::restrict_current_thread;
