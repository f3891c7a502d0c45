//! WriteFile: a header frame, then data frames, written through the [`OpRunner`].
//!
//! Non-atomic writes go straight to the target (truncate, append or create-new), so a failed stream can
//! leave a partial file. Atomic writes go to a temporary file in the target's directory (so the rename
//! stays on one filesystem), which is fsynced and renamed over the target once the stream ends; the
//! temporary file is removed on every failure path, including a dropped call, by [`FileWriter`]'s `Drop`.
//! An atomic write replaces a symlink at the target with a regular file (as `rename(2)` does); it keeps
//! the permissions of the file it replaces unless the header gives explicit ones.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use futures_util::{Stream, StreamExt as _};
use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
use outpost_proto::pb;
use outpost_proto::pb::write_file_request::Frame;
use tonic::Status;

use super::error::FsError;
use super::ops::checked_path;
use super::runner::OpRunner;

/// Mode of a new file when the header gives none (the umask applies).
const DEFAULT_MODE: u32 = 0o644;
/// How often to retry a clashing temporary name.
const TEMP_ATTEMPTS: usize = 8;

/// A validated WriteFile header.
#[derive(Debug, Clone)]
pub(crate) struct WriteTarget {
    path: PathBuf,
    mode: pb::WriteMode,
    atomic: bool,
    permissions: Option<u32>,
}

impl WriteTarget {
    /// Validates the header; fields are named `header.*`.
    pub(crate) fn from_header(header: &pb::WriteFileHeader) -> Result<Self, FsError> {
        let path = checked_path("header.path", &header.path)?;
        let mode = pb::WriteMode::try_from(header.mode).map_err(|_| FsError::InvalidArgument {
            field: "header.mode",
            reason: "unknown write mode",
        })?;
        if header.permissions.is_some_and(|bits| bits > 0o7777) {
            return Err(FsError::InvalidArgument {
                field: "header.permissions",
                reason: "must be permission bits (at most 0o7777)",
            });
        }
        if path.file_name().is_none() {
            return Err(FsError::InvalidArgument {
                field: "header.path",
                reason: "must name a file",
            });
        }
        Ok(Self {
            path,
            mode,
            atomic: header.atomic,
            permissions: header.permissions,
        })
    }
}

/// An open write: the target itself, or a temporary file that [`FileWriter::commit`] renames into place.
#[derive(Debug)]
pub(crate) struct FileWriter {
    file: File,
    target: WriteTarget,
    /// The temporary file while it exists; removed on drop unless committed.
    temp: Option<PathBuf>,
    written: u64,
}

impl FileWriter {
    /// Opens the target (or a temporary file next to it) as the header asks.
    pub(crate) fn open(target: WriteTarget) -> Result<Self, FsError> {
        if target.atomic {
            return Self::open_atomic(target);
        }
        let path = &target.path;
        let existed = fs::symlink_metadata(path).is_ok();
        let mut options = OpenOptions::new();
        options
            .write(true)
            .mode(target.permissions.unwrap_or(DEFAULT_MODE));
        match target.mode {
            pb::WriteMode::Truncate => options.create(true).truncate(true),
            pb::WriteMode::Append => options.create(true).append(true),
            pb::WriteMode::CreateNew => options.create_new(true),
        };
        let file = options
            .open(path)
            .map_err(|e| FsError::io("open", path, e))?;
        if let (Some(bits), false) = (target.permissions, existed) {
            // Explicit permissions are exact: undo the umask that `open` applied.
            set_mode(&file, path, bits)?;
        }
        Ok(Self {
            file,
            target,
            temp: None,
            written: 0,
        })
    }

    fn open_atomic(target: WriteTarget) -> Result<Self, FsError> {
        let path = &target.path;
        let existing = match fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => {
                return Err(FsError::io(
                    "open",
                    path,
                    io::Error::from_raw_os_error(libc::EISDIR),
                ));
            }
            Ok(_) if target.mode == pb::WriteMode::CreateNew => {
                return Err(FsError::io(
                    "open",
                    path,
                    io::Error::from_raw_os_error(libc::EEXIST),
                ));
            }
            Ok(metadata) => Some(metadata.permissions().mode() & 0o7777),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(FsError::io("stat", path, e)),
        };
        let dir = path.parent().unwrap_or(Path::new("/"));
        let (file, temp) = create_temp(dir, target.permissions.or(existing))?;
        let mut writer = Self {
            file,
            target,
            temp: Some(temp),
            written: 0,
        };
        if let (Some(_), pb::WriteMode::Append) = (existing, writer.target.mode) {
            let path = &writer.target.path;
            let mut original = File::open(path).map_err(|e| FsError::io("open", path, e))?;
            io::copy(&mut original, &mut writer.file).map_err(|e| FsError::io("copy", path, e))?;
        }
        Ok(writer)
    }

    /// Appends one data frame.
    pub(crate) fn write(&mut self, data: &[u8]) -> Result<(), FsError> {
        let path = self.temp.as_ref().unwrap_or(&self.target.path);
        self.file
            .write_all(data)
            .map_err(|e| FsError::io("write", path, e))?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Finishes the write and returns the number of data bytes written. An atomic write is fsynced
    /// and renamed over the target (create-new never replaces an existing file).
    pub(crate) fn commit(mut self) -> Result<u64, FsError> {
        let Some(temp) = self.temp.clone() else {
            return Ok(self.written);
        };
        self.file
            .sync_all()
            .map_err(|e| FsError::io("sync", &temp, e))?;
        let path = &self.target.path;
        let flags = if self.target.mode == pb::WriteMode::CreateNew {
            RenameFlags::RENAME_NOREPLACE
        } else {
            RenameFlags::empty()
        };
        renameat2(AT_FDCWD, &temp, AT_FDCWD, path, flags)
            .map_err(|errno| FsError::io("rename", path, io::Error::from(errno)))?;
        self.temp = None;
        // Persist the rename itself: fsync the directory entry.
        let dir = path.parent().unwrap_or(Path::new("/"));
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| FsError::io("sync directory", dir, e))?;
        Ok(self.written)
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take()
            && let Err(error) = fs::remove_file(&temp)
        {
            tracing::warn!(path = %temp.display(), %error, "could not remove temporary file");
        }
    }
}

fn set_mode(file: &File, path: &Path, bits: u32) -> Result<(), FsError> {
    file.set_permissions(Permissions::from_mode(bits))
        .map_err(|e| FsError::io("set permissions", path, e))
}

/// Creates a fresh temporary file in `dir`; exact `mode` when given, else the default less the umask.
fn create_temp(dir: &Path, mode: Option<u32>) -> Result<(File, PathBuf), FsError> {
    let mut last_error = None;
    for _ in 0..TEMP_ATTEMPTS {
        let temp = dir.join(format!(".outpost-{}.tmp", uuid::Uuid::new_v4().simple()));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode.unwrap_or(DEFAULT_MODE))
            .open(&temp);
        match opened {
            Ok(file) => {
                if let Some(bits) = mode
                    && let Err(error) = set_mode(&file, &temp, bits)
                {
                    let _ = fs::remove_file(&temp);
                    return Err(error);
                }
                return Ok((file, temp));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(FsError::io("create temporary file in", dir, e)),
        }
    }
    let error = last_error.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EEXIST));
    Err(FsError::io("create temporary file in", dir, error))
}

fn frame_error(reason: &'static str) -> Status {
    Status::from(FsError::InvalidArgument {
        field: "frame",
        reason,
    })
}

/// Drives a WriteFile stream: header first, then data frames, then commit.
pub(crate) async fn receive<S>(runner: OpRunner, mut frames: S) -> Result<u64, Status>
where
    S: Stream<Item = Result<pb::WriteFileRequest, Status>> + Unpin,
{
    let header = match frames.next().await.transpose()?.and_then(|f| f.frame) {
        Some(Frame::Header(header)) => header,
        Some(Frame::Data(_)) => return Err(frame_error("the first frame must be the header")),
        None => {
            return Err(frame_error(
                "missing header: the stream must start with a header frame",
            ));
        }
    };
    let target = WriteTarget::from_header(&header)?;
    let profile = header.profile;
    runner.check_profile(&profile)?;
    let mut writer = runner
        .run(&profile, move || FileWriter::open(target))
        .await?;
    while let Some(frame) = frames.next().await {
        let data = match frame.map(|f| f.frame) {
            Ok(Some(Frame::Data(data))) => data,
            Ok(Some(Frame::Header(_))) => {
                return discard(
                    &runner,
                    &profile,
                    writer,
                    frame_error("a second header frame is not allowed"),
                )
                .await;
            }
            Ok(None) => {
                return discard(&runner, &profile, writer, frame_error("empty frame")).await;
            }
            Err(status) => return discard(&runner, &profile, writer, status).await,
        };
        writer = runner
            .run(&profile, move || {
                writer.write(&data)?;
                Ok(writer)
            })
            .await?;
    }
    Ok(runner.run(&profile, move || writer.commit()).await?)
}

/// Drops `writer` (removing its temporary file) on the runner, then fails with `status`.
async fn discard(
    runner: &OpRunner,
    profile: &str,
    writer: FileWriter,
    status: Status,
) -> Result<u64, Status> {
    runner
        .run(profile, move || {
            drop(writer);
            Ok(())
        })
        .await?;
    Err(status)
}

#[cfg(test)]
mod tests {
    use futures_util::stream;
    use tonic::Code;

    use super::*;

    fn header(path: &Path, mode: pb::WriteMode, atomic: bool) -> pb::WriteFileRequest {
        pb::WriteFileRequest {
            frame: Some(Frame::Header(pb::WriteFileHeader {
                path: path.to_str().unwrap().to_owned(),
                mode: mode.into(),
                atomic,
                ..Default::default()
            })),
        }
    }

    fn data(bytes: &[u8]) -> pb::WriteFileRequest {
        pb::WriteFileRequest {
            frame: Some(Frame::Data(bytes.to_vec())),
        }
    }

    async fn send(frames: Vec<Result<pb::WriteFileRequest, Status>>) -> Result<u64, Status> {
        receive(OpRunner::new(), stream::iter(frames)).await
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn modes_truncate_append_create_new() {
        let dir = tempfile::tempdir().unwrap();
        for atomic in [false, true] {
            let path = dir.path().join(format!("f-{atomic}"));
            let frames = vec![
                Ok(header(&path, pb::WriteMode::Truncate, atomic)),
                Ok(data(b"hello ")),
                Ok(data(b"world")),
            ];
            assert_eq!(send(frames).await.unwrap(), 11);
            let frames = vec![
                Ok(header(&path, pb::WriteMode::Append, atomic)),
                Ok(data(b"!")),
            ];
            assert_eq!(send(frames).await.unwrap(), 1);
            assert_eq!(fs::read(&path).unwrap(), b"hello world!");
            let frames = vec![
                Ok(header(&path, pb::WriteMode::Truncate, atomic)),
                Ok(data(b"x")),
            ];
            send(frames).await.unwrap();
            assert_eq!(fs::read(&path).unwrap(), b"x");
            let error = send(vec![Ok(header(&path, pb::WriteMode::CreateNew, atomic))])
                .await
                .unwrap_err();
            assert_eq!(error.code(), Code::AlreadyExists, "atomic={atomic}");
            let fresh = dir.path().join(format!("new-{atomic}"));
            send(vec![Ok(header(&fresh, pb::WriteMode::CreateNew, atomic))])
                .await
                .unwrap();
            assert_eq!(fs::read(&fresh).unwrap(), b"");
        }
        assert_eq!(
            names(dir.path()),
            ["f-false", "f-true", "new-false", "new-true"]
        );
    }

    #[tokio::test]
    async fn permissions_are_exact_for_new_files_and_kept_on_atomic_replace() {
        let dir = tempfile::tempdir().unwrap();
        for atomic in [false, true] {
            let path = dir.path().join(format!("p-{atomic}"));
            let mut first = header(&path, pb::WriteMode::Truncate, atomic);
            if let Some(Frame::Header(h)) = &mut first.frame {
                h.permissions = Some(0o751);
            }
            send(vec![Ok(first)]).await.unwrap();
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode(&path), 0o751);
            send(vec![Ok(header(&path, pb::WriteMode::Truncate, atomic))])
                .await
                .unwrap();
            assert_eq!(mode(&path), 0o751, "atomic={atomic}");
        }
    }

    #[tokio::test]
    async fn bad_streams_are_invalid_and_leave_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, b"original").unwrap();
        type Frames = Vec<Result<pb::WriteFileRequest, Status>>;
        let cases: Vec<(Frames, Code, &str)> = vec![
            (vec![], Code::InvalidArgument, "frame: missing header"),
            (
                vec![Ok(data(b"x"))],
                Code::InvalidArgument,
                "frame: the first frame must be the header",
            ),
            (
                vec![
                    Ok(header(&path, pb::WriteMode::Truncate, true)),
                    Ok(data(b"new")),
                    Ok(header(&path, pb::WriteMode::Truncate, true)),
                ],
                Code::InvalidArgument,
                "frame: a second header frame",
            ),
            (
                vec![
                    Ok(header(&path, pb::WriteMode::Truncate, true)),
                    Ok(data(b"new")),
                    Err(Status::cancelled("client left")),
                ],
                Code::Cancelled,
                "client left",
            ),
            (
                vec![
                    Ok(header(&path, pb::WriteMode::Truncate, true)),
                    Ok(pb::WriteFileRequest { frame: None }),
                ],
                Code::InvalidArgument,
                "frame: empty frame",
            ),
            (
                vec![Ok(header(Path::new("rel"), pb::WriteMode::Truncate, true))],
                Code::InvalidArgument,
                "header.path: must be absolute",
            ),
            (
                vec![Ok(header(Path::new("/"), pb::WriteMode::Truncate, true))],
                Code::InvalidArgument,
                "header.path: must name a file",
            ),
        ];
        for (frames, code, message) in cases {
            let error = send(frames).await.unwrap_err();
            assert_eq!(error.code(), code, "{message}");
            assert!(
                error.message().starts_with(message),
                "{} vs {message}",
                error.message()
            );
        }
        assert_eq!(fs::read(&path).unwrap(), b"original");
        assert_eq!(names(dir.path()), ["f"]);
    }

    #[tokio::test]
    async fn unknown_mode_profile_and_directory_targets_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut bad_mode = header(&dir.path().join("f"), pb::WriteMode::Truncate, false);
        let mut with_profile = bad_mode.clone();
        if let Some(Frame::Header(h)) = &mut bad_mode.frame {
            h.mode = 9;
        }
        if let Some(Frame::Header(h)) = &mut with_profile.frame {
            h.profile = ":workspace".to_owned();
        }
        assert_eq!(
            send(vec![Ok(bad_mode)]).await.unwrap_err().code(),
            Code::InvalidArgument
        );
        let refused = send(vec![Ok(with_profile)]).await.unwrap_err();
        assert_eq!(refused.code(), Code::FailedPrecondition);
        assert!(refused.message().contains("not available yet"));
        for atomic in [false, true] {
            let error = send(vec![Ok(header(
                dir.path(),
                pb::WriteMode::Truncate,
                atomic,
            ))])
            .await
            .unwrap_err();
            assert_eq!(error.code(), Code::FailedPrecondition, "atomic={atomic}");
        }
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn dropped_or_failed_atomic_writers_remove_the_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let target = WriteTarget::from_header(&pb::WriteFileHeader {
            path: path.to_str().unwrap().to_owned(),
            mode: pb::WriteMode::CreateNew.into(),
            atomic: true,
            ..Default::default()
        })
        .unwrap();
        let mut writer = FileWriter::open(target.clone()).unwrap();
        writer.write(b"abc").unwrap();
        assert_eq!(names(dir.path()).len(), 1);
        drop(writer);
        assert!(names(dir.path()).is_empty());

        // The target appears while the atomic create-new is streaming: the commit fails, no temp remains.
        let mut writer = FileWriter::open(target).unwrap();
        writer.write(b"abc").unwrap();
        fs::write(&path, b"other").unwrap();
        let error = writer.commit().unwrap_err();
        assert_eq!(Status::from(error).code(), Code::AlreadyExists);
        assert_eq!(names(dir.path()), ["f"]);
        assert_eq!(fs::read(&path).unwrap(), b"other");
    }
}
