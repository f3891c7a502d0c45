//! Every filesystem call end to end over every transport, and the bad inputs a hostile caller sends.

use outpost_client::{ClientError, ConnectOptions, Executor, Target, pb};
use outpost_tests::{InProcessExecutor, Transport};

fn code<T: std::fmt::Debug>(result: Result<T, ClientError>) -> tonic::Code {
    match result {
        Err(ClientError::Server(status)) => status.code(),
        other => panic!("expected an error status, got {other:?}"),
    }
}

fn message<T: std::fmt::Debug>(result: Result<T, ClientError>) -> String {
    match result {
        Err(ClientError::Server(status)) => status.message().to_owned(),
        other => panic!("expected an error status, got {other:?}"),
    }
}

/// Exercises every call against a fresh temp dir, asserting what a user would observe.
async fn every_call(client: &Executor) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let base = dir.path().to_string_lossy().into_owned();
    let p = |name: &str| format!("{base}/{name}");

    client.create_dir(&p("a/b/c"), true).await?;
    assert_eq!(
        code(client.create_dir(&p("x/y"), false).await),
        tonic::Code::NotFound
    );
    let payload: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        client
            .write_file(
                &p("a/f.bin"),
                payload.clone(),
                pb::WriteMode::Truncate,
                true
            )
            .await?,
        payload.len() as u64
    );
    assert_eq!(
        client.read_file(&p("a/f.bin")).await?,
        payload,
        "a multi-chunk file round-trips"
    );
    let mut ranged = Vec::new();
    client
        .read_file_with(&p("a/f.bin"), 1_048_570, Some(20), |c| {
            ranged.extend_from_slice(c);
            Ok(())
        })
        .await?;
    assert_eq!(ranged, payload[1_048_570..1_048_590]);
    client
        .write_file(
            &p("a/f.bin"),
            b"tail".to_vec(),
            pb::WriteMode::Append,
            false,
        )
        .await?;
    assert_eq!(
        client.metadata(&p("a/f.bin"), true).await?.size,
        payload.len() as u64 + 4
    );
    assert_eq!(
        code(
            client
                .write_file(&p("a/f.bin"), vec![1], pb::WriteMode::CreateNew, false)
                .await
        ),
        tonic::Code::AlreadyExists
    );

    std::os::unix::fs::symlink("f.bin", dir.path().join("a/link"))?;
    let link = client.metadata(&p("a/link"), false).await?;
    assert_eq!(
        (link.kind(), link.symlink_target.as_deref()),
        (pb::FileKind::Symlink, Some("f.bin"))
    );
    assert_eq!(
        client.metadata(&p("a/link"), true).await?.kind(),
        pb::FileKind::File
    );
    assert_eq!(
        client.canonicalize(&p("a/link")).await?,
        std::fs::canonicalize(dir.path().join("a/f.bin"))?.to_string_lossy()
    );

    let names: Vec<_> = client
        .read_dir(&p("a"))
        .await?
        .into_iter()
        .map(|e| (e.name.clone(), e.kind()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("b".into(), pb::FileKind::Directory),
            ("f.bin".into(), pb::FileKind::File),
            ("link".into(), pb::FileKind::Symlink)
        ]
    );

    client.rename(&p("a/f.bin"), &p("a/g.bin")).await?;
    assert_eq!(
        code(client.metadata(&p("a/f.bin"), true).await),
        tonic::Code::NotFound
    );
    client.copy(&p("a"), &p("copy"), true).await?;
    assert_eq!(
        client.read_file(&p("copy/g.bin")).await?.len(),
        payload.len() + 4
    );
    assert_eq!(
        client.metadata(&p("copy/link"), false).await?.kind(),
        pb::FileKind::Symlink,
        "symlinks copy as symlinks"
    );
    assert_eq!(
        code(client.remove(&p("copy"), false).await),
        tonic::Code::FailedPrecondition
    );
    client.remove(&p("copy"), true).await?;
    assert_eq!(
        code(client.metadata(&p("copy"), false).await),
        tonic::Code::NotFound
    );
    Ok(())
}

#[tokio::test]
async fn every_call_over_unix() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    every_call(&server.connect().await?).await
}

#[tokio::test]
async fn every_call_over_tcp_with_token() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Tcp).await?;
    every_call(&server.connect().await?).await
}

#[tokio::test]
async fn every_call_over_tls() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Tls).await?;
    every_call(&server.connect().await?).await
}

#[tokio::test]
async fn every_call_over_stdio_exec_target() -> anyhow::Result<()> {
    let target = Target::Exec(Some(outpost_tests::outpost_bin()));
    every_call(&outpost_client::connect(&target, &ConnectOptions::default()).await?).await
}

#[tokio::test]
async fn hostile_paths_are_invalid_argument_naming_the_field() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    let too_long = format!("/{}", "a".repeat(4096));
    for bad in ["", "relative/path", "/with\0nul", too_long.as_str()] {
        let result = client.metadata(bad, true).await;
        let msg = message(client.metadata(bad, true).await);
        assert_eq!(code(result), tonic::Code::InvalidArgument, "{bad:?}");
        assert!(msg.contains("path"), "message names the field: {msg}");
    }
    let msg = message(client.rename("/tmp", "rel").await);
    assert!(msg.contains("to"), "rename names the `to` field: {msg}");
    let msg = message(client.copy("rel", "/tmp/x", false).await);
    assert!(msg.contains("from"), "copy names the `from` field: {msg}");
    assert_eq!(
        code(client.read_file("/definitely/not/here").await),
        tonic::Code::NotFound
    );
    // The server keeps answering after all of that.
    client.info().await?;
    Ok(())
}

#[tokio::test]
async fn write_without_header_is_rejected_and_leaves_nothing() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    let frames = vec![pb::WriteFileRequest {
        frame: Some(pb::write_file_request::Frame::Data(b"x".to_vec())),
    }];
    let result = client
        .fs_client()
        .write_file(tokio_stream::iter(frames))
        .await;
    assert_eq!(result.unwrap_err().code(), tonic::Code::InvalidArgument);
    Ok(())
}

#[tokio::test]
async fn large_directories_page_every_entry_once() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    let dir = tempfile::tempdir()?;
    for i in 0..2500 {
        std::fs::write(dir.path().join(format!("f{i:05}")), "")?;
    }
    let entries = client.read_dir(&dir.path().to_string_lossy()).await?;
    let names: std::collections::BTreeSet<_> = entries.iter().map(|e| e.name.clone()).collect();
    assert_eq!((entries.len(), names.len()), (2500, 2500));
    Ok(())
}
