//! Launching a command under a [`ResolvedPolicy`]: [`PreparedLaunch::prepare`] decides which layers
//! this host can enforce (refusing when a needed one is missing, unless degraded runs are explicitly
//! allowed), allocates everything the child needs, and computes the environment;
//! [`PreparedLaunch::apply`] installs it on a [`std::process::Command`] via `pre_exec`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use crate::Capabilities;
use crate::child::ChildPlan;
use crate::landlock_layer::{self, ChildRuleset, LandlockError};
use crate::mounts::{MountError, MountPlan};
use crate::report::SandboxReport;
use crate::resolve::ResolvedPolicy;
use crate::seccomp_layer::{self, SeccompError};

/// Lowest Landlock ABI that can scope signals (needed when launching as root: uid 0 without
/// capabilities could still signal every other root process).
const ABI_SIGNAL_SCOPE: u32 = 6;

/// Capability number of `CAP_SYS_ADMIN` (not exported by the libc crate).
const CAP_SYS_ADMIN: u32 = 21;

/// How to launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Run even when a layer the profile needs is unavailable (each missing layer is listed in
    /// [`SandboxReport::degraded`]). Operator opt-out; never the default.
    pub allow_degraded: bool,
    /// Kill the command with SIGKILL when the spawning thread exits. Spawn from a long-lived thread
    /// (not a short-lived blocking-pool thread) when this is on.
    pub parent_death_signal: bool,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        Self {
            allow_degraded: false,
            parent_death_signal: true,
        }
    }
}

/// Failure to prepare a launch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// A layer the profile needs is unavailable on this host.
    #[error(
        "refusing to launch: {layer} is unavailable on this host ({reason}); the profile needs it. \
         An operator can explicitly accept a weaker sandbox with --allow-degraded"
    )]
    Missing {
        /// The missing layer.
        layer: &'static str,
        /// Why it is needed or unavailable.
        reason: &'static str,
    },
    /// Building the Landlock ruleset failed.
    #[error("cannot prepare the Landlock layer")]
    Landlock(#[source] LandlockError),
    /// Building the seccomp programs failed.
    #[error("cannot prepare the seccomp layer")]
    Seccomp(#[source] SeccompError),
    /// Preparing the mount plan failed.
    #[error("cannot prepare the mount namespace layer")]
    Mounts(#[source] MountError),
    /// A resource limit does not fit the platform type.
    #[error("resource limit {0} is out of range")]
    Rlimit(&'static str),
}

/// A launch ready to be applied to any number of commands.
#[derive(Debug, Clone)]
pub struct PreparedLaunch {
    plan: Option<Arc<ChildPlan>>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    report: SandboxReport,
}

/// Whether the calling thread holds `CAP_SYS_ADMIN` (mounts without a user namespace).
pub(crate) fn has_sys_admin() -> bool {
    crate::child::effective_capabilities().is_ok_and(|eff| eff & (1 << CAP_SYS_ADMIN) != 0)
}

impl PreparedLaunch {
    /// Prepares a launch of `policy` on a host with `caps`; `inherited_env` is the environment the env
    /// policy starts from (usually `std::env::vars_os()`, or the request's environment).
    ///
    /// # Errors
    /// [`LaunchError::Missing`] when a needed layer is unavailable and `allow_degraded` is off; the
    /// other variants when preparing a layer fails.
    pub fn prepare<I>(
        policy: &ResolvedPolicy,
        caps: &Capabilities,
        opts: &LaunchOptions,
        inherited_env: I,
    ) -> Result<Self, LaunchError>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        let restricted = policy.sandboxed && policy.network_restricted();
        let env = policy
            .env
            .apply(inherited_env, policy.profile_name.as_deref(), restricted);
        let mut report = SandboxReport::new(policy);
        if !policy.sandboxed {
            return Ok(Self {
                plan: None,
                env,
                cwd: policy.cwd.clone(),
                report,
            });
        }
        let host = Host::probe(policy, caps);
        check_layers(caps, opts, &host, &mut report)?;
        let plan = build_plan(policy, caps, opts, &host, &mut report)?;
        Ok(Self {
            plan: Some(Arc::new(plan)),
            env,
            cwd: policy.cwd.clone(),
            report,
        })
    }

    /// What this launch enforces.
    pub fn report(&self) -> &SandboxReport {
        &self.report
    }

    /// The environment the command gets (env policy applied, outpost variables set).
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// Installs the launch on `cmd`: replaces its environment, sets the working directory and adds
    /// the child set-up as a `pre_exec` hook (tokio users pass `cmd.as_std_mut()`). A failing set-up
    /// step fails `spawn` with that step's errno (and names the step on the child's stderr).
    ///
    /// The child calls `setsid`, so it leads its own session and process group (pgid == pid): signal
    /// the group with `kill(-pid, ..)`. Do not also call `CommandExt::process_group`; a process-group
    /// leader cannot `setsid` and the spawn would fail with `EPERM`. For a PTY, add a later `pre_exec`
    /// hook that makes stdin the controlling terminal (`ioctl(0, TIOCSCTTY, 0)`); `TIOCSTI` stays
    /// denied by seccomp either way.
    ///
    /// The child re-enters its working directory after setting up mounts, so a `current_dir` set
    /// after `apply` is honoured.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env_clear();
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.current_dir(&self.cwd);
        if let Some(plan) = &self.plan {
            let plan = Arc::clone(plan);
            // SAFETY: the hook only runs `ChildPlan::run`, which is async-signal-safe: it makes
            // syscalls on data allocated before fork and neither allocates, locks nor panics.
            unsafe {
                cmd.pre_exec(move || plan.run());
            }
        }
    }
}

/// What this process can do for the mount layer.
#[derive(Debug, Clone, Copy)]
struct Host {
    /// Running as uid 0 (the mount layer, with its read-only system remount, is required).
    root: bool,
    /// No CAP_SYS_ADMIN: the mount namespace needs a user namespace.
    userns: bool,
    /// The policy needs the mount layer.
    mounts_needed: bool,
    /// The mount layer can be built here.
    mounts_possible: bool,
}

impl Host {
    fn probe(policy: &ResolvedPolicy, caps: &Capabilities) -> Self {
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let userns = !has_sys_admin();
        Self {
            root,
            userns,
            mounts_needed: root || policy.needs_mounts(),
            mounts_possible: !userns || caps.user_namespaces,
        }
    }
}

/// Refuses (or, with `allow_degraded`, records) every layer the policy needs that the host lacks.
fn check_layers(
    caps: &Capabilities,
    opts: &LaunchOptions,
    host: &Host,
    report: &mut SandboxReport,
) -> Result<(), LaunchError> {
    let mut missing = |layer: &'static str, reason: &'static str| {
        if opts.allow_degraded {
            report.degraded.push(format!("{layer}: {reason}"));
            Ok(())
        } else {
            Err(LaunchError::Missing { layer, reason })
        }
    };
    if host.mounts_needed && !host.mounts_possible {
        missing(
            "mount namespace",
            "protected subpaths and denied paths need a mount namespace, which needs CAP_SYS_ADMIN or user namespaces",
        )?;
    }
    if caps.landlock_abi == 0 {
        missing(
            "Landlock",
            "the kernel has no Landlock; the filesystem allow-list is a hard requirement",
        )?;
    } else if host.root && caps.landlock_abi < ABI_SIGNAL_SCOPE {
        missing(
            "Landlock signal scoping",
            "running as root needs Landlock ABI 6 so the command cannot signal other root processes",
        )?;
    }
    if !caps.seccomp {
        missing("seccomp", "the kernel cannot install seccomp filters")?;
    }
    Ok(())
}

/// Allocates everything the child needs for the layers this host has.
fn build_plan(
    policy: &ResolvedPolicy,
    caps: &Capabilities,
    opts: &LaunchOptions,
    host: &Host,
    report: &mut SandboxReport,
) -> Result<ChildPlan, LaunchError> {
    // Unprivileged launches use the mount layer whenever they can (best effort): the read-only
    // system mounts stop chmod, xattrs and utimes on the user's own files outside the writable roots,
    // which Landlock does not cover.
    let mounts = if host.mounts_possible {
        let plan = MountPlan::new(policy, host.userns, true).map_err(LaunchError::Mounts)?;
        report.record_mounts(
            policy,
            plan.uses_userns(),
            plan.read_only_system(),
            plan.denied(),
        );
        Some(plan)
    } else {
        None
    };
    let landlock = if caps.landlock_abi > 0 {
        let (created, ll) =
            landlock_layer::build(policy, caps.landlock_abi).map_err(LaunchError::Landlock)?;
        report.landlock = ll;
        Some(ChildRuleset::new(created).map_err(LaunchError::Landlock)?)
    } else {
        None
    };
    let seccomp = if caps.seccomp {
        report.seccomp = true;
        let restricted = policy.network_restricted();
        Some(seccomp_layer::build(restricted).map_err(LaunchError::Seccomp)?)
    } else {
        None
    };
    report.no_new_privs = true;
    report.capabilities_dropped = true;
    if !report.degraded.is_empty() {
        tracing::warn!(degraded = ?report.degraded, "launching with a degraded sandbox (allow_degraded)");
    }
    tracing::debug!(
        profile = ?policy.profile_name,
        landlock_abi = report.landlock.abi,
        seccomp = report.seccomp,
        mount_namespace = report.mount_namespace,
        "prepared sandboxed launch"
    );
    // SAFETY: getpid cannot fail.
    let parent_pid = opts.parent_death_signal.then(|| unsafe { libc::getpid() });
    report.parent_death_signal = parent_pid.is_some();
    Ok(ChildPlan {
        parent_pid,
        rlimits: rlimits(policy)?,
        mounts,
        landlock,
        seccomp,
    })
}

fn rlimits(
    policy: &ResolvedPolicy,
) -> Result<Vec<(libc::__rlimit_resource_t, libc::rlimit)>, LaunchError> {
    let r = &policy.rlimits;
    let all = [
        (libc::RLIMIT_NOFILE, r.nofile, "nofile"),
        (libc::RLIMIT_NPROC, r.nproc, "nproc"),
        (libc::RLIMIT_AS, r.address_space, "as"),
        (libc::RLIMIT_FSIZE, r.fsize, "fsize"),
        (libc::RLIMIT_CPU, r.cpu, "cpu"),
        (libc::RLIMIT_CORE, r.core, "core"),
    ];
    all.into_iter()
        .filter_map(|(res, v, name)| v.map(|v| (res, v, name)))
        .map(|(res, v, name)| {
            let v = libc::rlim_t::try_from(v).map_err(|_| LaunchError::Rlimit(name))?;
            Ok((
                res,
                libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Profile, WORKSPACE};
    use crate::resolve::{FsContext, resolve};

    fn policy() -> ResolvedPolicy {
        let ctx = FsContext::for_cwd(PathBuf::from("/"));
        resolve(&Profile::builtin(WORKSPACE).expect("builtin"), &ctx, None).expect("resolve")
    }

    #[test]
    fn missing_landlock_refuses_and_names_the_opt_out() {
        let caps = Capabilities {
            landlock_abi: 0,
            seccomp: true,
            user_namespaces: true,
        };
        let err = PreparedLaunch::prepare(&policy(), &caps, &LaunchOptions::default(), [])
            .expect_err("no Landlock must refuse");
        let msg = err.to_string();
        assert!(
            msg.contains("Landlock") && msg.contains("--allow-degraded"),
            "{msg}"
        );
    }

    #[test]
    fn allow_degraded_records_every_missing_layer() {
        let caps = Capabilities::default();
        let opts = LaunchOptions {
            allow_degraded: true,
            parent_death_signal: false,
        };
        let launch = PreparedLaunch::prepare(&policy(), &caps, &opts, []).expect("degraded launch");
        let report = launch.report();
        assert!(report.degraded.iter().any(|d| d.starts_with("Landlock")));
        assert!(report.degraded.iter().any(|d| d.starts_with("seccomp")));
        assert!(!report.seccomp && report.landlock.abi == 0);
        assert!(report.to_string().contains("DEGRADED"));
    }

    #[test]
    fn unsandboxed_keeps_profile_variable_only() {
        let ctx = FsContext::for_cwd(PathBuf::from("/"));
        let p = resolve(
            &Profile::builtin(crate::profile::DANGER_FULL_ACCESS).expect("builtin"),
            &ctx,
            None,
        )
        .expect("resolve");
        let launch =
            PreparedLaunch::prepare(&p, &Capabilities::default(), &LaunchOptions::default(), [])
                .expect("unsandboxed launch needs no layer");
        assert!(!launch.report().sandboxed);
        assert_eq!(
            launch.env(),
            &[(
                "CODEX_PERMISSION_PROFILE".into(),
                ":danger-full-access".into()
            )]
        );
    }
}
