//! Sandbox section: launch overhead of `outpost sandbox -P :workspace -- true` against a plain spawn of
//! `true` and against bubblewrap with an equivalent policy (read-only root, writable workspace and
//! /tmp, no network), all in the same run, interleaved launch by launch.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::report::Row;
use super::{ms, percentile};

const SECTION: &str = "sandbox";

/// Runs every command of `commands` once per round for `n` rounds, interleaved, so a drift in the
/// machine's speed during the section hits all of them alike; returns each command's median.
fn interleaved_medians(
    n: usize,
    commands: &[&dyn Fn() -> Command],
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = vec![Vec::with_capacity(n); commands.len()];
    for _ in 0..n {
        for (make, samples) in commands.iter().zip(&mut samples) {
            let mut c = make();
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let t = Instant::now();
            let status = c.status()?;
            samples.push(t.elapsed());
            anyhow::ensure!(status.success(), "{c:?} failed: {status}");
        }
    }
    Ok(samples.iter_mut().map(|s| percentile(s, 50.0)).collect())
}

/// Runs the section.
///
/// # Errors
/// When a launch fails.
pub fn run(quick: bool) -> anyhow::Result<Vec<Row>> {
    let n = if quick { 30 } else { 200 };
    let workspace = tempfile::tempdir()?;
    let ws = workspace.path().to_owned();
    let outpost = crate::outpost_bin();
    let plain = || Command::new("true");
    let sandboxed = || {
        let mut c = Command::new(&outpost);
        c.args(["sandbox", "-P", ":workspace", "-C"])
            .arg(&ws)
            .args(["--", "true"]);
        c
    };
    let bwrap = || {
        let mut c = Command::new("bwrap");
        c.args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            "/tmp",
            "/tmp",
            "--bind",
        ])
        .arg(&ws)
        .arg(&ws)
        .args(["--unshare-net", "--die-with-parent", "--", "true"]);
        c
    };
    let have_bwrap = which("bwrap");
    let mut commands: Vec<&dyn Fn() -> Command> = vec![&plain, &sandboxed];
    if have_bwrap {
        commands.push(&bwrap);
    }
    let medians = interleaved_medians(n, &commands)?;
    let (plain, sandboxed) = (medians[0], medians[1]);
    let overhead = sandboxed.saturating_sub(plain);
    let mut rows = vec![
        Row::new(
            SECTION,
            "`outpost sandbox -P :workspace -- true`",
            ms(sandboxed),
            "ms",
        )
        .baseline("plain `true`", ms(plain)),
        Row::new(
            SECTION,
            "sandbox launch overhead over a plain spawn",
            ms(overhead),
            "ms",
        )
        .target("<= 1.5 ms", ms(overhead) <= 1.5),
    ];
    if let Some(&bwrap) = medians.get(2) {
        rows.push(
            Row::new(
                SECTION,
                "`outpost sandbox` vs bwrap (equivalent policy)",
                ms(sandboxed),
                "ms",
            )
            .baseline("bwrap", ms(bwrap))
            .target(
                "<= 0.6x bwrap",
                sandboxed.as_secs_f64() <= 0.6 * bwrap.as_secs_f64(),
            ),
        );
    } else {
        eprintln!(
            "outpost-bench: WARNING: bwrap is not installed (apt-get install bubblewrap); bwrap comparison skipped"
        );
    }
    Ok(rows)
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}
