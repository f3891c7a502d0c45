//! Errors of the environment registry and of `environments.toml` loading.

use std::path::PathBuf;

use crate::error::ClientError;

/// Why a registry operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No environment with this id is registered.
    #[error("unknown environment {0:?}")]
    UnknownEnvironment(String),
    /// The environment was replaced (registered again) while the caller waited for it.
    #[error("environment {0:?} was replaced while waiting for it")]
    Replaced(String),
    /// The environment was removed (or the registry dropped) while the caller waited for it.
    #[error("environment {0:?} was removed while waiting for it")]
    Removed(String),
}

/// Why an environment id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid environment id {id:?}: must be 1 to 64 characters of [A-Za-z0-9_-]")]
pub struct InvalidEnvironmentId {
    /// The id as given.
    pub id: String,
}

/// Why `environments.toml` could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown or mistyped keys.
    #[error("cannot parse {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: toml::de::Error,
    },
    /// An environment id is invalid.
    #[error("in {path}")]
    InvalidId {
        /// The file.
        path: PathBuf,
        /// The id problem.
        #[source]
        source: InvalidEnvironmentId,
    },
    /// Two environments share an id.
    #[error("{path}: environment id {id:?} is defined twice")]
    DuplicateId {
        /// The file.
        path: PathBuf,
        /// The id.
        id: String,
    },
    /// `default` names no defined environment.
    #[error("{path}: default = {id:?} names no environment defined in the file")]
    UnknownDefault {
        /// The file.
        path: PathBuf,
        /// The id.
        id: String,
    },
    /// An environment's target does not parse.
    #[error("{path}: environment {id:?} has an invalid target")]
    InvalidTarget {
        /// The file.
        path: PathBuf,
        /// The environment.
        id: String,
        /// The parse error.
        #[source]
        source: ClientError,
    },
    /// A token file named by an environment cannot be read.
    #[error("{path}: cannot read token file {token_file} of environment {id:?}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The environment.
        id: String,
        /// The token file.
        token_file: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No environments file exists at any default location.
    #[error("no environments file: looked for ./environments.toml and {0}")]
    NotFound(PathBuf),
}
