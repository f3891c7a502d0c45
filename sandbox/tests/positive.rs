//! Positive tests: allowed work succeeds inside the sandbox (workspace writes, system reads, a C
//! build, AF_UNIX sockets, device sinks), named-profile features work (deny paths, network enabled,
//! rlimits), and unsandboxed profiles really are unsandboxed.

mod common;

use common::*;
use outpost_sandbox::profile::{Access, FsEntry, FsPath, FsPolicy, SpecialPath};
use outpost_sandbox::{NetworkPolicy, Profile};

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn workspace_writes_succeed() {
    if !sandbox_available("workspace_writes_succeed") {
        return;
    }
    let d = Dirs::new();
    let out = sh_in(
        ":workspace",
        &d,
        "set -e; echo hi > a.txt; mkdir -p sub/dir; mv a.txt sub/dir/b.txt; \
        ln -s sub/dir/b.txt link; cat link; rm -r sub; mkfifo fifo; chmod +x file.txt; echo t > \"$TMPDIR/x\" 2>/dev/null || true; \
        echo scratch > /tmp/outpost-positive-$$ && rm /tmp/outpost-positive-$$; cat .git/config > /dev/null",
    );
    ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
}

#[test]
fn system_reads_succeed() {
    if !sandbox_available("system_reads_succeed") {
        return;
    }
    let d = Dirs::new();
    for profile in [":workspace", ":read-only"] {
        let out = sh_in(
            profile,
            &d,
            "set -e; head -c 1 /etc/passwd >/dev/null; ls /usr/bin >/dev/null; \
            cat /proc/self/status >/dev/null; head -c 8 /dev/urandom | wc -c; cat file.txt",
        );
        ok(&out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "8\nworkspace\n");
    }
}

#[test]
fn compile_and_run_c_program() {
    if !sandbox_available("compile_and_run_c_program") {
        return;
    }
    if !std::path::Path::new("/usr/bin/cc").exists() {
        eprintln!("!!! compile_and_run_c_program NOT RUN: no /usr/bin/cc on this host !!!");
        return;
    }
    let d = Dirs::new();
    std::fs::write(
        d.ws.path().join("main.c"),
        "#include <stdio.h>\nint main(void){puts(\"built\");return 3;}\n",
    )
    .expect("write main.c");
    std::fs::write(
        d.ws.path().join("Makefile"),
        "app: main.c\n\tcc -O1 -o app main.c\n",
    )
    .expect("write Makefile");
    let out = sh_in(":workspace", &d, "make -s app && ./app; echo rc=$?");
    ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "built\nrc=3\n");
}

#[test]
fn unix_sockets_and_device_sinks_work() {
    if !sandbox_available("unix_sockets_and_device_sinks_work") {
        return;
    }
    let d = Dirs::new();
    for args in [
        &["socket", "1", "1"][..],
        &["socketpair", "1"],
        &["socket", "0x100000001", "1"],
        &["prlimit-self"],
        &["socketpair-io"],
        &["openpty"],
        &["open-ro", "/dev/urandom"],
        &["write", "/dev/null"],
        &["read", "/dev/zero"],
    ] {
        let (code, stdout) = probe_in(":workspace", &d, args);
        assert_eq!(code, 0, "{args:?}: {}", stdout.trim());
    }
}

#[test]
fn exit_code_and_profile_variable() {
    if !sandbox_available("exit_code_and_profile_variable") {
        return;
    }
    let d = Dirs::new();
    let out = sh_in(
        ":read-only",
        &d,
        "echo \"$CODEX_PERMISSION_PROFILE\"; exit 7",
    );
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), ":read-only\n");
}

fn named(entries: Vec<FsEntry>, network: NetworkPolicy) -> Profile {
    let mut p = Profile::builtin(":workspace").expect("builtin");
    p.name = Some("custom".into());
    p.fs = FsPolicy::Restricted(entries);
    p.network = network;
    p
}

fn entry(path: FsPath, access: Access) -> FsEntry {
    FsEntry { path, access }
}

#[test]
fn deny_entries_hide_paths() {
    if !sandbox_available("deny_entries_hide_paths") {
        return;
    }
    let d = Dirs::new();
    std::fs::create_dir(d.outside.path().join("hidden")).expect("mkdir hidden");
    std::fs::write(d.outside.path().join("hidden/key"), "k").expect("write key");
    std::fs::write(d.ws.path().join(".env"), "API=1\n").expect("write .env");
    let profile = named(
        vec![
            entry(FsPath::Special(SpecialPath::Root), Access::Read),
            entry(
                FsPath::Special(SpecialPath::ProjectRoots { subpath: None }),
                Access::Write,
            ),
            entry(FsPath::Plain(d.outside.path().join("hidden")), Access::Deny),
            entry(
                FsPath::Plain(d.outside.path().join("secret.txt")),
                Access::Deny,
            ),
            entry(FsPath::Plain(d.ws.path().join(".env")), Access::Deny),
        ],
        NetworkPolicy::Restricted,
    );
    let policy = d.policy(&profile);
    let run = |args: &[&str]| run_policy(&policy, vec![], probe(), args);
    let out = run(&["read", &d.out("hidden/key")]);
    assert_eq!(
        out.status.code(),
        Some(EACCES),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&["readdir", &d.out("hidden")]);
    assert_eq!(
        out.status.code(),
        Some(EACCES),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for (op, path) in [
        ("read", d.out("secret.txt")),
        ("write", d.out("secret.txt")),
        ("read", d.ws(".env")),
        ("write", d.ws(".env")),
    ] {
        let out = run(&[op, &path]);
        assert_eq!(
            out.status.code(),
            Some(EACCES),
            "{op} {path}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = run_policy(&policy, vec![], "/usr/bin/env", &[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "CODEX_PERMISSION_PROFILE=custom\nCODEX_SANDBOX_NETWORK_DISABLED=1\n"
    );
}

#[test]
fn network_enabled_profile_allows_inet() {
    if !sandbox_available("network_enabled_profile_allows_inet") {
        return;
    }
    let d = Dirs::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    let profile = named(
        vec![entry(FsPath::Special(SpecialPath::Root), Access::Read)],
        NetworkPolicy::Enabled,
    );
    let out = run_policy(
        &d.policy(&profile),
        vec![],
        probe(),
        &["tcp-connect", &port],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The rest of the deny-list still applies with the network enabled.
    let out = run_policy(&d.policy(&profile), vec![], probe(), &["io_uring_setup"]);
    assert_eq!(out.status.code(), Some(EPERM));
    // Unix sockets are reachable with the network enabled, except denied ones (how operators hide
    // daemon sockets; root launches hide the well-known ones by default).
    let open_sock = d.out("open.sock");
    let hidden_sock = d.out("hidden.sock");
    let _l1 = std::os::unix::net::UnixListener::bind(&open_sock).expect("bind open socket");
    let _l2 = std::os::unix::net::UnixListener::bind(&hidden_sock).expect("bind hidden socket");
    let mut profile = profile;
    if let FsPolicy::Restricted(entries) = &mut profile.fs {
        entries.push(entry(
            FsPath::Plain(hidden_sock.clone().into()),
            Access::Deny,
        ));
    }
    let policy = d.policy(&profile);
    let out = run_policy(&policy, vec![], probe(), &["unix-connect", &open_sock]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run_policy(&policy, vec![], probe(), &["unix-connect", &hidden_sock]);
    assert_eq!(
        out.status.code(),
        Some(libc::ECONNREFUSED),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn rlimits_apply() {
    if !sandbox_available("rlimits_apply") {
        return;
    }
    let d = Dirs::new();
    let mut profile = Profile::builtin(":workspace").expect("builtin");
    profile.rlimits.nofile = Some(64);
    let out = run_policy(&d.policy(&profile), vec![], "/bin/sh", &["-c", "ulimit -n"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "64\n");
}

#[test]
fn danger_full_access_is_unsandboxed() {
    let d = Dirs::new();
    let policy = d.policy(&Profile::builtin(":danger-full-access").expect("builtin"));
    let out = run_policy(&policy, vec![], probe(), &["write", &d.out("written")]);
    assert_eq!(out.status.code(), Some(0));
    assert!(d.outside.path().join("written").exists());
}

#[test]
fn whole_suite_as_unprivileged_user() {
    rerun_as_nobody("whole_suite_as_unprivileged_user");
}

/// The executor spawns through tokio: `apply` works on `tokio::process::Command::as_std_mut()`.
#[test]
fn tokio_command_spawn() {
    if !sandbox_available("tokio_command_spawn") {
        return;
    }
    let d = Dirs::new();
    let policy = d.policy(&Profile::builtin(":workspace").expect("builtin"));
    let launch = prepare(&policy, std::env::vars_os());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(async {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            "echo from-tokio > t.txt && cat t.txt && echo x > /etc/nope",
        ]);
        launch.apply(cmd.as_std_mut());
        cmd.output().await.expect("tokio spawn")
    });
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-tokio\n");
    assert_ne!(out.status.code(), Some(0), "writing /etc must fail");
}

/// A `current_dir` set after `apply` (as the executor does) is where the command runs, and writes
/// there go to the writable bind, not the read-only original mount.
#[test]
fn current_dir_after_apply_is_honoured() {
    if !sandbox_available("current_dir_after_apply_is_honoured") {
        return;
    }
    let d = Dirs::new();
    std::fs::create_dir(d.ws.path().join("sub")).expect("mkdir sub");
    let policy = d.policy(&Profile::builtin(":workspace").expect("builtin"));
    let launch = prepare(&policy, std::env::vars_os());
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", "pwd; echo here > rel.txt"]);
    launch.apply(&mut cmd);
    cmd.current_dir(d.ws.path().join("sub"));
    let out = cmd.output().expect("spawn");
    ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}\n", d.ws("sub"))
    );
    assert!(d.ws.path().join("sub/rel.txt").exists());
}
