//! [`Executor`]: a connected executor with typed calls. Cloning is cheap and shares the connection.

use futures_util::StreamExt;
use outpost_proto::pb;
use tonic::codegen::InterceptedService;
use tonic::transport::Channel;

use crate::connect::BearerAuth;
use crate::error::ClientError;

type Authed = InterceptedService<Channel, BearerAuth>;

/// Largest message the client accepts; the executor's chunks are far smaller.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A connected executor.
#[derive(Debug, Clone)]
pub struct Executor {
    channel: Channel,
    auth: BearerAuth,
    target: String,
    /// Permission profile named in filesystem calls (empty: the executor's own rights).
    profile: String,
}

impl Executor {
    pub(crate) fn new(channel: Channel, auth: BearerAuth, target: String) -> Self {
        Self {
            channel,
            auth,
            target,
            profile: String::new(),
        }
    }

    /// The same connection, with every filesystem call made under `profile`: the executor enforces it
    /// in the kernel (a denied operation fails with `PERMISSION_DENIED`).
    pub fn with_profile(&self, profile: &str) -> Self {
        Self {
            profile: profile.to_owned(),
            ..self.clone()
        }
    }

    /// The target this handle was connected with.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The raw channel, for services without a typed wrapper here (e.g. health).
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// A generated `Executor` service client carrying the bearer token.
    pub fn executor_client(&self) -> pb::executor_client::ExecutorClient<Authed> {
        pb::executor_client::ExecutorClient::with_interceptor(
            self.channel.clone(),
            self.auth.clone(),
        )
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// A generated `FileSystem` service client carrying the bearer token.
    pub fn fs_client(&self) -> pb::file_system_client::FileSystemClient<Authed> {
        pb::file_system_client::FileSystemClient::with_interceptor(
            self.channel.clone(),
            self.auth.clone(),
        )
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// A generated `Process` service client carrying the bearer token.
    pub fn process_client(&self) -> pb::process_client::ProcessClient<Authed> {
        pb::process_client::ProcessClient::with_interceptor(self.channel.clone(), self.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// A generated `Session` service client carrying the bearer token.
    pub fn session_client(&self) -> pb::session_client::SessionClient<Authed> {
        pb::session_client::SessionClient::with_interceptor(self.channel.clone(), self.auth.clone())
    }

    /// Version, platform, filesystem context, sandbox capabilities and limits of the executor.
    ///
    /// # Errors
    /// Transport failures and error statuses.
    pub async fn info(&self) -> Result<pb::InfoResponse, ClientError> {
        Ok(self
            .executor_client()
            .info(pb::InfoRequest {})
            .await?
            .into_inner())
    }

    /// Metadata of `path`; with `follow_symlinks` false, a symlink describes itself.
    ///
    /// # Errors
    /// `NOT_FOUND` when missing, `INVALID_ARGUMENT` for a bad path, transport failures.
    pub async fn metadata(
        &self,
        path: &str,
        follow_symlinks: bool,
    ) -> Result<pb::Metadata, ClientError> {
        let request = pb::GetMetadataRequest {
            path: path.to_owned(),
            follow_symlinks,
            profile: self.profile.clone(),
        };
        Ok(self.fs_client().get_metadata(request).await?.into_inner())
    }

    /// Reads `length` bytes (all when `None`) from `offset`, calling `sink` for each chunk as it arrives.
    ///
    /// # Errors
    /// Error statuses from the executor (also mid-stream), transport failures, and errors from `sink`.
    pub async fn read_file_with(
        &self,
        path: &str,
        offset: u64,
        length: Option<u64>,
        mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<u64, ClientError> {
        let request = pb::ReadFileRequest {
            path: path.to_owned(),
            offset,
            length,
            profile: self.profile.clone(),
        };
        let mut stream = self.fs_client().read_file(request).await?.into_inner();
        let mut total = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            sink(&chunk.data).map_err(ClientError::Sink)?;
            total += chunk.data.len() as u64;
        }
        Ok(total)
    }

    /// Reads a whole file into memory.
    ///
    /// # Errors
    /// As [`Executor::read_file_with`].
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        self.read_file_with(path, 0, None, |chunk| {
            out.extend_from_slice(chunk);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Writes `data` to `path` with the given mode, atomically (temp file + rename) when asked.
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn write_file(
        &self,
        path: &str,
        data: Vec<u8>,
        mode: pb::WriteMode,
        atomic: bool,
    ) -> Result<u64, ClientError> {
        let header = pb::WriteFileHeader {
            path: path.to_owned(),
            mode: mode.into(),
            atomic,
            permissions: None,
            profile: self.profile.clone(),
        };
        let frames: Vec<pb::WriteFileRequest> =
            std::iter::once(pb::write_file_request::Frame::Header(header))
                .chain(
                    data.chunks(1024 * 1024)
                        .map(|c| pb::write_file_request::Frame::Data(c.to_vec())),
                )
                .map(|frame| pb::WriteFileRequest { frame: Some(frame) })
                .collect();
        let response = self
            .fs_client()
            .write_file(tokio_stream::iter(frames))
            .await?;
        Ok(response.into_inner().bytes_written)
    }

    /// All entries of a directory, following pages until the last one.
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn read_dir(&self, path: &str) -> Result<Vec<pb::DirectoryEntry>, ClientError> {
        let mut entries = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = pb::ReadDirectoryRequest {
                path: path.to_owned(),
                page_token,
                page_size: 0,
                profile: self.profile.clone(),
            };
            let page = self.fs_client().read_directory(request).await?.into_inner();
            entries.extend(page.entries);
            if page.next_page_token.is_empty() {
                return Ok(entries);
            }
            page_token = page.next_page_token;
        }
    }

    /// Creates a directory (and missing parents when `recursive`).
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn create_dir(&self, path: &str, recursive: bool) -> Result<(), ClientError> {
        let request = pb::CreateDirectoryRequest {
            path: path.to_owned(),
            recursive,
            profile: self.profile.clone(),
        };
        self.fs_client().create_directory(request).await?;
        Ok(())
    }

    /// Removes a file, or a directory (with its contents when `recursive`).
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn remove(&self, path: &str, recursive: bool) -> Result<(), ClientError> {
        let request = pb::RemoveRequest {
            path: path.to_owned(),
            recursive,
            profile: self.profile.clone(),
        };
        self.fs_client().remove(request).await?;
        Ok(())
    }

    /// Renames `from` to `to`.
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        let request = pb::RenameRequest {
            from: from.to_owned(),
            to: to.to_owned(),
            profile: self.profile.clone(),
        };
        self.fs_client().rename(request).await?;
        Ok(())
    }

    /// Copies `from` to `to` (directories when `recursive`); returns the bytes copied.
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn copy(&self, from: &str, to: &str, recursive: bool) -> Result<u64, ClientError> {
        let request = pb::CopyRequest {
            from: from.to_owned(),
            to: to.to_owned(),
            recursive,
            profile: self.profile.clone(),
        };
        Ok(self
            .fs_client()
            .copy(request)
            .await?
            .into_inner()
            .bytes_copied)
    }

    /// The canonical absolute path of `path`, with symlinks resolved on the executor.
    ///
    /// # Errors
    /// Error statuses and transport failures.
    pub async fn canonicalize(&self, path: &str) -> Result<String, ClientError> {
        let request = pb::CanonicalizeRequest {
            path: path.to_owned(),
            profile: self.profile.clone(),
        };
        Ok(self
            .fs_client()
            .canonicalize(request)
            .await?
            .into_inner()
            .path)
    }

    /// The server-side find-up walk: one round trip for any depth.
    ///
    /// # Errors
    /// Error statuses (including a propagated probe error) and transport failures.
    pub async fn find_up_server(
        &self,
        request: pb::FindUpRequest,
    ) -> Result<pb::FindUpResponse, ClientError> {
        Ok(self.fs_client().find_up(request).await?.into_inner())
    }
}
