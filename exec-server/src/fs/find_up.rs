//! Server-side FindUp: the shared walk of [`outpost_proto::find_up`], probed sequentially with `stat`
//! (following symlinks, like `GetMetadata` with `follow_symlinks`), so the result and counters match the
//! client's windowed and sequential searches.

use std::fs;
use std::io;

use outpost_proto::find_up::{
    Decision, EntryKind, FindUpFailure, FindUpResult, FindUpSearch, FindUpSpec, ProbeOutcome,
};

use super::error::FsError;

fn probe(path: &str) -> ProbeOutcome<io::Error> {
    match fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => ProbeOutcome::Found(EntryKind::File),
        Ok(metadata) if metadata.is_dir() => ProbeOutcome::Found(EntryKind::Directory),
        Ok(_) => ProbeOutcome::Found(EntryKind::Other),
        Err(error) if error.kind() == io::ErrorKind::NotFound => ProbeOutcome::NotFound,
        Err(error) => ProbeOutcome::Error(error),
    }
}

/// Walks up from the spec's cwd and returns the nearest match (or none) with the counters.
pub(crate) fn find_up(spec: FindUpSpec) -> Result<FindUpResult, FsError> {
    let mut search = FindUpSearch::new(spec);
    while let Some(next) = search.next_probe() {
        match search.consume(&next, probe(next.path())) {
            Decision::Continue => {}
            Decision::Done(result) => return Ok(result),
            Decision::Failed(FindUpFailure::Probe { path, error, .. }) => {
                return Err(FsError::io("find-up probe", path, error));
            }
            Decision::Failed(failure) => {
                // Sequential use consumes every probe right after issuing it, so this cannot happen.
                let error = io::Error::other(failure.to_string());
                return Err(FsError::io("find-up probe", next.path(), error));
            }
        }
    }
    // Unreachable as well: the last probe always decides. Report what was consumed, not a guess.
    Ok(FindUpResult {
        hit: None,
        counters: search.counters(),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use outpost_proto::find_up::FindUpCounters;
    use outpost_proto::pb;
    use tonic::Code;

    use super::*;

    fn request(cwd: &Path, markers: &[&str]) -> pb::FindUpRequest {
        pb::FindUpRequest {
            cwd: cwd.to_str().unwrap().to_owned(),
            markers: markers.iter().map(|m| (*m).to_owned()).collect(),
            ..Default::default()
        }
    }

    fn run(request: pb::FindUpRequest) -> Result<FindUpResult, FsError> {
        find_up(FindUpSpec::try_from(request).unwrap())
    }

    fn root(result: &FindUpResult) -> Option<(&str, &str)> {
        result
            .hit
            .as_ref()
            .map(|h| (h.root.as_str(), h.marker.as_str()))
    }

    #[test]
    fn nearest_root_and_marker_order() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        fs::create_dir_all(base.join("a/b/c")).unwrap();
        fs::write(base.join("a/Cargo.toml"), b"").unwrap();
        fs::create_dir(base.join("a/.git")).unwrap();
        let result = run(request(&base.join("a/b/c"), &[".git", "Cargo.toml"])).unwrap();
        let expected = base.join("a");
        assert_eq!(root(&result), Some((expected.to_str().unwrap(), ".git")));
        assert_eq!(
            result.counters,
            FindUpCounters {
                ancestors_visited: 3,
                probes: 5,
                errors_ignored: 0
            }
        );
    }

    #[test]
    fn match_kind_and_stop_at() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        fs::create_dir_all(base.join("a/b/marker")).unwrap();
        fs::write(base.join("a/marker"), b"").unwrap();
        let mut req = request(&base.join("a/b"), &["marker"]);
        req.match_kind = pb::MatchKind::File.into();
        let result = run(req.clone()).unwrap();
        assert_eq!(root(&result).unwrap().0, base.join("a").to_str().unwrap());
        req.match_kind = pb::MatchKind::Directory.into();
        assert_eq!(
            root(&run(req.clone()).unwrap()).unwrap().0,
            base.join("a/b").to_str().unwrap()
        );
        req.match_kind = pb::MatchKind::File.into();
        req.stop_at = Some(base.join("a/b").to_str().unwrap().to_owned());
        let result = run(req).unwrap();
        assert_eq!(root(&result), None);
        assert_eq!(result.counters.probes, 1);
    }

    #[test]
    fn symlinked_cwd_is_walked_as_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        // real/deep/er holds no marker; its real parent has one, the link's parent does not.
        fs::create_dir_all(base.join("real/deep/er")).unwrap();
        fs::write(base.join("real/deep/MARK"), b"").unwrap();
        fs::create_dir(base.join("elsewhere")).unwrap();
        fs::write(base.join("elsewhere/OTHER"), b"").unwrap();
        symlink(base.join("real/deep/er"), base.join("elsewhere/link")).unwrap();
        let via_link = base.join("elsewhere/link");
        let result = run(request(&via_link, &["MARK", "OTHER"])).unwrap();
        assert_eq!(
            root(&result),
            Some((base.join("elsewhere").to_str().unwrap(), "OTHER"))
        );
        let result = run(request(&base.join("real/deep/er"), &["MARK", "OTHER"])).unwrap();
        assert_eq!(
            root(&result).unwrap().0,
            base.join("real/deep").to_str().unwrap()
        );
        // A marker that is a symlink to a directory is probed through the link.
        symlink(base.join("real"), base.join("elsewhere/link/LINKED")).unwrap();
        let mut req = request(&via_link, &["LINKED"]);
        req.match_kind = pb::MatchKind::Directory.into();
        assert_eq!(
            root(&run(req).unwrap()).unwrap().0,
            via_link.to_str().unwrap()
        );
    }

    #[test]
    fn errors_in_earlier_probes_follow_the_policy() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        // `file` is a regular file, so probes under file/sub fail with ENOTDIR (root is not stopped by
        // permissions), while base itself holds the marker.
        fs::write(base.join("file"), b"").unwrap();
        fs::write(base.join("MARK"), b"").unwrap();
        let cwd = base.join("file/sub");
        let error = run(request(&cwd, &["MARK"])).unwrap_err();
        assert!(error.to_string().contains("file/sub/MARK"), "{error}");
        assert_eq!(tonic::Status::from(error).code(), Code::FailedPrecondition);
        let mut req = request(&cwd, &["MARK"]);
        req.error_policy = pb::ErrorPolicy::Ignore.into();
        let result = run(req).unwrap();
        assert_eq!(root(&result).unwrap().0, base.to_str().unwrap());
        assert_eq!(
            result.counters,
            FindUpCounters {
                ancestors_visited: 3,
                probes: 3,
                errors_ignored: 2
            }
        );
    }

    #[test]
    fn name_too_long_marker_errors_under_propagate_only() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("MARK"), b"").unwrap();
        // 256 bytes is a valid marker but longer than NAME_MAX: every probe of it fails.
        let long = "x".repeat(256);
        let error = run(request(dir.path(), &[&long, "MARK"])).unwrap_err();
        assert_eq!(tonic::Status::from(error).code(), Code::InvalidArgument);
        let mut req = request(dir.path(), &[&long, "MARK"]);
        req.error_policy = pb::ErrorPolicy::Ignore.into();
        let result = run(req).unwrap();
        assert_eq!(root(&result).unwrap().1, "MARK");
        assert_eq!(result.counters.errors_ignored, 1);
    }

    #[test]
    fn dangling_symlink_marker_is_absent_and_root_is_reachable() {
        let dir = tempfile::tempdir().unwrap();
        symlink("/nonexistent/target", dir.path().join("MARK")).unwrap();
        let mut req = request(dir.path(), &["MARK"]);
        req.stop_at = Some(dir.path().to_str().unwrap().to_owned());
        let result = run(req).unwrap();
        assert_eq!(root(&result), None);
        let result = run(request(Path::new("/"), &["etc"])).unwrap();
        assert_eq!(root(&result), Some(("/", "etc")));
    }
}
