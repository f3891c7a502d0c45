//! Sessions and processes on an executor. A [`Session`] holds its `Session.Attach` stream open; when
//! the handle is dropped (or the connection breaks) the executor detaches it and, after the detach
//! TTL, kills its processes. Re-attaching with the same id within the TTL resumes it.

use std::time::Duration;

use outpost_proto::pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::ClientError;
use crate::executor::Executor;

/// An attached session. Dropping it detaches the session on the executor.
#[derive(Debug)]
pub struct Session {
    executor: Executor,
    id: String,
    resumed: bool,
    // Dropping the sender ends the Attach request stream: the executor then detaches the session.
    _hold: mpsc::Sender<pb::AttachRequest>,
    keepalive: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

impl Executor {
    /// Attaches a session: a new one (`id` `None`) or, within its detach TTL, an existing one.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` when the session is attached elsewhere; transport failures.
    pub async fn attach(
        &self,
        id: Option<&str>,
        detach_ttl: Option<Duration>,
    ) -> Result<Session, ClientError> {
        let (tx, rx) = mpsc::channel(4);
        let hello = pb::AttachHello {
            session_id: id.unwrap_or_default().to_owned(),
            detach_ttl_ms: detach_ttl.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        // The channel has room: this cannot fail before the stream is even created.
        let _ = tx
            .send(pb::AttachRequest {
                msg: Some(pb::attach_request::Msg::Hello(hello)),
            })
            .await;
        let mut responses = self
            .session_client()
            .attach(ReceiverStream::new(rx))
            .await?
            .into_inner();
        let attached = match responses.message().await? {
            Some(pb::AttachResponse {
                msg: Some(pb::attach_response::Msg::Attached(a)),
            }) => a,
            _ => {
                return Err(ClientError::Server(tonic::Status::internal(
                    "the executor did not confirm the attach",
                )));
            }
        };
        // Drain pongs so the stream never backs up; ends when the connection does.
        let keepalive =
            tokio::spawn(async move { while let Ok(Some(_)) = responses.message().await {} });
        Ok(Session {
            executor: self.clone(),
            id: attached.session_id,
            resumed: attached.resumed,
            _hold: tx,
            keepalive,
        })
    }
}

impl Session {
    /// The session id (give it to [`Executor::attach`] to resume after a reconnect).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether attaching resumed an existing session.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    /// The executor this session lives on.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Starts a process; `session_id` of `request` is filled in.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` naming the bad field, `ALREADY_EXISTS` for a duplicate id, `NOT_FOUND` for a
    /// missing program; transport failures. A sandbox refusal is not an error here: it arrives as an
    /// exit event with `sandbox_denied`.
    pub async fn start(
        &self,
        mut request: pb::StartRequest,
    ) -> Result<pb::StartResponse, ClientError> {
        request.session_id.clone_from(&self.id);
        Ok(self
            .executor
            .process_client()
            .start(request)
            .await?
            .into_inner())
    }

    /// Events of a process with seq > `after_seq`, live until it is closed.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown process; transport failures.
    pub async fn events(
        &self,
        process_id: &str,
        after_seq: u64,
        require_ack: bool,
    ) -> Result<tonic::Streaming<pb::ProcessEvent>, ClientError> {
        let request = pb::EventsRequest {
            session_id: self.id.clone(),
            process_id: process_id.to_owned(),
            after_seq,
            require_ack,
        };
        Ok(self
            .executor
            .process_client()
            .events(request)
            .await?
            .into_inner())
    }

    /// Acknowledges events up to `seq` (for `require_ack` streams), letting the executor discard them.
    ///
    /// # Errors
    /// Unknown process; transport failures.
    pub async fn ack(&self, process_id: &str, seq: u64) -> Result<(), ClientError> {
        self.ack_call(process_id, seq).await
    }

    /// The ack call with everything it needs owned, so it can also run detached.
    fn ack_call(
        &self,
        process_id: &str,
        seq: u64,
    ) -> impl Future<Output = Result<(), ClientError>> + Send + 'static {
        let mut client = self.executor.process_client();
        let request = pb::AckRequest {
            session_id: self.id.clone(),
            process_id: process_id.to_owned(),
            seq,
        };
        async move {
            client.ack(request).await?;
            Ok(())
        }
    }

    /// Writes to stdin; a retry with the same `write_id` is not applied twice. Returns whether it was
    /// a duplicate.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` when stdin is closed; transport failures.
    pub async fn write_stdin(
        &self,
        process_id: &str,
        data: Vec<u8>,
        write_id: &str,
    ) -> Result<bool, ClientError> {
        let request = pb::WriteStdinRequest {
            session_id: self.id.clone(),
            process_id: process_id.to_owned(),
            data,
            write_id: write_id.to_owned(),
        };
        Ok(self
            .executor
            .process_client()
            .write_stdin(request)
            .await?
            .into_inner()
            .duplicate)
    }

    /// Closes stdin.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` when already closed; transport failures.
    pub async fn close_stdin(&self, process_id: &str) -> Result<(), ClientError> {
        let request = pb::CloseStdinRequest {
            session_id: self.id.clone(),
            process_id: process_id.to_owned(),
        };
        self.executor.process_client().close_stdin(request).await?;
        Ok(())
    }

    /// Signals the process group.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` when the process is gone; transport failures.
    pub async fn signal(
        &self,
        process_id: &str,
        signal: pb::SignalKind,
    ) -> Result<(), ClientError> {
        let request = pb::SignalRequest {
            session_id: self.id.clone(),
            process_id: process_id.to_owned(),
            signal: signal.into(),
        };
        self.executor.process_client().signal(request).await?;
        Ok(())
    }

    /// Resizes the process's terminal.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` without a terminal; transport failures.
    pub async fn resize(&self, process_id: &str, rows: u32, cols: u32) -> Result<(), ClientError> {
        let request = pb::ResizeRequest {
            session_id: self.id.clone(),
            process_id: process_id.to_owned(),
            size: Some(pb::TtySize { rows, cols }),
        };
        self.executor.process_client().resize(request).await?;
        Ok(())
    }

    /// The session's processes.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn list(&self) -> Result<Vec<pb::ProcessInfo>, ClientError> {
        let request = pb::ListRequest {
            session_id: self.id.clone(),
        };
        Ok(self
            .executor
            .process_client()
            .list(request)
            .await?
            .into_inner()
            .processes)
    }
}

/// Acknowledge consumed output after this many bytes, so the executor can discard it while the
/// rest of its ring keeps the producer running.
const ACK_EVERY_BYTES: usize = 256 * 1024;
/// Acknowledge whatever is unacknowledged once the stream has been quiet this long: the executor's
/// ring may be smaller than [`ACK_EVERY_BYTES`] (it is configurable), and its producer then waits
/// for exactly this ack.
const ACK_WHEN_IDLE: Duration = Duration::from_millis(5);
/// Times an interrupted event stream is reopened from the last seen seq.
const RESUME_ATTEMPTS: u32 = 5;

/// Where [`follow_with`] gets the session it (re)opens a process's event stream on. A [`Session`]
/// provides itself; an [`EnvironmentRegistry`](crate::registry::EnvironmentRegistry) provides the
/// environment's current session, which after a reconnect is the same session resumed on a new
/// connection.
pub trait SessionProvider: Sync {
    /// A handle to the session to use.
    type Handle<'a>: std::ops::Deref<Target = Session> + Send + Sync
    where
        Self: 'a;

    /// The session to use now; may wait (bounded) while the executor reconnects.
    fn session(&self) -> impl Future<Output = Result<Self::Handle<'_>, ClientError>> + Send;
}

impl SessionProvider for Session {
    type Handle<'a> = &'a Session;

    fn session(&self) -> impl Future<Output = Result<&Session, ClientError>> + Send {
        std::future::ready(Ok(self))
    }
}

impl Session {
    /// Follows a process to its end: every event with seq > `after_seq` is handed to `on_event` exactly
    /// once, in order (a gap event is handed over too, never skipped); an interrupted stream is reopened
    /// from the last seen seq. Consumed output is acknowledged, so nothing is discarded before this
    /// reader saw it. Returns the exit event.
    ///
    /// # Errors
    /// Errors of `on_event` (as [`ClientError::Sink`]), a stream that cannot be resumed, and a process
    /// that closed without an exit event.
    pub async fn follow(
        &self,
        process_id: &str,
        after_seq: u64,
        on_event: impl FnMut(&pb::ProcessEvent) -> std::io::Result<()>,
    ) -> Result<pb::Exit, ClientError> {
        follow_with(self, process_id, after_seq, on_event).await
    }
}

/// [`Session::follow`] on whatever session `provider` supplies at each (re)open, so the stream resumes
/// from the last seen seq on a new connection after a reconnect. When the executor no longer knows
/// the process after an interruption (it restarted, or the session expired), the output after the
/// last seen seq is lost: that is reported as [`ClientError::ProcessLost`], never papered over.
///
/// # Errors
/// As [`Session::follow`], plus the provider's errors and [`ClientError::ProcessLost`].
pub async fn follow_with<P: SessionProvider>(
    provider: &P,
    process_id: &str,
    after_seq: u64,
    mut on_event: impl FnMut(&pb::ProcessEvent) -> std::io::Result<()>,
) -> Result<pb::Exit, ClientError> {
    let mut last_seq = after_seq;
    let mut exit = None;
    let mut unacked = 0usize;
    let mut failures = 0u32;
    loop {
        let session = provider.session().await?;
        let mut stream = match session.events(process_id, last_seq, true).await {
            Ok(stream) => stream,
            Err(err @ ClientError::Transport(_)) if failures < RESUME_ATTEMPTS => {
                failures += 1;
                tracing::warn!(process_id, last_seq, cause = %err, "event stream lost; resuming");
                tokio::time::sleep(Duration::from_millis(50 << failures)).await;
                continue;
            }
            Err(ClientError::Server(status))
                if failures > 0 && status.code() == tonic::Code::NotFound =>
            {
                return Err(ClientError::ProcessLost {
                    process_id: process_id.to_owned(),
                    last_seq,
                });
            }
            Err(err) => return Err(err),
        };
        loop {
            let next = if unacked == 0 {
                stream.message().await
            } else {
                // Output is waiting for an ack: when the stream goes quiet, ack it, so a producer
                // blocked on a ring smaller than ACK_EVERY_BYTES resumes. (`message` is cancel-safe.)
                match tokio::time::timeout(ACK_WHEN_IDLE, stream.message()).await {
                    Ok(next) => next,
                    Err(_) => {
                        send_ack(&session, process_id, last_seq);
                        unacked = 0;
                        stream.message().await
                    }
                }
            };
            let event = match next {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(status) => {
                    let err = ClientError::from(status);
                    if matches!(err, ClientError::Transport(_)) && failures < RESUME_ATTEMPTS {
                        failures += 1;
                        tracing::warn!(process_id, last_seq, cause = %err, "event stream lost; resuming");
                        break;
                    }
                    return Err(err);
                }
            };
            on_event(&event).map_err(ClientError::Sink)?;
            last_seq = event.seq;
            // Progress: a later interruption gets a fresh set of resume attempts.
            failures = 0;
            match &event.event {
                Some(pb::process_event::Event::Output(out)) => unacked += out.data.len(),
                Some(pb::process_event::Event::Exit(e)) => exit = Some(e.clone()),
                Some(pb::process_event::Event::Closed(_)) => {
                    let _ = session.ack(process_id, last_seq).await;
                    return exit.ok_or(ClientError::NoExit);
                }
                _ => {}
            }
            if unacked >= ACK_EVERY_BYTES {
                send_ack(&session, process_id, last_seq);
                unacked = 0;
            }
        }
    }
}

/// Acknowledges output up to `seq` without waiting, so reading never stalls for a round trip. Acks
/// are cumulative and idempotent: a lost one only delays discarding on the executor.
fn send_ack(session: &Session, process_id: &str, seq: u64) {
    let ack = session.ack_call(process_id, seq);
    tokio::spawn(async move {
        let _ = ack.await;
    });
}
