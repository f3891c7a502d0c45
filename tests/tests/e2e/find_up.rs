//! Find-up semantics end to end: precedence, kinds, lexical symlinked cwd, error policies, stop_at,
//! and equality of the server RPC, the windowed client search and the sequential one over many
//! generated trees.

use std::os::unix::fs::symlink;
use std::path::Path;

use outpost_client::{ClientError, Executor, pb};
use outpost_tests::{InProcessExecutor, Transport};

fn request(cwd: &Path, markers: &[&str]) -> pb::FindUpRequest {
    pb::FindUpRequest {
        cwd: cwd.to_string_lossy().into_owned(),
        markers: markers.iter().map(|m| (*m).to_owned()).collect(),
        ..Default::default()
    }
}

/// What a user observes of one search: the answer, or the error code.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Answer(Option<String>, Option<String>, (u32, u32, u32)),
    Error(tonic::Code),
}

fn seen(result: Result<pb::FindUpResponse, ClientError>) -> Seen {
    match result {
        Ok(r) => {
            let c = r.counters.unwrap_or_default();
            Seen::Answer(
                r.root,
                r.marker,
                (c.ancestors_visited, c.probes, c.errors_ignored),
            )
        }
        Err(ClientError::Server(status)) => Seen::Error(status.code()),
        Err(ClientError::InvalidFindUp(_)) => Seen::Error(tonic::Code::InvalidArgument),
        Err(other) => panic!("transport failure in find-up: {other:?}"),
    }
}

/// Runs the request every way and asserts they agree; returns what they saw.
async fn all_modes(client: &Executor, req: pb::FindUpRequest) -> Seen {
    let server = seen(client.find_up_server(req.clone()).await);
    for window in [1, 3, 8, 32] {
        let windowed = seen(outpost_client::find_up::find_up(client, req.clone(), window).await);
        assert_eq!(
            windowed, server,
            "window {window} disagrees with the server for {req:?}"
        );
    }
    server
}

async fn executor() -> anyhow::Result<(InProcessExecutor, Executor)> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    Ok((server, client))
}

fn s(p: &Path) -> Option<String> {
    Some(p.to_string_lossy().into_owned())
}

#[tokio::test]
async fn nearest_ancestor_wins_then_marker_order() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let tree = tempfile::tempdir()?;
    let root = tree.path();
    let cwd = outpost_tests::nested_dirs(root, 3)?; // root/d0/d1/d2
    std::fs::create_dir(root.join(".git"))?;
    std::fs::write(root.join("d0").join("Cargo.toml"), "")?;
    std::fs::write(root.join("d0").join("package.json"), "")?;
    // .git is first in marker order but further away: the nearer d0 wins, with its first marker.
    let got = all_modes(
        &client,
        request(&cwd, &[".git", "package.json", "Cargo.toml"]),
    )
    .await;
    assert_eq!(
        got,
        Seen::Answer(s(&root.join("d0")), Some("package.json".into()), (3, 8, 0))
    );
    Ok(())
}

#[tokio::test]
async fn match_kind_filters_files_and_directories() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let tree = tempfile::tempdir()?;
    let root = tree.path();
    let cwd = outpost_tests::nested_dirs(root, 2)?;
    std::fs::write(root.join("d0").join(".git"), "gitdir: elsewhere")?; // a worktree-style file
    std::fs::create_dir(root.join(".git"))?;
    let mut req = request(&cwd, &[".git"]);
    req.match_kind = pb::MatchKind::Directory.into();
    let got = all_modes(&client, req.clone()).await;
    assert!(
        matches!(&got, Seen::Answer(r, _, _) if *r == s(root)),
        "{got:?}"
    );
    req.match_kind = pb::MatchKind::File.into();
    let got = all_modes(&client, req).await;
    assert!(
        matches!(&got, Seen::Answer(r, _, _) if *r == s(&root.join("d0"))),
        "{got:?}"
    );
    Ok(())
}

#[tokio::test]
async fn symlinked_cwd_is_walked_as_spelled() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let tree = tempfile::tempdir()?;
    let root = tree.path();
    let real = outpost_tests::nested_dirs(&root.join("real"), 2)?;
    std::fs::create_dir(root.join("spelled"))?;
    std::fs::write(root.join("spelled").join("MARK"), "")?;
    std::fs::write(root.join("real").join("MARK"), "")?;
    symlink(&real, root.join("spelled").join("link"))?;
    // Lexically the parent of spelled/link is spelled/, not real/d0.
    let got = all_modes(
        &client,
        request(&root.join("spelled").join("link"), &["MARK"]),
    )
    .await;
    assert!(
        matches!(&got, Seen::Answer(r, _, _) if *r == s(&root.join("spelled"))),
        "{got:?}"
    );
    // The same directory spelled through real/ finds real/.
    let got = all_modes(&client, request(&real, &["MARK"])).await;
    assert!(
        matches!(&got, Seen::Answer(r, _, _) if *r == s(&root.join("real"))),
        "{got:?}"
    );
    Ok(())
}

#[tokio::test]
async fn an_error_in_an_earlier_probe_follows_the_policy() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let tree = tempfile::tempdir()?;
    let root = tree.path();
    let cwd = outpost_tests::nested_dirs(root, 2)?;
    // A symlink loop as the marker in d0: stat fails with ELOOP, an error that is not "not found".
    symlink("loop", root.join("d0").join("loop"))?;
    std::fs::write(root.join("loop"), "")?;
    let mut req = request(&cwd, &["loop"]);
    let propagated = all_modes(&client, req.clone()).await;
    assert!(
        matches!(propagated, Seen::Error(code) if code != tonic::Code::NotFound),
        "{propagated:?}"
    );
    req.error_policy = pb::ErrorPolicy::Ignore.into();
    let ignored = all_modes(&client, req).await;
    assert_eq!(
        ignored,
        Seen::Answer(s(root), Some("loop".into()), (3, 3, 1))
    );
    Ok(())
}

#[tokio::test]
async fn stop_at_bounds_the_walk_and_nothing_found_is_not_an_error() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let tree = tempfile::tempdir()?;
    let root = tree.path();
    let cwd = outpost_tests::nested_dirs(root, 3)?;
    std::fs::write(root.join("TOP"), "")?;
    let mut req = request(&cwd, &["TOP"]);
    req.stop_at = s(&root.join("d0"));
    let got = all_modes(&client, req).await;
    assert_eq!(got, Seen::Answer(None, None, (3, 3, 0)));
    Ok(())
}

#[tokio::test]
async fn bad_requests_are_invalid_argument() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let long = "x".repeat(257);
    let many: Vec<String> = (0..17).map(|i| format!("m{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    for markers in [
        &[][..],
        &["a/b"][..],
        &[".."][..],
        &["."][..],
        &[long.as_str()][..],
        &many[..],
    ] {
        let got = all_modes(&client, request(Path::new("/tmp"), markers)).await;
        assert_eq!(
            got,
            Seen::Error(tonic::Code::InvalidArgument),
            "markers {markers:?}"
        );
    }
    let got = all_modes(&client, request(Path::new("relative/dir"), &["x"])).await;
    assert_eq!(got, Seen::Error(tonic::Code::InvalidArgument));
    let status = client
        .find_up_server(request(Path::new("/tmp"), &[]))
        .await
        .unwrap_err();
    assert!(
        status.to_string().contains("markers"),
        "the message names the field: {status}"
    );
    Ok(())
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test]
async fn server_windowed_and_sequential_agree_on_generated_trees() -> anyhow::Result<()> {
    let (_server, client) = executor().await?;
    let markers = ["A", "B", "C"];
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut hits, mut misses, mut errors) = (0, 0, 0);
    for case in 0..60 {
        let tree = tempfile::tempdir()?;
        let depth = 1 + rng.below(9) as usize;
        let cwd = outpost_tests::nested_dirs(tree.path(), depth)?;
        let mut dir = cwd.clone();
        for _ in 0..=depth {
            for marker in markers {
                match rng.below(12) {
                    0 => std::fs::write(dir.join(marker), "")?,
                    1 => std::fs::create_dir(dir.join(marker))?,
                    2 => symlink(marker, dir.join(marker))?, // self loop: ELOOP
                    _ => {}
                }
            }
            dir.pop();
        }
        let mut req = request(&cwd, &markers[..1 + rng.below(3) as usize]);
        req.match_kind = i32::try_from(rng.below(3))?;
        req.error_policy = i32::try_from(rng.below(2))?;
        if rng.below(3) == 0 {
            req.stop_at = s(tree.path());
        }
        let bounded = req.stop_at.is_some();
        let got = all_modes(&client, req).await;
        match &got {
            Seen::Answer(Some(root), _, _) => {
                hits += 1;
                if bounded {
                    assert!(
                        root.starts_with(&*tree.path().to_string_lossy()),
                        "case {case}: {got:?}"
                    );
                }
            }
            Seen::Answer(None, _, _) => misses += 1,
            Seen::Error(_) => errors += 1,
        }
    }
    // The generator must exercise every outcome, or the agreement above proves little.
    assert!(
        hits > 0 && misses > 0 && errors > 0,
        "hits {hits}, misses {misses}, errors {errors}"
    );
    Ok(())
}

#[tokio::test]
async fn agents_md_from_root_down_with_override_first() -> anyhow::Result<()> {
    use outpost_client::agents_md::discover;
    let (_server, client) = executor().await?;
    let tree = tempfile::tempdir()?;
    let root = tree.path();
    let cwd = outpost_tests::nested_dirs(root, 2)?;
    std::fs::create_dir(root.join(".git"))?;
    let markers = vec![".git".to_owned()];
    let cwd_s = cwd.to_string_lossy().into_owned();
    assert_eq!(discover(&client, &cwd_s, &markers, 1024).await?, None);
    std::fs::write(root.join("d0").join("AGENTS.md"), "inner")?;
    std::fs::write(root.join("AGENTS.md"), "outer")?;
    let doc = discover(&client, &cwd_s, &markers, 1024)
        .await?
        .expect("found");
    assert_eq!(
        (doc.contents.as_slice(), doc.truncated),
        (&b"outer"[..], false),
        "the root is checked first"
    );
    std::fs::write(
        root.join("AGENTS.override.md"),
        "override wins over its sibling",
    )?;
    let doc = discover(&client, &cwd_s, &markers, 8)
        .await?
        .expect("found");
    assert_eq!(
        (doc.contents.as_slice(), doc.truncated),
        (&b"override"[..], true),
        "bounded read"
    );
    std::fs::create_dir(cwd.join("AGENTS.md"))?; // a directory named like the file never wins
    std::fs::remove_file(root.join("AGENTS.override.md"))?;
    std::fs::remove_file(root.join("AGENTS.md"))?;
    let doc = discover(&client, &cwd_s, &markers, 1024)
        .await?
        .expect("found");
    assert_eq!(
        doc.path,
        root.join("d0").join("AGENTS.md").to_string_lossy()
    );
    Ok(())
}
