//! [`Environment`]: one connected executor handle with its Info, filesystem context and session, and
//! [`EnvironmentCache`], metadata cached under an environment id that outlives handle replacement.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use outpost_proto::pb;

use super::config::EnvironmentId;
use crate::executor::Executor;
use crate::process::Session;

/// Paths on the executor's host, captured at attach time; permission profiles resolve against these,
/// never against the harness's paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsContext {
    /// The executor's working directory.
    pub cwd: String,
    /// Its home directory.
    pub home: String,
    /// Its temporary directory.
    pub tmp: String,
    /// Its workspace roots.
    pub workspace_roots: Vec<String>,
}

impl From<pb::FilesystemContext> for FsContext {
    fn from(ctx: pb::FilesystemContext) -> Self {
        Self {
            cwd: ctx.cwd,
            home: ctx.home,
            tmp: ctx.tmp,
            workspace_roots: ctx.workspace_roots,
        }
    }
}

/// One connection to an environment's executor. Replaced (not mutated) when the registry reconnects.
#[derive(Debug)]
pub struct Environment {
    id: EnvironmentId,
    executor: Executor,
    info: pb::InfoResponse,
    fs_context: FsContext,
    session: Arc<Session>,
    cache: Arc<EnvironmentCache>,
    connection: u64,
    connected_at: std::time::Instant,
}

impl Environment {
    pub(crate) fn new(
        id: EnvironmentId,
        executor: Executor,
        info: pb::InfoResponse,
        session: Session,
        cache: Arc<EnvironmentCache>,
        connection: u64,
    ) -> Self {
        let fs_context = info.fs_context.clone().unwrap_or_default().into();
        Self {
            id,
            executor,
            info,
            fs_context,
            session: Arc::new(session),
            cache,
            connection,
            connected_at: std::time::Instant::now(),
        }
    }

    /// The environment id.
    pub fn id(&self) -> &EnvironmentId {
        &self.id
    }

    /// The connected executor handle.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The executor's Info as of attach time.
    pub fn info(&self) -> &pb::InfoResponse {
        &self.info
    }

    /// The executor's filesystem context as of attach time.
    pub fn fs_context(&self) -> &FsContext {
        &self.fs_context
    }

    /// The environment's session (the same session id across reconnects while the executor keeps it).
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Metadata cached under this environment's id (shared with every handle of the id).
    pub fn cache(&self) -> &Arc<EnvironmentCache> {
        &self.cache
    }

    /// When this connection was complete (health SERVING, Info read, session attached), just before
    /// it was published as Ready.
    pub fn connected_at(&self) -> std::time::Instant {
        self.connected_at
    }

    /// Counts connections of this environment in this registry: 1 for the first, then +1 per reconnect
    /// or replacement.
    pub fn connection(&self) -> u64 {
        self.connection
    }
}

type Entry = Arc<dyn Any + Send + Sync>;

/// Typed metadata cached under an environment id (project roots, AGENTS.md, ...). It survives handle
/// replacement, since an id names one logical executor with stable contents; a new registry starts
/// with empty caches.
#[derive(Debug, Default)]
pub struct EnvironmentCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl EnvironmentCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The value under `key` when present and of type `T`.
    pub fn get<T: Any + Send + Sync>(&self, key: &str) -> Option<Arc<T>> {
        self.entries()
            .get(key)
            .cloned()
            .and_then(|v| v.downcast::<T>().ok())
    }

    /// Stores `value` under `key` (replacing any previous value) and returns it shared.
    pub fn insert<T: Any + Send + Sync>(&self, key: &str, value: T) -> Arc<T> {
        let value = Arc::new(value);
        self.entries().insert(key.to_owned(), value.clone());
        value
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: &str) -> bool {
        self.entries().remove(key).is_some()
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_is_typed() {
        let cache = EnvironmentCache::default();
        cache.insert("root", String::from("/srv/ws"));
        assert_eq!(
            cache.get::<String>("root").as_deref().map(String::as_str),
            Some("/srv/ws")
        );
        assert!(cache.get::<u32>("root").is_none());
        assert!(cache.remove("root"));
        assert!(cache.is_empty());
    }
}
