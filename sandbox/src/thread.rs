//! Restricting the *current thread* to a [`ResolvedPolicy`], so an executor can serve filesystem calls
//! for a profile on dedicated worker threads instead of spawning a process per call.
//!
//! Layers, all per-thread in Linux: a private mount namespace (after `unshare(CLONE_FS)` gives the
//! thread its own filesystem context) with the same read-only system, protected-subpath and deny
//! mounts as a launch; `no_new_privs` and a full capability drop; then Landlock. A user namespace cannot
//! be created by one thread of a multi-threaded process, so without `CAP_SYS_ADMIN` the mount layer is
//! unavailable and the call is refused unless degraded runs are allowed. seccomp is not applied: the
//! thread runs the executor's own code, not untrusted code.

use crate::child::drop_capabilities;
use crate::landlock_layer::{self, LandlockError};
use crate::launch::{LaunchOptions, has_sys_admin};
use crate::mounts::{MountError, MountPlan};
use crate::report::SandboxReport;
use crate::resolve::ResolvedPolicy;

/// Failure to restrict the current thread.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadRestrictError {
    /// The policy is unsandboxed; there is nothing to restrict (use an unrestricted thread).
    #[error("the policy is unsandboxed; refusing to mark a thread as restricted")]
    Unsandboxed,
    /// The mount layer is needed but this thread cannot create a mount namespace.
    #[error(
        "refusing to restrict the thread: protected subpaths or denied paths need a mount namespace, \
         which needs CAP_SYS_ADMIN for a thread; an operator can accept this with --allow-degraded"
    )]
    MountsUnavailable,
    /// Preparing the mount plan failed.
    #[error("cannot prepare the thread's mount namespace")]
    PrepareMounts(#[source] MountError),
    /// `unshare(CLONE_FS)` or a mount step failed.
    #[error("cannot set up the thread's mount namespace")]
    Mounts(#[source] std::io::Error),
    /// Setting `no_new_privs` or dropping capabilities failed.
    #[error("cannot drop the thread's privileges")]
    Privileges(#[source] std::io::Error),
    /// Landlock failed (or the kernel has none).
    #[error("cannot apply Landlock to the thread")]
    Landlock(#[source] LandlockError),
}

/// Restricts the calling thread to `policy`'s filesystem rules (plus mounts and capability drop).
///
/// Irreversible for this thread: run it on a dedicated worker thread.
///
/// # Errors
/// [`ThreadRestrictError`] naming the step that failed; [`ThreadRestrictError::MountsUnavailable`]
/// when the mount layer is needed and unavailable and `opts.allow_degraded` is off.
pub fn restrict_current_thread(
    policy: &ResolvedPolicy,
    opts: &LaunchOptions,
) -> Result<SandboxReport, ThreadRestrictError> {
    if !policy.sandboxed {
        return Err(ThreadRestrictError::Unsandboxed);
    }
    let mut report = SandboxReport::new(policy);
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root || policy.needs_mounts() {
        if has_sys_admin() {
            let plan =
                MountPlan::new(policy, false, true).map_err(ThreadRestrictError::PrepareMounts)?;
            // SAFETY: unshare(CLONE_FS) takes a flags word; it gives this thread a private cwd/root so
            // that the following mount namespace is per-thread.
            if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
                return Err(ThreadRestrictError::Mounts(std::io::Error::last_os_error()));
            }
            plan.apply().map_err(ThreadRestrictError::Mounts)?;
            report.record_mounts(policy, false, plan.read_only_system(), plan.denied());
        } else if policy.needs_mounts() && !opts.allow_degraded {
            return Err(ThreadRestrictError::MountsUnavailable);
        } else if policy.needs_mounts() {
            report
                .degraded
                .push("mount namespace: unavailable for a thread without CAP_SYS_ADMIN".into());
        }
    }
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only and affects this thread.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(ThreadRestrictError::Privileges(
            std::io::Error::last_os_error(),
        ));
    }
    report.no_new_privs = true;
    drop_capabilities().map_err(ThreadRestrictError::Privileges)?;
    report.capabilities_dropped = true;
    let abi = crate::Capabilities::detect().landlock_abi;
    report.landlock =
        landlock_layer::restrict_thread(policy, abi).map_err(ThreadRestrictError::Landlock)?;
    Ok(report)
}
