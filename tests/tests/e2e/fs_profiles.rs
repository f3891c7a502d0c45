//! Filesystem calls under a permission profile are enforced by the kernel on restricted worker
//! threads: what the profile forbids fails with PERMISSION_DENIED, what it allows works.

use outpost_client::{ClientError, pb};
use outpost_exec_server::ExecutorOptions;
use outpost_tests::{InProcessExecutor, Transport};

fn code<T: std::fmt::Debug>(result: Result<T, ClientError>) -> tonic::Code {
    match result {
        Err(ClientError::Server(s)) => s.code(),
        other => panic!("expected an error status, got {other:?}"),
    }
}

#[tokio::test]
async fn profiles_are_enforced_for_filesystem_calls() -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    let ws = workspace.path().canonicalize()?;
    std::fs::create_dir(ws.join(".git"))?;
    std::fs::write(ws.join(".git").join("config"), "[core]\n")?;
    let outside = tempfile::tempdir_in("/var/tmp")?;
    let outside_file = outside.path().join("victim");
    std::fs::write(&outside_file, "keep")?;
    let options = ExecutorOptions {
        workspace_roots: vec![ws.clone()],
        ..ExecutorOptions::default()
    };
    let server = InProcessExecutor::start_with(Transport::Unix, options).await?;
    let client = server.connect().await?;
    let p = |rel: &str| ws.join(rel).to_string_lossy().into_owned();
    let victim = outside_file.to_string_lossy().into_owned();

    let read_only = client.with_profile(":read-only");
    assert_eq!(
        read_only.read_file(&victim).await?,
        b"keep",
        "reads are allowed"
    );
    assert_eq!(
        code(
            read_only
                .write_file(&p("new.txt"), b"x".to_vec(), pb::WriteMode::Truncate, false)
                .await
        ),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        code(read_only.remove(&victim, false).await),
        tonic::Code::PermissionDenied
    );

    let workspace_profile = client.with_profile(":workspace");
    workspace_profile
        .write_file(&p("new.txt"), b"ok".to_vec(), pb::WriteMode::Truncate, true)
        .await?;
    assert_eq!(std::fs::read(ws.join("new.txt"))?, b"ok");
    assert_eq!(
        code(
            workspace_profile
                .write_file(&victim, b"pwned".to_vec(), pb::WriteMode::Truncate, false)
                .await
        ),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        code(
            workspace_profile
                .write_file(
                    &p(".git/config"),
                    b"x".to_vec(),
                    pb::WriteMode::Append,
                    false
                )
                .await
        ),
        tonic::Code::PermissionDenied,
        ".git stays read-only inside the writable workspace"
    );
    // .git is a read-only bind mount in the worker's namespace: renaming it away fails (EBUSY from the
    // mount, or EACCES from Landlock), and it stays where it is.
    let moved = code(workspace_profile.rename(&p(".git"), &p("moved")).await);
    assert!(
        matches!(
            moved,
            tonic::Code::PermissionDenied | tonic::Code::FailedPrecondition
        ),
        "{moved:?}"
    );
    assert!(ws.join(".git").join("config").is_file());
    assert_eq!(
        std::fs::read(&outside_file)?,
        b"keep",
        "nothing outside the policy changed"
    );

    assert_eq!(
        code(
            client
                .with_profile(":danger-full-access")
                .metadata("/", true)
                .await
        ),
        tonic::Code::PermissionDenied,
        "unsandboxed access is refused by the default managed requirements"
    );
    assert_eq!(
        code(client.with_profile(":nope").metadata("/", true).await),
        tonic::Code::InvalidArgument
    );
    // Calls without a profile keep the executor's own rights.
    client
        .write_file(
            &p("plain.txt"),
            b"y".to_vec(),
            pb::WriteMode::Truncate,
            false,
        )
        .await?;
    Ok(())
}
