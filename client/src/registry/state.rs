//! Environment states, per-step snapshots and wait outcomes.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::config::EnvironmentId;
use super::environment::Environment;

/// Where an environment is in its life.
#[derive(Debug, Clone)]
pub enum EnvironmentState {
    /// Not usable yet: connecting, reconnecting, waiting for a target (deferred), waiting for health to
    /// be SERVING, or a lazy environment nobody asked for yet.
    Starting,
    /// Connected and SERVING; the handle to use.
    Ready(Arc<Environment>),
    /// Gave up; the reason says why. Registering or attaching a target again starts over.
    Failed(Arc<str>),
}

impl EnvironmentState {
    /// The handle when Ready.
    pub fn ready(&self) -> Option<&Arc<Environment>> {
        match self {
            Self::Ready(env) => Some(env),
            _ => None,
        }
    }

    /// Whether this is `Starting`.
    pub fn is_starting(&self) -> bool {
        matches!(self, Self::Starting)
    }
}

/// An immutable view of every environment's state, taken atomically: the readiness and the handle of
/// each entry come from the same registry state. Taking one is an `Arc` clone (no RPC, no lock held
/// afterwards); a step uses exactly these handles even if the registry changes meanwhile, and an old
/// handle lives as long as a snapshot holds it.
#[derive(Debug, Clone, Default)]
pub struct StepSnapshot {
    states: Arc<BTreeMap<EnvironmentId, EnvironmentState>>,
    version: u64,
}

impl StepSnapshot {
    pub(crate) fn new(states: BTreeMap<EnvironmentId, EnvironmentState>, version: u64) -> Self {
        Self {
            states: Arc::new(states),
            version,
        }
    }

    /// The state of `id` at the time of the snapshot.
    pub fn get(&self, id: &str) -> Option<&EnvironmentState> {
        self.states.get(id)
    }

    /// The handle of `id` when it was Ready.
    pub fn ready(&self, id: &str) -> Option<&Arc<Environment>> {
        self.get(id).and_then(EnvironmentState::ready)
    }

    /// Every environment and its state, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = (&EnvironmentId, &EnvironmentState)> {
        self.states.iter()
    }

    /// Number of environments.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no environment is registered.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Registry version this snapshot was taken at; bumped by every state change.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// Result of [`wait_for_environment`](super::EnvironmentRegistry::wait_for_environment).
#[derive(Debug, Clone)]
pub enum WaitOutcome {
    /// The environment is ready; use this handle.
    Ready(Arc<Environment>),
    /// The environment failed; the reason says why.
    Failed(Arc<str>),
    /// Still Starting when the timeout elapsed.
    TimedOut,
}

/// What the per-environment watch channel carries: a state, or why waiting ended without one.
#[derive(Debug, Clone)]
pub(crate) enum Watched {
    State(EnvironmentState),
    Replaced,
    Removed,
}
