//! The `outpost.v1.Session` and `outpost.v1.Process` gRPC services: convert, call the manager, map
//! the error. Streams run in spawned tasks feeding bounded channels; a failed send means the client left.

use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use nix::sys::signal::Signal;
use outpost_proto::pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::error::ProcessError;
use super::manager::ProcessManager;
use super::validate;

/// Events sent per read of the log.
const EVENTS_PER_BATCH: usize = 64;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Serves both services over one [`ProcessManager`].
#[derive(Debug, Clone)]
pub struct ProcessService {
    manager: Arc<ProcessManager>,
}

impl ProcessService {
    /// Services backed by `manager`.
    pub fn new(manager: Arc<ProcessManager>) -> Self {
        Self { manager }
    }
}

#[tonic::async_trait]
impl pb::session_server::Session for ProcessService {
    type AttachStream = BoxStream<pb::AttachResponse>;

    async fn attach(
        &self,
        request: Request<Streaming<pb::AttachRequest>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await? {
            Some(pb::AttachRequest {
                msg: Some(pb::attach_request::Msg::Hello(hello)),
            }) => hello,
            _ => {
                return Err(ProcessError::Invalid {
                    field: "hello",
                    reason: "the first message must be hello".into(),
                }
                .into());
            }
        };
        let (session, resumed) = self
            .manager
            .attach(&hello.session_id, hello.detach_ttl_ms)?;
        tracing::info!(session_id = %session.id, resumed, "session attached");
        let (tx, rx) = mpsc::channel(8);
        let attached = pb::Attached {
            session_id: session.id.clone(),
            resumed,
            detach_ttl_ms: hello.detach_ttl_ms.unwrap_or(0),
        };
        let _ = tx
            .send(Ok(pb::AttachResponse {
                msg: Some(pb::attach_response::Msg::Attached(attached)),
            }))
            .await;
        let manager = self.manager.clone();
        tokio::spawn(async move {
            // Hold the session while the client's stream lives; answer pings.
            while let Ok(Some(msg)) = inbound.message().await {
                if let Some(pb::attach_request::Msg::Ping(n)) = msg.msg
                    && tx
                        .send(Ok(pb::AttachResponse {
                            msg: Some(pb::attach_response::Msg::Pong(n)),
                        }))
                        .await
                        .is_err()
                {
                    break;
                }
            }
            tracing::info!(session_id = %session.id, "session detached");
            manager.detach(&session);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

fn signal_of(kind: i32) -> Result<Signal, ProcessError> {
    match pb::SignalKind::try_from(kind) {
        Ok(pb::SignalKind::Int) => Ok(Signal::SIGINT),
        Ok(pb::SignalKind::Term) => Ok(Signal::SIGTERM),
        Ok(pb::SignalKind::Kill) => Ok(Signal::SIGKILL),
        Ok(pb::SignalKind::Hup) => Ok(Signal::SIGHUP),
        _ => Err(ProcessError::Invalid {
            field: "signal",
            reason: format!("unknown signal {kind}; use INT, TERM, KILL or HUP"),
        }),
    }
}

#[tonic::async_trait]
impl pb::process_server::Process for ProcessService {
    type EventsStream = BoxStream<pb::ProcessEvent>;

    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        let req = request.into_inner();
        let session = self.manager.session(&req.session_id)?;
        let (handle, sandbox) = self.manager.start(&session, &req)?;
        Ok(Response::new(pb::StartResponse {
            process_id: handle.id.clone(),
            pid: handle.pid,
            sandbox: Some(sandbox),
        }))
    }

    async fn events(
        &self,
        request: Request<pb::EventsRequest>,
    ) -> Result<Response<Self::EventsStream>, Status> {
        let req = request.into_inner();
        let process = self
            .manager
            .session(&req.session_id)?
            .process(&req.process_id)?;
        let log = process.log.clone();
        if req.require_ack {
            log.require_ack();
        }
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut appended = log.subscribe();
            let mut cursor = req.after_seq;
            loop {
                appended.borrow_and_update();
                let batch = log.read_after(cursor, EVENTS_PER_BATCH);
                if batch.events.is_empty() {
                    if appended.changed().await.is_err() {
                        return;
                    }
                    continue;
                }
                for event in batch.events {
                    cursor = event.seq;
                    if tx.send(Ok(event)).await.is_err() {
                        return; // the client went away
                    }
                }
                if !req.require_ack {
                    log.release(cursor, false);
                }
                if batch.finished {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).boxed())))
    }

    async fn write_stdin(
        &self,
        request: Request<pb::WriteStdinRequest>,
    ) -> Result<Response<pb::WriteStdinResponse>, Status> {
        let req = request.into_inner();
        let process = self
            .manager
            .session(&req.session_id)?
            .process(&req.process_id)?;
        let duplicate = process.write_stdin(&req.data, &req.write_id).await?;
        Ok(Response::new(pb::WriteStdinResponse { duplicate }))
    }

    async fn close_stdin(
        &self,
        request: Request<pb::CloseStdinRequest>,
    ) -> Result<Response<pb::CloseStdinResponse>, Status> {
        let req = request.into_inner();
        self.manager
            .session(&req.session_id)?
            .process(&req.process_id)?
            .close_stdin()
            .await?;
        Ok(Response::new(pb::CloseStdinResponse {}))
    }

    async fn signal(
        &self,
        request: Request<pb::SignalRequest>,
    ) -> Result<Response<pb::SignalResponse>, Status> {
        let req = request.into_inner();
        let signal = signal_of(req.signal)?;
        self.manager
            .session(&req.session_id)?
            .process(&req.process_id)?
            .signal(signal)?;
        Ok(Response::new(pb::SignalResponse {}))
    }

    async fn resize(
        &self,
        request: Request<pb::ResizeRequest>,
    ) -> Result<Response<pb::ResizeResponse>, Status> {
        let req = request.into_inner();
        let (rows, cols) = validate::tty_size(req.size.as_ref())?;
        self.manager
            .session(&req.session_id)?
            .process(&req.process_id)?
            .resize(rows, cols)?;
        Ok(Response::new(pb::ResizeResponse {}))
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let session = self.manager.session(&request.into_inner().session_id)?;
        let processes = session
            .list()
            .into_iter()
            .map(|p| {
                let exit = p.exit_status();
                pb::ProcessInfo {
                    process_id: p.id.clone(),
                    pid: p.pid,
                    argv: p.argv.clone(),
                    state: if exit.is_some() {
                        pb::ProcessState::Exited
                    } else {
                        pb::ProcessState::Running
                    }
                    .into(),
                    exit,
                    last_seq: p.log.last_seq(),
                    tty: p.is_tty(),
                }
            })
            .collect();
        Ok(Response::new(pb::ListResponse { processes }))
    }

    async fn ack(
        &self,
        request: Request<pb::AckRequest>,
    ) -> Result<Response<pb::AckResponse>, Status> {
        let req = request.into_inner();
        self.manager
            .session(&req.session_id)?
            .process(&req.process_id)?
            .log
            .release(req.seq, true);
        Ok(Response::new(pb::AckResponse {}))
    }
}
