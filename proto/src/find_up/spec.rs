//! The validated find-up request: limits, match kind, error policy and field-naming errors.

use thiserror::Error;

use super::probes::{Cursor, Probes};
use crate::path::{PathProblem, normalize_lexically};
use crate::pb;

/// The most markers one search may name.
pub const MAX_MARKERS: usize = 16;
/// The longest marker name, in bytes.
pub const MAX_MARKER_BYTES: usize = 256;
/// The most bytes all marker names may take together.
pub const MAX_MARKERS_TOTAL_BYTES: usize = 2048;

/// Which kind of entry counts as a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// Anything that exists (after following symlinks).
    Any,
    /// Only a regular file.
    File,
    /// Only a directory.
    Directory,
}

/// What a probe error (anything but "not found") does to the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// The first error in probe order fails the search.
    Propagate,
    /// Errors count as absent markers and are counted in `errors_ignored`.
    Ignore,
}

/// Why a find-up request was rejected. Messages name the request field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FindUpSpecError {
    /// `cwd` is not a valid absolute path.
    #[error("cwd: {0}")]
    Cwd(#[source] PathProblem),
    /// `stop_at` is not a valid absolute path.
    #[error("stop_at: {0}")]
    StopAt(#[source] PathProblem),
    /// Fewer than one or more than [`MAX_MARKERS`] markers.
    #[error("markers: must name 1 to {MAX_MARKERS} markers, got {0}")]
    MarkerCount(usize),
    /// One marker is malformed.
    #[error("markers[{index}]: {problem}")]
    Marker {
        /// Position of the marker in the request.
        index: usize,
        /// What is wrong with it.
        problem: MarkerProblem,
    },
    /// The markers together are longer than [`MAX_MARKERS_TOTAL_BYTES`].
    #[error("markers: must take at most {MAX_MARKERS_TOTAL_BYTES} bytes in total, got {0}")]
    MarkersTooLong(usize),
    /// `match_kind` is not a known enum value.
    #[error("match_kind: unknown value {0}")]
    MatchKind(i32),
    /// `error_policy` is not a known enum value.
    #[error("error_policy: unknown value {0}")]
    ErrorPolicy(i32),
}

/// What is wrong with one marker name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MarkerProblem {
    /// The name is empty.
    #[error("must not be empty")]
    Empty,
    /// The name is longer than [`MAX_MARKER_BYTES`].
    #[error("must be at most {MAX_MARKER_BYTES} bytes")]
    TooLong,
    /// The name contains `/`.
    #[error("must not contain '/'")]
    Slash,
    /// The name contains NUL.
    #[error("must not contain NUL")]
    Nul,
    /// The name is `.` or `..`.
    #[error("must not be '.' or '..'")]
    Dots,
}

/// A validated find-up request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindUpSpec {
    pub(super) cwd: String,
    pub(super) markers: Vec<String>,
    pub(super) match_kind: MatchKind,
    pub(super) error_policy: ErrorPolicy,
    pub(super) stop_at: Option<String>,
}

impl TryFrom<pb::FindUpRequest> for FindUpSpec {
    type Error = FindUpSpecError;

    /// Validates the request. The `profile` field is not part of the spec; the server handles it.
    fn try_from(request: pb::FindUpRequest) -> Result<Self, Self::Error> {
        let cwd = normalize_lexically(&request.cwd).map_err(FindUpSpecError::Cwd)?;
        let stop_at = match &request.stop_at {
            Some(stop) => Some(normalize_lexically(stop).map_err(FindUpSpecError::StopAt)?),
            None => None,
        };
        check_markers(&request.markers)?;
        let match_kind = match pb::MatchKind::try_from(request.match_kind) {
            Ok(pb::MatchKind::Any) => MatchKind::Any,
            Ok(pb::MatchKind::File) => MatchKind::File,
            Ok(pb::MatchKind::Directory) => MatchKind::Directory,
            Err(_) => return Err(FindUpSpecError::MatchKind(request.match_kind)),
        };
        let error_policy = match pb::ErrorPolicy::try_from(request.error_policy) {
            Ok(pb::ErrorPolicy::Propagate) => ErrorPolicy::Propagate,
            Ok(pb::ErrorPolicy::Ignore) => ErrorPolicy::Ignore,
            Err(_) => return Err(FindUpSpecError::ErrorPolicy(request.error_policy)),
        };
        Ok(Self {
            cwd,
            markers: request.markers,
            match_kind,
            error_policy,
            stop_at,
        })
    }
}

fn check_markers(markers: &[String]) -> Result<(), FindUpSpecError> {
    if markers.is_empty() || markers.len() > MAX_MARKERS {
        return Err(FindUpSpecError::MarkerCount(markers.len()));
    }
    for (index, marker) in markers.iter().enumerate() {
        let problem = if marker.is_empty() {
            Some(MarkerProblem::Empty)
        } else if marker.len() > MAX_MARKER_BYTES {
            Some(MarkerProblem::TooLong)
        } else if marker.contains('/') {
            Some(MarkerProblem::Slash)
        } else if marker.contains('\0') {
            Some(MarkerProblem::Nul)
        } else if marker == "." || marker == ".." {
            Some(MarkerProblem::Dots)
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(FindUpSpecError::Marker { index, problem });
        }
    }
    let total: usize = markers.iter().map(String::len).sum();
    if total > MAX_MARKERS_TOTAL_BYTES {
        return Err(FindUpSpecError::MarkersTooLong(total));
    }
    Ok(())
}

impl FindUpSpec {
    /// The start directory in lexical normal form.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// The marker names in probe order.
    pub fn markers(&self) -> &[String] {
        &self.markers
    }

    /// Which entry kinds count as a marker.
    pub fn match_kind(&self) -> MatchKind {
        self.match_kind
    }

    /// What a probe error does.
    pub fn error_policy(&self) -> ErrorPolicy {
        self.error_policy
    }

    /// The last directory the walk visits, in lexical normal form, if one was requested.
    pub fn stop_at(&self) -> Option<&str> {
        self.stop_at.as_deref()
    }

    /// The probes of this search in order, generated lazily.
    pub fn probes(&self) -> Probes<'_> {
        Probes {
            spec: self,
            cursor: Cursor::default(),
        }
    }

    /// Whether `dir` (an ancestor of `cwd`) is the last directory of the walk.
    pub(super) fn is_last_dir(&self, dir: &str) -> bool {
        dir == "/" || self.stop_at.as_deref().is_some_and(|stop| stop == dir)
    }
}
