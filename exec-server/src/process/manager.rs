//! Sessions and their processes. A session lives while attached; when its Attach stream drops it is
//! detached, and unless re-attached within its TTL its processes are killed (whole process groups)
//! and it is forgotten. Exited processes stay readable for a retention period.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outpost_proto::pb;

use super::error::ProcessError;
use super::handle::ProcessHandle;
use super::sandbox::{Launch, LaunchRequest, SandboxSettings};
use super::validate::StartSpec;

/// Limits and timings of the process service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessConfig {
    /// How long a detached session's processes keep running (default 30 s).
    pub detach_ttl: Duration,
    /// Largest TTL a client may ask for.
    pub max_detach_ttl: Duration,
    /// Output retained per process, in bytes (default 1 MiB).
    pub output_ring_bytes: usize,
    /// How long an exited process stays readable (default 30 s).
    pub exit_retention: Duration,
    /// Processes (running or retained) per session.
    pub max_processes_per_session: usize,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        Self {
            detach_ttl: Duration::from_secs(30),
            max_detach_ttl: Duration::from_secs(3600),
            output_ring_bytes: 1024 * 1024,
            exit_retention: Duration::from_secs(30),
            max_processes_per_session: 4096,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: String,
    attached: AtomicBool,
    /// Bumped on every attach, so a stale expiry timer knows it lost.
    generation: AtomicU64,
    ttl: Mutex<Duration>,
    processes: Mutex<HashMap<String, Arc<ProcessHandle>>>,
}

impl Session {
    fn processes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ProcessHandle>>> {
        self.processes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn process(&self, id: &str) -> Result<Arc<ProcessHandle>, ProcessError> {
        self.processes()
            .get(id)
            .cloned()
            .ok_or_else(|| ProcessError::UnknownProcess(id.to_owned()))
    }

    pub(crate) fn list(&self) -> Vec<Arc<ProcessHandle>> {
        let mut all: Vec<_> = self.processes().values().cloned().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    fn kill_all(&self) {
        for process in self.processes().values() {
            process.kill_group();
        }
    }
}

/// All sessions of one executor.
#[derive(Debug)]
pub struct ProcessManager {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    guard: Option<super::guard::OrphanGuard>,
    sandbox: SandboxSettings,
    config: ProcessConfig,
    shutting_down: AtomicBool,
}

impl ProcessManager {
    /// A manager with no sessions.
    pub fn new(sandbox: SandboxSettings, config: ProcessConfig) -> Arc<Self> {
        Self::with_guard(sandbox, config, None)
    }

    /// A manager that reports every spawned process group to `guard`.
    pub fn with_guard(
        sandbox: SandboxSettings,
        config: ProcessConfig,
        guard: Option<super::guard::OrphanGuard>,
    ) -> Arc<Self> {
        Arc::new(Self {
            sessions: Mutex::new(HashMap::new()),
            guard,
            sandbox,
            config,
            shutting_down: AtomicBool::new(false),
        })
    }

    /// The sandbox settings (profiles for Info).
    pub fn sandbox(&self) -> &SandboxSettings {
        &self.sandbox
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Attaches (creating or resuming) a session; returns it and whether it was resumed.
    pub(crate) fn attach(
        &self,
        id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<(Arc<Session>, bool), ProcessError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ProcessError::ShuttingDown);
        }
        let id = if id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            id.to_owned()
        };
        super::validate::process_id(&id).map_err(|_| ProcessError::Invalid {
            field: "session_id",
            reason: "must be at most 128 characters of [A-Za-z0-9._:-]".into(),
        })?;
        let ttl = ttl_ms
            .map_or(self.config.detach_ttl, Duration::from_millis)
            .min(self.config.max_detach_ttl);
        let mut sessions = self.sessions();
        if let Some(existing) = sessions.get(&id) {
            if existing.attached.swap(true, Ordering::SeqCst) {
                return Err(ProcessError::AlreadyAttached(id));
            }
            existing.generation.fetch_add(1, Ordering::SeqCst);
            *existing
                .ttl
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = ttl;
            return Ok((existing.clone(), true));
        }
        let session = Arc::new(Session {
            id: id.clone(),
            attached: AtomicBool::new(true),
            generation: AtomicU64::new(0),
            ttl: Mutex::new(ttl),
            processes: Mutex::new(HashMap::new()),
        });
        sessions.insert(id, session.clone());
        Ok((session, false))
    }

    /// Marks the session detached and arms its expiry.
    pub(crate) fn detach(self: &Arc<Self>, session: &Arc<Session>) {
        session.attached.store(false, Ordering::SeqCst);
        let generation = session.generation.load(Ordering::SeqCst);
        let ttl = *session
            .ttl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (me, session) = (Arc::downgrade(self), Arc::downgrade(session));
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let (Some(me), Some(session)) = (me.upgrade(), session.upgrade()) else {
                return;
            };
            if session.attached.load(Ordering::SeqCst)
                || session.generation.load(Ordering::SeqCst) != generation
            {
                return;
            }
            tracing::info!(session_id = %session.id, ?ttl, "detached session expired; killing its processes");
            session.kill_all();
            me.sessions().remove(&session.id);
        });
    }

    /// Looks up a live session.
    pub(crate) fn session(&self, id: &str) -> Result<Arc<Session>, ProcessError> {
        self.sessions()
            .get(id)
            .cloned()
            .ok_or_else(|| ProcessError::UnknownSession(id.to_owned()))
    }

    /// Starts a process in `session`.
    pub(crate) fn start(
        &self,
        session: &Arc<Session>,
        req: &pb::StartRequest,
    ) -> Result<(Arc<ProcessHandle>, pb::SandboxSummary), ProcessError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ProcessError::ShuttingDown);
        }
        let spec = StartSpec::from_request(req, || uuid::Uuid::new_v4().to_string())?;
        {
            let processes = session.processes();
            if processes.contains_key(&spec.process_id) {
                return Err(ProcessError::DuplicateProcess(spec.process_id));
            }
            if processes.len() >= self.config.max_processes_per_session {
                return Err(ProcessError::TooManyProcesses(processes.len()));
            }
        }
        let launch = self.sandbox.prepare(&LaunchRequest {
            sandbox: req.sandbox.as_ref(),
            cwd: &spec.cwd,
            env_policy: req.env_policy.as_ref(),
            env: &req.env,
            rlimits: &req.rlimits,
        })?;
        let cap = self.config.output_ring_bytes;
        let (handle, summary) = match launch {
            Launch::Denied(message) => {
                tracing::warn!(process_id = %spec.process_id, %message, "sandbox refused the launch");
                (
                    ProcessHandle::denied(spec.process_id.clone(), spec.argv.clone(), cap, message),
                    pb::SandboxSummary::default(),
                )
            }
            Launch::Ready(launch) => {
                let summary = summary(launch.report());
                let handle = match super::spawn::spawn(&spec, &launch, cap) {
                    Ok(handle) => {
                        if let Some(guard) = &self.guard {
                            guard.record(handle.pid);
                        }
                        handle
                    }
                    Err(ProcessError::Spawn(err)) if launch.report().sandboxed => {
                        let message = format!("the sandbox set-up failed in the child: {err}");
                        ProcessHandle::denied(
                            spec.process_id.clone(),
                            spec.argv.clone(),
                            cap,
                            message,
                        )
                    }
                    Err(other) => return Err(other),
                };
                (handle, summary)
            }
        };
        {
            let mut processes = session.processes();
            if processes.contains_key(&spec.process_id) {
                handle.kill_group();
                return Err(ProcessError::DuplicateProcess(spec.process_id));
            }
            processes.insert(spec.process_id.clone(), handle.clone());
        }
        self.retire_after_exit(session, &handle);
        Ok((handle, summary))
    }

    /// Forgets an exited process after the retention period.
    fn retire_after_exit(&self, session: &Arc<Session>, handle: &Arc<ProcessHandle>) {
        let retention = self.config.exit_retention;
        let (session, handle) = (Arc::downgrade(session), Arc::downgrade(handle));
        tokio::spawn(async move {
            let Some(h) = handle.upgrade() else { return };
            h.exited().await;
            let id = h.id.clone();
            drop(h);
            tokio::time::sleep(retention).await;
            if let Some(session) = session.upgrade() {
                session.processes().remove(&id);
            }
        });
    }

    /// Refuses new work and kills every process group (graceful executor shutdown).
    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        let sessions: Vec<_> = self.sessions().values().cloned().collect();
        for session in sessions {
            session.kill_all();
        }
    }
}

fn summary(report: &outpost_sandbox::SandboxReport) -> pb::SandboxSummary {
    pb::SandboxSummary {
        sandboxed: report.sandboxed,
        profile: report.profile.clone(),
        landlock_abi: report.landlock.abi,
        seccomp: report.seccomp,
        mount_namespace: report.mount_namespace,
        network_restricted: report.network_restricted,
        degraded: report.degraded.clone(),
    }
}
