//! The Landlock layer: builds a ruleset (filesystem allow-list, TCP deny, scopes) for a
//! [`ResolvedPolicy`] before fork, and restricts either a child (raw `landlock_restrict_self` on the
//! prepared ruleset fd, allocation-free) or the current thread.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::resolve::{DEVICE_READ, DEVICE_WRITE, ResolvedPolicy};

/// Where device nodes live; only [`DEVICE_WRITE`] and [`DEVICE_READ`] are reachable below it.
const DEV: &str = "/dev";

/// Lowest Landlock ABI with TCP rules.
const ABI_NET: u32 = 4;
/// Lowest Landlock ABI with scopes (abstract unix sockets, signals).
const ABI_SCOPE: u32 = 6;

/// What the Landlock layer enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LandlockReport {
    /// Kernel ABI the ruleset was built for (0: no Landlock).
    pub abi: u32,
    /// Filesystem allow-list enforced.
    pub filesystem: bool,
    /// TCP bind/connect denied (network restricted and ABI >= 4).
    pub tcp_denied: bool,
    /// Signals to processes outside the sandbox denied (ABI >= 6).
    pub scope_signal: bool,
    /// Abstract unix sockets outside the sandbox unreachable (network restricted and ABI >= 6).
    pub scope_abstract_unix: bool,
    /// Granted paths that do not exist on this host and were skipped.
    pub skipped_paths: Vec<PathBuf>,
}

/// Failure to build or apply a Landlock ruleset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockError {
    /// The kernel has no Landlock (the filesystem allow-list is a hard requirement).
    #[error("the kernel has no Landlock support (filesystem allow-list unavailable)")]
    Unsupported,
    /// Creating the ruleset failed.
    #[error("cannot create the Landlock ruleset")]
    Create(#[source] landlock::RulesetError),
    /// Adding the rule for a path failed.
    #[error("cannot add a Landlock rule for {path}")]
    AddRule {
        /// The path.
        path: PathBuf,
        /// The Landlock error.
        #[source]
        source: landlock::RulesetError,
    },
    /// `landlock_restrict_self` failed.
    #[error("cannot restrict the thread with Landlock")]
    Restrict(#[source] landlock::RulesetError),
    /// The kernel accepted the ruleset but reports it as not enforced.
    #[error("Landlock reports the ruleset as not enforced")]
    NotEnforced,
}

/// Builds the ruleset for `policy` on a kernel with Landlock ABI `abi`.
pub(crate) fn build(
    policy: &ResolvedPolicy,
    abi: u32,
) -> Result<(RulesetCreated, LandlockReport), LandlockError> {
    if abi == 0 {
        return Err(LandlockError::Unsupported);
    }
    let abi_enum = ABI::from(i32::try_from(abi).unwrap_or(i32::MAX));
    let mut report = LandlockReport {
        abi,
        filesystem: true,
        ..LandlockReport::default()
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi_enum))
        .map_err(LandlockError::Create)?;
    if policy.network_restricted() && abi >= ABI_NET {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi_enum))
            .map_err(LandlockError::Create)?;
        report.tcp_denied = true;
    }
    if abi >= ABI_SCOPE {
        let mut scope = BitFlags::from(Scope::Signal);
        report.scope_signal = true;
        if policy.network_restricted() {
            scope |= Scope::AbstractUnixSocket;
            report.scope_abstract_unix = true;
        }
        ruleset = ruleset.scope(scope).map_err(LandlockError::Create)?;
    }
    let mut created = ruleset.create().map_err(LandlockError::Create)?;
    let read = AccessFs::from_read(abi_enum);
    let all = AccessFs::from_all(abi_enum);
    let list = BitFlags::from(AccessFs::ReadDir);
    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for p in &policy.readable {
        grant_outside_dev(p, read, list, &mut grants);
    }
    for p in &policy.writable {
        grant_outside_dev(p, all, list, &mut grants);
    }
    grants.extend(DEVICE_WRITE.iter().map(|p| (PathBuf::from(p), all)));
    grants.extend(DEVICE_READ.iter().map(|p| (PathBuf::from(p), read)));
    for (path, access) in &grants {
        let (path, access) = (path.as_path(), *access);
        let Ok(fd) = PathFd::new(path) else {
            report.skipped_paths.push(path.to_owned());
            continue;
        };
        // Files only take file rights: the crate reads the type from the opened fd (no second path
        // walk, no race with a rename) and, at BestEffort, keeps the rule with the file rights.
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|source| LandlockError::AddRule {
                path: path.to_owned(),
                source,
            })?;
    }
    Ok((created, report))
}

/// Adds `path` with `access`, except that device nodes are only reachable through the explicit device
/// rules: a grant on an ancestor of `/dev` (usually `/`) becomes a listing-only rule on each ancestor
/// plus the full grant on every sibling subtree, and `/dev` itself is listing-only. Otherwise uid 0
/// could open disks and consoles (it owns those nodes, so permission bits would not stop it).
///
/// A symbolic link among the siblings gets no rule: opening it for the rule would follow it, so the
/// rule would land on the target, which is either inside a sibling subtree that has its own rule
/// (`/bin -> usr/bin`) or, pointing into `/dev`, exactly what the split keeps out.
fn grant_outside_dev(
    path: &Path,
    access: BitFlags<AccessFs>,
    list: BitFlags<AccessFs>,
    out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) {
    let dev = Path::new(DEV);
    if path == dev {
        out.push((path.to_owned(), list));
        return;
    }
    if !dev.starts_with(path) {
        out.push((path.to_owned(), access));
        return;
    }
    out.push((path.to_owned(), list));
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        grant_outside_dev(&entry.path(), access, list, out);
    }
}

/// A built ruleset reduced to its fd, ready for a forked child.
#[derive(Debug)]
pub(crate) struct ChildRuleset {
    fd: OwnedFd,
}

impl ChildRuleset {
    pub(crate) fn new(created: RulesetCreated) -> Result<Self, LandlockError> {
        let fd: Option<OwnedFd> = created.into();
        fd.map(|fd| Self { fd }).ok_or(LandlockError::Unsupported)
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Applies the ruleset behind `fd` to the calling thread. Async-signal-safe: one syscall.
/// `no_new_privs` must already be set (or the caller must hold `CAP_SYS_ADMIN`).
pub(crate) fn restrict_raw(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: landlock_restrict_self takes an fd and a flags word; it reads no user memory. An invalid
    // fd only yields EBADF.
    let ret = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Restricts the calling thread with the ruleset for `policy` (Landlock restricts one thread and what
/// it spawns later). Sets `no_new_privs` on the thread.
pub(crate) fn restrict_thread(
    policy: &ResolvedPolicy,
    abi: u32,
) -> Result<LandlockReport, LandlockError> {
    let (created, report) = build(policy, abi)?;
    let status = created.restrict_self().map_err(LandlockError::Restrict)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(LandlockError::NotEnforced);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_on_root_skip_device_nodes() {
        let read = AccessFs::from_read(ABI::V1);
        let list = BitFlags::from(AccessFs::ReadDir);
        let mut out = Vec::new();
        grant_outside_dev(Path::new("/"), read, list, &mut out);
        assert!(out.contains(&(PathBuf::from("/"), list)));
        assert!(out.contains(&(PathBuf::from("/dev"), list)));
        assert!(out.contains(&(PathBuf::from("/usr"), read)));
        assert!(
            out.iter()
                .all(|(p, a)| !p.starts_with("/dev") || *a == list)
        );
        for entry in std::fs::read_dir("/").unwrap().flatten() {
            if entry.file_type().unwrap().is_symlink() {
                assert!(out.iter().all(|(p, _)| *p != entry.path()), "{entry:?}");
            }
        }
        let mut out = Vec::new();
        grant_outside_dev(Path::new("/usr"), read, list, &mut out);
        assert_eq!(out, vec![(PathBuf::from("/usr"), read)]);
    }
}
