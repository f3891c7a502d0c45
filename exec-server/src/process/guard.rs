//! The orphan guard: a tiny companion process that outlives the executor just long enough to kill
//! what the executor started. The executor feeds it the process group of every process it spawns
//! through a pipe; when the pipe reaches end-of-file (the executor exited or was SIGKILLed — no code of
//! ours runs then), the guard kills each recorded group that still exists. The parent-death signal
//! already kills direct children; the guard also reaches their background descendants in the group.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// Hidden subcommand of `outpost` that runs [`run_orphan_guard`].
pub const GUARD_SUBCOMMAND: &str = "__orphan-guard";

/// The executor's end of the guard.
#[derive(Debug)]
pub struct OrphanGuard {
    feed: Mutex<ChildStdin>,
    _child: Child,
}

impl OrphanGuard {
    /// Starts `bin __orphan-guard` (normally the running `outpost` binary).
    ///
    /// # Errors
    /// When the guard cannot be spawned.
    pub fn spawn(bin: &Path) -> std::io::Result<Self> {
        let mut child = Command::new(bin)
            .arg(GUARD_SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let feed = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("guard stdin was not captured"))?;
        Ok(Self {
            feed: Mutex::new(feed),
            _child: child,
        })
    }

    /// Records the process group of a newly spawned process.
    pub fn record(&self, pgid: u32) {
        let mut feed = self
            .feed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(err) = writeln!(feed, "{pgid}") {
            tracing::error!(cause = %err, pgid, "cannot tell the orphan guard about a process group");
        }
    }
}

/// Body of the guard process: reads process group ids from stdin until end-of-file, then kills every
/// group that still exists. A group counts only while some member is still a session leader of that
/// id (our children call `setsid`, so pgid == sid == leader pid), which keeps a recycled number that
/// now names an unrelated group from being hit.
pub fn run_orphan_guard() {
    // Leave the executor's session so a terminal's ^C for the executor does not kill the guard first.
    // SAFETY: setsid takes no arguments; failure (already a group leader) is harmless here.
    unsafe { libc::setsid() };
    let mut groups = BTreeSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if let Ok(pgid) = line.trim().parse::<i32>()
            && pgid > 1
        {
            groups.insert(pgid);
        }
    }
    for pgid in groups {
        if group_is_ours(pgid) {
            // SAFETY: killpg takes integers; ESRCH for a vanished group is ignored.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
        }
    }
}

/// Whether some live process has process group and session `pgid`.
fn group_is_ours(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // Fields after "pid (comm)": state ppid pgrp session ...
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let pgrp = fields.get(2).and_then(|f| f.parse::<i32>().ok());
        let session = fields.get(3).and_then(|f| f.parse::<i32>().ok());
        pgrp == Some(pgid) && session == Some(pgid)
    })
}
