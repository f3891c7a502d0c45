//! Environment ids, per-environment specs and `environments.toml`.
//!
//! ```toml
//! default = "local"                 # used when no id is given (optional)
//! ssh_command = "ssh -F ~/.ssh/cfg" # replaces `ssh` for every ssh:// target (optional)
//!
//! [[environments]]
//! id = "local"                      # 1 to 64 of [A-Za-z0-9_-]
//! target = "exec:"                  # omitted: deferred, attach a target later
//! lazy = false                      # true: connect on first demand
//! start_timeout_ms = 60000          # first connection; 0 = no limit
//! reconnect_deadline_ms = 25000     # after transport loss, then Failed
//! connect_timeout_ms = 10000
//! detach_ttl_ms = 30000             # how long processes outlive a lost connection
//! token_file = "/etc/outpost/token"
//! tls_ca = "/etc/outpost/ca.pem"
//! ssh_command = "ssh -F /etc/outpost/ssh_config"
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::error::{ConfigError, InvalidEnvironmentId};
use crate::connect::ConnectOptions;
use crate::target::Target;

/// A validated environment id: 1 to 64 characters of `[A-Za-z0-9_-]`. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvironmentId(Arc<str>);

impl EnvironmentId {
    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for EnvironmentId {
    type Err = InvalidEnvironmentId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid = (1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if valid {
            Ok(Self(s.into()))
        } else {
            Err(InvalidEnvironmentId { id: s.to_owned() })
        }
    }
}

impl std::fmt::Display for EnvironmentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::borrow::Borrow<str> for EnvironmentId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// When an environment starts connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartMode {
    /// As soon as it is registered (and has a target).
    #[default]
    Eager,
    /// On first demand: [`wait_for_environment`](super::EnvironmentRegistry::wait_for_environment)
    /// or [`start`](super::EnvironmentRegistry::start). A snapshot never starts it.
    Lazy,
}

/// Default deadline for getting an environment back after its transport broke.
pub const DEFAULT_RECONNECT_DEADLINE: Duration = Duration::from_secs(25);
/// Default bound on the first connection.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything the registry needs to run one environment.
#[derive(Debug, Clone)]
pub struct EnvironmentSpec {
    /// The stable id.
    pub id: EnvironmentId,
    /// Where the executor is; `None` until it is attached (deferred).
    pub target: Option<Target>,
    /// Eager or lazy start.
    pub start: StartMode,
    /// Credentials, TLS, ssh command and connect timeout.
    pub connect: ConnectOptions,
    /// Bound on the first connection (until health is SERVING); `None`: wait indefinitely.
    pub start_timeout: Option<Duration>,
    /// After transport loss, how long reconnecting may take before the environment is Failed.
    pub reconnect_deadline: Duration,
    /// Detach TTL asked for the environment's session; `None`: the executor's default.
    pub detach_ttl: Option<Duration>,
}

impl EnvironmentSpec {
    /// An eager environment with default timeouts and no target yet.
    pub fn new(id: EnvironmentId) -> Self {
        Self {
            id,
            target: None,
            start: StartMode::Eager,
            connect: ConnectOptions::default(),
            start_timeout: Some(DEFAULT_START_TIMEOUT),
            reconnect_deadline: DEFAULT_RECONNECT_DEADLINE,
            detach_ttl: None,
        }
    }

    /// Sets the target.
    #[must_use]
    pub fn with_target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Sets the start mode.
    #[must_use]
    pub fn with_start(mut self, start: StartMode) -> Self {
        self.start = start;
        self
    }

    /// Sets the connect options.
    #[must_use]
    pub fn with_connect(mut self, connect: ConnectOptions) -> Self {
        self.connect = connect;
        self
    }

    /// Sets the reconnect deadline.
    #[must_use]
    pub fn with_reconnect_deadline(mut self, deadline: Duration) -> Self {
        self.reconnect_deadline = deadline;
        self
    }

    /// Sets the start timeout (`None`: no limit).
    #[must_use]
    pub fn with_start_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.start_timeout = timeout;
        self
    }
}

/// A loaded `environments.toml`.
#[derive(Debug, Clone, Default)]
pub struct EnvironmentsConfig {
    /// The environment used when none is named.
    pub default: Option<EnvironmentId>,
    /// The environments, in file order.
    pub environments: Vec<EnvironmentSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    default: Option<String>,
    ssh_command: Option<String>,
    #[serde(default)]
    environments: Vec<EntryDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc {
    id: String,
    target: Option<String>,
    #[serde(default)]
    lazy: bool,
    start_timeout_ms: Option<u64>,
    reconnect_deadline_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    detach_ttl_ms: Option<u64>,
    token_file: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    ssh_command: Option<String>,
}

impl EnvironmentsConfig {
    /// Reads and validates `path`.
    ///
    /// # Errors
    /// Unreadable or invalid TOML, unknown keys, invalid or duplicate ids, a `default` that names no
    /// environment, unparsable targets and unreadable token files — each naming the file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses the text of an environments file; `path` is named in errors.
    ///
    /// # Errors
    /// As [`EnvironmentsConfig::load`], except reading the file itself.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let doc: FileDoc = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let mut environments: Vec<EnvironmentSpec> = Vec::with_capacity(doc.environments.len());
        for entry in doc.environments {
            let spec = entry.into_spec(path, doc.ssh_command.as_deref())?;
            if environments.iter().any(|e| e.id == spec.id) {
                return Err(ConfigError::DuplicateId {
                    path: path.to_owned(),
                    id: spec.id.to_string(),
                });
            }
            environments.push(spec);
        }
        let default = match doc.default {
            None => None,
            Some(id) => Some(
                environments
                    .iter()
                    .find(|e| e.id.as_str() == id)
                    .map(|e| e.id.clone())
                    .ok_or_else(|| ConfigError::UnknownDefault {
                        path: path.to_owned(),
                        id,
                    })?,
            ),
        };
        Ok(Self {
            default,
            environments,
        })
    }

    /// The environment named `id`.
    pub fn get(&self, id: &str) -> Option<&EnvironmentSpec> {
        self.environments.iter().find(|e| e.id.as_str() == id)
    }

    /// Where the file is looked for: `./environments.toml` when it exists, else
    /// `$XDG_CONFIG_HOME/outpost/environments.toml` (`~/.config` when unset).
    ///
    /// # Errors
    /// [`ConfigError::NotFound`] when neither exists.
    pub fn default_path() -> Result<PathBuf, ConfigError> {
        let local = PathBuf::from("environments.toml");
        if local.is_file() {
            return Ok(local);
        }
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from(".config"));
        let global = config_home.join("outpost").join("environments.toml");
        if global.is_file() {
            Ok(global)
        } else {
            Err(ConfigError::NotFound(global))
        }
    }
}

impl EntryDoc {
    fn into_spec(
        self,
        path: &Path,
        ssh_command: Option<&str>,
    ) -> Result<EnvironmentSpec, ConfigError> {
        let id: EnvironmentId = self.id.parse().map_err(|source| ConfigError::InvalidId {
            path: path.to_owned(),
            source,
        })?;
        let target = self
            .target
            .map(|t| t.parse::<Target>())
            .transpose()
            .map_err(|source| ConfigError::InvalidTarget {
                path: path.to_owned(),
                id: id.to_string(),
                source,
            })?;
        let token = match &self.token_file {
            None => None,
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .map_err(|source| ConfigError::TokenFile {
                        path: path.to_owned(),
                        id: id.to_string(),
                        token_file: file.clone(),
                        source,
                    })?
                    .trim()
                    .to_owned(),
            ),
        };
        let connect = ConnectOptions {
            token,
            tls_ca: self.tls_ca,
            connect_timeout: self.connect_timeout_ms.map(Duration::from_millis),
            ssh_command: self.ssh_command.or_else(|| ssh_command.map(str::to_owned)),
            ..ConnectOptions::default()
        };
        let start_timeout = match self.start_timeout_ms {
            None => Some(DEFAULT_START_TIMEOUT),
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
        };
        Ok(EnvironmentSpec {
            id,
            target,
            start: if self.lazy {
                StartMode::Lazy
            } else {
                StartMode::Eager
            },
            connect,
            start_timeout,
            reconnect_deadline: self
                .reconnect_deadline_ms
                .map_or(DEFAULT_RECONNECT_DEADLINE, Duration::from_millis),
            detach_ttl: self.detach_ttl_ms.map(Duration::from_millis),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated() {
        for good in ["a", "build-1", "A_b-9", &"x".repeat(64)] {
            assert!(good.parse::<EnvironmentId>().is_ok(), "{good}");
        }
        for bad in ["", "a b", "a/b", "é", "a.b", &"x".repeat(65)] {
            let err = bad.parse::<EnvironmentId>().unwrap_err();
            assert!(err.to_string().contains("[A-Za-z0-9_-]"), "{bad}: {err}");
        }
    }

    #[test]
    fn parses_a_full_file() {
        let text = r#"
            default = "remote"
            ssh_command = "ssh -F /etc/cfg"
            [[environments]]
            id = "local"
            target = "exec:"
            [[environments]]
            id = "remote"
            target = "ssh://dev@host:2222"
            lazy = true
            start_timeout_ms = 0
            reconnect_deadline_ms = 5000
            [[environments]]
            id = "later"
        "#;
        let config = EnvironmentsConfig::parse(text, Path::new("e.toml")).unwrap();
        assert_eq!(
            config.default.as_ref().map(EnvironmentId::as_str),
            Some("remote")
        );
        let remote = config.get("remote").unwrap();
        assert_eq!(remote.start, StartMode::Lazy);
        assert_eq!(remote.start_timeout, None);
        assert_eq!(remote.reconnect_deadline, Duration::from_secs(5));
        assert_eq!(
            remote.connect.ssh_command.as_deref(),
            Some("ssh -F /etc/cfg")
        );
        let local = config.get("local").unwrap();
        assert_eq!(local.target, Some(Target::Exec(None)));
        assert_eq!(local.reconnect_deadline, DEFAULT_RECONNECT_DEADLINE);
        assert_eq!(config.get("later").unwrap().target, None);
    }

    #[test]
    fn rejects_bad_files_naming_the_problem() {
        let cases = [
            ("[[environments]]\nid = \"a b\"", "invalid environment id"),
            (
                "[[environments]]\nid = \"a\"\n[[environments]]\nid = \"a\"",
                "defined twice",
            ),
            (
                "default = \"x\"\n[[environments]]\nid = \"a\"",
                "names no environment",
            ),
            (
                "[[environments]]\nid = \"a\"\ntarget = \"ftp://x\"",
                "invalid target",
            ),
            ("[[environments]]\nid = \"a\"\ncolour = 1", "cannot parse"),
        ];
        for (text, want) in cases {
            let err = EnvironmentsConfig::parse(text, Path::new("e.toml")).unwrap_err();
            let chain = outpost_proto::error_chain(&err);
            assert!(chain.contains(want), "{text}: {chain}");
        }
    }
}
