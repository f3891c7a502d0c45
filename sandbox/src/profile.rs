//! Permission profiles: the built-ins (`:read-only`, `:workspace`, `:danger-full-access`) and named
//! profiles from TOML config (`[permissions.NAME]`). A profile is unresolved: special paths such as
//! `project_roots` are turned into real paths later, against a [`crate::FsContext`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::env_policy::EnvPolicy;

/// Name of the built-in read-only profile.
pub const READ_ONLY: &str = ":read-only";
/// Name of the built-in workspace profile.
pub const WORKSPACE: &str = ":workspace";
/// Name of the built-in unsandboxed profile.
pub const DANGER_FULL_ACCESS: &str = ":danger-full-access";

/// Subpaths that stay read-only inside writable roots unless a profile says otherwise.
pub const DEFAULT_PROTECTED_SUBPATHS: [&str; 3] = [".git", ".codex", ".agents"];

/// What a filesystem entry grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Read, list and execute.
    Read,
    /// Everything `Read` grants plus create, write, remove and rename.
    Write,
    /// Neither read nor write, even below a readable or writable root.
    Deny,
}

/// A path that depends on where the profile is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecialPath {
    /// The whole filesystem (`/`).
    Root,
    /// The system directories a dynamically linked program needs to run.
    Minimal,
    /// Each workspace root, optionally joined with a relative subpath.
    ProjectRoots {
        /// Relative path below each root.
        subpath: Option<PathBuf>,
    },
    /// The context's temporary directory (`$TMPDIR`).
    Tmpdir,
    /// `/tmp` itself.
    SlashTmp,
    /// A kind this version does not know; kept (and warned about) for forward compatibility.
    Unknown(String),
}

impl SpecialPath {
    /// Builds a special path from its kind name as used in TOML and JSON.
    pub fn from_kind(kind: &str, subpath: Option<PathBuf>) -> Self {
        match kind {
            "root" => Self::Root,
            "minimal" => Self::Minimal,
            "project_roots" => Self::ProjectRoots { subpath },
            "tmpdir" => Self::Tmpdir,
            "slash_tmp" => Self::SlashTmp,
            other => Self::Unknown(other.to_owned()),
        }
    }
}

/// The path part of a filesystem entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsPath {
    /// An absolute path.
    Plain(PathBuf),
    /// A context-dependent path.
    Special(SpecialPath),
}

/// One filesystem rule of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsEntry {
    /// Where the rule applies.
    pub path: FsPath,
    /// What it grants or denies.
    pub access: Access,
}

/// Whether the sandboxed process may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkPolicy {
    /// Only AF_UNIX sockets; no TCP, UDP, raw, netlink or other families.
    #[default]
    Restricted,
    /// Unrestricted network.
    Enabled,
}

/// Whether the profile sandboxes at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsPolicy {
    /// Only the listed entries are reachable.
    Restricted(Vec<FsEntry>),
    /// No filesystem sandbox, no sandbox at all (`:danger-full-access`, JSON `disabled`).
    Unrestricted,
}

/// Resource limits applied with `setrlimit` in the child. `None` leaves the inherited limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rlimits {
    /// `RLIMIT_NOFILE`: open file descriptors.
    pub nofile: Option<u64>,
    /// `RLIMIT_NPROC`: processes of this user.
    pub nproc: Option<u64>,
    /// `RLIMIT_AS`: address space in bytes.
    #[serde(rename = "as")]
    pub address_space: Option<u64>,
    /// `RLIMIT_FSIZE`: largest file in bytes.
    pub fsize: Option<u64>,
    /// `RLIMIT_CPU`: CPU seconds.
    pub cpu: Option<u64>,
    /// `RLIMIT_CORE`: core dump size in bytes.
    pub core: Option<u64>,
}

/// An unresolved permission profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The name a user selected it by (`:workspace`, `dev`); `None` for anonymous JSON profiles.
    pub name: Option<String>,
    /// Filesystem rules, or no sandbox.
    pub fs: FsPolicy,
    /// Network policy.
    pub network: NetworkPolicy,
    /// Names kept read-only directly below every writable root.
    pub protected_subpaths: Vec<String>,
    /// Environment policy.
    pub env: EnvPolicy,
    /// Resource limits.
    pub rlimits: Rlimits,
}

impl Profile {
    /// Returns the built-in profile with this name, or `None`.
    pub fn builtin(name: &str) -> Option<Self> {
        let read_root = FsEntry {
            path: FsPath::Special(SpecialPath::Root),
            access: Access::Read,
        };
        let write = |s: SpecialPath| FsEntry {
            path: FsPath::Special(s),
            access: Access::Write,
        };
        let fs = match name {
            READ_ONLY => FsPolicy::Restricted(vec![read_root]),
            WORKSPACE => FsPolicy::Restricted(vec![
                read_root,
                write(SpecialPath::ProjectRoots { subpath: None }),
                write(SpecialPath::Tmpdir),
                write(SpecialPath::SlashTmp),
            ]),
            DANGER_FULL_ACCESS => FsPolicy::Unrestricted,
            _ => return None,
        };
        let network = if name == DANGER_FULL_ACCESS {
            NetworkPolicy::Enabled
        } else {
            NetworkPolicy::Restricted
        };
        Some(Self {
            name: Some(name.to_owned()),
            fs,
            network,
            protected_subpaths: default_protected(),
            env: EnvPolicy::default(),
            rlimits: Rlimits::default(),
        })
    }

    /// Whether this profile asks for no sandbox at all.
    pub fn is_unsandboxed(&self) -> bool {
        self.fs == FsPolicy::Unrestricted
    }
}

pub(crate) fn default_protected() -> Vec<String> {
    DEFAULT_PROTECTED_SUBPATHS
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// Failure to load or parse a profile config file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key (the message names it).
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The parser's message, which names the offending key.
        message: String,
    },
    /// A filesystem entry has neither or both of `path` and `special`, or a relative path.
    #[error("invalid filesystem entry #{index} in profile {profile:?}: {reason}")]
    Entry {
        /// The profile.
        profile: String,
        /// Zero-based index in its `filesystem` list.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A profile name in the file collides with a built-in or uses the reserved `:` prefix.
    #[error("profile name {0:?} is reserved (names starting with ':' are built-ins)")]
    ReservedName(String),
    /// The requested profile exists neither as a built-in nor in the config.
    #[error(
        "unknown permission profile {0:?} (built-ins: :read-only, :workspace, :danger-full-access)"
    )]
    UnknownProfile(String),
}

/// A parsed profile config file (`[permissions.NAME]` tables).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// Profile used when none is named.
    pub default_profile: Option<String>,
    /// Named profiles.
    #[serde(default)]
    permissions: BTreeMap<String, RawProfile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    #[serde(default)]
    filesystem: Vec<RawEntry>,
    #[serde(default)]
    network: NetworkPolicy,
    protected_subpaths: Option<Vec<String>>,
    #[serde(default)]
    env: EnvPolicy,
    #[serde(default)]
    rlimits: Rlimits,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    path: Option<PathBuf>,
    special: Option<String>,
    subpath: Option<PathBuf>,
    access: Access,
}

impl ProfileConfig {
    /// Parses config text; `origin` is only used in error messages.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for invalid TOML or an unknown key (named in the message),
    /// [`ConfigError::ReservedName`] for a profile named like a built-in.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_owned(),
            message: e.message().to_owned(),
        })?;
        if let Some(name) = config.permissions.keys().find(|n| n.starts_with(':')) {
            return Err(ConfigError::ReservedName(name.clone()));
        }
        Ok(config)
    }

    /// Reads and parses a config file.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read, else as [`ProfileConfig::parse`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Names of the profiles this config defines, sorted.
    pub fn profile_names(&self) -> impl Iterator<Item = &str> {
        self.permissions.keys().map(String::as_str)
    }

    /// Looks a profile up: built-ins first, then this config.
    ///
    /// # Errors
    /// [`ConfigError::UnknownProfile`] when no such profile exists, [`ConfigError::Entry`] for a
    /// malformed filesystem entry.
    pub fn profile(&self, name: &str) -> Result<Profile, ConfigError> {
        if let Some(p) = Profile::builtin(name) {
            return Ok(p);
        }
        let raw = self
            .permissions
            .get(name)
            .ok_or_else(|| ConfigError::UnknownProfile(name.to_owned()))?;
        let mut entries = Vec::with_capacity(raw.filesystem.len());
        for (index, e) in raw.filesystem.iter().enumerate() {
            let bad = |reason| ConfigError::Entry {
                profile: name.to_owned(),
                index,
                reason,
            };
            let path = match (&e.path, &e.special) {
                (Some(p), None) if p.is_absolute() => FsPath::Plain(p.clone()),
                (Some(_), None) => return Err(bad("`path` must be absolute")),
                (None, Some(kind)) => {
                    FsPath::Special(SpecialPath::from_kind(kind, e.subpath.clone()))
                }
                _ => return Err(bad("exactly one of `path` and `special` is required")),
            };
            entries.push(FsEntry {
                path,
                access: e.access,
            });
        }
        Ok(Profile {
            name: Some(name.to_owned()),
            fs: FsPolicy::Restricted(entries),
            network: raw.network,
            protected_subpaths: raw
                .protected_subpaths
                .clone()
                .unwrap_or_else(default_protected),
            env: raw.env.clone(),
            rlimits: raw.rlimits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProfileConfig, ConfigError> {
        ProfileConfig::parse(text, Path::new("test.toml"))
    }

    #[test]
    fn builtins_exist() {
        for n in [READ_ONLY, WORKSPACE, DANGER_FULL_ACCESS] {
            let p = parse("").unwrap().profile(n).unwrap();
            assert_eq!(p.name.as_deref(), Some(n));
        }
        assert!(
            Profile::builtin(DANGER_FULL_ACCESS)
                .unwrap()
                .is_unsandboxed()
        );
        assert!(!Profile::builtin(WORKSPACE).unwrap().is_unsandboxed());
    }

    #[test]
    fn named_profile_parses() {
        let cfg = parse(
            r#"
            [permissions.dev]
            network = "enabled"
            protected_subpaths = [".git"]
            filesystem = [
              { special = "root", access = "read" },
              { special = "project_roots", subpath = "out", access = "write" },
              { path = "/etc/secret", access = "deny" },
              { special = "future_kind", access = "read" },
            ]
            [permissions.dev.rlimits]
            nofile = 256
            [permissions.dev.env]
            inherit = "core"
            "#,
        )
        .unwrap();
        let p = cfg.profile("dev").unwrap();
        assert_eq!(p.network, NetworkPolicy::Enabled);
        assert_eq!(p.rlimits.nofile, Some(256));
        assert_eq!(p.protected_subpaths, vec![".git".to_owned()]);
        let FsPolicy::Restricted(entries) = p.fs else {
            panic!("dev must be restricted")
        };
        assert_eq!(entries.len(), 4);
        assert_eq!(
            entries[1].path,
            FsPath::Special(SpecialPath::ProjectRoots {
                subpath: Some("out".into())
            })
        );
        assert_eq!(
            entries[3].path,
            FsPath::Special(SpecialPath::Unknown("future_kind".into()))
        );
    }

    #[test]
    fn unknown_top_level_key_is_named() {
        let err = parse("colour = 1\n").unwrap_err().to_string();
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn unknown_profile_key_is_named() {
        let err = parse("[permissions.x]\nnetwrk = \"enabled\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("netwrk"), "{err}");
    }

    #[test]
    fn bad_access_and_entries_are_errors() {
        assert!(
            parse("[permissions.x]\nfilesystem = [{ path = \"/a\", access = \"all\" }]").is_err()
        );
        let cfg =
            parse("[permissions.x]\nfilesystem = [{ path = \"rel\", access = \"read\" }]").unwrap();
        assert!(matches!(
            cfg.profile("x"),
            Err(ConfigError::Entry { index: 0, .. })
        ));
        let cfg = parse("[permissions.x]\nfilesystem = [{ access = \"read\" }]").unwrap();
        assert!(matches!(cfg.profile("x"), Err(ConfigError::Entry { .. })));
    }

    #[test]
    fn reserved_and_unknown_names() {
        assert!(matches!(
            parse("[permissions.\":workspace\"]\n"),
            Err(ConfigError::ReservedName(_))
        ));
        assert!(matches!(
            parse("").unwrap().profile("nope"),
            Err(ConfigError::UnknownProfile(_))
        ));
    }
}
