//! MCP sandbox metadata: the `_meta` entries `codex/sandbox-state` (alias `codex/sandbox-state-meta`)
//! and `codex/sandbox-launcher` (`{"codexExecutable": "/abs/path"}`), the launcher invocation built from
//! them, and an authority binding for anything long-lived.
//!
//! Only `_meta` is authority; tool arguments from the model never are. An absent launcher never
//! authorizes a PATH search or an unsandboxed fallback: building an invocation without one fails.

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::codex_json::{JsonError, SandboxState};

/// `_meta` key of the sandbox state.
pub const SANDBOX_STATE_KEY: &str = "codex/sandbox-state";
/// Alias of [`SANDBOX_STATE_KEY`].
pub const SANDBOX_STATE_META_KEY: &str = "codex/sandbox-state-meta";
/// `_meta` key of the launcher entry.
pub const SANDBOX_LAUNCHER_KEY: &str = "codex/sandbox-launcher";

/// Failure to read MCP sandbox metadata or to build an invocation from it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpMetaError {
    /// The sandbox state entry is malformed.
    #[error("invalid `{key}` metadata")]
    State {
        /// The `_meta` key.
        key: &'static str,
        /// What is wrong.
        #[source]
        source: JsonError,
    },
    /// Both state keys are present with different values.
    #[error("`{SANDBOX_STATE_KEY}` and `{SANDBOX_STATE_META_KEY}` disagree")]
    ConflictingState,
    /// The launcher entry is not `{"codexExecutable": "/abs/path"}`.
    #[error("invalid `{SANDBOX_LAUNCHER_KEY}` metadata: codexExecutable must be an absolute path")]
    Launcher,
    /// No launcher was provided; there is no PATH search and no unsandboxed fallback.
    #[error("no `{SANDBOX_LAUNCHER_KEY}` metadata: refusing to search PATH or run unsandboxed")]
    NoLauncher,
    /// No sandbox state was provided.
    #[error("no `{SANDBOX_STATE_KEY}` metadata")]
    NoState,
    /// The command is empty.
    #[error("empty command")]
    EmptyCommand,
}

/// The launcher named by `codex/sandbox-launcher`.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxLauncher {
    /// `codexExecutable`, absolute.
    pub codex_executable: PathBuf,
    /// The entry exactly as received.
    pub original: Value,
}

/// The sandbox entries of one MCP request's `_meta`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpSandboxMeta {
    /// The sandbox state, from either key.
    pub state: Option<SandboxState>,
    /// The launcher, when present.
    pub launcher: Option<SandboxLauncher>,
}

impl McpSandboxMeta {
    /// Reads the sandbox entries from a `_meta` object (other keys are ignored).
    ///
    /// # Errors
    /// [`McpMetaError::State`], [`McpMetaError::ConflictingState`], [`McpMetaError::Launcher`].
    pub fn from_meta(meta: &Map<String, Value>) -> Result<Self, McpMetaError> {
        let primary = meta.get(SANDBOX_STATE_KEY);
        let alias = meta.get(SANDBOX_STATE_META_KEY);
        let (key, value) = match (primary, alias) {
            (Some(a), Some(b)) if a != b => return Err(McpMetaError::ConflictingState),
            (Some(v), _) => (SANDBOX_STATE_KEY, Some(v)),
            (None, Some(v)) => (SANDBOX_STATE_META_KEY, Some(v)),
            (None, None) => (SANDBOX_STATE_KEY, None),
        };
        let state = value
            .map(|v| SandboxState::from_value(v.clone()))
            .transpose()
            .map_err(|source| McpMetaError::State { key, source })?;
        let launcher = meta
            .get(SANDBOX_LAUNCHER_KEY)
            .map(|v| {
                let exe = v
                    .get("codexExecutable")
                    .and_then(Value::as_str)
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .ok_or(McpMetaError::Launcher)?;
                Ok(SandboxLauncher {
                    codex_executable: exe,
                    original: v.clone(),
                })
            })
            .transpose()?;
        Ok(Self { state, launcher })
    }

    /// Builds `<launcher> sandbox --sandbox-state-json <state> -- <command...>`, the state forwarded
    /// as one argument, verbatim.
    ///
    /// # Errors
    /// [`McpMetaError::NoLauncher`] (never falls back to PATH or to running unsandboxed),
    /// [`McpMetaError::NoState`], [`McpMetaError::EmptyCommand`].
    pub fn launcher_invocation(
        &self,
        command: &[OsString],
    ) -> Result<LauncherInvocation, McpMetaError> {
        let launcher = self.launcher.as_ref().ok_or(McpMetaError::NoLauncher)?;
        let state = self.state.as_ref().ok_or(McpMetaError::NoState)?;
        if command.is_empty() {
            return Err(McpMetaError::EmptyCommand);
        }
        let mut args: Vec<OsString> = vec![
            "sandbox".into(),
            "--sandbox-state-json".into(),
            state.forwardable().into(),
            "--".into(),
        ];
        args.extend(command.iter().cloned());
        Ok(LauncherInvocation {
            program: launcher.codex_executable.clone(),
            args,
        })
    }

    /// The authority these entries grant, for binding long-lived things to it.
    pub fn authority(&self) -> SandboxAuthority {
        SandboxAuthority {
            state: self.state.as_ref().map(|s| s.original.clone()),
            launcher: self.launcher.as_ref().map(|l| l.original.clone()),
        }
    }
}

/// A program and arguments to spawn (no shell, no PATH search: `program` is absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherInvocation {
    /// The launcher executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// The sandbox authority (original state and launcher values) something was created under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxAuthority {
    state: Option<Value>,
    launcher: Option<Value>,
}

/// Reuse refused because the authority changed since binding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorityChanged {
    /// The sandbox state differs.
    #[error("sandbox state changed since this was created; refusing to reuse it")]
    State,
    /// The launcher differs (or appeared / disappeared).
    #[error("sandbox launcher changed since this was created; refusing to reuse it")]
    Launcher,
}

impl SandboxAuthority {
    /// Checks that `current` grants exactly the authority this was bound to.
    ///
    /// # Errors
    /// [`AuthorityChanged`] naming what changed.
    pub fn check(&self, current: &McpSandboxMeta) -> Result<(), AuthorityChanged> {
        let now = current.authority();
        if now.state != self.state {
            return Err(AuthorityChanged::State);
        }
        if now.launcher != self.launcher {
            return Err(AuthorityChanged::Launcher);
        }
        Ok(())
    }
}

/// A long-lived value (a spawned MCP server, a cached result) bound to the authority it was made under.
#[derive(Debug, Clone)]
pub struct Bound<T> {
    value: T,
    authority: SandboxAuthority,
}

impl<T> Bound<T> {
    /// Binds `value` to the authority of `meta`.
    pub fn new(value: T, meta: &McpSandboxMeta) -> Self {
        Self {
            value,
            authority: meta.authority(),
        }
    }

    /// Returns the value if `current` carries the same authority.
    ///
    /// # Errors
    /// [`AuthorityChanged`] when state or launcher changed: create a new one instead.
    pub fn get(&self, current: &McpSandboxMeta) -> Result<&T, AuthorityChanged> {
        self.authority.check(current)?;
        Ok(&self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    fn state() -> Value {
        json!({"permissionProfile": {"type": "external", "network": "restricted"}, "sandboxCwd": "file:///w", "extra": 1})
    }

    #[test]
    fn alias_and_launcher() {
        let m = McpSandboxMeta::from_meta(&meta(json!({
            SANDBOX_STATE_META_KEY: state(),
            SANDBOX_LAUNCHER_KEY: {"codexExecutable": "/usr/bin/outpost"},
        })))
        .unwrap();
        let inv = m.launcher_invocation(&["ls".into(), "-l".into()]).unwrap();
        assert_eq!(inv.program, PathBuf::from("/usr/bin/outpost"));
        assert_eq!(inv.args[0], "sandbox");
        assert_eq!(inv.args[1], "--sandbox-state-json");
        let forwarded: Value = serde_json::from_str(inv.args[2].to_str().unwrap()).unwrap();
        assert_eq!(forwarded, state());
        assert_eq!(&inv.args[3..], &["--", "ls", "-l"]);
    }

    #[test]
    fn absent_launcher_never_falls_back() {
        let m = McpSandboxMeta::from_meta(&meta(json!({SANDBOX_STATE_KEY: state()}))).unwrap();
        assert!(matches!(
            m.launcher_invocation(&["ls".into()]),
            Err(McpMetaError::NoLauncher)
        ));
        let bad = meta(json!({SANDBOX_LAUNCHER_KEY: {"codexExecutable": "outpost"}}));
        assert!(matches!(
            McpSandboxMeta::from_meta(&bad),
            Err(McpMetaError::Launcher)
        ));
        let conflict = meta(json!({SANDBOX_STATE_KEY: state(), SANDBOX_STATE_META_KEY: {"x": 1}}));
        assert!(matches!(
            McpSandboxMeta::from_meta(&conflict),
            Err(McpMetaError::ConflictingState)
        ));
    }

    #[test]
    fn authority_rejects_changes() {
        let launcher = json!({"codexExecutable": "/usr/bin/outpost"});
        let m1 = McpSandboxMeta::from_meta(&meta(
            json!({SANDBOX_STATE_KEY: state(), SANDBOX_LAUNCHER_KEY: launcher.clone()}),
        ))
        .unwrap();
        let bound = Bound::new(42, &m1);
        assert_eq!(bound.get(&m1), Ok(&42));
        let mut changed = state();
        changed["sandboxCwd"] = json!("file:///other");
        let m2 = McpSandboxMeta::from_meta(&meta(
            json!({SANDBOX_STATE_KEY: changed, SANDBOX_LAUNCHER_KEY: launcher}),
        ))
        .unwrap();
        assert_eq!(bound.get(&m2), Err(AuthorityChanged::State));
        let m3 = McpSandboxMeta::from_meta(&meta(json!({SANDBOX_STATE_KEY: state()}))).unwrap();
        assert_eq!(bound.get(&m3), Err(AuthorityChanged::Launcher));
    }
}
