//! Following a process across reconnects: the registry supplies the environment's current session
//! to [`follow_with`], waiting while the environment reconnects.

use std::sync::Arc;
use std::time::Duration;

use outpost_proto::pb;

use super::registry_impl::{EnvironmentRegistry, Inner};
use super::state::WaitOutcome;
use crate::error::ClientError;
use crate::process::{Session, SessionProvider, follow_with};

impl EnvironmentRegistry {
    /// Follows a process of `id`'s session to its end like [`Session::follow`], across reconnects:
    /// after transport loss it waits for the environment to be Ready again (up to its reconnect
    /// deadline) and resumes the event stream from the last seen seq on the new connection. A process
    /// the executor no longer knows is [`ClientError::ProcessLost`].
    ///
    /// # Errors
    /// As [`follow_with`]; [`ClientError::EnvironmentUnavailable`] when the
    /// environment does not come back.
    pub async fn follow(
        &self,
        id: &str,
        process_id: &str,
        after_seq: u64,
        on_event: impl FnMut(&pb::ProcessEvent) -> std::io::Result<()>,
    ) -> Result<pb::Exit, ClientError> {
        let wait = self.inner.reconnect_deadline(id);
        let provider = CurrentSession {
            inner: self.inner.clone(),
            id: id.to_owned(),
            wait,
        };
        follow_with(&provider, process_id, after_seq, on_event).await
    }
}

/// The environment's session on its current connection, waiting while it reconnects.
#[derive(Debug)]
struct CurrentSession {
    inner: Arc<Inner>,
    id: String,
    wait: Duration,
}

impl SessionProvider for CurrentSession {
    type Handle<'a>
        = Arc<Session>
    where
        Self: 'a;

    async fn session(&self) -> Result<Arc<Session>, ClientError> {
        let unavailable = |reason: String| ClientError::EnvironmentUnavailable {
            id: self.id.clone(),
            reason,
        };
        match self.inner.wait_for(&self.id, self.wait).await {
            Ok(WaitOutcome::Ready(env)) => Ok(env.session().clone()),
            Ok(WaitOutcome::Failed(reason)) => Err(unavailable(reason.to_string())),
            Ok(WaitOutcome::TimedOut) => Err(unavailable(format!(
                "not ready within {:.1} s",
                self.wait.as_secs_f64()
            ))),
            Err(err) => Err(unavailable(err.to_string())),
        }
    }
}
