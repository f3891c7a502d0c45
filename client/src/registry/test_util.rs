//! A fake executor for registry tests: just health (whose status the test sets), Info and
//! Session.Attach, on a unix socket in a temp dir.

use std::path::PathBuf;
use std::pin::Pin;

use futures_util::StreamExt as _;
use outpost_proto::pb;
use tokio_stream::Stream;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

#[derive(Debug)]
struct FakeInfo;

#[tonic::async_trait]
impl pb::executor_server::Executor for FakeInfo {
    async fn info(
        &self,
        _: tonic::Request<pb::InfoRequest>,
    ) -> Result<tonic::Response<pb::InfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(pb::InfoResponse {
            executor_id: "fake".into(),
            ..Default::default()
        }))
    }
}

#[derive(Debug)]
struct FakeSession;

type AttachStream = Pin<Box<dyn Stream<Item = Result<pb::AttachResponse, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl pb::session_server::Session for FakeSession {
    type AttachStream = AttachStream;

    async fn attach(
        &self,
        request: tonic::Request<tonic::Streaming<pb::AttachRequest>>,
    ) -> Result<tonic::Response<AttachStream>, tonic::Status> {
        let mut requests = request.into_inner();
        let attached = pb::AttachResponse {
            msg: Some(pb::attach_response::Msg::Attached(pb::Attached {
                session_id: "s1".into(),
                resumed: false,
                detach_ttl_ms: 30_000,
            })),
        };
        // Keep the response stream open while the client holds its request stream.
        let stream = attach_stream(attached, async move {
            while let Ok(Some(_)) = requests.message().await {}
        });
        Ok(tonic::Response::new(stream))
    }
}

/// One message, then nothing until `hold` completes.
fn attach_stream(
    first: pb::AttachResponse,
    hold: impl std::future::Future<Output = ()> + Send + 'static,
) -> AttachStream {
    let first = tokio_stream::once(Ok(first));
    let rest = futures_util::stream::once(hold).filter_map(|()| async { None });
    Box::pin(futures_util::StreamExt::chain(first, rest))
}

/// A running fake executor; stops when dropped.
#[derive(Debug)]
pub(super) struct FakeExecutor {
    pub(super) target: String,
    pub(super) health: HealthReporter,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for FakeExecutor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeExecutor {
    pub(super) async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let sock: PathBuf = dir.path().join("fake.sock");
        let listener = tokio::net::UnixListener::bind(&sock).expect("bind fake socket");
        let (health, health_svc) = tonic_health::server::health_reporter();
        health.set_service_status("", ServingStatus::Serving).await;
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(health_svc)
                .add_service(pb::executor_server::ExecutorServer::new(FakeInfo))
                .add_service(pb::session_server::SessionServer::new(FakeSession))
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await;
        });
        Self {
            target: format!("unix:{}", sock.display()),
            health,
            task,
            _dir: dir,
        }
    }
}
