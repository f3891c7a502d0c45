//! The executor configuration file (`outpost.toml`). Every field mirrors a command-line flag of
//! `outpost serve`; flags override the file. Unknown keys are an error that names the key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::ServerError;

/// Contents of `outpost.toml`. All fields are optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen target (`unix:PATH`, `tcp://HOST:PORT`, `stdio`).
    pub listen: Option<String>,
    /// File that holds the bearer token.
    pub token_file: Option<PathBuf>,
    /// PEM certificate chain for TLS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for TLS.
    pub tls_key: Option<PathBuf>,
    /// PEM bundle of CAs whose client certificates are accepted (mTLS).
    pub tls_client_ca: Option<PathBuf>,
    /// Workspace roots (absolute); profiles resolve `project_roots` against them.
    #[serde(default)]
    pub workspace_roots: Vec<PathBuf>,
    /// Extra uids allowed to connect over the unix socket besides the server's own.
    #[serde(default)]
    pub allowed_peer_uids: Vec<u32>,
    /// Stable executor id; default: a random id per process.
    pub executor_id: Option<String>,
    /// TOML file with named permission profiles (`[permissions.NAME]`) and `default_profile`.
    pub profiles_file: Option<PathBuf>,
    /// Profile used when a request names none (default `:workspace`).
    pub default_profile: Option<String>,
    /// Managed requirements file (default `$OUTPOST_MANAGED_CONFIG` or `/etc/outpost/requirements.toml`).
    pub managed_config: Option<PathBuf>,
    /// Operator opt-out: launch even when a sandbox layer a profile needs is missing.
    #[serde(default)]
    pub allow_degraded: bool,
    /// Limits.
    #[serde(default)]
    pub limits: LimitsConfig,
}

/// `[limits]` table of `outpost.toml`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest gRPC message accepted or sent, in bytes.
    pub max_message_bytes: Option<usize>,
    /// Concurrent HTTP/2 streams (calls) per connection.
    pub max_concurrent_streams: Option<u32>,
    /// HTTP/2 ping interval in milliseconds.
    pub keepalive_interval_ms: Option<u64>,
    /// How long to wait for a ping reply before closing the connection, in milliseconds.
    pub keepalive_timeout_ms: Option<u64>,
    /// How long draining waits for in-flight calls on shutdown, in milliseconds.
    pub shutdown_grace_ms: Option<u64>,
    /// How long a detached session's processes keep running, in milliseconds (default 30000).
    pub detach_ttl_ms: Option<u64>,
    /// Output retained per process, in bytes (default 1 MiB).
    pub output_ring_bytes: Option<usize>,
    /// How long an exited process stays readable, in milliseconds (default 30000).
    pub exit_retention_ms: Option<u64>,
}

impl ServerConfig {
    /// Reads and parses a configuration file.
    ///
    /// # Errors
    /// [`ServerError::ReadFile`] when the file cannot be read, [`ServerError::Config`] when it does not
    /// parse (the message names the offending key).
    pub fn load(path: &Path) -> Result<Self, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServerError::ReadFile {
            what: "config file",
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ServerError::Config {
            path: path.to_owned(),
            source,
        })
    }
}

/// Effective limits of a running executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest gRPC message accepted or sent, in bytes.
    pub max_message_bytes: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// HTTP/2 ping interval.
    pub keepalive_interval: Duration,
    /// Ping reply deadline.
    pub keepalive_timeout: Duration,
    /// Drain bound on shutdown.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 16 * 1024 * 1024,
            max_concurrent_streams: 256,
            keepalive_interval: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(20),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl LimitsConfig {
    /// Applies the configured values over the defaults.
    pub fn resolve(&self) -> Limits {
        let d = Limits::default();
        Limits {
            max_message_bytes: self.max_message_bytes.unwrap_or(d.max_message_bytes),
            max_concurrent_streams: self
                .max_concurrent_streams
                .unwrap_or(d.max_concurrent_streams),
            keepalive_interval: self
                .keepalive_interval_ms
                .map_or(d.keepalive_interval, Duration::from_millis),
            keepalive_timeout: self
                .keepalive_timeout_ms
                .map_or(d.keepalive_timeout, Duration::from_millis),
            shutdown_grace: self
                .shutdown_grace_ms
                .map_or(d.shutdown_grace, Duration::from_millis),
        }
    }
}

impl LimitsConfig {
    /// Applies the configured process limits over the defaults.
    pub fn process(&self) -> crate::process::ProcessConfig {
        let d = crate::process::ProcessConfig::default();
        crate::process::ProcessConfig {
            detach_ttl: self
                .detach_ttl_ms
                .map_or(d.detach_ttl, Duration::from_millis),
            output_ring_bytes: self.output_ring_bytes.unwrap_or(d.output_ring_bytes),
            exit_retention: self
                .exit_retention_ms
                .map_or(d.exit_retention, Duration::from_millis),
            ..d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_is_named() {
        let err = toml::from_str::<ServerConfig>("listne = \"stdio\"").unwrap_err();
        assert!(err.to_string().contains("listne"), "{err}");
    }

    #[test]
    fn limits_override_defaults() {
        let cfg: ServerConfig = toml::from_str("[limits]\nmax_concurrent_streams = 7\n").unwrap();
        let limits = cfg.limits.resolve();
        assert_eq!(limits.max_concurrent_streams, 7);
        assert_eq!(
            limits.max_message_bytes,
            Limits::default().max_message_bytes
        );
    }
}
