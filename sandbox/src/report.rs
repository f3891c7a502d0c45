//! [`SandboxReport`]: what a launch actually enforces on this host, layer by layer. Printed by
//! `outpost sandbox --explain` and returned to the executor's callers.

use std::fmt;
use std::path::PathBuf;

use crate::landlock_layer::LandlockReport;
use crate::resolve::ResolvedPolicy;

/// The layers a launch enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxReport {
    /// `false` for unsandboxed profiles: nothing below applies.
    pub sandboxed: bool,
    /// The active named profile (`CODEX_PERMISSION_PROFILE`), if any.
    pub profile: Option<String>,
    /// Landlock ABI and what it covers.
    pub landlock: LandlockReport,
    /// seccomp deny-list installed.
    pub seccomp: bool,
    /// Private mount namespace.
    pub mount_namespace: bool,
    /// The mount namespace lives in a new user namespace (unprivileged launch).
    pub user_namespace: bool,
    /// Everything outside the writable roots is mounted read-only (root launches).
    pub read_only_system: bool,
    /// Subpaths kept read-only inside writable roots.
    pub protected_paths: Vec<PathBuf>,
    /// Paths hidden by the mount layer.
    pub denied_paths: Vec<PathBuf>,
    /// All capabilities dropped (bounding, ambient, effective, permitted, inheritable).
    pub capabilities_dropped: bool,
    /// `no_new_privs` set.
    pub no_new_privs: bool,
    /// SIGKILL when the spawning thread dies.
    pub parent_death_signal: bool,
    /// Network restricted: AF_UNIX sockets only, and no `connect` (socketpair IPC).
    pub network_restricted: bool,
    /// Layers that are missing and were accepted with `allow_degraded`.
    pub degraded: Vec<String>,
}

impl SandboxReport {
    pub(crate) fn new(policy: &ResolvedPolicy) -> Self {
        Self {
            sandboxed: policy.sandboxed,
            profile: policy.profile_name.clone(),
            network_restricted: policy.sandboxed && policy.network_restricted(),
            ..Self::default()
        }
    }

    pub(crate) fn record_mounts(
        &mut self,
        policy: &ResolvedPolicy,
        userns: bool,
        ro: bool,
        denied: &[PathBuf],
    ) {
        self.mount_namespace = true;
        self.user_namespace = userns;
        self.read_only_system = ro;
        self.protected_paths = policy.protected.clone();
        self.denied_paths = denied.to_vec();
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl fmt::Display for SandboxReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "profile: {}",
            self.profile.as_deref().unwrap_or("<anonymous>")
        )?;
        if !self.sandboxed {
            return writeln!(f, "sandbox: NONE (unsandboxed profile)");
        }
        let ll = &self.landlock;
        writeln!(
            f,
            "landlock: abi {} filesystem={} tcp-denied={} scope-signal={} scope-abstract-unix={}",
            ll.abi,
            yes(ll.filesystem),
            yes(ll.tcp_denied),
            yes(ll.scope_signal),
            yes(ll.scope_abstract_unix)
        )?;
        for p in &ll.skipped_paths {
            writeln!(f, "  skipped (missing): {}", p.display())?;
        }
        writeln!(f, "seccomp: {}", yes(self.seccomp))?;
        writeln!(
            f,
            "mount namespace: {} (user namespace: {}, read-only system: {})",
            yes(self.mount_namespace),
            yes(self.user_namespace),
            yes(self.read_only_system)
        )?;
        for p in &self.protected_paths {
            writeln!(f, "  protected read-only: {}", p.display())?;
        }
        for p in &self.denied_paths {
            writeln!(f, "  denied: {}", p.display())?;
        }
        writeln!(
            f,
            "capabilities dropped: {}",
            yes(self.capabilities_dropped)
        )?;
        writeln!(f, "no_new_privs: {}", yes(self.no_new_privs))?;
        writeln!(f, "parent-death signal: {}", yes(self.parent_death_signal))?;
        writeln!(
            f,
            "network: {}",
            if self.network_restricted {
                "restricted (AF_UNIX socketpair IPC only: no inet sockets, no connect)"
            } else {
                "enabled"
            }
        )?;
        for d in &self.degraded {
            writeln!(f, "DEGRADED: {d}")?;
        }
        Ok(())
    }
}
