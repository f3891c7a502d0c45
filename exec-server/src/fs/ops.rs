//! Single-shot filesystem operations: metadata, create directory, remove, rename, canonicalize.
//!
//! Plain synchronous functions over validated paths; the service runs them through the
//! [`OpRunner`](super::runner::OpRunner).

use std::fs::{self, FileType, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use outpost_proto::path::check_absolute;
use outpost_proto::pb;

use super::error::FsError;

/// Validates the absolute path in request field `field`.
pub(crate) fn checked_path(field: &'static str, value: &str) -> Result<PathBuf, FsError> {
    check_absolute(value).map_err(|problem| FsError::InvalidPath { field, problem })?;
    Ok(PathBuf::from(value))
}

/// The wire kind of a file type (symlinks are not followed).
pub(crate) fn file_kind(file_type: FileType) -> pb::FileKind {
    if file_type.is_file() {
        pb::FileKind::File
    } else if file_type.is_dir() {
        pb::FileKind::Directory
    } else if file_type.is_symlink() {
        pb::FileKind::Symlink
    } else if file_type.is_fifo()
        || file_type.is_socket()
        || file_type.is_block_device()
        || file_type.is_char_device()
    {
        pb::FileKind::Other
    } else {
        pb::FileKind::Unspecified
    }
}

fn mtime_unix_nanos(metadata: &Metadata) -> i64 {
    metadata
        .mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(metadata.mtime_nsec())
}

/// Describes `path`, or the symlink itself when `follow_symlinks` is false.
pub(crate) fn get_metadata(path: &Path, follow_symlinks: bool) -> Result<pb::Metadata, FsError> {
    let metadata = if follow_symlinks {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    }
    .map_err(|e| FsError::io("stat", path, e))?;
    let symlink_target = if metadata.file_type().is_symlink() {
        let target = fs::read_link(path).map_err(|e| FsError::io("read link", path, e))?;
        Some(target.to_string_lossy().into_owned())
    } else {
        None
    };
    Ok(pb::Metadata {
        kind: file_kind(metadata.file_type()).into(),
        size: metadata.size(),
        mode: metadata.mode(),
        mtime_unix_nanos: mtime_unix_nanos(&metadata),
        symlink_target,
    })
}

/// Creates the directory `path`; with `recursive`, also its missing parents, and an existing
/// directory is accepted.
pub(crate) fn create_directory(path: &Path, recursive: bool) -> Result<(), FsError> {
    let result = if recursive {
        fs::create_dir_all(path)
    } else {
        fs::create_dir(path)
    };
    result.map_err(|e| FsError::io("create directory", path, e))
}

/// Removes `path` without following a final symlink; a directory needs `recursive` unless empty.
pub(crate) fn remove(path: &Path, recursive: bool) -> Result<(), FsError> {
    if path.parent().is_none() {
        return Err(FsError::Refused {
            path: path.to_owned(),
            reason: "refusing to remove the root directory",
        });
    }
    let metadata = fs::symlink_metadata(path).map_err(|e| FsError::io("stat", path, e))?;
    if !metadata.is_dir() {
        return fs::remove_file(path).map_err(|e| FsError::io("remove file", path, e));
    }
    if recursive {
        return fs::remove_dir_all(path).map_err(|e| FsError::io("remove directory tree", path, e));
    }
    fs::remove_dir(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOTEMPTY) {
            FsError::Refused {
                path: path.to_owned(),
                reason: "directory is not empty; set recursive to remove it with its contents",
            }
        } else {
            FsError::io("remove directory", path, e)
        }
    })
}

/// Renames `from` to `to` (replacing `to` as `rename(2)` does).
pub(crate) fn rename(from: &Path, to: &Path) -> Result<(), FsError> {
    fs::rename(from, to).map_err(|e| FsError::io("rename", pair(from, to), e))
}

/// The `from -> to` display path of a two-path step.
pub(crate) fn pair(from: &Path, to: &Path) -> PathBuf {
    PathBuf::from(format!("{} -> {}", from.display(), to.display()))
}

/// Resolves `path` to an absolute path without symlinks, `.` or `..`.
pub(crate) fn canonicalize(path: &Path) -> Result<String, FsError> {
    let canonical = fs::canonicalize(path).map_err(|e| FsError::io("canonicalize", path, e))?;
    canonical.into_os_string().into_string().map_err(|_| {
        FsError::io(
            "canonicalize",
            path,
            io::Error::new(io::ErrorKind::InvalidData, "the result is not valid UTF-8"),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use tonic::Code;

    use super::*;

    fn code(error: FsError) -> Code {
        tonic::Status::from(error).code()
    }

    #[test]
    fn metadata_with_and_without_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"hello").unwrap();
        let link = dir.path().join("l");
        symlink(&file, &link).unwrap();

        let followed = get_metadata(&link, true).unwrap();
        assert_eq!(followed.kind(), pb::FileKind::File);
        assert_eq!(followed.size, 5);
        assert_eq!(followed.symlink_target, None);
        assert_eq!(followed.mode & libc::S_IFMT, libc::S_IFREG);
        assert!(followed.mtime_unix_nanos > 1_500_000_000_000_000_000);

        let own = get_metadata(&link, false).unwrap();
        assert_eq!(own.kind(), pb::FileKind::Symlink);
        assert_eq!(own.symlink_target.as_deref(), file.to_str());

        let dangling = dir.path().join("dangling");
        symlink("/nonexistent/x", &dangling).unwrap();
        assert_eq!(
            code(get_metadata(&dangling, true).unwrap_err()),
            Code::NotFound
        );
        let own = get_metadata(&dangling, false).unwrap();
        assert_eq!(own.symlink_target.as_deref(), Some("/nonexistent/x"));
        assert_eq!(
            get_metadata(dir.path(), true).unwrap().kind(),
            pb::FileKind::Directory
        );
    }

    #[test]
    fn checked_path_names_the_field() {
        let message = |v: &str| checked_path("from", v).unwrap_err().to_string();
        assert_eq!(message("rel"), "from: must be absolute");
        assert_eq!(message(""), "from: must not be empty");
        assert_eq!(message("/a\0"), "from: must not contain NUL");
        assert!(message(&"/".repeat(4097)).starts_with("from: must be at most 4096 bytes"));
    }

    #[test]
    fn create_directory_recursive_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        assert_eq!(
            code(create_directory(&deep, false).unwrap_err()),
            Code::NotFound
        );
        create_directory(&deep, true).unwrap();
        create_directory(&deep, true).unwrap();
        assert_eq!(
            code(create_directory(&deep, false).unwrap_err()),
            Code::AlreadyExists
        );
        assert!(deep.is_dir());
    }

    #[test]
    fn remove_needs_recursive_for_a_non_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        fs::create_dir_all(tree.join("sub")).unwrap();
        fs::write(tree.join("sub/f"), b"x").unwrap();
        let error = remove(&tree, false).unwrap_err();
        assert!(error.to_string().contains("set recursive"), "{error}");
        assert_eq!(code(error), Code::FailedPrecondition);
        remove(&tree, true).unwrap();
        assert!(!tree.exists());
        assert_eq!(code(remove(&tree, false).unwrap_err()), Code::NotFound);
        assert_eq!(
            code(remove(Path::new("/"), true).unwrap_err()),
            Code::FailedPrecondition
        );
    }

    #[test]
    fn remove_does_not_follow_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), b"x").unwrap();
        let link = dir.path().join("link");
        symlink(&target, &link).unwrap();
        remove(&link, true).unwrap();
        assert!(target.join("keep").exists());
        assert!(fs::symlink_metadata(&link).is_err());
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).unwrap();
        remove(&empty, false).unwrap();
    }

    #[test]
    fn rename_and_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("a");
        let to = dir.path().join("b");
        fs::write(&from, b"x").unwrap();
        rename(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"x");
        let error = rename(&from, &to).unwrap_err();
        assert!(error.to_string().contains(" -> "), "{error}");
        assert_eq!(code(error), Code::NotFound);

        let link = dir.path().join("link");
        symlink(dir.path(), &link).unwrap();
        let canonical = canonicalize(&link.join("./b")).unwrap();
        assert_eq!(Path::new(&canonical), fs::canonicalize(&to).unwrap());
        assert_eq!(
            code(canonicalize(&dir.path().join("nope")).unwrap_err()),
            Code::NotFound
        );
    }

    #[test]
    fn not_a_directory_is_a_failed_precondition() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"x").unwrap();
        let error = get_metadata(&file.join("x"), true).unwrap_err();
        assert_eq!(code(error), Code::FailedPrecondition);
    }
}
