//! `outpost exec`: run a command on an executor under a permission profile, streaming its output,
//! forwarding stdin (and signals, or a whole terminal with `--tty`), and exiting with its exit code.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use outpost_client::{Session, pb};
use tokio::io::AsyncReadExt;

use crate::target_args::TargetArgs;
use crate::tty::RawTerminal;

/// Arguments of `outpost exec`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: the command's; 128+N when killed by signal N; 124 when --timeout \
    expired; 126 when the sandbox refused to run it.\n\nExamples:\n  \
    outpost exec -- ls -la\n  \
    outpost exec -P :read-only --cwd /srv/ws -- make test\n  \
    outpost exec --tty -- bash\n  \
    outpost exec --target unix:/run/outpost.sock --env RUST_LOG=debug -- cargo build"
)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Permission profile (default: the executor's default, usually :workspace).
    #[arg(long, short = 'P', conflicts_with = "sandbox_state_json")]
    profile: Option<String>,
    /// Codex sandbox state JSON, forwarded verbatim to the executor.
    #[arg(long)]
    sandbox_state_json: Option<String>,
    /// Working directory on the executor (default: the executor's cwd).
    #[arg(long, short = 'C')]
    cwd: Option<String>,
    /// Set a variable in the command's environment (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Run on a pseudo-terminal (interactive; raw mode locally, resized on SIGWINCH).
    #[arg(long)]
    tty: bool,
    /// Kill the command after this long (e.g. 30s, 500ms, 5m).
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))?;
    if k.is_empty() {
        return Err("the variable name is empty".into());
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// Parses `500ms`, `30s`, `5m`, `1h`, or plain seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (e.g. 30s, 500ms, 5m)"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("invalid duration unit in {s:?} (ms, s, m, h)")),
    })
}

pub(crate) async fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let executor = args.target.connect().await?;
    let cwd = match args.cwd.clone() {
        Some(cwd) => cwd,
        None => executor.info().await?.fs_context.unwrap_or_default().cwd,
    };
    let session = Arc::new(
        executor
            .attach(None, None)
            .await
            .context("cannot attach a session")?,
    );
    let raw = if args.tty {
        Some(RawTerminal::enter()?)
    } else {
        None
    };
    let size = raw.as_ref().map(|r| r.size());
    let request = pb::StartRequest {
        argv: args.command.clone(),
        cwd,
        env: args.env.iter().cloned().collect(),
        sandbox: match (&args.profile, &args.sandbox_state_json) {
            (Some(p), _) => Some(pb::start_request::Sandbox::Profile(p.clone())),
            (None, Some(json)) => Some(pb::start_request::Sandbox::SandboxStateJson(json.clone())),
            (None, None) => None,
        },
        tty: size.map(|(rows, cols)| pb::TtySize {
            rows: rows.into(),
            cols: cols.into(),
        }),
        pipe_stdin: true,
        timeout_ms: args
            .timeout
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ..Default::default()
    };
    let started = match session.start(request).await {
        Ok(started) => started,
        Err(err)
            if err
                .status()
                .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
        {
            // Like a shell: 127 when the command cannot be found.
            eprintln!("outpost: {err}");
            return Ok(ExitCode::from(127));
        }
        Err(err) => return Err(anyhow::Error::new(err).context("cannot start the command")),
    };
    let pid = started.process_id;
    let stdin_task = tokio::spawn(forward_stdin(session.clone(), pid.clone(), args.tty));
    let signal_task = tokio::spawn(forward_signals(session.clone(), pid.clone(), args.tty));
    let exit = session.follow(&pid, 0, write_event).await;
    stdin_task.abort();
    signal_task.abort();
    drop(raw);
    let exit = exit.context("lost the command's output")?;
    Ok(exit_code(&exit))
}

fn write_event(event: &pb::ProcessEvent) -> std::io::Result<()> {
    match &event.event {
        Some(pb::process_event::Event::Output(out)) => {
            if out.stream() == pb::OutputStream::Stderr {
                let mut err = std::io::stderr().lock();
                err.write_all(&out.data)?;
                err.flush()
            } else {
                write_stdout(&out.data)
            }
        }
        Some(pb::process_event::Event::Gap(gap)) => {
            eprintln!(
                "outpost: {} bytes of output were lost (events {}..={})",
                gap.bytes_lost, gap.first_seq, gap.last_seq
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Writes `data` to fd 1 unbuffered. std's stdout is line-buffered, which would scan every chunk
/// of bulk output for a newline only to pass it through; nothing else in `exec` writes to stdout.
fn write_stdout(data: &[u8]) -> std::io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: fd 1 is open for the life of the process, and `ManuallyDrop` never closes it.
    let mut out = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(1) });
    out.write_all(data)
}

fn exit_code(exit: &pb::Exit) -> ExitCode {
    if exit.sandbox_denied {
        eprintln!(
            "outpost: the sandbox refused to run the command: {}",
            exit.message
        );
        return ExitCode::from(126);
    }
    if exit.timed_out {
        eprintln!("outpost: the command timed out and was killed");
        return ExitCode::from(124);
    }
    match (exit.code, exit.signal) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(255)),
        (None, None) => {
            eprintln!("outpost: {}", exit.message);
            ExitCode::FAILURE
        }
    }
}

async fn forward_stdin(session: Arc<Session>, pid: String, tty: bool) {
    let mut stdin = tokio::io::stdin();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n_writes = 0u64;
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                n_writes += 1;
                if session
                    .write_stdin(&pid, buf[..n].to_vec(), &format!("w{n_writes}"))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
    if !tty {
        let _ = session.close_stdin(&pid).await;
    }
}

async fn forward_signals(session: Arc<Session>, pid: String, tty: bool) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup), Ok(mut winch)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::window_change()),
    ) else {
        return;
    };
    loop {
        let kind = tokio::select! {
            _ = int.recv() => pb::SignalKind::Int,
            _ = term.recv() => pb::SignalKind::Term,
            _ = hup.recv() => pb::SignalKind::Hup,
            _ = winch.recv() => {
                if tty && let Some((rows, cols)) = crate::tty::current_size() {
                    let _ = session.resize(&pid, rows.into(), cols.into()).await;
                }
                continue;
            }
        };
        let _ = session.signal(&pid, kind).await;
    }
}
