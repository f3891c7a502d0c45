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

mod probes;
mod search;
mod spec;

pub use probes::{Probe, Probes};
pub use search::{
    Decision, EntryKind, FindUpCounters, FindUpFailure, FindUpHit, FindUpResult, FindUpSearch,
    ProbeOutcome,
};
pub use spec::{
    ErrorPolicy, FindUpSpec, FindUpSpecError, MAX_MARKER_BYTES, MAX_MARKERS,
    MAX_MARKERS_TOTAL_BYTES, MarkerProblem, MatchKind,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

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
    fn a_probe_of_another_search_is_refused_not_trusted() {
        let other = spec("/a/much/longer/path", &["m1", "m2", "m3"]);
        let foreign: Vec<Probe> = other.probes().collect();
        let mut search = FindUpSearch::new(spec("/b", &["m"]));
        for probe in &foreign {
            let decision = search.consume::<()>(probe, ProbeOutcome::Found(EntryKind::File));
            assert!(matches!(
                decision,
                Decision::Failed(FindUpFailure::OutOfOrder {
                    expected: Some(0),
                    ..
                })
            ));
        }
        assert_eq!(search.counters(), FindUpCounters::default());
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
