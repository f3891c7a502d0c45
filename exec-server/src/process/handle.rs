//! A running (or recently exited) process: its output log, stdin with idempotent writes, signals to
//! its process group, terminal resize, and the tasks that pump output and report the exit.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use outpost_proto::pb;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::watch;

use super::error::ProcessError;
use super::log::OutputLog;
use super::pty::PtyMaster;

/// Output is read from the child in chunks of at most this size.
const READ_CHUNK: usize = 256 * 1024;
/// After the child exits, wait this long for its pipes to drain before reporting the exit.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
/// How many recent write ids are remembered for idempotent stdin writes.
const WRITE_ID_MEMORY: usize = 1024;

/// The child's stdin.
#[derive(Debug)]
pub(crate) enum Stdin {
    /// A pipe (`pipe_stdin`).
    Pipe(ChildStdin),
    /// The terminal's master side (`tty`).
    Pty(Arc<PtyMaster>),
}

/// One process of a session.
#[derive(Debug)]
pub(crate) struct ProcessHandle {
    pub(crate) id: String,
    pub(crate) pid: u32,
    pub(crate) argv: Vec<String>,
    pub(crate) log: Arc<OutputLog>,
    pty: Option<Arc<PtyMaster>>,
    stdin: tokio::sync::Mutex<Option<Stdin>>,
    write_ids: std::sync::Mutex<VecDeque<String>>,
    exit: watch::Sender<Option<pb::Exit>>,
    timed_out: AtomicBool,
}

impl ProcessHandle {
    pub(crate) fn new(
        id: String,
        pid: u32,
        argv: Vec<String>,
        log: Arc<OutputLog>,
        stdin: Option<Stdin>,
        pty: Option<Arc<PtyMaster>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            pid,
            argv,
            log,
            pty,
            stdin: tokio::sync::Mutex::new(stdin),
            write_ids: std::sync::Mutex::new(VecDeque::new()),
            exit: watch::channel(None).0,
            timed_out: AtomicBool::new(false),
        })
    }

    /// A process record for a launch the sandbox refused: exited, nothing ran.
    pub(crate) fn denied(
        id: String,
        argv: Vec<String>,
        log_cap: usize,
        message: String,
    ) -> Arc<Self> {
        let log = Arc::new(OutputLog::new(log_cap));
        let handle = Self::new(id, 0, argv, log.clone(), None, None);
        let exit = pb::Exit {
            sandbox_denied: true,
            message,
            ..Default::default()
        };
        handle.exit.send_replace(Some(exit.clone()));
        log.push_exit(exit);
        log.close();
        handle
    }

    pub(crate) fn is_tty(&self) -> bool {
        self.pty.is_some()
    }

    /// The exit, once known.
    pub(crate) fn exit_status(&self) -> Option<pb::Exit> {
        self.exit.borrow().clone()
    }

    /// Resolves when the process has exited.
    pub(crate) async fn exited(&self) {
        let mut rx = self.exit.subscribe();
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// Writes to stdin unless `write_id` was applied already; returns whether it was a duplicate.
    pub(crate) async fn write_stdin(
        &self,
        data: &[u8],
        write_id: &str,
    ) -> Result<bool, ProcessError> {
        let mut stdin = self.stdin.lock().await;
        if !write_id.is_empty() && self.seen_write(write_id) {
            return Ok(true);
        }
        let result = match stdin.as_mut() {
            None => return Err(ProcessError::StdinClosed(self.id.clone())),
            Some(Stdin::Pipe(pipe)) => pipe.write_all(data).await,
            Some(Stdin::Pty(pty)) => pty.write_all(data).await,
        };
        result.map_err(|source| ProcessError::StdinWrite {
            id: self.id.clone(),
            source,
        })?;
        if !write_id.is_empty() {
            let mut ids = self
                .write_ids
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if ids.len() == WRITE_ID_MEMORY {
                ids.pop_front();
            }
            ids.push_back(write_id.to_owned());
        }
        Ok(false)
    }

    fn seen_write(&self, write_id: &str) -> bool {
        let ids = self
            .write_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.iter().any(|id| id == write_id)
    }

    /// Closes stdin (EOF for a pipe; the EOF character for a terminal).
    pub(crate) async fn close_stdin(&self) -> Result<(), ProcessError> {
        match self.stdin.lock().await.take() {
            None => Err(ProcessError::StdinClosed(self.id.clone())),
            Some(Stdin::Pipe(pipe)) => {
                drop(pipe);
                Ok(())
            }
            Some(Stdin::Pty(pty)) => {
                pty.send_eof()
                    .await
                    .map_err(|source| ProcessError::StdinWrite {
                        id: self.id.clone(),
                        source,
                    })
            }
        }
    }

    /// Signals the whole process group.
    pub(crate) fn signal(&self, signal: Signal) -> Result<(), ProcessError> {
        if self.pid == 0 {
            return Err(ProcessError::Signal {
                id: self.id.clone(),
                source: nix::Error::ESRCH,
            });
        }
        let pgid = Pid::from_raw(i32::try_from(self.pid).unwrap_or(i32::MAX));
        killpg(pgid, signal).map_err(|source| ProcessError::Signal {
            id: self.id.clone(),
            source,
        })
    }

    /// Kills the process group, ignoring a group that is already gone.
    pub(crate) fn kill_group(&self) {
        if self.pid != 0 {
            let _ = self.signal(Signal::SIGKILL);
        }
    }

    /// Resizes the terminal.
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> Result<(), ProcessError> {
        let pty = self
            .pty
            .as_ref()
            .ok_or_else(|| ProcessError::NoTty(self.id.clone()))?;
        pty.resize(rows, cols)
            .map_err(|source| ProcessError::Setup {
                what: "terminal size",
                source,
            })
    }

    /// Starts the tasks that pump output, enforce the timeout and report the exit.
    pub(crate) fn supervise(self: &Arc<Self>, mut child: Child, timeout: Option<Duration>) {
        let mut pumps = tokio::task::JoinSet::new();
        if let Some(out) = child.stdout.take() {
            pumps.spawn(pump(out, self.log.clone(), pb::OutputStream::Stdout));
        }
        if let Some(err) = child.stderr.take() {
            pumps.spawn(pump(err, self.log.clone(), pb::OutputStream::Stderr));
        }
        if let Some(pty) = self.pty.clone() {
            pumps.spawn(pump_pty(pty, self.log.clone()));
        }
        if let Some(limit) = timeout {
            let me = Arc::downgrade(self);
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                if let Some(me) = me.upgrade()
                    && me.exit_status().is_none()
                {
                    me.timed_out.store(true, Ordering::SeqCst);
                    me.kill_group();
                }
            });
        }
        let me = self.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // Output written just before exit is still in the pipes: let it drain first, bounded, since
            // a background grandchild may keep a pipe open indefinitely.
            let drained = tokio::time::timeout(DRAIN_AFTER_EXIT, async {
                while pumps.join_next().await.is_some() {}
            })
            .await
            .is_ok();
            let exit = exit_event(status, me.timed_out.load(Ordering::SeqCst));
            me.log.push_exit(exit.clone());
            me.exit.send_replace(Some(exit));
            if !drained {
                while pumps.join_next().await.is_some() {}
            }
            me.log.close();
        });
    }
}

fn exit_event(status: std::io::Result<std::process::ExitStatus>, timed_out: bool) -> pb::Exit {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => pb::Exit {
            code: status.code(),
            signal: status.signal(),
            timed_out,
            ..Default::default()
        },
        Err(err) => pb::Exit {
            timed_out,
            message: format!("cannot wait for the process: {err}"),
            ..Default::default()
        },
    }
}

async fn pump(mut from: impl AsyncRead + Unpin, log: Arc<OutputLog>, stream: pb::OutputStream) {
    let mut buf = bytes::BytesMut::with_capacity(READ_CHUNK);
    loop {
        buf.reserve(READ_CHUNK);
        match from.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => log.push_output(stream, buf.split().freeze()).await,
        }
    }
}

async fn pump_pty(pty: Arc<PtyMaster>, log: Arc<OutputLog>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match pty.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                log.push_output(
                    pb::OutputStream::Pty,
                    bytes::Bytes::copy_from_slice(&buf[..n]),
                )
                .await
            }
        }
    }
}
