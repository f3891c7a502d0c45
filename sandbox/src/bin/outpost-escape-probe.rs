//! Test helper for the escape suite (not installed, not part of the product): performs one escape
//! attempt inside a sandbox and reports what the kernel answered. Prints `ok` and exits 0 when the
//! attempt succeeded, or prints `errno N` and exits with N when it failed.
//!
//! Usage: `outpost-escape-probe OP [ARGS...]`; see `attempt` for the operations.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

fn c(s: &str) -> CString {
    CString::new(std::ffi::OsStr::new(s).as_bytes()).expect("test paths contain no NUL")
}

fn num(s: &str) -> i64 {
    if let Some(hex) = s.strip_prefix("0x") {
        u64::from_str_radix(hex, 16)
            .expect("hex number")
            .cast_signed()
    } else {
        s.parse().expect("number")
    }
}

/// File-system attempts (paths as arguments).
#[allow(clippy::too_many_lines)]
fn files(op: &str, a: &[String]) -> Option<libc::c_long> {
    let arg = |i: usize| a.get(i).map_or("", String::as_str);
    // SAFETY: each arm makes one syscall with arguments built right here; buffers live until the
    // call returns. This binary exists to make dangerous calls and report the result.
    unsafe {
        Some(match op {
            "write" => {
                let fd = libc::open(c(arg(0)).as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
                if fd < 0 {
                    -1
                } else {
                    libc::write(fd, b"x".as_ptr().cast(), 1) as libc::c_long
                }
            }
            "openpty" => {
                let (mut master, mut slave) = (0, 0);
                let null = std::ptr::null_mut();
                libc::openpty(
                    &raw mut master,
                    &raw mut slave,
                    null,
                    std::ptr::null(),
                    std::ptr::null(),
                )
                .into()
            }
            "open-ro" => libc::open(c(arg(0)).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK).into(),
            "truncate" => libc::truncate(c(arg(0)).as_ptr(), 0).into(),
            "read" => {
                let fd = libc::open(c(arg(0)).as_ptr(), libc::O_RDONLY);
                let mut buf = [0u8; 16];
                if fd < 0 {
                    -1
                } else {
                    libc::read(fd, buf.as_mut_ptr().cast(), 16) as libc::c_long
                }
            }
            "readdir" => {
                if libc::opendir(c(arg(0)).as_ptr()).is_null() {
                    -1
                } else {
                    0
                }
            }
            "unlink" => libc::unlink(c(arg(0)).as_ptr()).into(),
            "rmdir" => libc::rmdir(c(arg(0)).as_ptr()).into(),
            "mkdir" => libc::mkdir(c(arg(0)).as_ptr(), 0o755).into(),
            "rename" => libc::rename(c(arg(0)).as_ptr(), c(arg(1)).as_ptr()).into(),
            "link" => libc::link(c(arg(0)).as_ptr(), c(arg(1)).as_ptr()).into(),
            "symlink" => libc::symlink(c(arg(0)).as_ptr(), c(arg(1)).as_ptr()).into(),
            "chmod" => libc::chmod(c(arg(0)).as_ptr(), 0o777).into(),
            "chown" => libc::chown(c(arg(0)).as_ptr(), 1000, 1000).into(),
            "setxattr" => libc::setxattr(
                c(arg(0)).as_ptr(),
                c"user.x".as_ptr(),
                b"1".as_ptr().cast(),
                1,
                0,
            )
            .into(),
            "utimes" => libc::utimes(c(arg(0)).as_ptr(), std::ptr::null()).into(),
            "mknod-char" => libc::mknod(
                c(arg(0)).as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(1, 3),
            )
            .into(),
            "mkfifo" => libc::mkfifo(c(arg(0)).as_ptr(), 0o644).into(),
            "write-via-symlink" => {
                if libc::symlink(c(arg(0)).as_ptr(), c(arg(1)).as_ptr()) != 0 {
                    -1
                } else {
                    let fd = libc::open(c(arg(1)).as_ptr(), libc::O_WRONLY | libc::O_TRUNC);
                    if fd < 0 {
                        -1
                    } else {
                        libc::write(fd, b"x".as_ptr().cast(), 1) as libc::c_long
                    }
                }
            }
            _ => return None,
        })
    }
}

/// A unix socket address for `name`: a pathname, or with `abstract_name` a name in the abstract
/// namespace (a leading NUL byte, length exactly as long as the name). Names that do not fit are
/// cut at the end of `sun_path`.
fn unix_addr(name: &str, abstract_name: bool) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid (empty) address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let offset = usize::from(abstract_name);
    let slots = addr.sun_path.iter_mut().skip(offset);
    let used = slots
        .zip(name.as_bytes())
        .map(|(slot, b)| *slot = *b as libc::c_char)
        .count();
    let len = if abstract_name {
        size_of::<libc::sa_family_t>() + offset + used
    } else {
        size_of::<libc::sockaddr_un>()
    };
    (addr, len as libc::socklen_t)
}

/// Socket attempts.
#[allow(clippy::too_many_lines)]
fn net(op: &str, a: &[String]) -> Option<libc::c_long> {
    let arg = |i: usize| a.get(i).map_or("", String::as_str);
    // SAFETY: each arm makes one syscall with arguments built right here; buffers live until the
    // call returns. This binary exists to make dangerous calls and report the result.
    unsafe {
        Some(match op {
            "socket" => libc::syscall(libc::SYS_socket, num(arg(0)), num(arg(1)), 0),
            "socketpair" => {
                let mut fds = [0i32; 2];
                libc::syscall(
                    libc::SYS_socketpair,
                    num(arg(0)),
                    libc::SOCK_STREAM,
                    0,
                    fds.as_mut_ptr(),
                )
            }
            "tcp-connect" => {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                if fd < 0 {
                    -1
                } else {
                    let addr = libc::sockaddr_in {
                        sin_family: libc::AF_INET as libc::sa_family_t,
                        sin_port: (num(arg(0)) as u16).to_be(),
                        sin_addr: libc::in_addr {
                            s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
                        },
                        sin_zero: [0; 8],
                    };
                    libc::connect(
                        fd,
                        (&raw const addr).cast(),
                        size_of::<libc::sockaddr_in>() as u32,
                    )
                    .into()
                }
            }
            "unix-connect" => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let (addr, len) = unix_addr(arg(0), false);
                if fd < 0 {
                    -1
                } else {
                    libc::connect(fd, (&raw const addr).cast(), len).into()
                }
            }
            "unix-sendto" => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0);
                let (addr, len) = unix_addr(arg(0), false);
                if fd < 0 {
                    -1
                } else {
                    libc::sendto(
                        fd,
                        b"x".as_ptr().cast(),
                        1,
                        0,
                        (&raw const addr).cast(),
                        len,
                    ) as libc::c_long
                }
            }
            "socketpair-io" => {
                let mut fds = [0i32; 2];
                if libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) != 0 {
                    -1
                } else {
                    let mut buf = [0u8; 1];
                    if libc::send(fds[0], b"x".as_ptr().cast(), 1, 0) != 1 {
                        -1
                    } else {
                        libc::recv(fds[1], buf.as_mut_ptr().cast(), 1, 0) as libc::c_long - 1
                    }
                }
            }
            "abstract-connect" => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let (addr, len) = unix_addr(arg(0), true);
                if fd < 0 {
                    -1
                } else {
                    libc::connect(fd, (&raw const addr).cast(), len).into()
                }
            }
            _ => return None,
        })
    }
}

/// Attempts against other processes, identity and the environment.
#[allow(clippy::too_many_lines)]
fn procs(op: &str, a: &[String]) -> Option<libc::c_long> {
    let arg = |i: usize| a.get(i).map_or("", String::as_str);
    // SAFETY: each arm makes one syscall with arguments built right here; buffers live until the
    // call returns. This binary exists to make dangerous calls and report the result.
    unsafe {
        Some(match op {
            "setuid" => libc::setresuid(1000, 1000, 1000).into(),
            "setgid" => libc::setresgid(1000, 1000, 1000).into(),
            "ptrace-attach" => libc::ptrace(libc::PTRACE_ATTACH, num(arg(0)) as libc::pid_t, 0, 0),
            "ptrace-traceme" => libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0),
            "process_vm_readv" => {
                let mut buf = [0u8; 8];
                let local = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: 8,
                };
                let remote = libc::iovec {
                    iov_base: 0x1000 as *mut libc::c_void,
                    iov_len: 8,
                };
                libc::process_vm_readv(num(arg(0)) as libc::pid_t, &local, 1, &remote, 1, 0)
                    as libc::c_long
            }
            "proc-mem-write" => {
                let fd = libc::open(c(&format!("/proc/{}/mem", arg(0))).as_ptr(), libc::O_RDWR);
                fd.into()
            }
            "kill" => libc::kill(num(arg(0)) as libc::pid_t, num(arg(1)) as i32).into(),
            "pidfd-kill" => {
                let fd = libc::syscall(libc::SYS_pidfd_open, num(arg(0)), 0);
                if fd < 0 {
                    -1
                } else {
                    libc::syscall(libc::SYS_pidfd_send_signal, fd, libc::SIGKILL, 0, 0)
                }
            }
            "prlimit-other" => {
                let lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::syscall(
                    libc::SYS_prlimit64,
                    num(arg(0)),
                    libc::RLIMIT_NOFILE,
                    &raw const lim,
                    0,
                )
            }
            "prlimit-self" => {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::syscall(libc::SYS_prlimit64, 0, libc::RLIMIT_NOFILE, 0, &raw mut lim)
            }
            "kill-parent" => libc::kill(libc::getppid(), libc::SIGCONT).into(),
            "capget-effective" => {
                let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
                let line = status
                    .lines()
                    .find(|l| l.starts_with("CapEff:"))
                    .unwrap_or("");
                println!("{line}");
                if line
                    .trim_start_matches("CapEff:")
                    .trim()
                    .trim_start_matches('0')
                    .is_empty()
                {
                    0
                } else {
                    -1
                }
            }
            "getenv" => match std::env::var_os(arg(0)) {
                Some(v) => {
                    println!("{}", v.to_string_lossy());
                    0
                }
                None => {
                    println!("<unset>");
                    0
                }
            },
            _ => return None,
        })
    }
}

/// Kernel attack surface: namespaces, mounts, io_uring, bpf, modules, terminals, syscall ABIs.
#[allow(clippy::too_many_lines)]
fn kernel(op: &str, a: &[String]) -> Option<libc::c_long> {
    let arg = |i: usize| a.get(i).map_or("", String::as_str);
    // SAFETY: each arm makes one syscall with arguments built right here; buffers live until the
    // call returns. This binary exists to make dangerous calls and report the result.
    unsafe {
        Some(match op {
            "io_uring_setup" => {
                let mut params = [0u8; 120];
                libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr())
            }
            "bpf" => {
                let mut attr = [0u8; 128];
                libc::syscall(libc::SYS_bpf, 0, attr.as_mut_ptr(), 128)
            }
            "userfaultfd" => libc::syscall(libc::SYS_userfaultfd, 0),
            "perf_event_open" => {
                let mut attr = [0u8; 128];
                attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
                libc::syscall(libc::SYS_perf_event_open, attr.as_mut_ptr(), 0, -1, -1, 0)
            }
            "clone3" => {
                let mut args = [0u64; 11];
                args[4] = libc::SIGCHLD as u64;
                libc::syscall(libc::SYS_clone3, args.as_mut_ptr(), 88)
            }
            "clone-newuser" => {
                let r = libc::syscall(
                    libc::SYS_clone,
                    libc::CLONE_NEWUSER | libc::SIGCHLD,
                    0,
                    0,
                    0,
                    0,
                );
                if r == 0 {
                    libc::_exit(0)
                }
                r
            }
            "unshare-user" => libc::unshare(libc::CLONE_NEWUSER).into(),
            "unshare-user-mount" => {
                if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                    -1
                } else {
                    libc::mount(
                        c"none".as_ptr(),
                        c"/tmp".as_ptr(),
                        c"tmpfs".as_ptr(),
                        0,
                        std::ptr::null(),
                    )
                    .into()
                }
            }
            "unshare-mount" => libc::unshare(libc::CLONE_NEWNS).into(),
            "mount" => libc::mount(
                c"none".as_ptr(),
                c(arg(0)).as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
            .into(),
            "umount" => libc::umount2(c(arg(0)).as_ptr(), libc::MNT_DETACH).into(),
            "chroot" => libc::chroot(c(arg(0)).as_ptr()).into(),
            "setns" => {
                let fd = libc::open(c"/proc/1/ns/mnt".as_ptr(), libc::O_RDONLY);
                libc::setns(fd, 0).into()
            }
            "tiocsti" => {
                let ch = b'x';
                libc::ioctl(num(arg(0)) as i32, libc::TIOCSTI, &raw const ch).into()
            }
            "tiocsti-high-bits" => {
                let ch = b'x';
                libc::syscall(
                    libc::SYS_ioctl,
                    num(arg(0)),
                    0x1_0000_5412u64,
                    &raw const ch,
                )
            }
            "i386-getpid" => {
                // The i386 entry point: seccomp sees AUDIT_ARCH_I386 and kills the process.
                #[cfg(target_arch = "x86_64")]
                {
                    let mut ret: i64 = 20;
                    std::arch::asm!("int 0x80", inout("rax") ret);
                    ret
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    -1
                }
            }
            "x32-getpid" => libc::syscall(0x4000_0000 | libc::SYS_getpid),
            "keyctl" => libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0),
            "init_module" => libc::syscall(
                libc::SYS_init_module,
                std::ptr::null::<u8>(),
                0,
                c"".as_ptr(),
            ),
            "kexec_load" => libc::syscall(libc::SYS_kexec_load, 0, 0, 0, 0),
            "open_by_handle_at" => {
                let mut handle = [0u8; 16];
                libc::syscall(
                    libc::SYS_open_by_handle_at,
                    libc::AT_FDCWD,
                    handle.as_mut_ptr(),
                    0,
                )
            }
            "pidfd_getfd" => libc::syscall(libc::SYS_pidfd_getfd, 0, 0, 0),
            _ => return None,
        })
    }
}

/// Runs the attempt; returns the raw return value (negative means failure, errno set).
fn attempt(op: &str, a: &[String]) -> i64 {
    let ret = files(op, a)
        .or_else(|| net(op, a))
        .or_else(|| procs(op, a))
        .or_else(|| kernel(op, a));
    ret.unwrap_or_else(|| {
        eprintln!("unknown op {op}");
        std::process::exit(126);
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((op, rest)) = args.split_first() else {
        eprintln!("usage: outpost-escape-probe OP [ARGS...]");
        std::process::exit(126);
    };
    let ret = attempt(op, rest);
    if ret >= 0 {
        println!("ok");
        std::process::exit(0);
    }
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(125);
    println!("errno {errno}");
    std::process::exit(errno.clamp(1, 125));
}
