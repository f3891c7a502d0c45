//! [`EnvironmentRegistry`]: the id -> entry map, state publication and the public operations.
//!
//! Every state change happens under one lock: the entry's watch channel is updated (waking waiters)
//! and a fresh immutable [`StepSnapshot`] is published, so readiness and handle always agree and
//! `snapshot()` is a read-lock plus an `Arc` clone. Each (re)start of an environment gets a new
//! generation; a supervisor of an older generation can no longer publish.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::config::{EnvironmentId, EnvironmentSpec, EnvironmentsConfig, StartMode};
use super::environment::EnvironmentCache;
use super::error::RegistryError;
use super::state::{EnvironmentState, StepSnapshot, WaitOutcome, Watched};
use super::supervisor::Supervisor;
use crate::target::Target;

/// Environments by id, with readiness, snapshots and waiting. Dropping it stops every environment's
/// task; handles held by snapshots keep working until they are dropped.
#[derive(Debug)]
pub struct EnvironmentRegistry {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    entries: Mutex<Entries>,
    published: RwLock<StepSnapshot>,
    connections: AtomicU64,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<EnvironmentId, Entry>,
    caches: HashMap<EnvironmentId, Arc<EnvironmentCache>>,
    version: u64,
    generations: u64,
}

#[derive(Debug)]
struct Entry {
    spec: EnvironmentSpec,
    generation: u64,
    state: watch::Sender<Watched>,
    /// Someone asked for it (eager, waited on, or started): connect as soon as there is a target.
    demanded: bool,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Entries {
    /// Stops the connection task of `id` and moves it to a new generation in `state`, so a task of
    /// the old generation can no longer publish; returns the entry.
    fn supersede(
        &mut self,
        id: &str,
        state: EnvironmentState,
    ) -> Result<&mut Entry, RegistryError> {
        self.generations += 1;
        let generation = self.generations;
        let entry = self
            .map
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownEnvironment(id.to_owned()))?;
        entry.stop();
        entry.generation = generation;
        entry.state.send_replace(Watched::State(state));
        Ok(entry)
    }
}

impl Entry {
    fn current(&self) -> EnvironmentState {
        match &*self.state.borrow() {
            Watched::State(state) => state.clone(),
            Watched::Replaced | Watched::Removed => EnvironmentState::Starting,
        }
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Ends the entry: waiters get `why`, the task stops.
    fn retire(mut self, why: Watched) {
        self.stop();
        self.state.send_replace(why);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes `state` for `id` when `generation` is still current; false otherwise.
    pub(crate) fn update(
        &self,
        id: &EnvironmentId,
        generation: u64,
        state: EnvironmentState,
    ) -> bool {
        let mut entries = self.lock();
        match entries.map.get(id) {
            Some(entry) if entry.generation == generation => {
                entry.state.send_replace(Watched::State(state));
                self.publish(&mut entries);
                true
            }
            _ => false,
        }
    }

    /// The reconnect deadline of `id` (zero when unknown).
    pub(super) fn reconnect_deadline(&self, id: &str) -> Duration {
        self.lock()
            .map
            .get(id)
            .map_or(Duration::ZERO, |e| e.spec.reconnect_deadline)
    }

    pub(crate) fn next_connection(&self) -> u64 {
        self.connections.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Rebuilds and swaps the snapshot; called with the entries lock held, after every change.
    fn publish(&self, entries: &mut Entries) {
        entries.version += 1;
        let states: BTreeMap<_, _> = entries
            .map
            .iter()
            .map(|(id, entry)| (id.clone(), entry.current()))
            .collect();
        *self
            .published
            .write()
            .unwrap_or_else(PoisonError::into_inner) = StepSnapshot::new(states, entries.version);
    }

    /// Starts the entry's task when it is demanded, has a target and is not running.
    fn launch(self: &Arc<Self>, entries: &mut Entries, id: &EnvironmentId) {
        let cache = entries.caches.entry(id.clone()).or_default().clone();
        let Some(entry) = entries.map.get_mut(id) else {
            return;
        };
        let (true, None, Some(target)) = (entry.demanded, &entry.task, &entry.spec.target) else {
            return;
        };
        let supervisor = Supervisor {
            registry: Arc::downgrade(self),
            generation: entry.generation,
            spec: entry.spec.clone(),
            target: target.clone(),
            cache,
        };
        entry.task = Some(tokio::spawn(supervisor.run()));
    }

    /// See [`EnvironmentRegistry::wait_for_environment`].
    pub(super) async fn wait_for(
        self: &Arc<Self>,
        id: &str,
        timeout: Duration,
    ) -> Result<WaitOutcome, RegistryError> {
        let mut rx = {
            let mut entries = self.lock();
            let entry = entries
                .map
                .get_mut(id)
                .ok_or_else(|| RegistryError::UnknownEnvironment(id.to_owned()))?;
            entry.demanded = true;
            let rx = entry.state.subscribe();
            let key = entry.spec.id.clone();
            self.launch(&mut entries, &key);
            rx
        };
        let settled = |w: &Watched| !matches!(w, Watched::State(EnvironmentState::Starting));
        let watched = match tokio::time::timeout(timeout, rx.wait_for(settled)).await {
            Err(_) => return Ok(WaitOutcome::TimedOut),
            Ok(Err(_)) => Watched::Removed,
            Ok(Ok(seen)) => seen.clone(),
        };
        match watched {
            Watched::State(EnvironmentState::Ready(env)) => Ok(WaitOutcome::Ready(env)),
            Watched::State(EnvironmentState::Failed(reason)) => Ok(WaitOutcome::Failed(reason)),
            Watched::State(EnvironmentState::Starting) => Ok(WaitOutcome::TimedOut),
            Watched::Replaced => Err(RegistryError::Replaced(id.to_owned())),
            Watched::Removed => Err(RegistryError::Removed(id.to_owned())),
        }
    }
}

impl Default for EnvironmentRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for EnvironmentRegistry {
    fn drop(&mut self) {
        let mut entries = self.inner.lock();
        for (_, entry) in entries.map.drain() {
            entry.retire(Watched::Removed);
        }
    }
}

impl EnvironmentRegistry {
    /// An empty registry with empty caches.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                entries: Mutex::new(Entries::default()),
                published: RwLock::new(StepSnapshot::default()),
                connections: AtomicU64::new(0),
            }),
        }
    }

    /// A registry with every environment of `config` registered (eager ones start connecting).
    /// Must be called within a tokio runtime.
    pub fn from_config(config: &EnvironmentsConfig) -> Self {
        let registry = Self::new();
        for spec in &config.environments {
            registry.register(spec.clone());
        }
        registry
    }

    /// Registers an environment, replacing any with the same id: the old handle stays valid for
    /// snapshots that hold it, callers waiting on the old one get [`RegistryError::Replaced`], and the
    /// id's metadata cache is kept. Eager environments with a target start connecting now; without a
    /// target the environment stays Starting until [`attach_target`](Self::attach_target).
    /// Must be called within a tokio runtime.
    pub fn register(&self, spec: EnvironmentSpec) {
        let mut entries = self.inner.lock();
        entries.generations += 1;
        let id = spec.id.clone();
        let entry = Entry {
            demanded: spec.start == StartMode::Eager,
            generation: entries.generations,
            state: watch::channel(Watched::State(EnvironmentState::Starting)).0,
            task: None,
            spec,
        };
        if let Some(old) = entries.map.insert(id.clone(), entry) {
            old.retire(Watched::Replaced);
        }
        self.inner.launch(&mut entries, &id);
        self.inner.publish(&mut entries);
    }

    /// Supplies (or changes) the target of `id` — deferred attach — and (re)connects when the
    /// environment is demanded. Waiters keep waiting; the environment is Starting until the new
    /// connection is Ready. A handle of the previous connection stays valid for whoever holds it.
    ///
    /// # Errors
    /// [`RegistryError::UnknownEnvironment`].
    pub fn attach_target(&self, id: &str, target: Target) -> Result<(), RegistryError> {
        self.restart_with(id, |spec| spec.target = Some(target))
    }

    /// Drops the current connection of `id` and connects afresh to the same target (a handle
    /// replacement; the metadata cache is kept).
    ///
    /// # Errors
    /// [`RegistryError::UnknownEnvironment`].
    pub fn reconnect(&self, id: &str) -> Result<(), RegistryError> {
        self.restart_with(id, |_| {})
    }

    fn restart_with(
        &self,
        id: &str,
        change: impl FnOnce(&mut EnvironmentSpec),
    ) -> Result<(), RegistryError> {
        let mut entries = self.inner.lock();
        let entry = entries.supersede(id, EnvironmentState::Starting)?;
        change(&mut entry.spec);
        let id = entry.spec.id.clone();
        self.inner.launch(&mut entries, &id);
        self.inner.publish(&mut entries);
        Ok(())
    }

    /// Marks `id` Failed with `reason` (e.g. provisioning its executor failed), stopping its task and
    /// waking waiters with the reason.
    ///
    /// # Errors
    /// [`RegistryError::UnknownEnvironment`].
    pub fn mark_failed(&self, id: &str, reason: &str) -> Result<(), RegistryError> {
        let mut entries = self.inner.lock();
        entries.supersede(id, EnvironmentState::Failed(reason.into()))?;
        self.inner.publish(&mut entries);
        Ok(())
    }

    /// Removes `id` and its cache; waiters get [`RegistryError::Removed`]. Returns whether it existed.
    pub fn remove(&self, id: &str) -> bool {
        let mut entries = self.inner.lock();
        entries.caches.remove(id);
        let Some(entry) = entries.map.remove(id) else {
            return false;
        };
        entry.retire(Watched::Removed);
        self.inner.publish(&mut entries);
        true
    }

    /// Starts a lazy environment connecting (no-op when already started or without a target yet; it
    /// then connects as soon as a target is attached).
    ///
    /// # Errors
    /// [`RegistryError::UnknownEnvironment`].
    pub fn start(&self, id: &str) -> Result<(), RegistryError> {
        let mut entries = self.inner.lock();
        let entry = entries
            .map
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownEnvironment(id.to_owned()))?;
        entry.demanded = true;
        let id = entry.spec.id.clone();
        self.inner.launch(&mut entries, &id);
        Ok(())
    }

    /// An immutable view of every environment's state, taken atomically; no RPC.
    pub fn snapshot(&self) -> StepSnapshot {
        self.inner
            .published
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The current state of `id`.
    pub fn state(&self, id: &str) -> Option<EnvironmentState> {
        self.inner.lock().map.get(id).map(Entry::current)
    }

    /// The metadata cache of `id`; it survives handle replacement and lives as long as the registry
    /// (or until [`remove`](Self::remove)).
    pub fn cache(&self, id: &EnvironmentId) -> Arc<EnvironmentCache> {
        self.inner
            .lock()
            .caches
            .entry(id.clone())
            .or_default()
            .clone()
    }

    /// Waits up to `timeout` for `id` to be Ready or Failed, starting a lazy environment. Returns at
    /// once when it already is.
    ///
    /// # Errors
    /// [`RegistryError::UnknownEnvironment`]; [`RegistryError::Replaced`] or
    /// [`RegistryError::Removed`] when that happens while waiting.
    pub async fn wait_for_environment(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<WaitOutcome, RegistryError> {
        self.inner.wait_for(id, timeout).await
    }
}
