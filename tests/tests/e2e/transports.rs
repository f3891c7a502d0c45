//! Every transport end to end: Info, health, and authentication.

use outpost_client::{ClientError, ConnectOptions, Target};
use outpost_tests::{InProcessExecutor, TEST_TOKEN, Transport};
use tonic_health::pb::health_check_response::ServingStatus;

async fn info_works(transport: Transport) -> anyhow::Result<()> {
    let server = InProcessExecutor::start(transport).await?;
    let client = server.connect().await?;
    let info = client.info().await?;
    assert_eq!(info.os, std::env::consts::OS);
    assert!(!info.executor_id.is_empty());
    let ctx = info
        .fs_context
        .expect("info carries the filesystem context");
    assert_eq!(ctx.cwd, std::env::current_dir()?.to_string_lossy());
    crate::wait_health(client.channel(), ServingStatus::Serving).await?;
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn unix_socket_serves_info() -> anyhow::Result<()> {
    info_works(Transport::Unix).await
}

#[tokio::test]
async fn tcp_with_token_serves_info() -> anyhow::Result<()> {
    info_works(Transport::Tcp).await
}

#[tokio::test]
async fn tls_serves_info() -> anyhow::Result<()> {
    info_works(Transport::Tls).await
}

#[tokio::test]
async fn mutual_tls_serves_info() -> anyhow::Result<()> {
    info_works(Transport::MutualTls).await
}

#[tokio::test]
async fn exec_target_spawns_a_private_executor() -> anyhow::Result<()> {
    let target = Target::Exec(Some(outpost_tests::outpost_bin()));
    let client = outpost_client::connect(&target, &ConnectOptions::default()).await?;
    let info = client.info().await?;
    assert_eq!(info.arch, std::env::consts::ARCH);
    crate::wait_health(client.channel(), ServingStatus::Serving).await?;
    Ok(())
}

#[tokio::test]
async fn unix_socket_is_private() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let sock = server
        .socket_path()
        .expect("unix executor has a socket path");
    let mode = std::fs::metadata(&sock)?.permissions().mode() & 0o777;
    let dir_mode = std::fs::metadata(sock.parent().unwrap())?
        .permissions()
        .mode()
        & 0o777;
    assert_eq!((mode, dir_mode), (0o600, 0o700));
    server.shutdown().await;
    assert!(!sock.exists(), "the socket file is removed on shutdown");
    Ok(())
}

fn assert_unauthenticated(result: Result<outpost_client::pb::InfoResponse, ClientError>) {
    match result {
        Err(ClientError::Server(status)) => {
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}")
        }
        other => panic!("expected UNAUTHENTICATED, got {other:?}"),
    }
}

#[tokio::test]
async fn tcp_without_or_with_wrong_token_is_unauthenticated_but_health_answers()
-> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Tcp).await?;
    let none = server.connect_with(&ConnectOptions::default()).await?;
    assert_unauthenticated(none.info().await);
    crate::wait_health(none.channel(), ServingStatus::Serving).await?;
    let wrong = ConnectOptions {
        token: Some(format!("{TEST_TOKEN}x")),
        ..ConnectOptions::default()
    };
    let wrong = server.connect_with(&wrong).await?;
    assert_unauthenticated(wrong.info().await);
    let fs = wrong.metadata("/", true).await;
    assert!(
        matches!(&fs, Err(ClientError::Server(s)) if s.code() == tonic::Code::Unauthenticated),
        "{fs:?}"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn mutual_tls_without_client_certificate_fails() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::MutualTls).await?;
    let options = ConnectOptions {
        tls_client_cert: None,
        tls_client_key: None,
        ..server.options.clone()
    };
    let outcome = match server.connect_with(&options).await {
        Ok(client) => client.info().await.map(|_| ()).map_err(anyhow::Error::from),
        Err(err) => Err(err),
    };
    assert!(
        outcome.is_err(),
        "a client without a certificate must not get an answer"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn tls_with_untrusted_ca_fails() -> anyhow::Result<()> {
    let server = InProcessExecutor::start(Transport::Tls).await?;
    let other_dir = tempfile::tempdir()?;
    let other = outpost_tests::TlsMaterial::generate(other_dir.path())?;
    let options = ConnectOptions {
        tls_ca: Some(other.ca_cert),
        ..server.options.clone()
    };
    assert!(
        server.connect_with(&options).await.is_err(),
        "an untrusted certificate must be rejected"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn missing_workspace_root_keeps_health_not_serving() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("late");
    let options = outpost_exec_server::ExecutorOptions {
        workspace_roots: vec![root.clone()],
        ..Default::default()
    };
    let server = InProcessExecutor::start_with(Transport::Unix, options).await?;
    let client = server.connect().await?;
    crate::wait_health(client.channel(), ServingStatus::NotServing).await?;
    std::fs::create_dir(&root)?;
    crate::wait_health(client.channel(), ServingStatus::Serving).await?;
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn reflection_lists_the_services_to_authenticated_callers() -> anyhow::Result<()> {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let server = InProcessExecutor::start(Transport::Tcp).await?;
    let client = server.connect().await?;
    let token: tonic::metadata::MetadataValue<_> = format!("Bearer {TEST_TOKEN}").parse()?;
    let mut reflection = ServerReflectionClient::with_interceptor(
        client.channel(),
        move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("authorization", token.clone());
            Ok(req)
        },
    );
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await?
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.message().await?.and_then(|r| r.message_response)
    else {
        anyhow::bail!("no service list");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "outpost.v1.Executor",
        "outpost.v1.FileSystem",
        "outpost.v1.Process",
        "outpost.v1.Session",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    server.shutdown().await;
    Ok(())
}
