//! The code that runs in the forked child between `fork` and `exec` (`pre_exec`). Everything here is
//! async-signal-safe: syscalls on data prepared before fork, no allocation, no locks, no panics. A failed
//! step writes its name to stderr (one static `write`) and returns the errno, which fails the spawn.
//!
//! Order: session and parent-death signal, rlimits, mount layer, no_new_privs and capability drop,
//! Landlock, close-on-exec for inherited fds, seccomp last (it denies syscalls earlier steps use).

use std::io;

use crate::landlock_layer::{ChildRuleset, restrict_raw};
use crate::mounts::MountPlan;
use crate::seccomp_layer::SeccompPrograms;

/// A child set-up step, named in the failure message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Setsid,
    ParentDeath,
    Rlimit,
    Unshare,
    UidMap,
    MakePrivate,
    ReadOnlySystem,
    Devices,
    BindWritable,
    Protect,
    DenyDir,
    DenyFile,
    Chdir,
    NoNewPrivs,
    Capabilities,
    Landlock,
    Seccomp,
}

impl Step {
    fn message(self) -> &'static [u8] {
        match self {
            Self::Setsid => b"outpost sandbox: child set-up failed: setsid\n",
            Self::ParentDeath => b"outpost sandbox: child set-up failed: parent-death signal\n",
            Self::Rlimit => b"outpost sandbox: child set-up failed: setrlimit\n",
            Self::Unshare => b"outpost sandbox: child set-up failed: unshare mount namespace\n",
            Self::UidMap => b"outpost sandbox: child set-up failed: user namespace id maps\n",
            Self::MakePrivate => b"outpost sandbox: child set-up failed: make mounts private\n",
            Self::ReadOnlySystem => {
                b"outpost sandbox: child set-up failed: read-only system mounts\n"
            }
            Self::Devices => b"outpost sandbox: child set-up failed: keep devices under /dev\n",
            Self::BindWritable => b"outpost sandbox: child set-up failed: bind writable root\n",
            Self::Protect => b"outpost sandbox: child set-up failed: protect subpath read-only\n",
            Self::DenyDir => b"outpost sandbox: child set-up failed: hide denied directory\n",
            Self::DenyFile => b"outpost sandbox: child set-up failed: hide denied file\n",
            Self::Chdir => b"outpost sandbox: child set-up failed: re-enter working directory\n",
            Self::NoNewPrivs => b"outpost sandbox: child set-up failed: no_new_privs\n",
            Self::Capabilities => b"outpost sandbox: child set-up failed: drop capabilities\n",
            Self::Landlock => b"outpost sandbox: child set-up failed: Landlock restrict_self\n",
            Self::Seccomp => b"outpost sandbox: child set-up failed: seccomp filter\n",
        }
    }
}

/// Turns a syscall return value into a result, reporting `step` on failure.
pub(crate) fn check(step: Step, ret: libc::c_int) -> io::Result<()> {
    if ret >= 0 {
        return Ok(());
    }
    fail(step, io::Error::last_os_error())
}

fn fail(step: Step, err: io::Error) -> io::Result<()> {
    let msg = step.message();
    // SAFETY: writes a static buffer to stderr; failure to report is ignored on purpose.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    Err(err)
}

/// Everything the child does, prepared before fork.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    pub(crate) parent_pid: Option<libc::pid_t>,
    pub(crate) rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    pub(crate) mounts: Option<MountPlan>,
    pub(crate) landlock: Option<ChildRuleset>,
    pub(crate) seccomp: Option<SeccompPrograms>,
}

impl ChildPlan {
    /// Runs every step. Called from `pre_exec`.
    pub(crate) fn run(&self) -> io::Result<()> {
        // SAFETY: setsid takes no arguments; a new session detaches us from the launcher's terminal
        // (TIOCSTI on a terminal that is not our controlling tty needs CAP_SYS_ADMIN).
        check(Step::Setsid, unsafe { libc::setsid() })?;
        if let Some(parent) = self.parent_pid {
            // SAFETY: PR_SET_PDEATHSIG takes a signal number only.
            check(Step::ParentDeath, unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)
            })?;
            // The parent may have died between fork and prctl; then nobody would kill us later.
            // SAFETY: getppid cannot fail.
            if unsafe { libc::getppid() } != parent {
                return fail(Step::ParentDeath, io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        for (resource, limit) in &self.rlimits {
            // SAFETY: `limit` points to a valid rlimit on the plan.
            check(Step::Rlimit, unsafe { libc::setrlimit(*resource, limit) })?;
        }
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
        // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only.
        check(Step::NoNewPrivs, unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        })?;
        drop_capabilities()?;
        if let Some(ruleset) = &self.landlock {
            restrict_raw(ruleset.raw_fd()).or_else(|e| fail(Step::Landlock, e))?;
        }
        cloexec_inherited_fds()?;
        if let Some(seccomp) = &self.seccomp {
            seccomp.install().or_else(|e| fail(Step::Seccomp, e))?;
        }
        Ok(())
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;
const PR_CAP_AMBIENT_CLEAR_ALL: libc::c_ulong = 4;

/// The calling thread's effective capability set (all 64 bits), from `capget`.
pub(crate) fn effective_capabilities() -> io::Result<u64> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and a two-element data array are the v3 capget layout; both live on our stack.
    let ret = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

/// Drops every capability of the calling thread: bounding set (when we may), ambient, effective,
/// permitted and inheritable; and locks securebits so uid 0 regains nothing on exec.
pub(crate) fn drop_capabilities() -> io::Result<()> {
    let effective = match effective_capabilities() {
        Ok(set) => set,
        Err(err) => return fail(Step::Capabilities, err),
    };
    if effective & (1 << CAP_SETPCAP) != 0 {
        for cap in 0..64 {
            // SAFETY: PR_CAPBSET_DROP takes a capability number; EINVAL marks the end of the list.
            if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                break;
            }
        }
        let bits = libc::SECBIT_NOROOT
            | libc::SECBIT_NOROOT_LOCKED
            | libc::SECBIT_NO_SETUID_FIXUP
            | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
            | libc::SECBIT_KEEP_CAPS_LOCKED
            | libc::SECBIT_NO_CAP_AMBIENT_RAISE
            | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        // SAFETY: PR_SET_SECUREBITS takes an integer bit set.
        check(Step::Capabilities, unsafe {
            libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0)
        })?;
    }
    // SAFETY: PR_CAP_AMBIENT with CLEAR_ALL takes integers only. Kernels before 4.3 lack ambient
    // capabilities (EINVAL), which leaves nothing to clear.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) };
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let empty = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: the v3 capset layout (as in `effective_capabilities`); dropping is always permitted.
    let ret = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, empty.as_ptr()) };
    check(Step::Capabilities, if ret == 0 { 0 } else { -1 })
}

/// Marks every fd above stderr close-on-exec, so nothing the launcher had open leaks into the
/// command (std's own exec-error pipe keeps working: it is close-on-exec already).
fn cloexec_inherited_fds() -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes fd flags.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if ret == 0 {
        return Ok(());
    }
    // Kernels before 5.11: walk the fd table up to the soft limit.
    // SAFETY: sysconf takes an integer.
    let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) };
    let max = libc::c_int::try_from(max).unwrap_or(4096);
    for fd in 3..max {
        // SAFETY: fcntl on an arbitrary fd number; EBADF for closed ones is expected and ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}
