//! Copy: files, symlinks as symlinks, and directories (with `recursive`) walked iteratively so a deep
//! tree cannot overflow the stack.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::{Path, PathBuf};

use super::error::FsError;
use super::ops::pair;

/// Copies `from` to `to` and returns the number of file bytes copied. `to` must not exist for a
/// directory or symlink; a regular file replaces an existing file at `to`.
pub(crate) fn copy(from: &Path, to: &Path, recursive: bool) -> Result<u64, FsError> {
    let metadata = fs::symlink_metadata(from).map_err(|e| FsError::io("stat", from, e))?;
    if !metadata.is_dir() {
        return copy_entry(from, to, metadata.file_type());
    }
    if !recursive {
        return Err(FsError::Refused {
            path: from.to_owned(),
            reason: "is a directory; set recursive to copy it with its contents",
        });
    }
    refuse_copy_into_itself(from, to)?;
    copy_tree(from, to)
}

/// Copies one non-directory entry.
fn copy_entry(from: &Path, to: &Path, file_type: fs::FileType) -> Result<u64, FsError> {
    if file_type.is_symlink() {
        let target = fs::read_link(from).map_err(|e| FsError::io("read link", from, e))?;
        symlink(&target, to).map_err(|e| FsError::io("create symlink", to, e))?;
        Ok(0)
    } else if file_type.is_file() {
        refuse_same_file(from, to)?;
        fs::copy(from, to).map_err(|e| FsError::io("copy", pair(from, to), e))
    } else {
        Err(FsError::Refused {
            path: from.to_owned(),
            reason: "only files, directories and symlinks can be copied",
        })
    }
}

/// Copying a file onto itself would truncate it before reading it.
fn refuse_same_file(from: &Path, to: &Path) -> Result<(), FsError> {
    let Ok(dest) = fs::metadata(to) else {
        // Absent (or unreadable, which the copy itself will report): not the same file.
        return Ok(());
    };
    let source = fs::metadata(from).map_err(|e| FsError::io("stat", from, e))?;
    if (source.dev(), source.ino()) == (dest.dev(), dest.ino()) {
        return Err(FsError::Refused {
            path: to.to_owned(),
            reason: "is the same file as from",
        });
    }
    Ok(())
}

/// A directory copied into its own subtree would grow while it is walked.
fn refuse_copy_into_itself(from: &Path, to: &Path) -> Result<(), FsError> {
    let source = fs::canonicalize(from).map_err(|e| FsError::io("canonicalize", from, e))?;
    let (Some(parent), Some(name)) = (to.parent(), to.file_name()) else {
        return Err(FsError::InvalidArgument {
            field: "to",
            reason: "must name a new directory",
        });
    };
    let parent = fs::canonicalize(parent).map_err(|e| FsError::io("canonicalize", parent, e))?;
    if parent.join(name).starts_with(&source) {
        return Err(FsError::Refused {
            path: to.to_owned(),
            reason: "cannot copy a directory into itself",
        });
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<u64, FsError> {
    let mut bytes = 0u64;
    let mut pending: Vec<(PathBuf, PathBuf)> = vec![(from.to_owned(), to.to_owned())];
    // Directory permissions are applied last, so a read-only source directory can still be filled.
    let mut made: Vec<(PathBuf, fs::Permissions)> = Vec::new();
    while let Some((source, dest)) = pending.pop() {
        fs::create_dir(&dest).map_err(|e| FsError::io("create directory", &dest, e))?;
        let permissions = fs::metadata(&source)
            .map_err(|e| FsError::io("stat", &source, e))?
            .permissions();
        made.push((dest.clone(), permissions));
        let entries =
            fs::read_dir(&source).map_err(|e| FsError::io("read directory", &source, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| FsError::io("read directory", &source, e))?;
            let file_type = entry
                .file_type()
                .map_err(|e| FsError::io("stat", entry.path(), e))?;
            let target = dest.join(entry.file_name());
            if file_type.is_dir() {
                pending.push((entry.path(), target));
            } else {
                bytes += copy_entry(&entry.path(), &target, file_type)?;
            }
        }
    }
    for (dir, permissions) in made.into_iter().rev() {
        fs::set_permissions(&dir, permissions)
            .map_err(|e| FsError::io("set permissions", &dir, e))?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use tonic::Code;

    use super::*;

    fn code(error: FsError) -> Code {
        tonic::Status::from(error).code()
    }

    #[test]
    fn copies_files_and_symlinks_as_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"12345").unwrap();
        assert_eq!(copy(&file, &dir.path().join("g"), false).unwrap(), 5);
        assert_eq!(fs::read(dir.path().join("g")).unwrap(), b"12345");
        let link = dir.path().join("l");
        symlink("f", &link).unwrap();
        assert_eq!(copy(&link, &dir.path().join("l2"), false).unwrap(), 0);
        assert_eq!(
            fs::read_link(dir.path().join("l2")).unwrap(),
            Path::new("f")
        );
        assert_eq!(
            code(copy(&dir.path().join("nope"), &file, false).unwrap_err()),
            Code::NotFound
        );
    }

    #[test]
    fn directories_need_recursive_and_keep_structure() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("a/b")).unwrap();
        fs::write(src.join("a/b/f"), b"xyz").unwrap();
        fs::write(src.join("top"), b"1").unwrap();
        symlink("a/b/f", src.join("link")).unwrap();
        fs::set_permissions(src.join("a"), fs::Permissions::from_mode(0o555)).unwrap();
        let dst = dir.path().join("dst");

        let error = copy(&src, &dst, false).unwrap_err();
        assert!(error.to_string().contains("set recursive"), "{error}");
        assert_eq!(code(error), Code::FailedPrecondition);
        assert_eq!(copy(&src, &dst, true).unwrap(), 4);
        assert_eq!(fs::read(dst.join("a/b/f")).unwrap(), b"xyz");
        assert_eq!(fs::read_link(dst.join("link")).unwrap(), Path::new("a/b/f"));
        let mode = fs::metadata(dst.join("a")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o555);
        assert_eq!(
            code(copy(&src, &dst, true).unwrap_err()),
            Code::AlreadyExists
        );
        let inside = copy(&src, &src.join("a/b/again"), true).unwrap_err();
        assert!(inside.to_string().contains("into itself"), "{inside}");
    }
}
