//! End-to-end tests of the FileSystem service over a real tonic server on a temporary unix socket,
//! through the public API only.

use std::io;
use std::path::{Path, PathBuf};

use futures_util::StreamExt as _;
use futures_util::stream::{self, FuturesOrdered};
use hyper_util::rt::TokioIo;
use outpost_exec_server::fs::{FileSystemService, FsConfig};
use outpost_proto::find_up::{
    Decision, FindUpFailure, FindUpResult, FindUpSearch, FindUpSpec, ProbeOutcome,
};
use outpost_proto::pb;
use outpost_proto::pb::file_system_client::FileSystemClient;
use outpost_proto::pb::write_file_request::Frame;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::Code;
use tonic::transport::{Channel, Endpoint, Server};

type Client = FileSystemClient<Channel>;

/// A running server on a temp socket; stopped when dropped.
struct Harness {
    client: Client,
    _shutdown: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

async fn start(config: FsConfig) -> Harness {
    let dir = tempfile::tempdir().expect("temp dir for the socket");
    let socket = dir.path().join("fs.sock");
    let listener = UnixListener::bind(&socket).expect("bind the test socket");
    let (shutdown, stopped) = oneshot::channel::<()>();
    let service = FileSystemService::new(config).into_server();
    tokio::spawn(async move {
        Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                let _ = stopped.await;
            })
            .await
            .expect("test server failed");
    });
    // The URI is required by the builder but unused: the connector dials the socket.
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
        .expect("connect to the test server");
    Harness {
        client: FileSystemClient::new(channel),
        _shutdown: shutdown,
        _dir: dir,
    }
}

fn s(path: &Path) -> String {
    path.to_str().expect("test paths are UTF-8").to_owned()
}

async fn write(
    client: &mut Client,
    path: &Path,
    frames: Vec<pb::WriteFileRequest>,
) -> Result<u64, tonic::Status> {
    let mut all = vec![pb::WriteFileRequest {
        frame: Some(Frame::Header(pb::WriteFileHeader {
            path: s(path),
            atomic: true,
            ..Default::default()
        })),
    }];
    all.extend(frames);
    Ok(client
        .write_file(stream::iter(all))
        .await?
        .into_inner()
        .bytes_written)
}

fn data(bytes: &[u8]) -> pb::WriteFileRequest {
    pb::WriteFileRequest {
        frame: Some(Frame::Data(bytes.to_vec())),
    }
}

#[tokio::test]
async fn create_write_read_and_stat() {
    let config = FsConfig {
        read_chunk_size: 1000,
        default_page_size: 3,
        ..FsConfig::default()
    };
    let mut h = start(config).await;
    let c = &mut h.client;
    let work = tempfile::tempdir().unwrap();
    let root = work.path();

    c.create_directory(pb::CreateDirectoryRequest {
        path: s(&root.join("d/e")),
        recursive: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let content: Vec<u8> = (0..2500u32).map(|i| (i % 256) as u8).collect();
    let file = root.join("d/e/f");
    assert_eq!(
        write(
            c,
            &file,
            vec![data(&content[..1200]), data(&content[1200..])]
        )
        .await
        .unwrap(),
        2500
    );

    let chunks: Vec<pb::ReadFileChunk> = c
        .read_file(pb::ReadFileRequest {
            path: s(&file),
            offset: 500,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .map(|chunk| chunk.unwrap())
        .collect()
        .await;
    assert!(chunks.iter().all(|chunk| chunk.data.len() <= 1000));
    let read: Vec<u8> = chunks.into_iter().flat_map(|chunk| chunk.data).collect();
    assert_eq!(read, &content[500..]);

    let metadata = c
        .get_metadata(pb::GetMetadataRequest {
            path: s(&file),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (metadata.get_ref().kind(), metadata.get_ref().size),
        (pb::FileKind::File, 2500)
    );
}

#[tokio::test]
async fn copy_rename_and_canonicalize() {
    let config = FsConfig {
        read_chunk_size: 1000,
        default_page_size: 3,
        ..FsConfig::default()
    };
    let mut h = start(config).await;
    let c = &mut h.client;
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    std::fs::write(root.join("d/e/f"), vec![1u8; 2500]).unwrap();

    let copy = root.join("d/copy");
    let copied = c
        .copy(pb::CopyRequest {
            from: s(&root.join("d/e")),
            to: s(&copy),
            recursive: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(copied.get_ref().bytes_copied, 2500);
    let renamed = root.join("d/renamed");
    c.rename(pb::RenameRequest {
        from: s(&copy),
        to: s(&renamed),
        ..Default::default()
    })
    .await
    .unwrap();
    let canonical = c
        .canonicalize(pb::CanonicalizeRequest {
            path: s(&root.join("d/./renamed")),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        PathBuf::from(&canonical.get_ref().path),
        std::fs::canonicalize(&renamed).unwrap()
    );
}

#[tokio::test]
async fn paged_listing_and_remove() {
    let config = FsConfig {
        read_chunk_size: 1000,
        default_page_size: 3,
        ..FsConfig::default()
    };
    let mut h = start(config).await;
    let c = &mut h.client;
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    std::fs::write(root.join("d/e/f"), vec![1u8; 2500]).unwrap();
    std::fs::create_dir(root.join("d/renamed")).unwrap();

    for name in ["a", "b", "c", "x"] {
        std::fs::write(root.join("d").join(name), b"").unwrap();
    }
    let mut names = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .read_directory(pb::ReadDirectoryRequest {
                path: s(&root.join("d")),
                page_token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.entries.len() <= 3);
        names.extend(page.entries.into_iter().map(|entry| entry.name));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert_eq!(names, ["a", "b", "c", "e", "renamed", "x"]);

    let refused = c
        .remove(pb::RemoveRequest {
            path: s(&root.join("d")),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    c.remove(pb::RemoveRequest {
        path: s(&root.join("d")),
        recursive: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let gone = c
        .get_metadata(pb::GetMetadataRequest {
            path: s(&root.join("d")),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
}

/// Asserts that a call failed with `code` and a message starting with `message`.
fn check<T: std::fmt::Debug>(result: Result<T, tonic::Status>, code: Code, message: &str) {
    let status = result.unwrap_err();
    assert_eq!(status.code(), code, "{status:?}");
    let text = status.message();
    assert!(
        text.starts_with(message),
        "{text:?} should start with {message:?}"
    );
}

#[tokio::test]
async fn bad_paths_name_the_field() {
    let mut h = start(FsConfig::default()).await;
    let c = &mut h.client;
    let long = format!("/{}", "a".repeat(4096));
    let cases = [
        ("rel", "path: must be absolute"),
        ("", "path: must not be empty"),
        (long.as_str(), "path: must be at most 4096 bytes"),
        ("/a\0b", "path: must not contain NUL"),
    ];
    for (path, message) in cases {
        let request = pb::GetMetadataRequest {
            path: path.to_owned(),
            ..Default::default()
        };
        check(
            c.get_metadata(request).await,
            Code::InvalidArgument,
            message,
        );
    }
    let read = pb::ReadFileRequest {
        path: "x".to_owned(),
        ..Default::default()
    };
    check(
        c.read_file(read).await,
        Code::InvalidArgument,
        "path: must be absolute",
    );
    let rename = pb::RenameRequest {
        from: "/a".to_owned(),
        to: "b".to_owned(),
        ..Default::default()
    };
    check(
        c.rename(rename).await,
        Code::InvalidArgument,
        "to: must be absolute",
    );
    let copy = pb::CopyRequest {
        from: "a".to_owned(),
        to: "/b".to_owned(),
        ..Default::default()
    };
    check(
        c.copy(copy).await,
        Code::InvalidArgument,
        "from: must be absolute",
    );
    let missing = pb::ReadFileRequest {
        path: "/nonexistent/outpost".to_owned(),
        ..Default::default()
    };
    check(
        c.read_file(missing).await,
        Code::NotFound,
        "open /nonexistent/outpost",
    );
}

#[tokio::test]
async fn bad_fields_and_profiles_are_refused() {
    let mut h = start(FsConfig::default()).await;
    let c = &mut h.client;
    let profiled = pb::GetMetadataRequest {
        path: "/".to_owned(),
        profile: ":workspace".to_owned(),
        ..Default::default()
    };
    check(
        c.get_metadata(profiled).await,
        Code::FailedPrecondition,
        "profile: profile enforcement",
    );
    let page = pb::ReadDirectoryRequest {
        path: "/".to_owned(),
        page_token: "zz".to_owned(),
        ..Default::default()
    };
    check(
        c.read_directory(page).await,
        Code::InvalidArgument,
        "page_token: malformed",
    );
    let find = pb::FindUpRequest {
        cwd: "/".to_owned(),
        markers: vec!["a/b".to_owned()],
        ..Default::default()
    };
    check(
        c.find_up(find).await,
        Code::InvalidArgument,
        "markers[0]: must not contain '/'",
    );
    let find = pb::FindUpRequest {
        cwd: "/".to_owned(),
        ..Default::default()
    };
    check(
        c.find_up(find).await,
        Code::InvalidArgument,
        "markers: must name 1 to 16",
    );
    let only_data = stream::iter(vec![data(b"x")]);
    check(
        c.write_file(only_data).await,
        Code::InvalidArgument,
        "frame: the first frame must be the header",
    );
}

/// The client-side search as the client library will run it: up to `window` GetMetadata calls in
/// flight, outcomes consumed in order.
async fn windowed(
    client: &Client,
    request: pb::FindUpRequest,
    window: usize,
) -> Result<FindUpResult, Code> {
    let mut search = FindUpSearch::new(FindUpSpec::try_from(request).expect("valid request"));
    let mut in_flight = FuturesOrdered::new();
    loop {
        while in_flight.len() < window {
            let Some(probe) = search.next_probe() else {
                break;
            };
            let mut client = client.clone();
            let path = probe.path().to_owned();
            in_flight.push_back(async move {
                let request = pb::GetMetadataRequest {
                    path,
                    follow_symlinks: true,
                    ..Default::default()
                };
                (
                    probe,
                    client
                        .get_metadata(request)
                        .await
                        .map(tonic::Response::into_inner),
                )
            });
        }
        let (probe, answer) = in_flight
            .next()
            .await
            .expect("an undecided search has probes in flight");
        match search.consume(&probe, ProbeOutcome::from_metadata(answer)) {
            Decision::Continue => {}
            Decision::Done(result) => return Ok(result),
            Decision::Failed(FindUpFailure::Probe { error, .. }) => return Err(error.code()),
            Decision::Failed(other) => panic!("misuse: {other}"),
        }
    }
}

/// A small deterministic generator, so failures reproduce.
fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

#[tokio::test]
async fn server_windowed_and_sequential_agree_on_generated_trees() {
    let h = start(FsConfig::default()).await;
    let mut seed = 7;
    // (hits, misses, failures): the generated trees must exercise every kind of result.
    let mut seen = (0, 0, 0);
    for tree in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let depth = 1 + next(&mut seed) % 8;
        let mut cwd = dir.path().to_owned();
        for level in 0..depth {
            cwd.push(format!("l{level}"));
            std::fs::create_dir(&cwd).unwrap();
            for marker in ["M1", "M2", "M3"] {
                match next(&mut seed) % 6 {
                    0 => std::fs::write(cwd.join(marker), b"").unwrap(),
                    1 => std::fs::create_dir(cwd.join(marker)).unwrap(),
                    2 => std::os::unix::fs::symlink("/nonexistent", cwd.join(marker)).unwrap(),
                    _ => {}
                }
            }
        }
        // Sometimes a regular file in the path: probes below it fail with ENOTDIR.
        if next(&mut seed).is_multiple_of(3) {
            std::fs::write(cwd.join("file"), b"").unwrap();
            cwd = cwd.join("file/sub");
        }
        let request = pb::FindUpRequest {
            cwd: s(&cwd),
            markers: vec!["M1".to_owned(), "M2".to_owned(), "M3".to_owned()],
            match_kind: i32::try_from(next(&mut seed) % 3).unwrap(),
            error_policy: i32::try_from(next(&mut seed) % 2).unwrap(),
            stop_at: Some(s(dir.path())),
            profile: String::new(),
        };
        let server = h
            .client
            .clone()
            .find_up(request.clone())
            .await
            .map(tonic::Response::into_inner);
        let server: Result<FindUpResult, Code> = server
            .map(|response| FindUpResult {
                hit: response
                    .root
                    .zip(response.marker)
                    .map(|(root, marker)| outpost_proto::find_up::FindUpHit { root, marker }),
                counters: response.counters.unwrap_or_default().into(),
            })
            .map_err(|status| status.code());
        let sequential = windowed(&h.client, request.clone(), 1).await;
        let window8 = windowed(&h.client, request, 8).await;
        assert_eq!(server, sequential, "tree {tree}");
        assert_eq!(server, window8, "tree {tree}");
        match &server {
            Ok(result) if result.hit.is_some() => seen.0 += 1,
            Ok(_) => seen.1 += 1,
            Err(_) => seen.2 += 1,
        }
    }
    assert!(
        seen.0 > 0 && seen.1 > 0 && seen.2 > 0,
        "hits, misses, failures: {seen:?}"
    );
}
