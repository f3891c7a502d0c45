//! Managed requirements: an operator file (default `/etc/outpost/requirements.toml`, overridable with
//! `OUTPOST_MANAGED_CONFIG`) that constrains which profiles may run and forces restrictions.
//!
//! ```toml
//! allowed_profiles = [":workspace", ":read-only", "dev"]  # absent: any profile
//! force_network_restricted = true
//! deny_paths = ["/etc/shadow", "/root/.ssh"]
//! allow_unsandboxed = false                               # :danger-full-access / JSON "disabled"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default location of the managed requirements file.
pub const DEFAULT_PATH: &str = "/etc/outpost/requirements.toml";
/// Environment variable that overrides [`DEFAULT_PATH`].
pub const PATH_ENV: &str = "OUTPOST_MANAGED_CONFIG";

/// Operator-managed constraints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagedRequirements {
    /// Profile names that may be used; `None` allows all. Anonymous (JSON) profiles are allowed only
    /// when the list contains `"*"` or is absent.
    pub allowed_profiles: Option<Vec<String>>,
    /// Force the network to be restricted whatever the profile says.
    #[serde(default)]
    pub force_network_restricted: bool,
    /// Absolute paths that are neither readable nor writable in any sandbox.
    #[serde(default)]
    pub deny_paths: Vec<PathBuf>,
    /// Whether unsandboxed runs (`:danger-full-access`, JSON `disabled`) are allowed.
    #[serde(default)]
    pub allow_unsandboxed: bool,
    /// Where this was loaded from (for messages); not part of the file.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// Failure to load managed requirements.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagedError {
    /// The file exists but could not be read.
    #[error("cannot read managed requirements {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key (the message names it).
    #[error("invalid managed requirements {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A deny path is relative.
    #[error("managed requirements {path}: deny_paths entry {entry:?} must be absolute")]
    RelativeDenyPath {
        /// The file.
        path: PathBuf,
        /// The entry.
        entry: PathBuf,
    },
}

/// A profile refused by a managed rule; the message names the rule and the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManagedRefusal {
    /// The profile is not in `allowed_profiles`.
    #[error(
        "profile {profile} is not allowed by managed requirements (rule `allowed_profiles` in {source_file})"
    )]
    NotAllowed {
        /// The profile name, or `<anonymous JSON profile>`.
        profile: String,
        /// The requirements file.
        source_file: String,
    },
    /// An unsandboxed run was requested but `allow_unsandboxed` is not true.
    #[error(
        "running unsandboxed is not allowed by managed requirements (rule `allow_unsandboxed` in {source_file}; set `allow_unsandboxed = true` there to permit it)"
    )]
    Unsandboxed {
        /// The requirements file, and whether it exists.
        source_file: String,
    },
}

impl ManagedRequirements {
    /// The path to load: `$OUTPOST_MANAGED_CONFIG` or [`DEFAULT_PATH`].
    pub fn default_path() -> PathBuf {
        std::env::var_os(PATH_ENV).map_or_else(|| PathBuf::from(DEFAULT_PATH), PathBuf::from)
    }

    /// Loads requirements from [`ManagedRequirements::default_path`]; a missing file means none.
    ///
    /// # Errors
    /// As [`ManagedRequirements::load`].
    pub fn load_default() -> Result<Self, ManagedError> {
        Self::load(&Self::default_path())
    }

    /// Loads requirements from `path`; a missing file means no requirements.
    ///
    /// # Errors
    /// [`ManagedError::Read`], [`ManagedError::Parse`] (naming an unknown key),
    /// [`ManagedError::RelativeDenyPath`].
    pub fn load(path: &Path) -> Result<Self, ManagedError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Remember where we looked, so a refusal can tell the operator which file to create.
                return Ok(Self {
                    source: Some(path.to_owned()),
                    ..Self::default()
                });
            }
            Err(source) => {
                return Err(ManagedError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Parses requirements text; `path` is recorded for messages.
    ///
    /// # Errors
    /// [`ManagedError::Parse`], [`ManagedError::RelativeDenyPath`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManagedError> {
        let mut req: Self = toml::from_str(text).map_err(|e| ManagedError::Parse {
            path: path.to_owned(),
            message: e.message().to_owned(),
        })?;
        if let Some(entry) = req.deny_paths.iter().find(|p| !p.is_absolute()) {
            return Err(ManagedError::RelativeDenyPath {
                path: path.to_owned(),
                entry: entry.clone(),
            });
        }
        req.source = Some(path.to_owned());
        Ok(req)
    }

    fn source_name(&self) -> String {
        self.source.as_ref().map_or_else(
            || "the built-in defaults (no requirements file)".to_owned(),
            |p| {
                if p.exists() {
                    p.display().to_string()
                } else {
                    format!("{} (absent, so the defaults apply)", p.display())
                }
            },
        )
    }

    /// Checks whether a profile may run.
    ///
    /// # Errors
    /// [`ManagedRefusal`] naming the rule that forbids it.
    pub fn check(&self, name: Option<&str>, unsandboxed: bool) -> Result<(), ManagedRefusal> {
        if let Some(allowed) = &self.allowed_profiles {
            let ok = allowed.iter().any(|a| a == "*" || Some(a.as_str()) == name);
            if !ok {
                return Err(ManagedRefusal::NotAllowed {
                    profile: name.map_or_else(
                        || "<anonymous JSON profile>".to_owned(),
                        |n| format!("{n:?}"),
                    ),
                    source_file: self.source_name(),
                });
            }
        }
        if unsandboxed && !self.allow_unsandboxed {
            return Err(ManagedRefusal::Unsandboxed {
                source_file: self.source_name(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<ManagedRequirements, ManagedError> {
        ManagedRequirements::parse(t, Path::new("/etc/outpost/requirements.toml"))
    }

    #[test]
    fn refusal_names_the_rule() {
        let req = parse("allowed_profiles = [\":read-only\"]").unwrap();
        assert!(req.check(Some(":read-only"), false).is_ok());
        let msg = req
            .check(Some(":workspace"), false)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("allowed_profiles"), "{msg}");
        assert!(msg.contains("requirements.toml"), "{msg}");
        let msg = parse("")
            .unwrap()
            .check(Some(":danger-full-access"), true)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("allow_unsandboxed"), "{msg}");
        assert!(
            parse("allow_unsandboxed = true")
                .unwrap()
                .check(None, true)
                .is_ok()
        );
    }

    #[test]
    fn unknown_key_and_relative_paths() {
        let err = parse("deny_path = []").unwrap_err().to_string();
        assert!(err.contains("deny_path"), "{err}");
        assert!(matches!(
            parse("deny_paths = [\"etc\"]"),
            Err(ManagedError::RelativeDenyPath { .. })
        ));
    }

    #[test]
    fn missing_file_means_no_requirements() {
        let path = Path::new("/nonexistent/outpost/req.toml");
        let req = ManagedRequirements::load(path).unwrap();
        let expected = ManagedRequirements {
            source: Some(path.to_owned()),
            ..ManagedRequirements::default()
        };
        assert_eq!(req, expected, "defaults, remembering where we looked");
        let refusal = req
            .check(Some(":danger-full-access"), true)
            .unwrap_err()
            .to_string();
        assert!(
            refusal.contains("/nonexistent/outpost/req.toml (absent"),
            "{refusal}"
        );
    }
}
