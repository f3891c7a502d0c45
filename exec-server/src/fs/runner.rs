//! The one place where filesystem operations leave the async runtime.
//!
//! Every operation is a plain synchronous closure that [`OpRunner::run`] executes on a blocking thread.
//! A call may name a permission profile; enforcing it means running the closure on a Landlock-restricted
//! worker thread, which is not implemented yet, so a non-empty profile is refused rather than ignored.

use super::error::FsError;

/// Runs blocking filesystem operations off the async runtime, under the requested permission profile.
#[derive(Debug, Clone, Default)]
pub struct OpRunner {
    _private: (),
}

impl OpRunner {
    /// A runner that executes operations on tokio's blocking pool without extra restrictions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks that `profile` can be enforced, before any work (or a stream) starts.
    ///
    /// # Errors
    ///
    /// [`FsError::ProfileUnsupported`] for any non-empty profile.
    pub fn check_profile(&self, profile: &str) -> Result<(), FsError> {
        if profile.is_empty() {
            Ok(())
        } else {
            Err(FsError::ProfileUnsupported {
                profile: profile.to_owned(),
            })
        }
    }

    /// Runs `op` on a blocking thread under `profile` (empty: the executor default).
    ///
    /// # Errors
    ///
    /// The error of `op`; [`FsError::ProfileUnsupported`] for a non-empty profile; [`FsError::Worker`]
    /// when the blocking task fails.
    pub async fn run<T, F>(&self, profile: &str, op: F) -> Result<T, FsError>
    where
        F: FnOnce() -> Result<T, FsError> + Send + 'static,
        T: Send + 'static,
    {
        self.check_profile(profile)?;
        tokio::task::spawn_blocking(op)
            .await
            .map_err(FsError::Worker)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_off_the_runtime_and_refuses_profiles() {
        let runner = OpRunner::new();
        let runtime_thread = std::thread::current().id();
        let worker_thread = runner
            .run("", || Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_ne!(worker_thread, runtime_thread);
        let refused = runner.run(":workspace", || Ok(())).await.unwrap_err();
        assert!(
            refused.to_string().contains("not available yet"),
            "{refused}"
        );
    }
}
