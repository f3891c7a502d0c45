//! Detection of the kernel sandbox features this host offers. Detection only asks the kernel; it never
//! changes the calling process.

use std::fs;

/// Kernel sandbox features as detected on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Highest Landlock ABI the kernel supports; 0 when Landlock is unavailable or disabled.
    pub landlock_abi: u32,
    /// Whether seccomp filters can be installed (`CONFIG_SECCOMP_FILTER`).
    pub seccomp: bool,
    /// Whether this process may create a user namespace.
    pub user_namespaces: bool,
}

impl Capabilities {
    /// Asks the running kernel which sandbox features it offers.
    pub fn detect() -> Self {
        Self {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_available(),
            user_namespaces: user_namespaces_available(),
        }
    }
}

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version instead of creating a ruleset.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;

fn landlock_abi() -> u32 {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, landlock_create_ruleset only
    // returns the ABI version (or an error); it reads no memory and creates no file descriptor.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(ret).unwrap_or(0)
}

fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments and only reports the calling thread's mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    // 0: not filtered yet; 2: already filtered (filters stack). -1/EINVAL: kernel without seccomp.
    mode >= 0 && std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").exists()
}

fn user_namespaces_available() -> bool {
    let max = fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if max == 0 {
        return false;
    }
    // Debian kernels gate unprivileged user namespaces behind this sysctl; root is not affected.
    let unprivileged = fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .map(|s| s.trim() != "0")
        .unwrap_or(true);
    unprivileged || nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_reports_consistent_values() {
        let caps = Capabilities::detect();
        // Landlock ABIs are small integers; a garbage return value would be caught here.
        assert!(
            caps.landlock_abi < 100,
            "implausible Landlock ABI {}",
            caps.landlock_abi
        );
        if caps.landlock_abi == 0 {
            eprintln!("NOTE: this kernel has no Landlock; sandboxed launches will be refused here");
        }
    }
}
