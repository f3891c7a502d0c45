//! The one place where filesystem operations leave the async runtime, and where a call's permission
//! profile is enforced by the kernel.
//!
//! A call without a profile runs on tokio's blocking pool with the executor's own rights. A call that
//! names a profile runs on that profile's worker threads, each of which restricted itself once, at
//! start, with [`outpost_sandbox::restrict_current_thread`] (Landlock, private mount namespace, no
//! capabilities; all per-thread on Linux). A denied operation therefore fails with the errno the kernel
//! gives (`EACCES`, `EROFS`, ...), which maps to PERMISSION_DENIED, and never rests on path string
//! checks. Profiles resolve against the executor's filesystem context, and managed requirements apply.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};

use outpost_sandbox::launch::LaunchOptions;
use outpost_sandbox::resolve::ResolveError;
use outpost_sandbox::{FsContext, resolve, restrict_current_thread};

use super::error::FsError;
use crate::process::SandboxSettings;

/// Worker threads per profile.
const WORKERS_PER_PROFILE: usize = 2;

type Job = Box<dyn FnOnce() + Send>;

/// Runs blocking filesystem operations off the async runtime, under the requested permission profile.
#[derive(Debug, Clone, Default)]
pub struct OpRunner {
    profiles: Option<Arc<Profiles>>,
}

#[derive(Debug)]
struct Profiles {
    settings: SandboxSettings,
    ctx: FsContext,
    workers: Mutex<HashMap<String, Worker>>,
}

/// How calls under one profile run.
#[derive(Debug, Clone)]
enum Worker {
    /// Restricted threads fed by a channel.
    Restricted(mpsc::Sender<Job>),
    /// The profile is unsandboxed and managed requirements allow that: the blocking pool.
    Unrestricted,
    /// The profile is forbidden (`denied`: managed requirements) or cannot be enforced on this host;
    /// every call is refused with `reason`.
    Refused { reason: String, denied: bool },
}

impl OpRunner {
    /// A runner without profile support: a call naming a profile is refused, never run unrestricted.
    pub fn new() -> Self {
        Self::default()
    }

    /// A runner that enforces profiles from `settings`, resolved against the executor's context.
    pub fn with_sandbox(settings: SandboxSettings) -> Self {
        let cwd = settings
            .workspace_roots
            .first()
            .cloned()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let ctx = settings.fs_context(cwd);
        Self {
            profiles: Some(Arc::new(Profiles {
                settings,
                ctx,
                workers: Mutex::new(HashMap::new()),
            })),
        }
    }

    /// Checks that `profile` can be enforced, before any work (or a stream) starts.
    ///
    /// # Errors
    /// [`FsError::ProfileUnsupported`] without profile support; [`FsError::Profile`] for an unknown,
    /// forbidden or unenforceable profile.
    pub fn check_profile(&self, profile: &str) -> Result<(), FsError> {
        if profile.is_empty() {
            return Ok(());
        }
        match self.worker(profile)? {
            Worker::Refused { reason, denied } => Err(FsError::Profile {
                profile: profile.to_owned(),
                reason,
                denied,
            }),
            _ => Ok(()),
        }
    }

    fn worker(&self, profile: &str) -> Result<Worker, FsError> {
        let Some(profiles) = &self.profiles else {
            return Err(FsError::ProfileUnsupported {
                profile: profile.to_owned(),
            });
        };
        let mut workers = profiles
            .workers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(worker) = workers.get(profile) {
            return Ok(worker.clone());
        }
        let worker = profiles.start(profile)?;
        workers.insert(profile.to_owned(), worker.clone());
        Ok(worker)
    }

    /// Runs `op` under `profile` (empty: the executor's own rights).
    ///
    /// # Errors
    /// The error of `op`; profile errors as in [`OpRunner::check_profile`]; [`FsError::Worker`] when
    /// the worker fails.
    pub async fn run<T, F>(&self, profile: &str, op: F) -> Result<T, FsError>
    where
        F: FnOnce() -> Result<T, FsError> + Send + 'static,
        T: Send + 'static,
    {
        if profile.is_empty() {
            return tokio::task::spawn_blocking(op)
                .await
                .map_err(FsError::Worker)?;
        }
        match self.worker(profile)? {
            Worker::Unrestricted => tokio::task::spawn_blocking(op)
                .await
                .map_err(FsError::Worker)?,
            Worker::Restricted(jobs) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let job: Job = Box::new(move || {
                    let _ = tx.send(op());
                });
                jobs.send(job).map_err(|_| FsError::WorkerGone)?;
                rx.await.map_err(|_| FsError::WorkerGone)?
            }
            Worker::Refused { reason, denied } => Err(FsError::Profile {
                profile: profile.to_owned(),
                reason,
                denied,
            }),
        }
    }
}

impl Profiles {
    /// Resolves `name` and starts its restricted workers; refusals are remembered as a worker state.
    fn start(&self, name: &str) -> Result<Worker, FsError> {
        let profile =
            self.settings
                .profiles
                .profile(name)
                .map_err(|_| FsError::InvalidArgument {
                    field: "profile",
                    reason: "unknown permission profile",
                })?;
        let policy = match resolve(&profile, &self.ctx, Some(&self.settings.managed)) {
            Ok(policy) => policy,
            Err(ResolveError::Refused(refusal)) => {
                return Ok(Worker::Refused {
                    reason: refusal.to_string(),
                    denied: true,
                });
            }
            Err(_) => {
                return Err(FsError::InvalidArgument {
                    field: "profile",
                    reason: "the profile does not resolve on this executor",
                });
            }
        };
        if !policy.sandboxed {
            return Ok(Worker::Unrestricted);
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let options = LaunchOptions {
            allow_degraded: self.settings.allow_degraded,
            parent_death_signal: false,
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        for i in 0..WORKERS_PER_PROFILE {
            let (rx, policy, ready) = (rx.clone(), policy.clone(), ready_tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("outpost-fs-{name}-{i}"))
                .spawn(move || {
                    let restricted = restrict_current_thread(&policy, &options);
                    let ok = restricted.is_ok();
                    let _ = ready.send(restricted.map(|_| ()).map_err(|e| e.to_string()));
                    if !ok {
                        return;
                    }
                    loop {
                        let job = rx
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if spawned.is_err() {
                return Err(FsError::WorkerGone);
            }
        }
        drop(ready_tx);
        for outcome in ready_rx.iter().take(WORKERS_PER_PROFILE) {
            if let Err(reason) = outcome {
                tracing::error!(profile = name, %reason, "cannot restrict a filesystem worker thread");
                return Ok(Worker::Refused {
                    reason,
                    denied: false,
                });
            }
        }
        Ok(Worker::Restricted(tx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_off_the_runtime_and_never_ignores_a_profile() {
        let runner = OpRunner::new();
        let runtime_thread = std::thread::current().id();
        let worker_thread = runner
            .run("", || Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_ne!(worker_thread, runtime_thread);
        let refused = runner.run(":workspace", || Ok(())).await.unwrap_err();
        assert!(
            matches!(refused, FsError::ProfileUnsupported { .. }),
            "{refused}"
        );
    }
}
