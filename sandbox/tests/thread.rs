//! Restricting one thread: the restricted worker thread is confined (outside writes, protected
//! subpaths), other threads of the same process are not.

mod common;

use std::io::ErrorKind;

use common::*;
use outpost_sandbox::thread::ThreadRestrictError;
use outpost_sandbox::{LaunchOptions, Profile, restrict_current_thread};

#[test]
fn restricted_worker_thread_is_confined_and_others_are_not() {
    if !sandbox_available("restricted_worker_thread_is_confined_and_others_are_not") {
        return;
    }
    let dirs = Dirs::new();
    let policy = dirs.policy(&Profile::builtin(":workspace").expect("builtin"));
    let (ws, out) = (dirs.ws(""), dirs.out(""));
    // Without CAP_SYS_ADMIN a thread cannot get a mount namespace: the restriction is refused unless
    // degraded runs are allowed, and then protected subpaths are not enforced on the thread.
    let privileged = nix::unistd::geteuid().is_root();
    if !privileged {
        eprintln!("NOTE: unprivileged run: thread restriction checked without the mount layer");
    }
    let handle = std::thread::spawn(move || {
        if !privileged {
            let refused = restrict_current_thread(&policy, &LaunchOptions::default());
            assert!(
                matches!(refused, Err(ThreadRestrictError::MountsUnavailable)),
                "{refused:?}"
            );
        }
        let opts = LaunchOptions {
            allow_degraded: !privileged,
            ..LaunchOptions::default()
        };
        let report = restrict_current_thread(&policy, &opts).expect("restrict thread");
        assert!(report.landlock.filesystem && report.capabilities_dropped);
        let write = |p: String| std::fs::write(p, "x").map_err(|e| e.kind());
        (
            write(format!("{ws}/ok.txt")),
            write(format!("{ws}/.git/config")),
            write(format!("{out}/secret.txt")),
            std::fs::read_to_string(format!("{out}/secret.txt")).map_err(|e| e.kind()),
        )
    });
    let (in_ws, git, outside, read) = handle.join().expect("worker thread");
    assert_eq!(in_ws, Ok(()));
    if privileged {
        assert!(
            matches!(
                git,
                Err(ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied)
            ),
            "{git:?}"
        );
    }
    assert!(
        matches!(
            outside,
            Err(ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied)
        ),
        "{outside:?}"
    );
    assert_eq!(read.as_deref(), Ok("secret\n"));
    // The test's own thread keeps its full access.
    std::fs::write(dirs.out("unrestricted.txt"), "y").expect("main thread is not restricted");
    assert_secret_intact(&dirs);
}

#[test]
fn whole_suite_as_unprivileged_user() {
    rerun_as_nobody("whole_suite_as_unprivileged_user");
}
