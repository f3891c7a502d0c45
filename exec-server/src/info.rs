//! The `Executor.Info` service: identity, platform, filesystem context, sandbox capabilities, limits.

use std::path::PathBuf;

use outpost_proto::pb;
use tonic::{Request, Response, Status};

use crate::process::SandboxSettings;
use crate::server::ExecutorOptions;

/// Largest ReadFile chunk the executor sends.
pub const READ_CHUNK_BYTES: u64 = 1024 * 1024;
/// Most markers one find-up request may carry.
pub const MAX_FIND_UP_MARKERS: u32 = 16;
/// Most entries in one ReadDirectory page.
pub const MAX_DIRECTORY_PAGE: u32 = 10_000;

/// Answers `Executor.Info` from facts captured at start-up.
#[derive(Debug, Clone)]
pub struct InfoService {
    response: pb::InfoResponse,
}

impl InfoService {
    /// Captures the executor's context: its cwd, `$HOME`, temp dir and the configured workspace roots.
    pub fn new(options: &ExecutorOptions, sandbox: &SandboxSettings) -> Self {
        let (workspace_roots, caps, limits) =
            (&options.workspace_roots, sandbox.caps, &options.limits);
        let display = |p: PathBuf| p.to_string_lossy().into_owned();
        let fs_context = pb::FilesystemContext {
            cwd: std::env::current_dir().map(display).unwrap_or_default(),
            home: std::env::var("HOME").unwrap_or_default(),
            tmp: display(std::env::temp_dir()),
            workspace_roots: workspace_roots.iter().cloned().map(display).collect(),
        };
        let response = pb::InfoResponse {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            executor_id: options.executor_id.clone(),
            fs_context: Some(fs_context),
            sandbox: Some(pb::SandboxCapabilities {
                landlock_abi: caps.landlock_abi,
                seccomp: caps.seccomp,
                user_namespaces: caps.user_namespaces,
            }),
            limits: Some(pb::Limits {
                max_message_bytes: limits.max_message_bytes as u64,
                max_concurrent_streams: limits.max_concurrent_streams,
                read_chunk_bytes: READ_CHUNK_BYTES,
                keepalive_interval_ms: u64::try_from(limits.keepalive_interval.as_millis())
                    .unwrap_or(u64::MAX),
                max_find_up_markers: MAX_FIND_UP_MARKERS,
                max_directory_page: MAX_DIRECTORY_PAGE,
            }),
            permission_profiles: sandbox.profile_names(),
            default_profile: sandbox.default_profile.clone(),
        };
        Self { response }
    }
}

#[tonic::async_trait]
impl pb::executor_server::Executor for InfoService {
    async fn info(
        &self,
        _request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoResponse>, Status> {
        Ok(Response::new(self.response.clone()))
    }
}
