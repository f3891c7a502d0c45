//! Find-up semantics shared by the server-side `FindUp` RPC and the client's windowed search.
//!
//! Pure logic, no IO: [`FindUpSpec`] is the validated request, [`Probes`] generates the probe paths
//! lazily (nearest ancestor first, markers in configured order within each directory) and
//! [`FindUpSearch`] folds probe outcomes, consumed strictly in probe order, into a [`Decision`]. Whoever
//! performs the probes (a `stat` on the server, a `GetMetadata` call in the client) feeds the outcomes in
//! order, so every strategy returns the same root, marker and counters.
//!
//! # Semantics
//! - The walk is lexical: `cwd` is never canonicalized. Repeated separators, `.` components and a trailing
//!   `/` are removed; a `..` component is refused (`cwd: must not contain '..' components`), because
//!   popping it lexically is wrong after a symlink and resolving it on disk would not be lexical.
//! - Ancestors are `cwd`, its parent, ... up to and including `stop_at` when `stop_at` is `cwd` or one of
//!   its lexical ancestors, else up to and including `/`. A `stop_at` outside the path has no effect
//!   (like git's ceiling directories).
//! - A marker of the wrong kind for the [`MatchKind`] counts as absent. A probe error follows the
//!   [`ErrorPolicy`].
//! - Counters count only outcomes consumed in order, never speculative probes that were in flight when the
//!   search was decided: `probes` is the number of outcomes consumed, `ancestors_visited` the number of
//!   directories whose first probe was consumed, `errors_ignored` the errors skipped under
//!   [`ErrorPolicy::Ignore`].
//! - The RPC requires 1 to 16 markers. "An empty marker list means no walk (root = cwd)" is a rule for
//!   callers such as AGENTS.md discovery: they skip the search instead of sending an empty list.

use thiserror::Error;

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
    cwd: String,
    markers: Vec<String>,
    match_kind: MatchKind,
    error_policy: ErrorPolicy,
    stop_at: Option<String>,
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
    fn is_last_dir(&self, dir: &str) -> bool {
        dir == "/" || self.stop_at.as_deref().is_some_and(|stop| stop == dir)
    }
}

/// One probe: does `dir/marker` exist?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    seq: u32,
    dir_end: usize,
    marker_index: usize,
    path: String,
    last: bool,
}

impl Probe {
    /// Position of this probe in probe order, from 0.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The absolute path to stat (`dir/marker`), following symlinks.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Index of the probed marker in [`FindUpSpec::markers`].
    pub fn marker_index(&self) -> usize {
        self.marker_index
    }

    /// Whether this is the last probe of the walk.
    pub fn is_last(&self) -> bool {
        self.last
    }
}

/// Position in the probe sequence: the current ancestor (a prefix of the normalized cwd) and marker.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    seq: u32,
    /// Length of the current ancestor prefix of `cwd`; `None` before the first probe.
    dir_end: Option<usize>,
    marker_index: usize,
    done: bool,
}

impl Cursor {
    fn next(&mut self, spec: &FindUpSpec) -> Option<Probe> {
        if self.done {
            return None;
        }
        let dir_end = *self.dir_end.get_or_insert(spec.cwd.len());
        let dir = &spec.cwd[..dir_end];
        let marker = &spec.markers[self.marker_index];
        let path = if dir == "/" {
            format!("/{marker}")
        } else {
            format!("{dir}/{marker}")
        };
        let last_marker = self.marker_index + 1 == spec.markers.len();
        let last = last_marker && spec.is_last_dir(dir);
        let probe = Probe {
            seq: self.seq,
            dir_end,
            marker_index: self.marker_index,
            path,
            last,
        };
        self.seq = self.seq.saturating_add(1);
        if last {
            self.done = true;
        } else if last_marker {
            self.marker_index = 0;
            // The parent of "/a" is "/" (prefix length 1); of "/a/b" it is "/a".
            self.dir_end = Some(dir.rfind('/').map_or(1, |slash| slash.max(1)));
        } else {
            self.marker_index += 1;
        }
        Some(probe)
    }
}

/// Lazy iterator over the probes of a [`FindUpSpec`], in probe order.
#[derive(Debug, Clone)]
pub struct Probes<'a> {
    spec: &'a FindUpSpec,
    cursor: Cursor,
}

impl Iterator for Probes<'_> {
    type Item = Probe;

    fn next(&mut self) -> Option<Probe> {
        self.cursor.next(self.spec)
    }
}

/// Counters of a search; identical for the server, windowed and sequential strategies.
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
    issue: Cursor,
    next_seq: Option<u32>,
    counters: FindUpCounters,
}

impl FindUpSearch {
    /// Starts a search.
    pub fn new(spec: FindUpSpec) -> Self {
        Self {
            spec,
            issue: Cursor::default(),
            next_seq: Some(0),
            counters: FindUpCounters::default(),
        }
    }

    /// The spec being searched.
    pub fn spec(&self) -> &FindUpSpec {
        &self.spec
    }

    /// The next probe to perform, or `None` when every probe has been issued or the search is decided.
    pub fn next_probe(&mut self) -> Option<Probe> {
        self.next_seq?;
        self.issue.next(&self.spec)
    }

    /// Counters of the outcomes consumed so far.
    pub fn counters(&self) -> FindUpCounters {
        self.counters
    }

    /// Consumes the outcome of `probe`, which must be the oldest issued probe not consumed yet.
    pub fn consume<E>(&mut self, probe: &Probe, outcome: ProbeOutcome<E>) -> Decision<E> {
        if self.next_seq != Some(probe.seq) {
            return Decision::Failed(FindUpFailure::OutOfOrder {
                expected: self.next_seq,
                got: probe.seq,
            });
        }
        self.next_seq = probe.seq.checked_add(1);
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
                    self.next_seq = None;
                    return Decision::Failed(FindUpFailure::Probe {
                        path: probe.path.clone(),
                        error,
                        counters: self.counters,
                    });
                }
            },
        };
        if matched {
            self.next_seq = None;
            let hit = FindUpHit {
                root: self.spec.cwd[..probe.dir_end].to_owned(),
                marker: self.spec.markers[probe.marker_index].clone(),
            };
            return Decision::Done(self.result(Some(hit)));
        }
        if probe.last {
            self.next_seq = None;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cwd: &str, markers: &[&str]) -> pb::FindUpRequest {
        pb::FindUpRequest {
            cwd: cwd.to_owned(),
            markers: markers.iter().map(|m| (*m).to_owned()).collect(),
            ..Default::default()
        }
    }

    fn spec(cwd: &str, markers: &[&str]) -> FindUpSpec {
        FindUpSpec::try_from(request(cwd, markers)).unwrap()
    }

    fn paths(spec: &FindUpSpec) -> Vec<String> {
        spec.probes().map(|p| p.path().to_owned()).collect()
    }

    /// Runs a search sequentially against a fake filesystem: `entries` maps probe paths to outcomes.
    fn run(
        spec: FindUpSpec,
        entries: &[(&str, Result<EntryKind, &'static str>)],
    ) -> Decision<&'static str> {
        let mut search = FindUpSearch::new(spec);
        while let Some(probe) = search.next_probe() {
            let outcome = match entries.iter().find(|(path, _)| *path == probe.path()) {
                Some((_, Ok(kind))) => ProbeOutcome::Found(*kind),
                Some((_, Err(error))) => ProbeOutcome::Error(*error),
                None => ProbeOutcome::NotFound,
            };
            match search.consume(&probe, outcome) {
                Decision::Continue => {}
                decided => return decided,
            }
        }
        panic!("the last probe must decide the search");
    }

    fn hit(decision: Decision<&'static str>) -> (Option<(String, String)>, FindUpCounters) {
        match decision {
            Decision::Done(result) => (result.hit.map(|h| (h.root, h.marker)), result.counters),
            other => panic!("expected a result, got {other:?}"),
        }
    }

    fn counters(ancestors_visited: u32, probes: u32, errors_ignored: u32) -> FindUpCounters {
        FindUpCounters {
            ancestors_visited,
            probes,
            errors_ignored,
        }
    }

    #[test]
    fn probes_nearest_first_markers_in_order() {
        let spec = spec("//a/./b/", &["m1", "m2"]);
        assert_eq!(spec.cwd(), "/a/b");
        assert_eq!(
            paths(&spec),
            ["/a/b/m1", "/a/b/m2", "/a/m1", "/a/m2", "/m1", "/m2"]
        );
        let seqs: Vec<u32> = spec.probes().map(|p| p.seq()).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4, 5]);
        let last: Vec<bool> = spec.probes().map(|p| p.is_last()).collect();
        assert_eq!(last, [false, false, false, false, false, true]);
    }

    #[test]
    fn root_cwd_probes_only_root() {
        assert_eq!(paths(&spec("/", &["m"])), ["/m"]);
    }

    #[test]
    fn stop_at_is_inclusive_and_ignored_outside_the_path() {
        let mut req = request("/a/b/c", &["m"]);
        req.stop_at = Some("/a/b/".to_owned());
        assert_eq!(
            paths(&FindUpSpec::try_from(req.clone()).unwrap()),
            ["/a/b/c/m", "/a/b/m"]
        );
        req.stop_at = Some("/a/b/c".to_owned());
        assert_eq!(
            paths(&FindUpSpec::try_from(req.clone()).unwrap()),
            ["/a/b/c/m"]
        );
        // "/a/bc" is not an ancestor of "/a/b/c": no effect.
        req.stop_at = Some("/a/bc".to_owned());
        assert_eq!(paths(&FindUpSpec::try_from(req.clone()).unwrap()).len(), 4);
        req.stop_at = Some("/".to_owned());
        assert_eq!(paths(&FindUpSpec::try_from(req.clone()).unwrap()).len(), 4);
        req.stop_at = Some("a".to_owned());
        assert_eq!(
            FindUpSpec::try_from(req).unwrap_err().to_string(),
            "stop_at: must be absolute"
        );
    }

    #[test]
    fn probes_are_lazy() {
        let long = format!("/{}", ["d"; 2000].join("/"));
        let spec = spec(&long, &["m"]);
        let first = spec.probes().next().unwrap();
        assert_eq!(first.path(), format!("{long}/m"));
        assert_eq!(spec.probes().count(), 2001);
    }

    #[test]
    fn bad_requests_name_the_field() {
        let cases: &[(pb::FindUpRequest, &str)] = &[
            (request("", &["m"]), "cwd: must not be empty"),
            (request("rel", &["m"]), "cwd: must be absolute"),
            (
                request("/a/../b", &["m"]),
                "cwd: must not contain '..' components",
            ),
            (request("/a\0", &["m"]), "cwd: must not contain NUL"),
            (
                request("/a", &[]),
                "markers: must name 1 to 16 markers, got 0",
            ),
            (
                request("/a", &["m"; 17]),
                "markers: must name 1 to 16 markers, got 17",
            ),
            (
                request("/a", &["ok", "x", "a/b"]),
                "markers[2]: must not contain '/'",
            ),
            (request("/a", &[""]), "markers[0]: must not be empty"),
            (request("/a", &["."]), "markers[0]: must not be '.' or '..'"),
            (
                request("/a", &["ok", ".."]),
                "markers[1]: must not be '.' or '..'",
            ),
            (request("/a", &["a\0"]), "markers[0]: must not contain NUL"),
        ];
        for (req, message) in cases {
            assert_eq!(
                FindUpSpec::try_from(req.clone()).unwrap_err().to_string(),
                *message
            );
        }
        let long = "x".repeat(MAX_MARKER_BYTES + 1);
        assert_eq!(
            FindUpSpec::try_from(request("/a", &[&long]))
                .unwrap_err()
                .to_string(),
            "markers[0]: must be at most 256 bytes"
        );
        let big = "x".repeat(MAX_MARKER_BYTES);
        let markers: Vec<&str> = vec![&big; 9];
        assert_eq!(
            FindUpSpec::try_from(request("/a", &markers))
                .unwrap_err()
                .to_string(),
            "markers: must take at most 2048 bytes in total, got 2304"
        );
        let markers: Vec<&str> = vec![&big; 8];
        assert!(FindUpSpec::try_from(request("/a", &markers)).is_ok());
        let mut req = request("/a", &["m"]);
        req.match_kind = 7;
        assert_eq!(
            FindUpSpec::try_from(req).unwrap_err().to_string(),
            "match_kind: unknown value 7"
        );
        let mut req = request("/a", &["m"]);
        req.error_policy = -1;
        assert_eq!(
            FindUpSpec::try_from(req).unwrap_err().to_string(),
            "error_policy: unknown value -1"
        );
    }

    #[test]
    fn nearest_root_wins_then_marker_order() {
        let entries = [
            ("/a/m2", Ok(EntryKind::File)),
            ("/a/m1", Ok(EntryKind::File)),
            ("/m1", Ok(EntryKind::File)),
        ];
        let (found, c) = hit(run(spec("/a/b", &["m1", "m2"]), &entries));
        assert_eq!(found, Some(("/a".to_owned(), "m1".to_owned())));
        assert_eq!(c, counters(2, 3, 0));
    }

    #[test]
    fn nothing_found_reports_all_probes() {
        let (found, c) = hit(run(spec("/a/b", &["m1", "m2"]), &[]));
        assert_eq!(found, None);
        assert_eq!(c, counters(3, 6, 0));
    }

    #[test]
    fn match_kind_treats_wrong_kind_as_absent() {
        let entries = [
            ("/a/b/m", Ok(EntryKind::Directory)),
            ("/a/m", Ok(EntryKind::File)),
            ("/m", Ok(EntryKind::Other)),
        ];
        let with = |kind: pb::MatchKind| {
            let mut req = request("/a/b", &["m"]);
            req.match_kind = kind.into();
            hit(run(FindUpSpec::try_from(req).unwrap(), &entries))
                .0
                .map(|(root, _)| root)
        };
        assert_eq!(with(pb::MatchKind::Any).as_deref(), Some("/a/b"));
        assert_eq!(with(pb::MatchKind::File).as_deref(), Some("/a"));
        assert_eq!(with(pb::MatchKind::Directory).as_deref(), Some("/a/b"));
        let only_other = [("/a/b/m", Ok(EntryKind::Other))];
        let mut req = request("/a/b", &["m"]);
        req.match_kind = pb::MatchKind::File.into();
        assert_eq!(
            hit(run(FindUpSpec::try_from(req).unwrap(), &only_other)).0,
            None
        );
    }

    #[test]
    fn errors_follow_the_policy() {
        let entries = [("/a/b/m", Err("EACCES")), ("/a/m", Ok(EntryKind::File))];
        match run(spec("/a/b", &["m"]), &entries) {
            Decision::Failed(FindUpFailure::Probe {
                path,
                error,
                counters: c,
            }) => {
                assert_eq!(path, "/a/b/m");
                assert_eq!(error, "EACCES");
                assert_eq!(c, counters(1, 1, 0));
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        let mut req = request("/a/b", &["m"]);
        req.error_policy = pb::ErrorPolicy::Ignore.into();
        let (found, c) = hit(run(FindUpSpec::try_from(req).unwrap(), &entries));
        assert_eq!(found, Some(("/a".to_owned(), "m".to_owned())));
        assert_eq!(c, counters(2, 2, 1));
    }

    #[test]
    fn error_after_the_hit_is_never_consumed() {
        let entries = [("/a/b/m", Ok(EntryKind::File)), ("/a/m", Err("EIO"))];
        let (found, c) = hit(run(spec("/a/b", &["m"]), &entries));
        assert_eq!(found.unwrap().0, "/a/b");
        assert_eq!(c, counters(1, 1, 0));
    }

    #[test]
    fn speculative_probes_do_not_count_and_order_is_enforced() {
        let mut search = FindUpSearch::new(spec("/a/b/c", &["m"]));
        let window: Vec<Probe> = std::iter::from_fn(|| search.next_probe()).take(3).collect();
        assert_eq!(window.len(), 3);
        match search.consume::<()>(&window[1], ProbeOutcome::NotFound) {
            Decision::Failed(FindUpFailure::OutOfOrder {
                expected: Some(0),
                got: 1,
            }) => {}
            other => panic!("expected out of order, got {other:?}"),
        }
        assert!(matches!(
            search.consume::<()>(&window[0], ProbeOutcome::NotFound),
            Decision::Continue
        ));
        let decided = search.consume::<()>(&window[1], ProbeOutcome::Found(EntryKind::File));
        match decided {
            Decision::Done(result) => {
                assert_eq!(result.hit.unwrap().root, "/a/b");
                assert_eq!(result.counters, counters(2, 2, 0));
            }
            other => panic!("expected a hit, got {other:?}"),
        }
        assert!(search.next_probe().is_none());
        assert!(matches!(
            search.consume::<()>(&window[2], ProbeOutcome::NotFound),
            Decision::Failed(FindUpFailure::OutOfOrder {
                expected: None,
                got: 2
            })
        ));
    }

    #[test]
    fn metadata_answers_classify_like_stat() {
        let file = pb::Metadata {
            kind: pb::FileKind::File.into(),
            ..Default::default()
        };
        assert!(matches!(
            ProbeOutcome::from_metadata(Ok(file)),
            ProbeOutcome::Found(EntryKind::File)
        ));
        let missing = ProbeOutcome::from_metadata(Err(tonic::Status::not_found("gone")));
        assert!(matches!(missing, ProbeOutcome::NotFound));
        let denied = ProbeOutcome::from_metadata(Err(tonic::Status::permission_denied("no")));
        assert!(
            matches!(denied, ProbeOutcome::Error(s) if s.code() == tonic::Code::PermissionDenied)
        );
    }

    #[test]
    fn result_converts_to_the_response() {
        let result = FindUpResult {
            hit: Some(FindUpHit {
                root: "/a".to_owned(),
                marker: "m".to_owned(),
            }),
            counters: counters(1, 2, 3),
        };
        let response = pb::FindUpResponse::from(result);
        assert_eq!(response.root.as_deref(), Some("/a"));
        assert_eq!(response.marker.as_deref(), Some("m"));
        assert_eq!(
            FindUpCounters::from(response.counters.unwrap()),
            counters(1, 2, 3)
        );
    }
}
