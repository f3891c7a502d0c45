//! State-machine tests that need no executor: deferred attach, failure, replacement, removal, lazy
//! start and timeouts, on paused tokio time.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::target::Target;

fn spec(id: &str) -> EnvironmentSpec {
    EnvironmentSpec::new(id.parse().unwrap())
}

fn nowhere() -> Target {
    "unix:/nonexistent/outpost-test/none.sock".parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn deferred_environment_stays_starting_and_times_out() {
    let registry = EnvironmentRegistry::new();
    registry.register(spec("later"));
    assert!(registry.snapshot().get("later").unwrap().is_starting());
    let outcome = registry
        .wait_for_environment("later", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(outcome, WaitOutcome::TimedOut));
    assert!(registry.state("later").unwrap().is_starting());
}

#[tokio::test(start_paused = true)]
async fn failure_wakes_every_waiter_with_the_reason() {
    let registry = Arc::new(EnvironmentRegistry::new());
    registry.register(spec("a"));
    let waiters: Vec<_> = (0..16)
        .map(|_| {
            let registry = registry.clone();
            tokio::spawn(async move {
                registry
                    .wait_for_environment("a", Duration::from_secs(3600))
                    .await
            })
        })
        .collect();
    tokio::task::yield_now().await;
    registry.mark_failed("a", "provisioning failed").unwrap();
    for waiter in waiters {
        match waiter.await.unwrap().unwrap() {
            WaitOutcome::Failed(reason) => assert_eq!(&*reason, "provisioning failed"),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        registry.snapshot().get("a"),
        Some(EnvironmentState::Failed(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn replacing_fails_pending_waiters_with_replaced() {
    let registry = Arc::new(EnvironmentRegistry::new());
    registry.register(spec("a"));
    let cache = registry.cache(&"a".parse().unwrap());
    cache.insert("root", 7u32);
    let waiter = {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .wait_for_environment("a", Duration::from_secs(3600))
                .await
        })
    };
    tokio::task::yield_now().await;
    registry.register(spec("a"));
    assert!(matches!(
        waiter.await.unwrap(),
        Err(RegistryError::Replaced(id)) if id == "a"
    ));
    // The cache belongs to the id, not to the replaced entry.
    let again = registry.cache(&"a".parse().unwrap());
    assert_eq!(again.get::<u32>("root").as_deref(), Some(&7));
    assert!(registry.remove("a"));
    assert!(registry.snapshot().is_empty());
    assert!(matches!(
        registry.wait_for_environment("a", Duration::ZERO).await,
        Err(RegistryError::UnknownEnvironment(_))
    ));
    // A new registry starts with empty caches.
    let fresh = EnvironmentRegistry::new();
    assert!(fresh.cache(&"a".parse().unwrap()).is_empty());
}

#[tokio::test(start_paused = true)]
async fn lazy_environment_starts_on_wait_and_fails_after_its_start_timeout() {
    let registry = EnvironmentRegistry::new();
    registry.register(
        spec("lazy")
            .with_target(nowhere())
            .with_start(StartMode::Lazy)
            .with_start_timeout(Some(Duration::from_secs(2))),
    );
    // Nobody asked: nothing connects, however long we wait on the clock.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(registry.state("lazy").unwrap().is_starting());
    let started = tokio::time::Instant::now();
    let outcome = registry
        .wait_for_environment("lazy", Duration::from_secs(60))
        .await
        .unwrap();
    let WaitOutcome::Failed(reason) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(reason.contains("gave up"), "{reason}");
    assert!(
        started.elapsed() <= Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn snapshots_are_immutable_and_versioned() {
    let registry = EnvironmentRegistry::new();
    registry.register(spec("a"));
    let before = registry.snapshot();
    registry.mark_failed("a", "gone").unwrap();
    registry.register(spec("b"));
    let after = registry.snapshot();
    assert!(before.get("a").unwrap().is_starting());
    assert!(before.get("b").is_none());
    assert!(matches!(after.get("a"), Some(EnvironmentState::Failed(_))));
    assert_eq!(after.len(), 2);
    assert!(after.version() > before.version());
}

#[tokio::test(start_paused = true)]
async fn attaching_a_target_later_starts_a_demanded_environment() {
    let registry = EnvironmentRegistry::new();
    registry.register(spec("d").with_start_timeout(Some(Duration::from_secs(1))));
    assert!(matches!(
        registry.attach_target("nope", nowhere()),
        Err(RegistryError::UnknownEnvironment(_))
    ));
    registry.attach_target("d", nowhere()).unwrap();
    let outcome = registry
        .wait_for_environment("d", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(outcome, WaitOutcome::Failed(_)), "{outcome:?}");
}

#[tokio::test]
async fn health_not_serving_moves_ready_to_starting_and_back() {
    let fake = test_util::FakeExecutor::start().await;
    let registry = EnvironmentRegistry::new();
    registry.register(spec("h").with_target(fake.target.parse().unwrap()));
    let WaitOutcome::Ready(env) = registry
        .wait_for_environment("h", Duration::from_secs(10))
        .await
        .unwrap()
    else {
        panic!("not ready")
    };
    fake.health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    let draining = readiness(&registry, false).await;
    assert!(draining.get("h").unwrap().is_starting());
    fake.health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let back = readiness(&registry, true).await;
    // The same connection and handle: NOT_SERVING is not a transport loss.
    assert!(Arc::ptr_eq(back.ready("h").unwrap(), &env));
}

/// Polls until `h` is (or is not) Ready; returns that snapshot.
async fn readiness(registry: &EnvironmentRegistry, want_ready: bool) -> StepSnapshot {
    for _ in 0..1000 {
        let step = registry.snapshot();
        if step.ready("h").is_some() == want_ready {
            return step;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("health change not observed (want ready: {want_ready})")
}
