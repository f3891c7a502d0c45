//! The seccomp layer: one BPF program built before fork with seccompiler and installed in the child
//! with one raw `seccomp(2)` call (allocation-free). It is a deny-list; everything else is allowed
//! (Landlock and the mount layer handle files).
//! - `EPERM`: io_uring, ptrace, process_vm_*, bpf, userfaultfd, perf_event_open, kexec, modules, the
//!   mount family, setns, keyrings, handle-based opens, `unshare`/`clone` with `CLONE_NEWUSER`,
//!   `ioctl(TIOCSTI | TIOCLINUX)` (terminal input injection), `prlimit64` on another process, and,
//!   when the network is restricted, `socket`/`socketpair` for any family but `AF_UNIX` (32-bit
//!   compare: the kernel reads an `int`, so high bits cannot smuggle another family past the filter),
//!   `connect` and `sendto` with an address (pathname unix sockets of host daemons such as
//!   `docker.sock` are outside Landlock's reach before ABI 9; socketpair IPC keeps working).
//! - `ENOSYS`, from a guard spliced in front: `clone3` (its flags live in memory seccomp cannot read,
//!   so libc falls back to `clone`, whose flags are checked) and every x32 syscall number
//!   (`nr >= 0x4000_0000`).
//!
//! Foreign architectures (i386 via `int 0x80`) kill the process (seccompiler's arch check).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// Bit that marks x32 syscall numbers on x86_64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Syscalls denied with `EPERM` unconditionally.
const DENIED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_acct,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_quotactl,
    libc::SYS_lookup_dcookie,
    libc::SYS_vhangup,
    libc::SYS_syslog,
    libc::SYS_uselib,
];

/// Failure to build the seccomp programs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// seccompiler rejected a rule.
    #[error("cannot build a seccomp rule")]
    Rule(#[source] seccompiler::BackendError),
    /// seccompiler rejected the filter or could not compile it.
    #[error("cannot compile the seccomp filter")]
    Compile(#[source] seccompiler::BackendError),
    /// Only x86_64 and aarch64 are supported.
    #[error("seccomp filters are not supported on this architecture")]
    Arch,
}

/// The prepared programs, installed in order.
#[derive(Debug, Clone)]
pub(crate) struct SeccompPrograms {
    pub(crate) programs: Vec<BpfProgram>,
}

fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| SeccompError::Arch)
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SeccompError> {
    SeccompCondition::new(arg, len, op, value).map_err(SeccompError::Rule)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conditions).map_err(SeccompError::Rule)
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, SeccompError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno.unsigned_abs()),
        arch()?,
    )
    .map_err(SeccompError::Compile)?;
    BpfProgram::try_from(filter).map_err(SeccompError::Compile)
}

/// Builds the programs for a sandbox; `network_restricted` adds the socket-family filter.
pub(crate) fn build(network_restricted: bool) -> Result<SeccompPrograms, SeccompError> {
    use SeccompCmpArgLen::Dword;
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let newuser = u64::try_from(libc::CLONE_NEWUSER).unwrap_or(0x1000_0000);
    let newuser_rule = || {
        rule(vec![cond(
            0,
            Dword,
            SeccompCmpOp::MaskedEq(newuser),
            newuser,
        )?])
    };
    eperm.insert(libc::SYS_unshare, vec![newuser_rule()?]);
    eperm.insert(libc::SYS_clone, vec![newuser_rule()?]);
    eperm.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Dword, SeccompCmpOp::Eq, libc::TIOCSTI)?])?,
            rule(vec![cond(1, Dword, SeccompCmpOp::Eq, libc::TIOCLINUX)?])?,
        ],
    );
    // Lowering another same-uid process's limits needs no capability (uid 0 without capabilities
    // could starve the executor); only the calling process (pid 0) may be targeted.
    eperm.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![cond(0, Dword, SeccompCmpOp::Ne, 0)?])?],
    );
    if network_restricted {
        let unix = u64::try_from(libc::AF_UNIX).unwrap_or(1);
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            eperm.insert(
                nr,
                vec![rule(vec![cond(0, Dword, SeccompCmpOp::Ne, unix)?])?],
            );
        }
        // Pathname unix sockets are not covered by Landlock before ABI 9 and stay reachable on
        // read-only mounts; host daemons listen there (docker.sock, the system bus), and uid 0
        // passes their permission checks. With the network restricted, AF_UNIX is for socketpair
        // IPC only: no connect, no datagrams to an address.
        eperm.insert(libc::SYS_connect, Vec::new());
        eperm.insert(
            libc::SYS_sendto,
            vec![rule(vec![cond(
                4,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::Ne,
                0,
            )?])?],
        );
    }
    let mut program = compile(eperm, libc::EPERM)?;
    splice_enosys_guard(&mut program);
    Ok(SeccompPrograms {
        programs: vec![program],
    })
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Inserts, right after seccompiler's 3-instruction architecture check,
/// `if (nr >= X32_SYSCALL_BIT || nr == clone3) return ERRNO(ENOSYS)`. Relative jumps inside
/// seccompiler's code never cross this point, the arch check's "matched" jump lands exactly on the
/// inserted load, and seccompiler's own code reloads the syscall number after it. One program instead
/// of a second filter keeps the per-syscall cost down.
fn splice_enosys_guard(program: &mut BpfProgram) {
    // BPF_LD | BPF_W | BPF_ABS.
    const BPF_LD_W_ABS: u16 = 0x20;
    // BPF_JMP | BPF_JGE | BPF_K.
    const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
    // BPF_JMP | BPF_JEQ | BPF_K.
    const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
    // BPF_RET | BPF_K.
    const BPF_RET_K: u16 = 0x06;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs();
    let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
    let x32_bit = if cfg!(target_arch = "x86_64") {
        X32_SYSCALL_BIT
    } else {
        u32::MAX
    };
    let guard = [
        stmt(BPF_LD_W_ABS, 0),
        // nr >= x32 bit: to the return, else skip it.
        jump(BPF_JMP_JGE_K, x32_bit, 1, 0),
        // nr == clone3: to the return, else past it.
        jump(BPF_JMP_JEQ_K, clone3, 0, 1),
        stmt(BPF_RET_K, enosys),
    ];
    program.splice(3..3, guard);
}

impl SeccompPrograms {
    /// Installs every program on the calling thread. Async-signal-safe (one syscall per program);
    /// `no_new_privs` must already be set.
    pub(crate) fn install(&self) -> std::io::Result<()> {
        for program in &self.programs {
            let len = u16::try_from(program.len())
                .map_err(|_| std::io::Error::from_raw_os_error(libc::E2BIG))?;
            let prog = libc::sock_fprog {
                len,
                filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
            };
            // SAFETY: `prog` points to `len` instructions owned by `self`, which outlives the call;
            // seccompiler's sock_filter is #[repr(C)] with the kernel's layout. The kernel copies the
            // program and keeps no pointer to it.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &raw const prog,
                )
            };
            if ret != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_build_and_splice() {
        let p = build(true).unwrap();
        assert_eq!(p.programs.len(), 1);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(p.programs[0][4].k, X32_SYSCALL_BIT);
        }
        assert!(
            p.programs
                .iter()
                .all(|prog| prog.len() < usize::from(u16::MAX))
        );
    }
}
