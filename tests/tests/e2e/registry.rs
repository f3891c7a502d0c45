//! The environment registry against real executors: readiness, deferred attach until health is
//! SERVING, pinned snapshots across a handle swap, transport loss and executor death, draining, and a
//! fleet of 32 `outpost serve` processes.

use std::sync::Arc;
use std::time::Duration;

use outpost_client::registry::{EnvironmentSpec, StartMode};
use outpost_client::{
    ClientError, ConnectOptions, Environment, EnvironmentRegistry, EnvironmentState, Target,
    WaitOutcome, pb,
};
use outpost_tests::relay::Relay;
use outpost_tests::{InProcessExecutor, ServeProcess, Transport};

const READY_WITHIN: Duration = Duration::from_secs(20);

pub(crate) fn spec(id: &str, target: &str, options: &ConnectOptions) -> EnvironmentSpec {
    EnvironmentSpec::new(id.parse().expect("test ids are valid"))
        .with_target(target.parse::<Target>().expect("test targets are valid"))
        .with_connect(options.clone())
}

pub(crate) async fn ready(
    registry: &EnvironmentRegistry,
    id: &str,
) -> anyhow::Result<Arc<Environment>> {
    match registry.wait_for_environment(id, READY_WITHIN).await? {
        WaitOutcome::Ready(env) => Ok(env),
        other => anyhow::bail!("environment {id} is not ready: {other:?}"),
    }
}

/// Polls the registry's snapshot until `id` satisfies `want` (bounded).
async fn until(
    registry: &EnvironmentRegistry,
    id: &str,
    within: Duration,
    want: impl Fn(&EnvironmentState) -> bool,
) -> anyhow::Result<EnvironmentState> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(state) = registry.snapshot().get(id)
            && want(state)
        {
            return Ok(state.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "{id} never reached the wanted state: {:?}",
                registry.state(id)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn exec_environment_becomes_ready_with_the_executors_fs_context() -> anyhow::Result<()> {
    let registry = EnvironmentRegistry::new();
    let target = format!("exec:{}", outpost_tests::outpost_bin().display());
    registry.register(spec("local", &target, &ConnectOptions::default()));
    let env = ready(&registry, "local").await?;
    assert_eq!(env.id().as_str(), "local");
    assert!(
        env.fs_context().cwd.starts_with('/'),
        "{:?}",
        env.fs_context()
    );
    assert!(!env.fs_context().tmp.is_empty());
    assert!(!env.info().executor_id.is_empty());
    let step = registry.snapshot();
    let pinned = step.ready("local").expect("ready in the snapshot");
    assert!(Arc::ptr_eq(pinned, &env));
    // The handle works: a call through it reaches the executor.
    let live = pinned.executor().info().await?;
    assert_eq!(live.executor_id, env.info().executor_id);
    Ok(())
}

#[tokio::test]
async fn deferred_target_stays_starting_until_health_is_serving() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("ws-not-yet");
    let root = format!("--workspace-root={}", workspace.display());
    let server = ServeProcess::unix(&[&root]).await?;
    let registry = EnvironmentRegistry::new();
    // Registered before anyone knows where the executor is.
    registry.register(EnvironmentSpec::new("later".parse()?).with_start(StartMode::Lazy));
    let waiter = registry.wait_for_environment("later", Duration::from_millis(300));
    assert!(matches!(waiter.await?, WaitOutcome::TimedOut));
    // The executor answers but is NOT_SERVING (its workspace root is missing): still Starting.
    registry.attach_target("later", server.target.parse()?)?;
    let waiter = registry.wait_for_environment("later", Duration::from_millis(1500));
    assert!(matches!(waiter.await?, WaitOutcome::TimedOut));
    assert!(
        registry
            .snapshot()
            .get("later")
            .expect("registered")
            .is_starting()
    );
    std::fs::create_dir(&workspace)?;
    let env = ready(&registry, "later").await?;
    assert_eq!(
        env.fs_context().workspace_roots,
        [workspace.display().to_string()]
    );
    Ok(())
}

#[tokio::test]
async fn snapshot_pins_handle_a_after_the_registry_swaps_to_b() -> anyhow::Result<()> {
    let a = InProcessExecutor::start(Transport::Unix).await?;
    let b = InProcessExecutor::start(Transport::Unix).await?;
    let registry = EnvironmentRegistry::new();
    registry.register(spec("ws", &a.target, &a.options));
    let env_a = ready(&registry, "ws").await?;
    env_a.cache().insert("project-root", "/srv/ws".to_owned());
    let step = registry.snapshot();

    registry.attach_target("ws", b.target.parse()?)?;
    let env_b = ready(&registry, "ws").await?;
    assert_ne!(env_a.info().executor_id, env_b.info().executor_id);
    assert!(env_b.connection() > env_a.connection());

    // The step keeps using A: its calls reach A's executor, not B's.
    let pinned = step.ready("ws").expect("A was ready when the step began");
    let reached = pinned.executor().info().await?.executor_id;
    assert_eq!(reached, env_a.info().executor_id);
    // A fresh snapshot sees B; the id's cache survived the swap.
    let now = registry.snapshot();
    let current = now.ready("ws").expect("B is ready");
    assert_eq!(
        current.executor().info().await?.executor_id,
        env_b.info().executor_id
    );
    assert_eq!(
        env_b
            .cache()
            .get::<String>("project-root")
            .as_deref()
            .map(String::as_str),
        Some("/srv/ws")
    );
    Ok(())
}

#[tokio::test]
async fn transport_loss_resumes_the_session_and_output_stays_contiguous() -> anyhow::Result<()> {
    let port = outpost_tests::free_port()?;
    let server = ServeProcess::tcp(port, &[]).await?;
    let relay = Relay::start(([127, 0, 0, 1], port).into()).await?;
    let registry = Arc::new(EnvironmentRegistry::new());
    let target = format!("http://{}", relay.addr);
    registry.register(
        spec("remote", &target, &server.options).with_reconnect_deadline(Duration::from_secs(10)),
    );
    let env = ready(&registry, "remote").await?;
    let script = "i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo line$i; sleep 0.05; done";
    let started = env
        .session()
        .start(pb::StartRequest {
            argv: ["sh", "-c", script].map(String::from).to_vec(),
            cwd: std::env::temp_dir().display().to_string(),
            ..Default::default()
        })
        .await?;
    let follower = {
        let (registry, pid) = (registry.clone(), started.process_id.clone());
        tokio::spawn(async move {
            let mut out = Vec::new();
            let exit = registry
                .follow("remote", &pid, 0, |event| {
                    if let Some(pb::process_event::Event::Output(o)) = &event.event {
                        out.extend_from_slice(&o.data);
                    }
                    Ok(())
                })
                .await;
            (exit, out)
        })
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    relay.cut();
    // Starting lasts only until the first reconnect attempt succeeds (often under a millisecond), so
    // wait for what follows it: Ready on a new connection.
    let again = until(&registry, "remote", Duration::from_secs(10), |s| {
        s.ready().is_some_and(|e| e.connection() > env.connection())
    })
    .await?;
    let again = again.ready().expect("matched Ready").clone();
    assert!(!Arc::ptr_eq(&env, &again), "a new connection, a new handle");
    assert_eq!(again.session().id(), env.session().id());
    assert!(again.session().resumed(), "the executor kept the session");
    let (exit, out) = follower.await?;
    assert_eq!(exit?.code, Some(0));
    let want: String = (1..=60).map(|i| format!("line{i}\n")).collect();
    assert_eq!(String::from_utf8(out)?, want);
    Ok(())
}

#[tokio::test]
async fn killed_executor_fails_after_the_deadline() -> anyhow::Result<()> {
    let mut server = ServeProcess::unix(&[]).await?;
    let registry = EnvironmentRegistry::new();
    registry.register(
        spec("doomed", &server.target, &server.options)
            .with_reconnect_deadline(Duration::from_millis(1500)),
    );
    ready(&registry, "doomed").await?;
    server.kill().await?;
    until(
        &registry,
        "doomed",
        Duration::from_secs(5),
        EnvironmentState::is_starting,
    )
    .await?;
    let lost = tokio::time::Instant::now();
    let failed = until(&registry, "doomed", Duration::from_secs(10), |s| {
        matches!(s, EnvironmentState::Failed(_))
    })
    .await?;
    let waited = lost.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let EnvironmentState::Failed(reason) = failed else {
        unreachable!()
    };
    assert!(reason.contains("gave up"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn executor_restarted_within_the_deadline_is_ready_again() -> anyhow::Result<()> {
    let mut server = ServeProcess::unix(&[]).await?;
    let sock = server.target.trim_start_matches("unix:").to_owned();
    let registry = Arc::new(EnvironmentRegistry::new());
    registry.register(
        spec("phoenix", &server.target, &server.options)
            .with_reconnect_deadline(Duration::from_secs(15)),
    );
    let first = ready(&registry, "phoenix").await?;
    let started = first
        .session()
        .start(pb::StartRequest {
            argv: ["sleep", "30"].map(String::from).to_vec(),
            cwd: std::env::temp_dir().display().to_string(),
            ..Default::default()
        })
        .await?;
    let follower = {
        let (registry, pid) = (registry.clone(), started.process_id.clone());
        tokio::spawn(async move { registry.follow("phoenix", &pid, 0, |_| Ok(())).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill().await?;
    until(
        &registry,
        "phoenix",
        Duration::from_secs(5),
        EnvironmentState::is_starting,
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _restarted = ServeProcess::unix_at(std::path::Path::new(&sock), &[]).await?;
    let second = ready(&registry, "phoenix").await?;
    assert_ne!(first.info().executor_id, second.info().executor_id);
    // Same session id, but the new executor never knew it: its processes died with the old one,
    // and the follower is told so instead of waiting forever or seeing a silent end.
    assert_eq!(first.session().id(), second.session().id());
    assert!(!second.session().resumed());
    let lost = tokio::time::timeout(Duration::from_secs(20), follower).await??;
    assert!(
        matches!(lost, Err(ClientError::ProcessLost { .. })),
        "{lost:?}"
    );
    Ok(())
}

#[tokio::test]
async fn target_that_does_not_answer_yet_becomes_ready_when_it_comes_up() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("run").join("outpost.sock");
    let registry = EnvironmentRegistry::new();
    registry.register(
        spec(
            "soon",
            &format!("unix:{}", sock.display()),
            &ConnectOptions::default(),
        )
        .with_start_timeout(None),
    );
    let early = registry.wait_for_environment("soon", Duration::from_millis(500));
    assert!(matches!(early.await?, WaitOutcome::TimedOut));
    let _server = ServeProcess::unix_at(&sock, &[]).await?;
    let env = ready(&registry, "soon").await?;
    assert!(!env.info().executor_id.is_empty());
    Ok(())
}

#[tokio::test]
async fn draining_executor_moves_the_environment_to_starting() -> anyhow::Result<()> {
    let server = ServeProcess::unix(&[]).await?;
    let registry = EnvironmentRegistry::new();
    registry.register(spec("drain", &server.target, &server.options));
    ready(&registry, "drain").await?;
    server.signal(nix::sys::signal::Signal::SIGTERM)?;
    until(
        &registry,
        "drain",
        Duration::from_secs(5),
        EnvironmentState::is_starting,
    )
    .await?;
    Ok(())
}

#[test]
fn cli_environment_flag_uses_the_environments_file() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("environments.toml");
    let bin = outpost_tests::outpost_bin();
    std::fs::write(
        &file,
        format!(
            "default = \"local\"\n[[environments]]\nid = \"local\"\ntarget = \"exec:{}\"\n\
             [[environments]]\nid = \"later\"\n",
            bin.display()
        ),
    )?;
    let run = |args: &[&str]| {
        std::process::Command::new(&bin)
            .args(args)
            .arg("--environments")
            .arg(&file)
            .env_remove("OUTPOST_TARGET")
            .output()
    };
    for args in [
        &["info", "--json", "--environment", "local"][..],
        &["info", "--json"],
    ] {
        let out = run(args)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        assert!(
            info["fs_context"]["cwd"]
                .as_str()
                .is_some_and(|c| c.starts_with('/'))
        );
    }
    let unknown = run(&["info", "--environment", "nope"])?;
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no environment \"nope\""));
    let deferred = run(&["info", "--environment", "later"])?;
    assert!(String::from_utf8_lossy(&deferred.stderr).contains("has no target yet"));
    let both = run(&["info", "--environment", "local", "--target", "exec:"])?;
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
    Ok(())
}
