//! `outpost fs ...`: filesystem operations on the executor's host.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use outpost_client::pb;

use crate::target_args::TargetArgs;

/// Filesystem subcommands. Paths are absolute paths on the executor's host.
#[derive(Debug, Subcommand)]
pub(crate) enum FsCommand {
    /// Show metadata of a path (kind, size, mode, mtime, symlink target).
    Stat {
        #[command(flatten)]
        target: TargetArgs,
        /// Describe a symlink itself instead of what it points to.
        #[arg(long, short = 'L')]
        no_follow: bool,
        /// Absolute path.
        path: String,
    },
    /// List a directory (all pages).
    Ls {
        #[command(flatten)]
        target: TargetArgs,
        /// Absolute path of a directory.
        path: String,
    },
    /// Write a file to stdout, streaming.
    Cat {
        #[command(flatten)]
        target: TargetArgs,
        /// Start at this byte offset.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Read at most this many bytes.
        #[arg(long)]
        length: Option<u64>,
        /// Absolute path.
        path: String,
    },
    /// Find the nearest ancestor of --cwd that holds one of the markers.
    FindUp(FindUpArgs),
    /// Find the AGENTS.md that applies to --cwd (root down to cwd, AGENTS.override.md first) and print it.
    AgentsMd {
        #[command(flatten)]
        target: TargetArgs,
        /// Absolute working directory.
        #[arg(long)]
        cwd: String,
        /// Project root marker (repeatable; default .git). The root bounds the search from above.
        #[arg(long = "root-marker", default_value = ".git")]
        root_markers: Vec<String>,
        /// Read at most this many bytes of the file.
        #[arg(long, default_value_t = outpost_client::agents_md::DEFAULT_MAX_BYTES)]
        max_bytes: u64,
    },
}

/// Arguments of `outpost fs find-up`.
#[derive(Debug, Args)]
pub(crate) struct FindUpArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Absolute directory to start from (walked lexically, as spelled).
    #[arg(long)]
    cwd: String,
    /// Marker name, in priority order within a directory (repeatable, 1 to 16).
    #[arg(long = "marker", short = 'm', required = true)]
    markers: Vec<String>,
    /// Which kind of entry counts as a marker.
    #[arg(long, value_enum, default_value_t = Kind::Any)]
    kind: Kind,
    /// Fail on the first probe error (propagate) or treat errors as absent (ignore).
    #[arg(long, value_enum, default_value_t = Policy::Propagate)]
    errors: Policy,
    /// Do not walk above this directory.
    #[arg(long)]
    stop_at: Option<String>,
    /// `server`: one FindUp RPC; `windowed`: pipelined GetMetadata probes; `sequential`: one at a time.
    #[arg(long, value_enum, default_value_t = Mode::Server)]
    mode: Mode,
    /// Probes in flight for `--mode windowed`.
    #[arg(long, default_value_t = 8)]
    window: usize,
    /// Print one JSON object (root, marker, counters, elapsed_ms).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Any,
    File,
    Directory,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Policy {
    Propagate,
    Ignore,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Server,
    Windowed,
    Sequential,
}

pub(crate) async fn run(cmd: FsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FsCommand::Stat {
            target,
            no_follow,
            path,
        } => {
            let meta = target.connect().await?.metadata(&path, !no_follow).await?;
            print_metadata(&path, &meta);
        }
        FsCommand::Ls { target, path } => {
            let entries = target.connect().await?.read_dir(&path).await?;
            let mut out = std::io::stdout().lock();
            for entry in entries {
                writeln!(out, "{:<9} {}", kind_name(entry.kind()), entry.name)?;
            }
        }
        FsCommand::Cat {
            target,
            offset,
            length,
            path,
        } => {
            let executor = target.connect().await?;
            let mut out = std::io::stdout().lock();
            executor
                .read_file_with(&path, offset, length, |chunk| out.write_all(chunk))
                .await?;
            out.flush()?;
        }
        FsCommand::FindUp(args) => return find_up(args).await,
        FsCommand::AgentsMd {
            target,
            cwd,
            root_markers,
            max_bytes,
        } => {
            let executor = target.connect().await?;
            match outpost_client::agents_md::discover(&executor, &cwd, &root_markers, max_bytes)
                .await?
            {
                Some(doc) => {
                    eprintln!(
                        "outpost: {} (root {}{})",
                        doc.path,
                        doc.root,
                        if doc.truncated { ", truncated" } else { "" }
                    );
                    std::io::stdout().write_all(&doc.contents)?;
                }
                None => {
                    eprintln!(
                        "outpost: no AGENTS.override.md or AGENTS.md between the project root and {cwd}"
                    );
                    return Ok(ExitCode::from(1));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn find_up(args: FindUpArgs) -> anyhow::Result<ExitCode> {
    let executor = args.target.connect().await?;
    let request = pb::FindUpRequest {
        cwd: args.cwd.clone(),
        markers: args.markers.clone(),
        match_kind: match args.kind {
            Kind::Any => pb::MatchKind::Any,
            Kind::File => pb::MatchKind::File,
            Kind::Directory => pb::MatchKind::Directory,
        }
        .into(),
        error_policy: match args.errors {
            Policy::Propagate => pb::ErrorPolicy::Propagate,
            Policy::Ignore => pb::ErrorPolicy::Ignore,
        }
        .into(),
        stop_at: args.stop_at.clone(),
        profile: String::new(),
    };
    // Timed after connecting: this measures the search, not process start-up or the handshake.
    let started = Instant::now();
    let response = match args.mode {
        Mode::Server => executor.find_up_server(request).await,
        Mode::Windowed | Mode::Sequential => {
            let window = if matches!(args.mode, Mode::Sequential) {
                1
            } else {
                args.window
            };
            outpost_client::find_up::find_up(&executor, request, window).await
        }
    }
    .context("find-up failed")?;
    let elapsed = started.elapsed();
    let counters = response.counters.unwrap_or_default();
    if args.json {
        let value = serde_json::json!({
            "root": response.root, "marker": response.marker,
            "counters": {"ancestors_visited": counters.ancestors_visited, "probes": counters.probes,
                         "errors_ignored": counters.errors_ignored},
            "elapsed_ms": elapsed.as_secs_f64() * 1000.0,
        });
        println!("{value}");
    } else {
        match (&response.root, &response.marker) {
            (Some(root), Some(marker)) => println!("root     {root}\nmarker   {marker}"),
            _ => println!("root     (none: no marker found)"),
        }
        println!(
            "counters ancestors_visited={} probes={} errors_ignored={}",
            counters.ancestors_visited, counters.probes, counters.errors_ignored
        );
        println!("elapsed  {:.3} ms", elapsed.as_secs_f64() * 1000.0);
    }
    Ok(ExitCode::SUCCESS)
}

fn kind_name(kind: pb::FileKind) -> &'static str {
    match kind {
        pb::FileKind::File => "file",
        pb::FileKind::Directory => "directory",
        pb::FileKind::Symlink => "symlink",
        pb::FileKind::Other => "other",
        pb::FileKind::Unspecified => "unknown",
    }
}

fn print_metadata(path: &str, meta: &pb::Metadata) {
    println!("path     {path}");
    println!("kind     {}", kind_name(meta.kind()));
    println!("size     {}", meta.size);
    println!("mode     {:o}", meta.mode);
    let secs = meta.mtime_unix_nanos.div_euclid(1_000_000_000);
    let nanos = meta.mtime_unix_nanos.rem_euclid(1_000_000_000);
    println!("mtime    {secs}.{nanos:09} (unix seconds)");
    if let Some(target) = &meta.symlink_target {
        println!("target   {target}");
    }
}
