//! Escape suite: each test makes one escape attempt from inside `:workspace` or `:read-only` and
//! asserts the denial a user observes (the errno the probe got, or the shell's failure), plus that
//! nothing outside changed. Runs as root in CI (capabilities dropped inside) and as any user where the
//! kernel allows. Tests needing a missing kernel feature say so loudly (see `common::sandbox_available`).

mod common;

use common::*;

/// One probe attempt: `escape!(name, profile, |dirs| [args], [allowed errnos])`.
macro_rules! escape {
    ($name:ident, $profile:expr, |$d:ident| $args:expr, $errnos:expr) => {
        #[test]
        fn $name() {
            if !sandbox_available(stringify!($name)) {
                return;
            }
            let $d = Dirs::new();
            let args: Vec<String> = $args.iter().map(|s| s.to_string()).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stdout) = probe_in($profile, &$d, &args);
            let allowed: &[i32] = &$errnos;
            assert!(
                allowed.contains(&code),
                "{} under {}: expected errno in {:?}, got exit {} ({})",
                stringify!($name),
                $profile,
                allowed,
                code,
                stdout.trim()
            );
            assert_secret_intact(&$d);
        }
    };
}

const WS: &str = ":workspace";
const RO: &str = ":read-only";

// Writes outside the writable roots.
escape!(
    write_new_file_outside,
    WS,
    |d| ["write", &d.out("new")],
    [EROFS, EACCES]
);
escape!(
    overwrite_file_outside,
    WS,
    |d| ["write", &d.out("secret.txt")],
    [EROFS, EACCES]
);
escape!(
    truncate_file_outside,
    WS,
    |d| ["truncate", &d.out("secret.txt")],
    [EROFS, EACCES]
);
escape!(
    unlink_file_outside,
    WS,
    |d| ["unlink", &d.out("secret.txt")],
    [EROFS, EACCES]
);
escape!(
    mkdir_outside,
    WS,
    |d| ["mkdir", &d.out("dir")],
    [EROFS, EACCES]
);
escape!(
    write_etc,
    WS,
    |_d| ["write", "/etc/outpost-escape-test"],
    [EROFS, EACCES]
);
escape!(
    write_via_proc_self_root,
    WS,
    |d| ["write", &format!("/proc/self/root{}", d.out("secret.txt"))],
    [EROFS, EACCES]
);
escape!(
    read_only_write_in_workspace,
    RO,
    |d| ["write", &d.ws("new.txt")],
    [EROFS, EACCES]
);
escape!(
    read_only_truncate_workspace_file,
    RO,
    |d| ["truncate", &d.ws("file.txt")],
    [EROFS, EACCES]
);
escape!(
    read_only_write_slash_tmp,
    RO,
    |_d| ["write", "/tmp/outpost-escape-ro"],
    [EROFS, EACCES]
);

// Moving and linking across roots.
escape!(
    rename_workspace_file_out,
    WS,
    |d| ["rename", &d.ws("file.txt"), &d.out("moved")],
    [EXDEV, EROFS, EACCES]
);
escape!(
    rename_outside_file_in,
    WS,
    |d| ["rename", &d.out("secret.txt"), &d.ws("stolen")],
    [EXDEV, EROFS, EACCES]
);
escape!(
    hardlink_outside_file_in,
    WS,
    |d| ["link", &d.out("secret.txt"), &d.ws("hl")],
    [EXDEV, EROFS, EACCES, EPERM]
);
escape!(
    symlink_outside_from_outside,
    WS,
    |d| ["symlink", "/etc/passwd", &d.out("sl")],
    [EROFS, EACCES]
);

escape!(
    write_through_workspace_symlink_to_outside,
    WS,
    |d| [
        "write-via-symlink",
        &d.out("secret.txt"),
        &d.ws("to-secret")
    ],
    [EROFS, EACCES]
);
escape!(
    write_through_workspace_symlink_to_git,
    WS,
    |d| [
        "write-via-symlink",
        &d.ws(".git/config"),
        &d.ws("to-config")
    ],
    [EROFS, EACCES]
);
escape!(
    hardlink_git_config_into_workspace,
    WS,
    |d| ["link", &d.ws(".git/config"), &d.ws("cfg-link")],
    [EXDEV, EROFS, EACCES, EPERM]
);
escape!(
    read_only_rename_in_workspace,
    RO,
    |d| ["rename", &d.ws("file.txt"), &d.ws("renamed.txt")],
    [EROFS, EACCES]
);

// Protected subpaths inside the workspace.
escape!(
    git_hook_write,
    WS,
    |d| ["write", &d.ws(".git/hooks/pre-commit")],
    [EROFS, EACCES]
);
escape!(
    git_config_truncate,
    WS,
    |d| ["truncate", &d.ws(".git/config")],
    [EROFS, EACCES]
);
escape!(
    git_config_overwrite,
    WS,
    |d| ["write", &d.ws(".git/config")],
    [EROFS, EACCES]
);
escape!(
    git_rename_away,
    WS,
    |d| ["rename", &d.ws(".git"), &d.ws("git-moved")],
    [EBUSY, EROFS, EACCES]
);
escape!(
    git_head_unlink,
    WS,
    |d| ["unlink", &d.ws(".git/HEAD")],
    [EROFS, EACCES]
);
escape!(
    git_unmount_protection,
    WS,
    |d| ["umount", &d.ws(".git")],
    [EPERM]
);

// Metadata changes Landlock does not cover (blocked by the read-only system mounts).
escape!(
    chmod_outside,
    WS,
    |d| ["chmod", &d.out("secret.txt")],
    [EROFS, EPERM]
);
escape!(
    chown_outside,
    WS,
    |d| ["chown", &d.out("secret.txt")],
    [EROFS, EPERM]
);
escape!(
    setxattr_outside,
    WS,
    |d| ["setxattr", &d.out("secret.txt")],
    [EROFS, EPERM]
);
escape!(
    utimes_outside,
    WS,
    |d| ["utimes", &d.out("secret.txt")],
    [EROFS, EPERM, EACCES]
);

// Device nodes and identity.
escape!(
    open_console_device,
    RO,
    |_d| ["open-ro", "/dev/tty1"],
    [EACCES, libc::ENOENT]
);
escape!(
    open_kernel_log,
    WS,
    |_d| ["open-ro", "/dev/kmsg"],
    [EACCES, libc::ENOENT]
);

#[test]
fn open_block_device() {
    if !sandbox_available("open_block_device") {
        return;
    }
    let candidates = ["/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/loop0"];
    let Some(dev) = candidates.iter().find(|p| std::path::Path::new(p).exists()) else {
        eprintln!("!!! open_block_device NOT RUN: no block device node on this host !!!");
        return;
    };
    let dirs = Dirs::new();
    let (code, stdout) = probe_in(WS, &dirs, &["open-ro", dev]);
    assert_eq!(code, EACCES, "{dev}: {}", stdout.trim());
}

escape!(
    mknod_char_device_in_workspace,
    WS,
    |d| ["mknod-char", &d.ws("null2")],
    [EPERM]
);
escape!(
    mkfifo_outside,
    WS,
    |d| ["mkfifo", &d.out("fifo")],
    [EROFS, EACCES]
);
// Unprivileged launches run in a user namespace where other ids are unmapped: EINVAL.
escape!(
    setuid_other_user,
    WS,
    |_d| ["setuid"],
    [EPERM, libc::EINVAL]
);
escape!(
    setgid_other_group,
    WS,
    |_d| ["setgid"],
    [EPERM, libc::EINVAL]
);

// Network: every family but AF_UNIX, also with high bits set.
escape!(socket_inet, WS, |_d| ["socket", "2", "1"], [EPERM]);
escape!(socket_inet_udp, RO, |_d| ["socket", "2", "2"], [EPERM]);
escape!(socket_inet6, WS, |_d| ["socket", "10", "1"], [EPERM]);
escape!(socket_netlink, WS, |_d| ["socket", "16", "3"], [EPERM]);
escape!(socket_packet, WS, |_d| ["socket", "17", "3"], [EPERM]);
escape!(socket_vsock, WS, |_d| ["socket", "40", "1"], [EPERM]);
escape!(
    socket_inet_high_bits,
    WS,
    |_d| ["socket", "0x100000002", "1"],
    [EPERM]
);
escape!(
    socket_inet6_high_bits,
    RO,
    |_d| ["socket", "0xffffffff0000000a", "1"],
    [EPERM]
);
escape!(socketpair_inet, WS, |_d| ["socketpair", "2"], [EPERM]);

escape!(
    tiocsti_with_high_bits,
    WS,
    |_d| ["tiocsti-high-bits", "0"],
    [EPERM]
);

// Kernel attack surface and namespace escapes.
escape!(io_uring_setup, WS, |_d| ["io_uring_setup"], [EPERM]);
escape!(bpf, WS, |_d| ["bpf"], [EPERM]);
escape!(userfaultfd, WS, |_d| ["userfaultfd"], [EPERM]);
escape!(perf_event_open, RO, |_d| ["perf_event_open"], [EPERM]);
escape!(clone3_is_enosys, WS, |_d| ["clone3"], [ENOSYS]);
escape!(
    clone_new_user_namespace,
    WS,
    |_d| ["clone-newuser"],
    [EPERM]
);
escape!(unshare_user_namespace, WS, |_d| ["unshare-user"], [EPERM]);
escape!(
    unshare_user_namespace_then_mount,
    RO,
    |_d| ["unshare-user-mount"],
    [EPERM]
);
escape!(unshare_mount_namespace, WS, |_d| ["unshare-mount"], [EPERM]);
escape!(
    mount_tmpfs_over_workspace,
    WS,
    |d| ["mount", &d.ws("")],
    [EPERM]
);
escape!(chroot, WS, |_d| ["chroot", "/tmp"], [EPERM]);
escape!(setns_into_init, WS, |_d| ["setns"], [EPERM]);
escape!(keyctl, WS, |_d| ["keyctl"], [EPERM]);
escape!(init_module, WS, |_d| ["init_module"], [EPERM]);
escape!(kexec_load, RO, |_d| ["kexec_load"], [EPERM]);
escape!(open_by_handle_at, WS, |_d| ["open_by_handle_at"], [EPERM]);
escape!(pidfd_getfd, WS, |_d| ["pidfd_getfd"], [EPERM]);
escape!(x32_syscall_is_enosys, WS, |_d| ["x32-getpid"], [ENOSYS]);
escape!(tiocsti_on_stdin, WS, |_d| ["tiocsti", "0"], [EPERM]);
escape!(ptrace_traceme, WS, |_d| ["ptrace-traceme"], [EPERM]);
escape!(signal_launcher_parent, WS, |_d| ["kill-parent"], [EPERM]);

/// Attempts against a process outside the sandbox: it must survive and stay untouched.
fn sibling_attack(name: &str, profile: &str, op: &str, extra: &[&str], allowed: &[i32]) {
    if !sandbox_available(name) {
        return;
    }
    let dirs = Dirs::new();
    let mut sibling = Sibling::spawn();
    let pid = sibling.pid();
    let mut args = vec![op, pid.as_str()];
    args.extend_from_slice(extra);
    let (code, stdout) = probe_in(profile, &dirs, &args);
    assert!(
        allowed.contains(&code),
        "{name}: expected {allowed:?}, got {code} ({})",
        stdout.trim()
    );
    assert!(sibling.alive(), "{name}: the sibling died");
}

#[test]
fn ptrace_attach_sibling() {
    sibling_attack("ptrace_attach_sibling", WS, "ptrace-attach", &[], &[EPERM]);
}

#[test]
fn process_vm_readv_sibling() {
    sibling_attack(
        "process_vm_readv_sibling",
        WS,
        "process_vm_readv",
        &[],
        &[EPERM],
    );
}

#[test]
fn proc_mem_write_sibling() {
    sibling_attack(
        "proc_mem_write_sibling",
        RO,
        "proc-mem-write",
        &[],
        &[EROFS, EACCES, EPERM],
    );
}

#[test]
fn kill_sibling() {
    sibling_attack("kill_sibling", WS, "kill", &["9"], &[EPERM]);
}

#[test]
fn i386_syscall_entry_kills_the_process() {
    use std::os::unix::process::ExitStatusExt;
    if !sandbox_available("i386_syscall_entry_kills_the_process") || !cfg!(target_arch = "x86_64") {
        return;
    }
    let dirs = Dirs::new();
    let policy = dirs.policy(&outpost_sandbox::Profile::builtin(WS).expect("builtin"));
    let out = run_policy(&policy, vec![], probe(), &["i386-getpid"]);
    assert_eq!(out.status.signal(), Some(libc::SIGSYS), "{:?}", out.status);
}

#[test]
fn read_sibling_environment_and_fds() {
    if !sandbox_available("read_sibling_environment_and_fds") {
        return;
    }
    let dirs = Dirs::new();
    let sibling = Sibling::spawn();
    for file in ["environ", "mem", "fd/0", "root/etc/hostname", "cwd"] {
        let path = format!("/proc/{}/{file}", sibling.pid());
        let (code, stdout) = probe_in(WS, &dirs, &["read", &path]);
        assert!(
            [EACCES, EPERM].contains(&code),
            "{path}: expected a denial, got {code} ({})",
            stdout.trim()
        );
    }
}

#[test]
fn pidfd_kill_sibling() {
    sibling_attack("pidfd_kill_sibling", WS, "pidfd-kill", &[], &[EPERM]);
}

#[test]
fn prlimit_on_sibling() {
    sibling_attack("prlimit_on_sibling", WS, "prlimit-other", &[], &[EPERM]);
}

/// Runs the probe's TIOCSTI attempt with a PTY slave as stdin (and, when `controlling`, as the
/// controlling terminal); returns the exit code and whether anything reached the terminal's input.
fn tiocsti_on_pty(controlling: bool) -> (Option<i32>, bool) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let dirs = Dirs::new();
    let policy = dirs.policy(&outpost_sandbox::Profile::builtin(WS).expect("builtin"));
    let launch = prepare(&policy, std::env::vars_os());
    let mut cmd = std::process::Command::new("/bin/sh");
    let script = format!(
        "{} tiocsti 0; code=$?; cut -d' ' -f7 /proc/self/stat >&2; exit $code",
        probe()
    );
    cmd.args(["-c", &script])
        .stdin(std::process::Stdio::from(pty.slave));
    launch.apply(&mut cmd);
    if controlling {
        // What the executor does for PTY processes, after the sandbox's own set-up.
        // SAFETY: TIOCSCTTY on fd 0 with argument 0 takes no pointer; async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let out = cmd.output().expect("run probe on a pty");
    let tty_nr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(
        tty_nr != "0",
        controlling,
        "controlling terminal state: tty_nr {tty_nr}"
    );
    nix::fcntl::fcntl(
        &pty.master,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .expect("nonblocking master");
    let mut buf = [0u8; 16];
    let n = nix::unistd::read(&pty.master, &mut buf).unwrap_or(0);
    (out.status.code(), buf[..n].contains(&b'x'))
}

#[test]
fn tiocsti_on_a_real_terminal() {
    if !sandbox_available("tiocsti_on_a_real_terminal") {
        return;
    }
    assert_eq!(tiocsti_on_pty(false), (Some(EPERM), false));
}

#[test]
fn tiocsti_on_the_controlling_terminal() {
    if !sandbox_available("tiocsti_on_the_controlling_terminal") {
        return;
    }
    assert_eq!(tiocsti_on_pty(true), (Some(EPERM), false));
}

#[test]
fn abstract_unix_socket_outside() {
    use std::os::linux::net::SocketAddrExt;
    if !sandbox_available("abstract_unix_socket_outside") {
        return;
    }
    let name = format!("outpost-escape-{}", std::process::id());
    let addr =
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract addr");
    let _listener =
        std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind abstract socket");
    let dirs = Dirs::new();
    let (code, stdout) = probe_in(WS, &dirs, &["abstract-connect", &name]);
    assert_eq!(code, EPERM, "abstract connect: {}", stdout.trim());
}

#[test]
fn host_daemon_unix_socket() {
    if !sandbox_available("host_daemon_unix_socket") {
        return;
    }
    let dirs = Dirs::new();
    let stream = dirs.out("daemon.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&stream).expect("bind daemon socket");
    let dgram = dirs.out("notify.sock");
    let _dgram = std::os::unix::net::UnixDatagram::bind(&dgram).expect("bind datagram socket");
    let (code, stdout) = probe_in(WS, &dirs, &["unix-connect", &stream]);
    assert_eq!(
        code,
        EPERM,
        "connect to a host daemon socket: {}",
        stdout.trim()
    );
    let (code, stdout) = probe_in(RO, &dirs, &["unix-sendto", &dgram]);
    assert_eq!(code, EPERM, "datagram to a host socket: {}", stdout.trim());
}

#[test]
fn tcp_connect_to_local_listener() {
    if !sandbox_available("tcp_connect_to_local_listener") {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind tcp");
    let port = listener
        .local_addr()
        .expect("local addr")
        .port()
        .to_string();
    let dirs = Dirs::new();
    let (code, stdout) = probe_in(WS, &dirs, &["tcp-connect", &port]);
    assert_eq!(code, EPERM, "tcp connect: {}", stdout.trim());
}

#[test]
fn capabilities_are_all_dropped() {
    if !sandbox_available("capabilities_are_all_dropped") {
        return;
    }
    let dirs = Dirs::new();
    let out = sh_in(
        WS,
        &dirs,
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 5, "{text}");
    for line in text.lines() {
        assert!(
            line.ends_with("0000000000000000"),
            "capability left: {line}"
        );
    }
}

#[test]
fn secrets_do_not_leak_into_environment() {
    if !sandbox_available("secrets_do_not_leak_into_environment") {
        return;
    }
    let dirs = Dirs::new();
    let policy = dirs.policy(&outpost_sandbox::Profile::builtin(WS).expect("builtin"));
    let env = vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("GITHUB_TOKEN".into(), "ghp_leak".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "leak".into()),
        (
            "CODEX_PERMISSION_PROFILE".into(),
            ":danger-full-access".into(),
        ),
    ];
    let out = run_policy(&policy, env, "/usr/bin/env", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("leak"), "secret leaked: {text}");
    assert!(
        text.contains("CODEX_PERMISSION_PROFILE=:workspace\n"),
        "{text}"
    );
    assert!(
        text.contains("CODEX_SANDBOX_NETWORK_DISABLED=1\n"),
        "{text}"
    );
}

#[test]
fn failing_child_setup_fails_the_spawn() {
    if !sandbox_available("failing_child_setup_fails_the_spawn") {
        return;
    }
    let dirs = Dirs::new();
    let mut profile = outpost_sandbox::Profile::builtin(WS).expect("builtin");
    // Above fs.nr_open: setrlimit fails with EPERM even for root, inside pre_exec.
    profile.rlimits.nofile = Some(1 << 40);
    let policy = dirs.policy(&profile);
    let launch = prepare(&policy, std::env::vars_os());
    let marker = dirs.ws("ran");
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", &format!("touch {marker}")]);
    launch.apply(&mut cmd);
    let err = cmd
        .spawn()
        .expect_err("spawn must fail when the child set-up fails");
    assert_eq!(err.raw_os_error(), Some(EPERM), "{err}");
    assert!(
        !std::path::Path::new(&marker).exists(),
        "the command ran despite the failed set-up"
    );
}

#[test]
fn shell_write_outside_fails_with_message() {
    if !sandbox_available("shell_write_outside_fails_with_message") {
        return;
    }
    let dirs = Dirs::new();
    let out = sh_in(
        WS,
        &dirs,
        &format!("echo pwned > {}", dirs.out("secret.txt")),
    );
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Read-only file system") || stderr.contains("Permission denied"),
        "{stderr}"
    );
    assert_secret_intact(&dirs);
}

#[test]
fn whole_suite_as_unprivileged_user() {
    rerun_as_nobody("whole_suite_as_unprivileged_user");
}
