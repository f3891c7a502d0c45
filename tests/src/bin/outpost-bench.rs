//! `outpost-bench`: measures outpost against same-run baselines, prints a markdown table, writes JSON,
//! and with `--update-readme` regenerates the README's benchmark table.
//!
//! Run: `cargo run --release -p outpost-tests --bin outpost-bench -- [--quick] [--update-readme]`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use outpost_tests::bench::{self, report};

#[derive(Debug, Default)]
struct Args {
    quick: bool,
    update_readme: bool,
    json: Option<PathBuf>,
    /// Sections to run; empty: all.
    only: Vec<String>,
}

/// Section names, in run order.
const SECTIONS: [&str; 5] = ["fs", "process", "registry", "sandbox", "http"];

impl Args {
    fn wants(&self, section: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == section)
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--update-readme" => args.update_readme = true,
            "--json" => args.json = Some(it.next().context("--json needs a path")?.into()),
            "--only" => {
                let list = it.next().context("--only needs a section list")?;
                for name in list.split(',') {
                    anyhow::ensure!(
                        SECTIONS.contains(&name),
                        "unknown section {name:?} in --only (sections: {})",
                        SECTIONS.join(", ")
                    );
                    args.only.push(name.to_owned());
                }
            }
            "--help" | "-h" => {
                println!(
                    "outpost-bench [--quick] [--only SECTIONS] [--update-readme] [--json PATH]\n\n\
                     Measures outpost side by side with baselines in one run and checks targets.\n  \
                     --quick          fewer iterations (smoke run)\n  \
                     --only SECTIONS  comma-separated subset of fs,process,registry,sandbox,http\n  \
                     --update-readme  replace the table between the bench markers in README.md\n  \
                     --json PATH      where to write results (default bench-results/bench.json)"
                );
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown argument {other:?} (see --help)"),
        }
    }
    anyhow::ensure!(
        !args.update_readme || args.only.is_empty(),
        "--update-readme needs every section; drop --only"
    );
    Ok(args)
}

/// Waits until every process an earlier section started has exited and been reaped (at most 10 s),
/// then half a second more: executors of one section still tearing down would otherwise slow the
/// next section's measurements (the sandbox section's launches most of all).
async fn settle() {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && has_children(std::process::id()) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// Whether any process (zombies included) has `pid` as its parent.
fn has_children(pid: u32) -> bool {
    outpost_tests::procfs::processes().any(|(_, s)| s.ppid == pid)
}

fn main() -> anyhow::Result<()> {
    outpost_client::tune_allocator_for_streaming();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut rows = Vec::new();
    if args.wants("fs") {
        eprintln!("outpost-bench: filesystem section ...");
        rows.extend(
            bench::fs::run(args.quick)
                .await
                .context("filesystem section")?,
        );
    }
    if args.wants("process") {
        settle().await;
        eprintln!("outpost-bench: process section ...");
        rows.extend(
            bench::process::run(args.quick)
                .await
                .context("process section")?,
        );
    }
    if args.wants("registry") {
        settle().await;
        eprintln!("outpost-bench: registry section ...");
        rows.extend(
            bench::registry::run(args.quick)
                .await
                .context("registry section")?,
        );
    }
    if args.wants("sandbox") {
        settle().await;
        eprintln!("outpost-bench: sandbox section ...");
        rows.extend(bench::sandbox::run(args.quick).context("sandbox section")?);
    }
    if args.wants("http") {
        settle().await;
        eprintln!("outpost-bench: http proxy section ...");
        rows.extend(
            bench::http::run(args.quick)
                .await
                .context("http proxy section")?,
        );
    }
    let table = report::markdown(&rows);
    println!("{table}");
    let json_path = args
        .json
        .unwrap_or_else(|| workspace.join("bench-results").join("bench.json"));
    if let Some(dir) = json_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::json!({
        "quick": args.quick,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "rows": rows,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)?)?;
    eprintln!("outpost-bench: wrote {}", json_path.display());
    if args.update_readme {
        let readme_path = workspace.join("README.md");
        let readme = std::fs::read_to_string(&readme_path)?;
        std::fs::write(&readme_path, report::splice_readme(&readme, &table)?)?;
        eprintln!("outpost-bench: updated {}", readme_path.display());
    }
    Ok(())
}
