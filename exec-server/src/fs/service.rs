//! [`FileSystemService`]: the tonic implementation of `outpost.v1.FileSystem`. Each method validates
//! and converts its request, runs the operation through the [`OpRunner`] and maps the error.

use std::pin::Pin;

use futures_util::Stream;
use outpost_proto::find_up::FindUpSpec;
use outpost_proto::pb;
use outpost_proto::pb::file_system_server::{FileSystem, FileSystemServer};
use tonic::{Request, Response, Status, Streaming};

use super::error::FsError;
use super::ops::checked_path;
use super::read::ReadRequest;
use super::runner::OpRunner;
use super::{copy, dir, find_up, ops, read, write};

/// The largest ReadFile chunk (the protocol's limit).
pub const MAX_READ_CHUNK_SIZE: usize = 1 << 20;
/// The largest ReadDirectory page the server will ever return.
pub const MAX_PAGE_SIZE: u32 = 10_000;

/// Limits of the filesystem service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsConfig {
    /// Bytes per ReadFile chunk; clamped to `1..=`[`MAX_READ_CHUNK_SIZE`]. Default 1 MiB.
    pub read_chunk_size: usize,
    /// Entries per ReadDirectory page when the request says 0. Default 1000.
    pub default_page_size: u32,
    /// The most entries per page a request may ask for; clamped to `1..=`[`MAX_PAGE_SIZE`].
    /// Default 10000.
    pub max_page_size: u32,
}

impl Default for FsConfig {
    fn default() -> Self {
        Self {
            read_chunk_size: MAX_READ_CHUNK_SIZE,
            default_page_size: 1000,
            max_page_size: MAX_PAGE_SIZE,
        }
    }
}

impl FsConfig {
    /// The config with every limit inside its allowed range.
    fn clamped(self) -> Self {
        let max_page_size = self.max_page_size.clamp(1, MAX_PAGE_SIZE);
        Self {
            read_chunk_size: self.read_chunk_size.clamp(1, MAX_READ_CHUNK_SIZE),
            default_page_size: self.default_page_size.clamp(1, max_page_size),
            max_page_size,
        }
    }

    fn page_size(&self, requested: u32) -> usize {
        let size = if requested == 0 {
            self.default_page_size
        } else {
            requested.min(self.max_page_size)
        };
        usize::try_from(size).unwrap_or(usize::MAX)
    }
}

/// The `outpost.v1.FileSystem` service.
///
/// ```no_run
/// # use outpost_exec_server::fs::{FileSystemService, FsConfig};
/// let service = FileSystemService::new(FsConfig::default()).into_server();
/// # let _ = service;
/// ```
#[derive(Debug, Clone)]
pub struct FileSystemService {
    config: FsConfig,
    runner: OpRunner,
}

impl FileSystemService {
    /// A service with `config` (out-of-range limits are clamped) running operations on the default
    /// [`OpRunner`].
    pub fn new(config: FsConfig) -> Self {
        Self::with_runner(config, OpRunner::new())
    }

    /// A service that runs every operation through `runner`.
    pub fn with_runner(config: FsConfig, runner: OpRunner) -> Self {
        Self {
            config: config.clamped(),
            runner,
        }
    }

    /// The effective (clamped) limits.
    pub fn config(&self) -> FsConfig {
        self.config
    }

    /// Wraps the service for a tonic router (`Routes::add_service` / `Server::add_service`).
    pub fn into_server(self) -> FileSystemServer<Self> {
        FileSystemServer::new(self)
    }

    async fn run<T, F>(&self, profile: &str, op: F) -> Result<Response<T>, Status>
    where
        F: FnOnce() -> Result<T, FsError> + Send + 'static,
        T: Send + 'static,
    {
        Ok(Response::new(self.runner.run(profile, op).await?))
    }
}

/// The ReadFile response stream.
pub type ReadFileStream = Pin<Box<dyn Stream<Item = Result<pb::ReadFileChunk, Status>> + Send>>;

#[tonic::async_trait]
impl FileSystem for FileSystemService {
    async fn get_metadata(
        &self,
        request: Request<pb::GetMetadataRequest>,
    ) -> Result<Response<pb::Metadata>, Status> {
        let request = request.into_inner();
        let path = checked_path("path", &request.path)?;
        let follow = request.follow_symlinks;
        self.run(&request.profile, move || ops::get_metadata(&path, follow))
            .await
    }

    type ReadFileStream = ReadFileStream;

    async fn read_file(
        &self,
        request: Request<pb::ReadFileRequest>,
    ) -> Result<Response<ReadFileStream>, Status> {
        let request = request.into_inner();
        let read = ReadRequest {
            path: checked_path("path", &request.path)?,
            offset: request.offset,
            length: request.length,
            profile: request.profile,
            chunk_size: self.config.read_chunk_size,
        };
        let stream = read::stream_file(self.runner.clone(), read).await?;
        Ok(Response::new(Box::pin(stream)))
    }

    async fn write_file(
        &self,
        request: Request<Streaming<pb::WriteFileRequest>>,
    ) -> Result<Response<pb::WriteFileResponse>, Status> {
        let bytes_written = write::receive(self.runner.clone(), request.into_inner()).await?;
        Ok(Response::new(pb::WriteFileResponse { bytes_written }))
    }

    async fn read_directory(
        &self,
        request: Request<pb::ReadDirectoryRequest>,
    ) -> Result<Response<pb::ReadDirectoryResponse>, Status> {
        let request = request.into_inner();
        let path = checked_path("path", &request.path)?;
        let after = dir::decode_page_token(&request.page_token)?;
        let page_size = self.config.page_size(request.page_size);
        self.run(&request.profile, move || {
            dir::read_directory(&path, after.as_deref(), page_size)
        })
        .await
    }

    async fn create_directory(
        &self,
        request: Request<pb::CreateDirectoryRequest>,
    ) -> Result<Response<pb::CreateDirectoryResponse>, Status> {
        let request = request.into_inner();
        let path = checked_path("path", &request.path)?;
        let recursive = request.recursive;
        self.run(&request.profile, move || {
            ops::create_directory(&path, recursive)
        })
        .await?;
        Ok(Response::new(pb::CreateDirectoryResponse {}))
    }

    async fn remove(
        &self,
        request: Request<pb::RemoveRequest>,
    ) -> Result<Response<pb::RemoveResponse>, Status> {
        let request = request.into_inner();
        let path = checked_path("path", &request.path)?;
        let recursive = request.recursive;
        self.run(&request.profile, move || ops::remove(&path, recursive))
            .await?;
        Ok(Response::new(pb::RemoveResponse {}))
    }

    async fn rename(
        &self,
        request: Request<pb::RenameRequest>,
    ) -> Result<Response<pb::RenameResponse>, Status> {
        let request = request.into_inner();
        let from = checked_path("from", &request.from)?;
        let to = checked_path("to", &request.to)?;
        self.run(&request.profile, move || ops::rename(&from, &to))
            .await?;
        Ok(Response::new(pb::RenameResponse {}))
    }

    async fn copy(
        &self,
        request: Request<pb::CopyRequest>,
    ) -> Result<Response<pb::CopyResponse>, Status> {
        let request = request.into_inner();
        let from = checked_path("from", &request.from)?;
        let to = checked_path("to", &request.to)?;
        let recursive = request.recursive;
        let bytes_copied = self
            .runner
            .run(&request.profile, move || copy::copy(&from, &to, recursive))
            .await?;
        Ok(Response::new(pb::CopyResponse { bytes_copied }))
    }

    async fn canonicalize(
        &self,
        request: Request<pb::CanonicalizeRequest>,
    ) -> Result<Response<pb::CanonicalizeResponse>, Status> {
        let request = request.into_inner();
        let path = checked_path("path", &request.path)?;
        let path = self
            .runner
            .run(&request.profile, move || ops::canonicalize(&path))
            .await?;
        Ok(Response::new(pb::CanonicalizeResponse { path }))
    }

    async fn find_up(
        &self,
        request: Request<pb::FindUpRequest>,
    ) -> Result<Response<pb::FindUpResponse>, Status> {
        let request = request.into_inner();
        let profile = request.profile.clone();
        let spec = FindUpSpec::try_from(request).map_err(FsError::from)?;
        let result = self
            .runner
            .run(&profile, move || find_up::find_up(spec))
            .await?;
        Ok(Response::new(result.into()))
    }
}
