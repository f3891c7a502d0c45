//! AGENTS.md discovery on top of find-up: once the project root is known (the nearest ancestor of cwd
//! with a root marker, else cwd itself), candidates run from the root down to cwd, with
//! `AGENTS.override.md` before `AGENTS.md` in each directory; the first existing regular file wins and
//! is read up to a size bound. All candidates are probed concurrently (one round trip) and judged in
//! order.

use futures_util::future::join_all;
use outpost_proto::pb;

use crate::error::ClientError;
use crate::executor::Executor;

/// File names checked in each directory, in priority order.
pub const CANDIDATE_NAMES: [&str; 2] = ["AGENTS.override.md", "AGENTS.md"];
/// Default bound on how much of the file is read.
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024;

/// The discovered instructions file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentsDoc {
    /// The project root the search used.
    pub root: String,
    /// Absolute path of the file that won.
    pub path: String,
    /// Its contents, at most the requested bound.
    pub contents: Vec<u8>,
    /// Whether the file is larger than what was read.
    pub truncated: bool,
}

/// Candidate paths from `root` down to `cwd` (both lexical; `root` must be `cwd` or an ancestor).
pub fn candidates(root: &str, cwd: &str) -> Vec<String> {
    let root = root.trim_end_matches('/');
    let cwd = cwd.trim_end_matches('/');
    let rest = cwd.strip_prefix(root).unwrap_or("");
    let mut dirs = vec![root.to_owned()];
    let mut current = root.to_owned();
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        current = format!("{current}/{part}");
        dirs.push(current.clone());
    }
    dirs.iter()
        .flat_map(|dir| {
            CANDIDATE_NAMES
                .iter()
                .map(move |name| format!("{dir}/{name}"))
        })
        .collect()
}

/// Finds the project root for `cwd` with `root_markers` (empty: root = cwd) and returns the winning
/// AGENTS file, or `None` when no candidate exists.
///
/// # Errors
/// An invalid cwd or markers, errors other than "not found" while probing, and transport failures.
pub async fn discover(
    executor: &Executor,
    cwd: &str,
    root_markers: &[String],
    max_bytes: u64,
) -> Result<Option<AgentsDoc>, ClientError> {
    let root = if root_markers.is_empty() {
        cwd.to_owned()
    } else {
        let request = pb::FindUpRequest {
            cwd: cwd.to_owned(),
            markers: root_markers.to_vec(),
            ..Default::default()
        };
        let found =
            crate::find_up::find_up(executor, request, crate::find_up::DEFAULT_WINDOW).await?;
        found.root.unwrap_or_else(|| cwd.to_owned())
    };
    let paths = candidates(&root, cwd);
    let probes = join_all(paths.iter().map(|p| executor.metadata(p, true))).await;
    for (path, probe) in paths.iter().zip(probes) {
        match probe {
            Ok(meta) if meta.kind() == pb::FileKind::File => {
                let mut contents = Vec::new();
                executor
                    .read_file_with(path, 0, Some(max_bytes), |chunk| {
                        contents.extend_from_slice(chunk);
                        Ok(())
                    })
                    .await?;
                return Ok(Some(AgentsDoc {
                    root,
                    path: path.clone(),
                    truncated: meta.size > contents.len() as u64,
                    contents,
                }));
            }
            Ok(_) => {}
            Err(ClientError::Server(status)) if status.code() == tonic::Code::NotFound => {}
            Err(err) => return Err(err),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_run_from_root_down_with_override_first() {
        assert_eq!(
            candidates("/r", "/r/a/b"),
            [
                "/r/AGENTS.override.md",
                "/r/AGENTS.md",
                "/r/a/AGENTS.override.md",
                "/r/a/AGENTS.md",
                "/r/a/b/AGENTS.override.md",
                "/r/a/b/AGENTS.md"
            ]
        );
        assert_eq!(
            candidates("/r", "/r"),
            ["/r/AGENTS.override.md", "/r/AGENTS.md"]
        );
    }
}
