//! The process service end to end, over a unix socket and over stdio (`exec:`): what a user of
//! `outpost exec` or the client library observes.

use std::collections::HashMap;
use std::time::Duration;

use outpost_client::{ClientError, ConnectOptions, Executor, Session, Target, pb};
use outpost_tests::{InProcessExecutor, Transport};

/// What one run produced.
#[derive(Debug, Default)]
struct Ran {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    pty: Vec<u8>,
    exit: pb::Exit,
}

fn start_req(argv: &[&str]) -> pb::StartRequest {
    pb::StartRequest {
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        cwd: std::env::temp_dir().to_string_lossy().into_owned(),
        ..Default::default()
    }
}

async fn run(session: &Session, req: pb::StartRequest) -> anyhow::Result<Ran> {
    let started = session.start(req).await?;
    let mut ran = Ran::default();
    let exit = session
        .follow(&started.process_id, 0, |event| {
            if let Some(pb::process_event::Event::Output(out)) = &event.event {
                match out.stream() {
                    pb::OutputStream::Stdout => ran.stdout.extend_from_slice(&out.data),
                    pb::OutputStream::Stderr => ran.stderr.extend_from_slice(&out.data),
                    pb::OutputStream::Pty => ran.pty.extend_from_slice(&out.data),
                }
            }
            Ok(())
        })
        .await?;
    ran.exit = exit;
    Ok(ran)
}

fn sh(script: &str) -> pb::StartRequest {
    start_req(&["sh", "-c", script])
}

async fn unix_executor() -> anyhow::Result<(InProcessExecutor, Executor)> {
    let server = InProcessExecutor::start(Transport::Unix).await?;
    let client = server.connect().await?;
    Ok((server, client))
}

async fn stdio_executor() -> anyhow::Result<Executor> {
    let target = Target::Exec(Some(outpost_tests::outpost_bin()));
    Ok(outpost_client::connect(&target, &ConnectOptions::default()).await?)
}

/// The behaviours every transport must show.
async fn battery(client: &Executor) -> anyhow::Result<()> {
    let session = client.attach(None, None).await?;
    // Exit codes and signals.
    assert_eq!(run(&session, sh("exit 7")).await?.exit.code, Some(7));
    let killed = run(&session, sh("kill -TERM $$")).await?.exit;
    assert_eq!((killed.code, killed.signal), (None, Some(15)));
    // Binary-safe output: every byte value, and stdout/stderr each in order.
    let all_bytes = run(
        &session,
        sh(r#"i=0; while [ $i -lt 256 ]; do printf "\\$(printf %o $i)"; i=$((i+1)); done"#),
    )
    .await?;
    assert_eq!(all_bytes.stdout, (0..=255u8).collect::<Vec<_>>());
    let interleaved = run(
        &session,
        sh("for i in $(seq 1 200); do echo out$i; echo err$i >&2; done"),
    )
    .await?;
    let expect = |p: &str| (1..=200).map(|i| format!("{p}{i}\n")).collect::<String>();
    assert_eq!(String::from_utf8(interleaved.stdout)?, expect("out"));
    assert_eq!(String::from_utf8(interleaved.stderr)?, expect("err"));
    // Profile in the environment; a stale inherited/overlaid value is overridden.
    let mut req = sh("echo $CODEX_PERMISSION_PROFILE");
    req.env.insert(
        "CODEX_PERMISSION_PROFILE".into(),
        ":danger-full-access".into(),
    );
    req.sandbox = Some(pb::start_request::Sandbox::Profile(":workspace".into()));
    assert_eq!(run(&session, req).await?.stdout, b":workspace\n");
    // Timeouts kill the group and say so.
    let mut req = sh("sleep 30");
    req.timeout_ms = Some(300);
    let timed = run(&session, req).await?.exit;
    assert!(timed.timed_out && timed.signal == Some(9), "{timed:?}");
    // rlimits tighten.
    let mut req = sh("ulimit -n");
    req.rlimits.push(pb::Rlimit {
        resource: "nofile".into(),
        soft: 64,
        hard: 64,
    });
    assert_eq!(run(&session, req).await?.stdout, b"64\n");
    Ok(())
}

#[tokio::test]
async fn battery_over_unix() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    battery(&client).await
}

#[tokio::test]
async fn battery_over_stdio() -> anyhow::Result<()> {
    battery(&stdio_executor().await?).await
}

#[tokio::test]
async fn stdin_round_trip_with_idempotent_retries() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    let session = client.attach(None, None).await?;
    let mut req = start_req(&["cat"]);
    req.pipe_stdin = true;
    let pid = session.start(req).await?.process_id;
    assert!(!session.write_stdin(&pid, b"hello ".to_vec(), "w1").await?);
    assert!(
        session.write_stdin(&pid, b"hello ".to_vec(), "w1").await?,
        "a retried write is a duplicate"
    );
    session.write_stdin(&pid, b"world".to_vec(), "w2").await?;
    session.close_stdin(&pid).await?;
    let mut out = Vec::new();
    let exit = session
        .follow(&pid, 0, |e| {
            if let Some(pb::process_event::Event::Output(o)) = &e.event {
                out.extend_from_slice(&o.data);
            }
            Ok(())
        })
        .await?;
    assert_eq!((out.as_slice(), exit.code), (&b"hello world"[..], Some(0)));
    let closed = session.write_stdin(&pid, b"late".to_vec(), "w3").await;
    assert_eq!(
        closed.unwrap_err().status().map(tonic::Status::code),
        Some(tonic::Code::FailedPrecondition)
    );
    Ok(())
}

#[tokio::test]
async fn pty_is_a_terminal_and_resizes() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    let session = client.attach(None, None).await?;
    let mut req = sh(
        "[ -t 0 ] && [ -t 1 ] && echo isatty; stty size; read _; stty size; echo $CODEX_PERMISSION_PROFILE",
    );
    req.tty = Some(pb::TtySize {
        rows: 30,
        cols: 100,
    });
    let pid = session.start(req).await?.process_id;
    tokio::time::sleep(Duration::from_millis(300)).await;
    session.resize(&pid, 40, 132).await?;
    session.write_stdin(&pid, b"\n".to_vec(), "").await?;
    let mut out = Vec::new();
    session
        .follow(&pid, 0, |e| {
            if let Some(pb::process_event::Event::Output(o)) = &e.event {
                assert_eq!(o.stream(), pb::OutputStream::Pty);
                out.extend_from_slice(&o.data);
            }
            Ok(())
        })
        .await?;
    let text = String::from_utf8_lossy(&out).replace('\r', "");
    assert!(text.contains("isatty\n30 100\n"), "{text:?}");
    assert!(
        text.contains("40 132\n"),
        "resize is visible to the program: {text:?}"
    );
    assert!(text.contains(":workspace"), "{text:?}");
    Ok(())
}

#[tokio::test]
async fn no_named_profile_removes_the_variable() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    let session = client.attach(None, None).await?;
    let tmp = std::env::temp_dir();
    let state = serde_json::json!({
        "permissionProfile": {"type": "managed", "file_system": {"type": "restricted", "entries": [
            {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]}, "network": "restricted"},
        "sandboxCwd": format!("file://{}", tmp.display()),
    });
    let mut req = sh("echo \"[${CODEX_PERMISSION_PROFILE-unset}]\"");
    req.env
        .insert("CODEX_PERMISSION_PROFILE".into(), ":workspace".into());
    req.sandbox = Some(pb::start_request::Sandbox::SandboxStateJson(
        state.to_string(),
    ));
    assert_eq!(run(&session, req).await?.stdout, b"[unset]\n");
    Ok(())
}

#[tokio::test]
async fn sandbox_refusal_is_visible_in_the_exit_event() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    let session = client.attach(None, None).await?;
    let mut req = start_req(&["true"]);
    req.sandbox = Some(pb::start_request::Sandbox::Profile(
        ":danger-full-access".into(),
    ));
    let exit = run(&session, req).await?.exit;
    assert!(exit.sandbox_denied, "{exit:?}");
    assert!(
        exit.message.contains("allow_unsandboxed"),
        "the message names the rule: {}",
        exit.message
    );
    Ok(())
}

fn code_of(result: Result<impl std::fmt::Debug, ClientError>) -> tonic::Code {
    match result {
        Err(ClientError::Server(s)) => s.code(),
        other => panic!("expected a status, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_input_is_a_clear_error() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    let session = client.attach(None, None).await?;
    assert_eq!(
        code_of(session.start(start_req(&[])).await),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        code_of(
            session
                .start(pb::StartRequest {
                    cwd: "rel".into(),
                    ..start_req(&["true"])
                })
                .await
        ),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        code_of(session.start(start_req(&["ec\0ho"])).await),
        tonic::Code::InvalidArgument
    );
    let mut nul_env = start_req(&["true"]);
    nul_env.env.insert("A".into(), "b\0c".into());
    assert_eq!(
        code_of(session.start(nul_env).await),
        tonic::Code::InvalidArgument
    );
    let mut huge = start_req(&["true"]);
    huge.env = HashMap::from([("HUGE".to_owned(), "x".repeat(4 * 1024 * 1024))]);
    assert_eq!(
        code_of(session.start(huge).await),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        code_of(session.signal("nope", pb::SignalKind::Term).await),
        tonic::Code::NotFound
    );
    let mut named = start_req(&["sleep", "5"]);
    named.process_id = "same".into();
    session.start(named.clone()).await?;
    assert_eq!(
        code_of(session.start(named).await),
        tonic::Code::AlreadyExists
    );
    assert_eq!(
        code_of(
            session
                .start(start_req(&["definitely-not-a-program"]))
                .await
        ),
        tonic::Code::NotFound
    );
    session.signal("same", pb::SignalKind::Kill).await?;
    client.info().await?; // still serving
    Ok(())
}

#[tokio::test]
async fn attaching_twice_fails_and_resume_works() -> anyhow::Result<()> {
    let (_server, client) = unix_executor().await?;
    let first = client.attach(Some("s1"), None).await?;
    let second = client.attach(Some("s1"), None).await;
    assert_eq!(code_of(second.map(|_| ())), tonic::Code::FailedPrecondition);
    let pid = first.start(start_req(&["sleep", "30"])).await?.process_id;
    drop(first);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = client.attach(Some("s1"), None).await?;
    assert!(again.resumed());
    let listed = again.list().await?;
    assert!(
        listed
            .iter()
            .any(|p| p.process_id == pid && p.state() == pb::ProcessState::Running),
        "{listed:?}"
    );
    again.signal(&pid, pb::SignalKind::Kill).await?;
    Ok(())
}
