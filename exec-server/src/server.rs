//! Serving: builds the routes (health, reflection, outpost services) behind the auth layer and drives
//! one HTTP/2 connection per accepted socket, or exactly one over stdio. Health is NOT_SERVING until
//! the start-up checks pass and again while draining; draining stops accepting and gives in-flight calls
//! a bounded grace period.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use outpost_proto::pb;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;
use tower::Layer;

use crate::auth::{AuthLayer, Authenticated, Token};
use crate::config::Limits;
use crate::error::ServerError;
use crate::fs::{FileSystemService, FsConfig, OpRunner};
use crate::info::InfoService;
use crate::listen::Listener;
use crate::process::guard::OrphanGuard;
use crate::process::{ProcessConfig, ProcessManager, ProcessService, SandboxSettings};

/// Services whose health is reported besides the overall ("") status.
const SERVICE_NAMES: &[&str] = &[
    "outpost.v1.Executor",
    "outpost.v1.FileSystem",
    "outpost.v1.Process",
    "outpost.v1.Session",
    "outpost.v1.Http",
];
/// A TLS client must finish its handshake within this time.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often failed start-up checks are retried.
const STARTUP_RETRY: Duration = Duration::from_secs(1);

/// Everything the executor needs besides its listener.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Required bearer token; `None` only on unix sockets and stdio.
    pub token: Option<Token>,
    /// TLS configuration for TCP listeners.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Absolute workspace roots; start-up checks require them to be directories.
    pub workspace_roots: Vec<PathBuf>,
    /// uids besides our own that may connect over a unix socket.
    pub allowed_peer_uids: Vec<u32>,
    /// Protocol and drain limits.
    pub limits: Limits,
    /// Executor id reported by Info.
    pub executor_id: String,
    /// HTTP proxy policy and limits.
    pub http: crate::http::HttpOptions,
    /// Profiles, managed requirements and kernel capabilities for process launches.
    pub sandbox: SandboxSettings,
    /// Session and process limits.
    pub process: ProcessConfig,
    /// Binary to run as the orphan guard (`outpost`, which has the hidden guard subcommand); `None`
    /// leaves descendants of a SIGKILLed executor to the parent-death signal alone.
    pub orphan_guard: Option<PathBuf>,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self {
            token: None,
            tls: None,
            workspace_roots: Vec::new(),
            allowed_peer_uids: Vec::new(),
            limits: Limits::default(),
            executor_id: uuid::Uuid::new_v4().to_string(),
            http: crate::http::HttpOptions::default(),
            sandbox: SandboxSettings::default(),
            process: ProcessConfig::default(),
            orphan_guard: None,
        }
    }
}

type Svc = TowerToHyperService<Authenticated<Routes>>;

/// Serves on `listener` until `shutdown` resolves (or, for stdio, until the peer goes away), then drains.
///
/// # Errors
/// Invalid options (relative workspace roots) and fatal accept errors.
pub async fn serve(
    listener: Listener,
    options: ExecutorOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    if let Some(root) = options.workspace_roots.iter().find(|r| !r.is_absolute()) {
        return Err(ServerError::RelativeWorkspaceRoot(root.clone()));
    }
    let (health, health_svc) = tonic_health::server::health_reporter();
    set_all(&health, ServingStatus::NotServing).await;
    let mut sandbox = options.sandbox.clone();
    if sandbox.workspace_roots.is_empty() {
        sandbox.workspace_roots.clone_from(&options.workspace_roots);
    }
    let guard = match &options.orphan_guard {
        Some(bin) => Some(
            OrphanGuard::spawn(bin).map_err(|source| ServerError::OrphanGuard {
                bin: bin.clone(),
                source,
            })?,
        ),
        None => None,
    };
    let processes = ProcessManager::with_guard(sandbox, options.process, guard);
    let routes = build_routes(&options, health_svc, &processes)?;
    let svc = TowerToHyperService::new(AuthLayer::new(options.token.clone()).layer(routes));
    let startup = tokio::spawn(startup_checks(
        health.clone(),
        options.workspace_roots.clone(),
    ));
    let http = http2_builder(&options.limits);
    let graceful = GracefulShutdown::new();
    let result = accept_loop(listener, &options, svc, &http, &graceful, shutdown).await;
    startup.abort();
    set_all(&health, ServingStatus::NotServing).await;
    processes.shutdown();
    tracing::info!(in_flight = graceful.count(), "draining");
    if tokio::time::timeout(options.limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(grace = ?options.limits.shutdown_grace, "drain grace period elapsed; closing remaining connections");
    }
    result
}

fn build_routes(
    options: &ExecutorOptions,
    health_svc: HealthServer<impl Health>,
    processes: &Arc<ProcessManager>,
) -> Result<Routes, ServerError> {
    let max = options.limits.max_message_bytes;
    let info = InfoService::new(options, processes.sandbox());
    let process = ProcessService::new(processes.clone());
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(outpost_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        // The descriptor sets are generated at build time from our own protos; failing here is a build bug.
        .expect("embedded file descriptor sets are valid");
    Ok(Routes::new(health_svc)
        .add_service(reflection)
        .add_service(
            pb::executor_server::ExecutorServer::new(info)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_service(
            pb::process_server::ProcessServer::new(process.clone())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .add_service(pb::session_server::SessionServer::new(process))
        .add_service(
            FileSystemService::with_runner(
                FsConfig::default(),
                OpRunner::with_sandbox(processes.sandbox().clone()),
            )
            .into_server()
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        )
        .add_service(
            crate::http::HttpService::new(options.http.clone())?
                .into_server()
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
        )
        .prepare())
}

fn http2_builder(limits: &Limits) -> http2::Builder<TokioExecutor> {
    let mut http = http2::Builder::new(TokioExecutor::new());
    http.timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .keep_alive_interval(limits.keepalive_interval)
        .keep_alive_timeout(limits.keepalive_timeout)
        // Large windows keep bulk transfers (ReadFile, process output) from stalling on flow control.
        .initial_stream_window_size(4 * 1024 * 1024)
        .initial_connection_window_size(16 * 1024 * 1024)
        .max_frame_size(256 * 1024);
    http
}

async fn accept_loop(
    listener: Listener,
    options: &ExecutorOptions,
    svc: Svc,
    http: &http2::Builder<TokioExecutor>,
    graceful: &GracefulShutdown,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    tokio::pin!(shutdown);
    match listener {
        Listener::Stdio => {
            let conn = spawn_connection(crate::stdio::stream(), svc, http, graceful.watcher());
            tokio::select! {
                _ = conn => tracing::info!("stdio peer closed the connection"),
                () = &mut shutdown => {}
            }
            Ok(())
        }
        Listener::Unix(listener, _guard) => {
            let own = nix::unistd::geteuid().as_raw();
            loop {
                let stream = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(err) => { transient_accept_error(err).await?; continue; }
                    },
                    () = &mut shutdown => return Ok(()),
                };
                let uid = stream.peer_cred().map(|c| c.uid());
                match uid {
                    Ok(uid) if uid == own || options.allowed_peer_uids.contains(&uid) => {
                        crate::listen::widen_send_buffer(&stream);
                        spawn_connection(stream, svc.clone(), http, graceful.watcher());
                    }
                    other => {
                        tracing::warn!(peer_uid = ?other, "refused unix peer: uid not allowed")
                    }
                }
            }
        }
        Listener::Tcp(listener) => loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => { transient_accept_error(err).await?; continue; }
                },
                () = &mut shutdown => return Ok(()),
            };
            let _ = stream.set_nodelay(true);
            match &options.tls {
                None => {
                    spawn_connection(stream, svc.clone(), http, graceful.watcher());
                }
                Some(tls) => spawn_tls_connection(
                    stream,
                    tls.clone(),
                    svc.clone(),
                    http.clone(),
                    graceful.watcher(),
                ),
            }
        },
    }
}

/// Accept errors such as EMFILE are transient: log, back off briefly, keep serving.
async fn transient_accept_error(err: std::io::Error) -> Result<(), ServerError> {
    tracing::error!(cause = %err, "accept failed");
    if err.kind() == std::io::ErrorKind::InvalidInput {
        return Err(ServerError::Accept(err));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

fn spawn_connection<I>(
    io: I,
    svc: Svc,
    http: &http2::Builder<TokioExecutor>,
    watcher: Watcher,
) -> tokio::task::JoinHandle<()>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = crate::http::WithConnectionId::new(svc);
    let conn = watcher.watch(http.serve_connection(TokioIo::new(io), svc));
    tokio::spawn(async move {
        if let Err(err) = conn.await {
            tracing::debug!(cause = %err, "connection ended with an error");
        }
    })
}

fn spawn_tls_connection(
    stream: tokio::net::TcpStream,
    tls: Arc<rustls::ServerConfig>,
    svc: Svc,
    http: http2::Builder<TokioExecutor>,
    watcher: Watcher,
) {
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(tls_stream)) => {
                let _ = spawn_connection(tls_stream, svc, &http, watcher).await;
            }
            Ok(Err(err)) => tracing::warn!(cause = %err, "TLS handshake failed"),
            Err(_) => tracing::warn!("TLS handshake timed out"),
        }
    });
}

async fn set_all(health: &HealthReporter, status: ServingStatus) {
    health.set_service_status("", status).await;
    for name in SERVICE_NAMES {
        health.set_service_status(name, status).await;
    }
}

/// Marks the executor SERVING once every workspace root is a directory; retries until then, so an
/// executor whose workspace is mounted late becomes ready without a restart.
async fn startup_checks(health: HealthReporter, roots: Vec<PathBuf>) {
    loop {
        let missing: Vec<_> = roots.iter().filter(|r| !r.is_dir()).collect();
        if missing.is_empty() {
            set_all(&health, ServingStatus::Serving).await;
            tracing::info!("start-up checks passed; serving");
            return;
        }
        tracing::warn!(
            ?missing,
            "workspace roots are not directories yet; health stays NOT_SERVING"
        );
        tokio::time::sleep(STARTUP_RETRY).await;
    }
}
