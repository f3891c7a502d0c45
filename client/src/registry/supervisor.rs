//! The task behind one environment: connect (waiting for health SERVING), capture Info and attach the
//! session, publish Ready, then watch `grpc.health.v1.Health/Watch`. NOT_SERVING moves the environment
//! to Starting and SERVING back to Ready; a broken stream is transport loss, which reconnects with
//! bounded exponential backoff and jitter until the reconnect deadline, resuming the same session.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use super::Inner;
use super::config::EnvironmentSpec;
use super::environment::{Environment, EnvironmentCache};
use super::state::EnvironmentState;
use crate::error::ClientError;
use crate::target::Target;

/// First retry delay after a failed connection attempt.
const BACKOFF_INITIAL: Duration = Duration::from_millis(50);
/// Largest retry delay.
const BACKOFF_MAX: Duration = Duration::from_secs(2);

type HealthStream = tonic::Streaming<HealthCheckResponse>;

/// Drives one generation of one environment; stops when the registry moved on to another generation.
#[derive(Debug)]
pub(super) struct Supervisor {
    pub(super) registry: Weak<Inner>,
    pub(super) generation: u64,
    pub(super) spec: EnvironmentSpec,
    pub(super) target: Target,
    pub(super) cache: Arc<EnvironmentCache>,
}

impl Supervisor {
    pub(super) async fn run(self) {
        let mut session_id: Option<String> = None;
        let mut deadline = self.spec.start_timeout.map(|t| Instant::now() + t);
        loop {
            let (env, health) = match self.connect_until(deadline, &mut session_id).await {
                Ok(connected) => connected,
                Err(reason) => {
                    tracing::warn!(env = %self.spec.id, %reason, "environment failed");
                    self.publish(EnvironmentState::Failed(reason.into()));
                    return;
                }
            };
            if !self.publish(EnvironmentState::Ready(env.clone())) {
                return;
            }
            if !self.watch_health(&env, health).await {
                return;
            }
            tracing::warn!(env = %self.spec.id, "executor connection lost; reconnecting");
            if !self.publish(EnvironmentState::Starting) {
                return;
            }
            deadline = Some(Instant::now() + self.spec.reconnect_deadline);
        }
    }

    /// Publishes `state` for this generation; false when the registry or generation is gone.
    fn publish(&self, state: EnvironmentState) -> bool {
        self.registry
            .upgrade()
            .is_some_and(|inner| inner.update(&self.spec.id, self.generation, state))
    }

    /// Retries [`Supervisor::connect_once`] with backoff until it succeeds or `deadline` passes
    /// (never giving up before it).
    async fn connect_until(
        &self,
        deadline: Option<Instant>,
        session_id: &mut Option<String>,
    ) -> Result<(Arc<Environment>, HealthStream), String> {
        let mut backoff = Backoff::new();
        let started = Instant::now();
        let mut last_error = String::from("the executor was not SERVING");
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(gave_up(started, &last_error));
            }
            let attempt = self.connect_once(session_id);
            let result = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, attempt).await {
                    Ok(result) => result,
                    Err(_) => return Err(gave_up(started, &last_error)),
                },
                None => attempt.await,
            };
            match result {
                Ok(connected) => return Ok(connected),
                Err(err) if is_permanent(&err) => return Err(outpost_proto::error_chain(&err)),
                Err(err) => last_error = outpost_proto::error_chain(&err),
            }
            let mut wait = backoff.next_delay();
            if let Some(deadline) = deadline {
                wait = wait.min(deadline.saturating_duration_since(Instant::now()));
            }
            tracing::debug!(env = %self.spec.id, cause = %last_error, ?wait, "connection attempt failed");
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt: connect, wait for health SERVING, read Info, attach (or resume) the session.
    async fn connect_once(
        &self,
        session_id: &mut Option<String>,
    ) -> Result<(Arc<Environment>, HealthStream), ClientError> {
        let executor = crate::connect(&self.target, &self.spec.connect).await?;
        let mut health = HealthClient::new(executor.channel())
            .watch(HealthCheckRequest {
                service: String::new(),
            })
            .await?
            .into_inner();
        loop {
            match health.message().await? {
                Some(status) if status.status() == ServingStatus::Serving => break,
                Some(_) => {}
                None => return Err(health_ended()),
            }
        }
        let info = executor.info().await?;
        let session = executor
            .attach(session_id.as_deref(), self.spec.detach_ttl)
            .await?;
        if session_id.is_some() && !session.resumed() {
            tracing::warn!(env = %self.spec.id, session = session.id(), "the executor lost the session; its processes are gone");
        }
        *session_id = Some(session.id().to_owned());
        let connection = self
            .registry
            .upgrade()
            .map_or(0, |inner| inner.next_connection());
        let env = Environment::new(
            self.spec.id.clone(),
            executor,
            info,
            session,
            self.cache.clone(),
            connection,
        );
        Ok((Arc::new(env), health))
    }

    /// Follows health until the stream breaks (transport loss). False when the generation is gone.
    async fn watch_health(&self, env: &Arc<Environment>, mut health: HealthStream) -> bool {
        loop {
            let state = match health.message().await {
                Ok(Some(status)) if status.status() == ServingStatus::Serving => {
                    EnvironmentState::Ready(env.clone())
                }
                Ok(Some(status)) => {
                    tracing::info!(env = %self.spec.id, status = ?status.status(), "executor not serving");
                    EnvironmentState::Starting
                }
                Ok(None) | Err(_) => return true,
            };
            if !self.publish(state) {
                return false;
            }
        }
    }
}

fn health_ended() -> ClientError {
    ClientError::Transport(tonic::Status::unavailable(
        "the health watch ended before the executor was SERVING",
    ))
}

fn gave_up(started: Instant, cause: &str) -> String {
    format!(
        "gave up after {:.1} s: {cause}",
        started.elapsed().as_secs_f64()
    )
}

/// Errors that retrying cannot fix: the target, credentials or TLS set-up are wrong.
fn is_permanent(err: &ClientError) -> bool {
    matches!(
        err,
        ClientError::InvalidTarget { .. }
            | ClientError::BinaryNotFound
            | ClientError::Pem { .. }
            | ClientError::PemEmpty { .. }
            | ClientError::Tls(_)
            | ClientError::MissingCa
            | ClientError::InvalidToken
    ) || err
        .status()
        .is_some_and(|s| s.code() == tonic::Code::Unauthenticated)
}

/// Exponential backoff with "equal jitter": each delay is half the current step plus a random part of
/// the other half, so many environments reconnecting at once spread out.
#[derive(Debug)]
struct Backoff {
    step: Duration,
}

impl Backoff {
    fn new() -> Self {
        Self {
            step: BACKOFF_INITIAL,
        }
    }

    fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = (self.step * 2).min(BACKOFF_MAX);
        let half = step / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_bounded_with_jitter() {
        let mut backoff = Backoff::new();
        let delays: Vec<_> = (0..10).map(|_| backoff.next_delay()).collect();
        assert!(delays[0] >= BACKOFF_INITIAL / 2 && delays[0] <= BACKOFF_INITIAL);
        assert!(delays.iter().all(|d| *d <= BACKOFF_MAX));
        assert!(delays[9] >= BACKOFF_MAX / 2);
    }
}
