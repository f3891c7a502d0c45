//! Errors of the filesystem service and their one mapping to gRPC status codes.
//!
//! Each variant names the step that failed and carries the path and the `io::Error`. The full chain is
//! logged on the server; the client gets the code and a short message (`open /x: No such file or
//! directory (os error 2)`).

use std::io;
use std::path::PathBuf;

use outpost_proto::find_up::FindUpSpecError;
use outpost_proto::path::PathProblem;
use thiserror::Error;
use tonic::{Code, Status};

use outpost_proto::error_chain;

/// A failed filesystem operation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FsError {
    /// A request field is invalid.
    #[error("{field}: {problem}")]
    InvalidPath {
        /// The request field, e.g. `path` or `header.path`.
        field: &'static str,
        /// What is wrong with it.
        #[source]
        problem: PathProblem,
    },
    /// A request field other than a path is invalid.
    #[error("{field}: {reason}")]
    InvalidArgument {
        /// The request field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The find-up request is invalid.
    #[error(transparent)]
    InvalidFindUp(#[from] FindUpSpecError),
    /// The call named a permission profile, which cannot be enforced for filesystem calls yet.
    #[error(
        "profile: profile enforcement for filesystem calls is not available yet (requested {profile:?})"
    )]
    ProfileUnsupported {
        /// The requested profile.
        profile: String,
    },
    /// The named profile is forbidden by managed requirements (`denied`) or cannot be enforced here.
    #[error("profile {profile:?}: {reason}")]
    Profile {
        /// The requested profile.
        profile: String,
        /// Why.
        reason: String,
        /// Forbidden by policy (PERMISSION_DENIED) rather than unavailable (FAILED_PRECONDITION).
        denied: bool,
    },
    /// A profile's worker thread is gone.
    #[error("the filesystem worker for this profile stopped")]
    WorkerGone,
    /// The operation refuses this target whatever the filesystem says.
    #[error("{path}: {reason}")]
    Refused {
        /// The target.
        path: PathBuf,
        /// Why, and what to do instead.
        reason: &'static str,
    },
    /// A filesystem call failed.
    #[error("{step} {}", path.display())]
    Io {
        /// The step that failed, e.g. `open` or `read directory`.
        step: &'static str,
        /// The path it failed on.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The blocking worker running the operation failed (panicked or was cancelled).
    #[error("filesystem worker failed")]
    Worker(#[source] tokio::task::JoinError),
}

impl FsError {
    /// An [`FsError::Io`] for `step` on `path`.
    pub(crate) fn io(step: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            step,
            path: path.into(),
            source,
        }
    }
}

/// The gRPC code for an IO failure.
fn io_code(error: &io::Error) -> Code {
    match error.raw_os_error() {
        Some(libc::ENOENT) => return Code::NotFound,
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => return Code::PermissionDenied,
        Some(libc::EEXIST) => return Code::AlreadyExists,
        Some(libc::ENAMETOOLONG | libc::EINVAL) => return Code::InvalidArgument,
        Some(
            libc::ENOTDIR
            | libc::EISDIR
            | libc::ENOTEMPTY
            | libc::ELOOP
            | libc::EXDEV
            | libc::EBUSY,
        ) => {
            return Code::FailedPrecondition;
        }
        Some(libc::ENOSPC | libc::EDQUOT | libc::EMFILE | libc::ENFILE | libc::EFBIG) => {
            return Code::ResourceExhausted;
        }
        _ => {}
    }
    match error.kind() {
        io::ErrorKind::NotFound => Code::NotFound,
        io::ErrorKind::PermissionDenied => Code::PermissionDenied,
        io::ErrorKind::AlreadyExists => Code::AlreadyExists,
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => Code::InvalidArgument,
        _ => Code::Internal,
    }
}

impl From<FsError> for Status {
    fn from(error: FsError) -> Self {
        let (code, message) = match &error {
            FsError::InvalidPath { .. }
            | FsError::InvalidArgument { .. }
            | FsError::InvalidFindUp(_) => (Code::InvalidArgument, error.to_string()),
            FsError::ProfileUnsupported { .. } | FsError::Refused { .. } => {
                (Code::FailedPrecondition, error.to_string())
            }
            FsError::Io { source, .. } => (io_code(source), error_chain(&error)),
            FsError::Profile { denied: true, .. } => (Code::PermissionDenied, error.to_string()),
            FsError::Profile { denied: false, .. } => (Code::FailedPrecondition, error.to_string()),
            FsError::WorkerGone => (Code::Internal, error.to_string()),
            FsError::Worker(_) => (
                Code::Internal,
                "internal error in the filesystem worker".to_owned(),
            ),
        };
        if code == Code::Internal {
            tracing::error!(error = %error_chain(&error), "filesystem call failed");
        } else {
            tracing::debug!(error = %error_chain(&error), ?code, "filesystem call rejected");
        }
        Status::new(code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(error: FsError) -> Status {
        Status::from(error)
    }

    #[test]
    fn io_errors_map_to_codes() {
        let cases = [
            (libc::ENOENT, Code::NotFound),
            (libc::EACCES, Code::PermissionDenied),
            (libc::EEXIST, Code::AlreadyExists),
            (libc::ENOTDIR, Code::FailedPrecondition),
            (libc::EISDIR, Code::FailedPrecondition),
            (libc::ENOTEMPTY, Code::FailedPrecondition),
            (libc::ENAMETOOLONG, Code::InvalidArgument),
            (libc::EIO, Code::Internal),
        ];
        for (errno, code) in cases {
            let error = FsError::io("open", "/x", io::Error::from_raw_os_error(errno));
            assert_eq!(status(error).code(), code, "errno {errno}");
        }
    }

    #[test]
    fn messages_name_step_path_and_cause() {
        let error = FsError::io("open", "/x/y", io::Error::from_raw_os_error(libc::ENOENT));
        let answer = status(error);
        assert!(
            answer.message().starts_with("open /x/y: "),
            "{}",
            answer.message()
        );
        let error = FsError::InvalidPath {
            field: "path",
            problem: PathProblem::NotAbsolute,
        };
        let answer = status(error);
        assert_eq!(answer.code(), Code::InvalidArgument);
        assert_eq!(answer.message(), "path: must be absolute");
        let error = FsError::ProfileUnsupported {
            profile: ":workspace".to_owned(),
        };
        assert_eq!(status(error).code(), Code::FailedPrecondition);
    }
}
