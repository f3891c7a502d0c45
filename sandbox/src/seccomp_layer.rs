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
//!
//! Between the guard and seccompiler's program sits a balanced search over the syscall numbers the
//! rules name. It returns `EPERM` for the unconditional denials itself, sends the syscalls with
//! argument conditions on to seccompiler's rules, and allows any other number after a handful of
//! comparisons. seccompiler alone emits a linear chain, five instructions per denied syscall. The
//! kernel pays for the length on every install: it JIT-compiles the program and emulates it for
//! each of the ~450 syscall numbers to find the ones it may always allow (the seccomp action cache).
//! Tests check the result against seccompiler's compilation of the whole rule set, number by number.

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
    /// A jump in the dispatch would not fit classic BPF's 8-bit offsets.
    #[error("the seccomp dispatch is too large for classic BPF jumps")]
    TooLarge,
    /// The dispatch was given the same syscall number twice.
    #[error("a syscall number appears twice in the seccomp dispatch")]
    Duplicate,
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
///
/// seccompiler compiles the rules with argument conditions; the dispatch spliced in front of them
/// answers the unconditional denials itself and sends only the conditional syscalls on.
pub(crate) fn build(network_restricted: bool) -> Result<SeccompPrograms, SeccompError> {
    let (unconditional, conditional): (BTreeMap<_, _>, BTreeMap<_, _>) = rules(network_restricted)?
        .into_iter()
        .partition(|(_, rules)| rules.is_empty());
    let number = |nr: &i64| u32::try_from(*nr).map_err(|_| SeccompError::TooLarge);
    let mut targets = Vec::with_capacity(unconditional.len() + conditional.len());
    for nr in unconditional.keys() {
        targets.push((number(nr)?, Target::Deny));
    }
    for nr in conditional.keys() {
        targets.push((number(nr)?, Target::Rules));
    }
    let mut program = compile(conditional, libc::EPERM)?;
    splice_enosys_guard(&mut program);
    splice_dispatch(&mut program, targets)?;
    Ok(SeccompPrograms {
        programs: vec![program],
    })
}

/// The `EPERM` rules by syscall number (seccompiler's input).
fn rules(network_restricted: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
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
    Ok(eperm)
}

/// Length of seccompiler's architecture check, which opens every program it compiles.
const ARCH_CHECK_LEN: usize = 3;
/// Length of the `ENOSYS` guard.
const GUARD_LEN: usize = 4;
/// `BPF_LD | BPF_W | BPF_ABS`.
const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JGE | BPF_K`.
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
/// `BPF_RET | BPF_K`.
const BPF_RET_K: u16 = 0x06;

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
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs();
    let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
    let x32_bit = if cfg!(target_arch = "x86_64") {
        X32_SYSCALL_BIT
    } else {
        u32::MAX
    };
    let guard: [sock_filter; GUARD_LEN] = [
        stmt(BPF_LD_W_ABS, 0),
        // nr >= x32 bit: to the return, else skip it.
        jump(BPF_JMP_JGE_K, x32_bit, 1, 0),
        // nr == clone3: to the return, else past it.
        jump(BPF_JMP_JEQ_K, clone3, 0, 1),
        stmt(BPF_RET_K, enosys),
    ];
    program.splice(ARCH_CHECK_LEN..ARCH_CHECK_LEN, guard);
}

/// Where the dispatch sends a listed syscall number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `RET ERRNO(EPERM)`, right after the dispatch.
    Deny,
    /// seccompiler's rules, after that return.
    Rules,
}

/// Inserts, right after the guard (whose load leaves the syscall number in the accumulator), a
/// balanced search over the `targets` numbers followed by `RET ERRNO(EPERM)`: a number sent to
/// [`Target::Deny`] jumps to that return, one sent to [`Target::Rules`] jumps past it into
/// seccompiler's program (which starts by reloading the number), and any other number returns
/// `ALLOW`, the filter's mismatch action.
fn splice_dispatch(
    program: &mut BpfProgram,
    mut targets: Vec<(u32, Target)>,
) -> Result<(), SeccompError> {
    targets.sort_unstable_by_key(|(nr, _)| *nr);
    if targets.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(SeccompError::Duplicate);
    }
    let total = dispatch_len(targets.len());
    let mut dispatch = Vec::with_capacity(total + 1);
    emit_dispatch(&targets, total, &mut dispatch)?;
    dispatch.push(stmt(
        BPF_RET_K,
        libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs(),
    ));
    let at = ARCH_CHECK_LEN + GUARD_LEN;
    program.splice(at..at, dispatch);
    Ok(())
}

/// Syscall numbers compared one by one at a leaf of the dispatch.
const DISPATCH_LEAF: usize = 4;

/// Instructions the search over `n` numbers takes (see [`emit_dispatch`]).
fn dispatch_len(n: usize) -> usize {
    if n <= DISPATCH_LEAF {
        n + 1
    } else {
        let low = n / 2;
        1 + dispatch_len(low) + dispatch_len(n - low)
    }
}

/// Emits the search over sorted `targets` into `out`, whose final length is `total` (the deny
/// return follows at index `total`, the rules at `total + 1`): a leaf is one `JEQ` per number and a
/// `RET ALLOW`; an inner node is a `JGE` on the first number of the upper half that skips the lower
/// half's subtree.
fn emit_dispatch(
    targets: &[(u32, Target)],
    total: usize,
    out: &mut Vec<sock_filter>,
) -> Result<(), SeccompError> {
    let offset = |n: usize| u8::try_from(n).map_err(|_| SeccompError::TooLarge);
    if targets.len() <= DISPATCH_LEAF {
        for (nr, target) in targets {
            let to = match target {
                Target::Deny => total,
                Target::Rules => total + 1,
            };
            out.push(jump(BPF_JMP_JEQ_K, *nr, offset(to - out.len() - 1)?, 0));
        }
        out.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
        return Ok(());
    }
    let (low, high) = targets.split_at(targets.len() / 2);
    out.push(jump(
        BPF_JMP_JGE_K,
        high[0].0,
        offset(dispatch_len(low.len()))?,
        0,
    ));
    emit_dispatch(low, total, out)?;
    emit_dispatch(high, total, out)
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

    /// `AUDIT_ARCH_X86_64` and `AUDIT_ARCH_AARCH64`: the native architecture in `seccomp_data`.
    fn native_arch() -> u32 {
        if cfg!(target_arch = "x86_64") {
            0xc000_003e
        } else {
            0xc000_00b7
        }
    }

    /// A classic BPF interpreter for the instructions seccompiler and the splices emit; it panics on
    /// anything else, so a program it cannot read fails the test instead of being misjudged. Returns
    /// the action and the number of instructions executed.
    fn eval(program: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
        // struct seccomp_data: nr, arch, instruction_pointer, args[6], read as 32-bit words.
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                8 | 12 => 0,
                16..=60 if offset.is_multiple_of(4) => {
                    let arg = args[usize::try_from((offset - 16) / 8).unwrap()];
                    let half = if offset.is_multiple_of(8) {
                        arg
                    } else {
                        arg >> 32
                    };
                    u32::try_from(half & 0xffff_ffff).unwrap()
                }
                _ => panic!("load from offset {offset}"),
            }
        };
        let (mut acc, mut pc, mut steps) = (0u32, 0usize, 0usize);
        loop {
            let ins = &program[pc];
            pc += 1;
            steps += 1;
            let branch = |taken: bool| usize::from(if taken { ins.jt } else { ins.jf });
            match ins.code {
                BPF_LD_W_ABS => acc = word(ins.k),
                // BPF_ALU | BPF_AND | BPF_K.
                0x54 => acc &= ins.k,
                // BPF_JMP | BPF_JA.
                0x05 => pc += usize::try_from(ins.k).unwrap(),
                BPF_JMP_JEQ_K => pc += branch(acc == ins.k),
                BPF_JMP_JGE_K => pc += branch(acc >= ins.k),
                // BPF_JMP | BPF_JGT | BPF_K.
                0x25 => pc += branch(acc > ins.k),
                // BPF_JMP | BPF_JSET | BPF_K.
                0x45 => pc += branch(acc & ins.k != 0),
                BPF_RET_K => return (ins.k, steps),
                code => panic!("unexpected BPF opcode {code:#x} at {}", pc - 1),
            }
        }
    }

    /// Argument vectors that reach every condition of the rules, both ways.
    fn probe_args() -> Vec<[u64; 6]> {
        let newuser = u64::try_from(libc::CLONE_NEWUSER).unwrap();
        vec![
            [0; 6],
            [1, 0, 0, 0, 0, 0],
            [2, 0, 0, 0, 0, 0],
            [(1 << 32) | 2, 0, 0, 0, 0, 0],
            [newuser | 0x11, 0, 0, 0, 0, 0],
            [0, libc::TIOCSTI, 0, 0, 0, 0],
            [0, libc::TIOCLINUX, 0, 0, 0, 0],
            [7, 0, 0, 0, 1, 0],
            [0, 0, 0, 0, 1 << 40, 0],
        ]
    }

    #[test]
    fn the_dispatch_decides_every_syscall_as_the_rules_do() {
        for restricted in [false, true] {
            let mut reference = compile(rules(restricted).unwrap(), libc::EPERM).unwrap();
            splice_enosys_guard(&mut reference);
            let built = build(restricted).unwrap();
            let program = &built.programs[0];
            assert!(
                program.len() * 3 < reference.len() * 2,
                "{} instructions, seccompiler alone {}",
                program.len(),
                reference.len()
            );
            let numbers = (0..1024u32)
                .chain((0..1024).map(|nr| nr | X32_SYSCALL_BIT))
                .chain([u32::MAX, X32_SYSCALL_BIT - 1]);
            for nr in numbers {
                for arch in [native_arch(), 0x4000_0003] {
                    for args in probe_args() {
                        let want = eval(&reference, nr, arch, args).0;
                        let got = eval(program, nr, arch, args).0;
                        assert_eq!(got, want, "nr {nr} arch {arch:#x} args {args:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn unlisted_syscalls_are_allowed_after_a_few_comparisons() {
        let program = &build(true).unwrap().programs[0];
        let allow = libc::SECCOMP_RET_ALLOW;
        let (action, steps) = eval(program, 39, native_arch(), [0; 6]);
        assert_eq!((action, 39), (allow, libc::SYS_getpid as u32));
        assert!(steps <= 16, "getpid took {steps} instructions");
        let listed = rules(true).unwrap();
        let worst = (0..512u32)
            // clone3 is answered by the guard in front of the dispatch.
            .filter(|nr| {
                !listed.contains_key(&i64::from(*nr)) && i64::from(*nr) != libc::SYS_clone3
            })
            .map(|nr| eval(program, nr, native_arch(), [0; 6]))
            .inspect(|(action, _)| assert_eq!(*action, allow))
            .map(|(_, steps)| steps)
            .max()
            .unwrap();
        assert!(worst <= 16, "an unlisted syscall took {worst} instructions");
        let (action, _) = eval(program, libc::SYS_ptrace as u32, native_arch(), [0; 6]);
        assert_eq!(action, libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs());
    }

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

    #[test]
    fn dispatch_length_matches_what_is_emitted() {
        for n in 0..200 {
            let targets: Vec<(u32, Target)> = (0..n).map(|k| (k * 3, Target::Deny)).collect();
            let total = dispatch_len(targets.len());
            let mut out = Vec::new();
            match emit_dispatch(&targets, total, &mut out) {
                Ok(()) => assert_eq!(out.len(), total, "{n} keys"),
                Err(SeccompError::TooLarge) => assert!(total > 255, "{n} keys"),
                Err(e) => panic!("{e}"),
            }
        }
    }
}
