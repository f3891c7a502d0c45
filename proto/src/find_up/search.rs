//! The in-order fold over probe outcomes: match kind, error policy, counters and the decision.

use thiserror::Error;

use super::probes::{Cursor, Probe};
use super::spec::{ErrorPolicy, FindUpSpec, MatchKind};
use crate::pb;

/// The kind of an existing probe target, with symlinks followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// Anything else (fifo, socket, device, or an unspecified kind).
    Other,
}

impl From<pb::FileKind> for EntryKind {
    fn from(kind: pb::FileKind) -> Self {
        match kind {
            pb::FileKind::File => Self::File,
            pb::FileKind::Directory => Self::Directory,
            pb::FileKind::Unspecified | pb::FileKind::Symlink | pb::FileKind::Other => Self::Other,
        }
    }
}

/// The result of one probe, as seen by whoever performed it.
#[derive(Debug)]
pub enum ProbeOutcome<E> {
    /// The probe path exists and has this kind.
    Found(EntryKind),
    /// The probe path does not exist (ENOENT, or `NOT_FOUND` from `GetMetadata`).
    NotFound,
    /// The probe failed for another reason.
    Error(E),
}

impl ProbeOutcome<tonic::Status> {
    /// Classifies the answer to a `GetMetadata` probe (sent with `follow_symlinks: true`) exactly as
    /// the server classifies its own `stat`: `NOT_FOUND` is absent, any other status is an error.
    pub fn from_metadata(answer: Result<pb::Metadata, tonic::Status>) -> Self {
        match answer {
            Ok(metadata) => Self::Found(metadata.kind().into()),
            Err(status) if status.code() == tonic::Code::NotFound => Self::NotFound,
            Err(status) => Self::Error(status),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FindUpCounters {
    /// Directories whose first probe was consumed.
    pub ancestors_visited: u32,
    /// Probe outcomes consumed, including the deciding one.
    pub probes: u32,
    /// Errors treated as absent under [`ErrorPolicy::Ignore`].
    pub errors_ignored: u32,
}

/// Where the marker was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindUpHit {
    /// The directory that holds the marker.
    pub root: String,
    /// The marker that matched.
    pub marker: String,
}

/// The result of a finished search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindUpResult {
    /// The nearest match, or `None` when no ancestor holds a marker.
    pub hit: Option<FindUpHit>,
    /// What the search consumed.
    pub counters: FindUpCounters,
}

/// Why a search failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FindUpFailure<E> {
    /// A probe failed under [`ErrorPolicy::Propagate`].
    #[error("probe {path} failed")]
    Probe {
        /// The probed path.
        path: String,
        /// What the prober reported.
        #[source]
        error: E,
        /// Counters up to and including the failed probe.
        counters: FindUpCounters,
    },
    /// The caller consumed an outcome out of probe order, or after the search was decided.
    #[error("find-up outcome consumed out of order: expected probe {expected:?}, got probe {got}")]
    OutOfOrder {
        /// The probe expected next; `None` once the search is decided.
        expected: Option<u32>,
        /// The probe the outcome was given for.
        got: u32,
    },
}

/// What the search does after consuming one outcome.
#[derive(Debug)]
pub enum Decision<E> {
    /// Not decided yet: consume the next probe's outcome.
    Continue,
    /// Decided: a hit, or no marker anywhere after the last probe.
    Done(FindUpResult),
    /// The search failed.
    Failed(FindUpFailure<E>),
}

/// The in-order fold over probe outcomes.
///
/// Issue probes with [`FindUpSearch::next_probe`] (as far ahead as you like) and hand each outcome back
/// to [`FindUpSearch::consume`] in the same order; stop at the first [`Decision`] that is not
/// [`Decision::Continue`].
#[derive(Debug, Clone)]
pub struct FindUpSearch {
    spec: FindUpSpec,
    /// Generates the probes handed out by `next_probe`.
    issue: Cursor,
    /// Regenerates the same sequence to check, and trust only, what `consume` is given.
    consumed: Cursor,
    decided: bool,
    counters: FindUpCounters,
}

impl FindUpSearch {
    /// Starts a search.
    pub fn new(spec: FindUpSpec) -> Self {
        Self {
            spec,
            issue: Cursor::default(),
            consumed: Cursor::default(),
            decided: false,
            counters: FindUpCounters::default(),
        }
    }

    /// The spec being searched.
    pub fn spec(&self) -> &FindUpSpec {
        &self.spec
    }

    /// The next probe to perform, or `None` when every probe has been issued or the search is decided.
    pub fn next_probe(&mut self) -> Option<Probe> {
        if self.decided {
            return None;
        }
        self.issue.next(&self.spec)
    }

    /// Counters of the outcomes consumed so far.
    pub fn counters(&self) -> FindUpCounters {
        self.counters
    }

    /// Consumes the outcome of `probe`, which must be the oldest issued probe not consumed yet;
    /// anything else (including a probe of another search) is [`FindUpFailure::OutOfOrder`].
    pub fn consume<E>(&mut self, probe: &Probe, outcome: ProbeOutcome<E>) -> Decision<E> {
        let mut cursor = self.consumed;
        let expected = if self.decided {
            None
        } else {
            cursor.next(&self.spec)
        };
        if expected.as_ref() != Some(probe) {
            return Decision::Failed(FindUpFailure::OutOfOrder {
                expected: expected.map(|p| p.seq),
                got: probe.seq,
            });
        }
        self.consumed = cursor;
        if probe.marker_index == 0 {
            self.counters.ancestors_visited += 1;
        }
        self.counters.probes += 1;
        let matched = match outcome {
            ProbeOutcome::Found(kind) => self.kind_matches(kind),
            ProbeOutcome::NotFound => false,
            ProbeOutcome::Error(error) => match self.spec.error_policy {
                ErrorPolicy::Ignore => {
                    self.counters.errors_ignored += 1;
                    false
                }
                ErrorPolicy::Propagate => {
                    self.decided = true;
                    return Decision::Failed(FindUpFailure::Probe {
                        path: probe.path.clone(),
                        error,
                        counters: self.counters,
                    });
                }
            },
        };
        if matched {
            self.decided = true;
            // `probe` equals the regenerated one, so its indices are in range.
            let hit = FindUpHit {
                root: self.spec.cwd[..probe.dir_end].to_owned(),
                marker: self.spec.markers[probe.marker_index].clone(),
            };
            return Decision::Done(self.result(Some(hit)));
        }
        if probe.last {
            self.decided = true;
            return Decision::Done(self.result(None));
        }
        Decision::Continue
    }

    fn kind_matches(&self, kind: EntryKind) -> bool {
        match self.spec.match_kind {
            MatchKind::Any => true,
            MatchKind::File => kind == EntryKind::File,
            MatchKind::Directory => kind == EntryKind::Directory,
        }
    }

    fn result(&self, hit: Option<FindUpHit>) -> FindUpResult {
        FindUpResult {
            hit,
            counters: self.counters,
        }
    }
}

impl From<FindUpCounters> for pb::FindUpCounters {
    fn from(counters: FindUpCounters) -> Self {
        Self {
            ancestors_visited: counters.ancestors_visited,
            probes: counters.probes,
            errors_ignored: counters.errors_ignored,
        }
    }
}

impl From<pb::FindUpCounters> for FindUpCounters {
    fn from(counters: pb::FindUpCounters) -> Self {
        Self {
            ancestors_visited: counters.ancestors_visited,
            probes: counters.probes,
            errors_ignored: counters.errors_ignored,
        }
    }
}

impl From<FindUpResult> for pb::FindUpResponse {
    fn from(result: FindUpResult) -> Self {
        let (root, marker) = match result.hit {
            Some(hit) => (Some(hit.root), Some(hit.marker)),
            None => (None, None),
        };
        Self {
            root,
            marker,
            counters: Some(result.counters.into()),
        }
    }
}
