//! `--target` and credential flags shared by every client command, and `--environment ID`, which
//! names an executor in an environments file (`environments.toml`) instead.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use outpost_client::registry::EnvironmentsConfig;
use outpost_client::{ConnectOptions, EnvironmentRegistry, Executor, Target, WaitOutcome};

/// Where the executor is and how to authenticate.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// Executor to talk to: `exec:` (spawn a private one), `unix:/PATH`, `http://HOST:PORT`,
    /// `https://HOST:PORT`, `ssh://[USER@]HOST[:PORT][?bin=/path/to/outpost]` (the ssh command is
    /// `OUTPOST_SSH_COMMAND`, else `ssh`).
    #[arg(
        long,
        short = 't',
        global = true,
        env = "OUTPOST_TARGET",
        default_value = "exec:"
    )]
    pub(crate) target: String,
    /// Environment id from the environments file, instead of --target (waits until it is Ready).
    #[arg(
        long,
        short = 'E',
        global = true,
        env = "OUTPOST_ENVIRONMENT",
        conflicts_with = "target"
    )]
    pub(crate) environment: Option<String>,
    /// Environments file; default ./environments.toml, else
    /// $XDG_CONFIG_HOME/outpost/environments.toml. Without --environment, its `default` is used.
    #[arg(long, global = true, env = "OUTPOST_ENVIRONMENTS")]
    pub(crate) environments: Option<PathBuf>,
    /// File holding the bearer token (default: `OUTPOST_TOKEN` if set).
    #[arg(long, global = true, env = "OUTPOST_TOKEN_FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// CA bundle that signed the executor's TLS certificate (https targets).
    #[arg(long, global = true, env = "OUTPOST_TLS_CA")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Client certificate for mTLS (PEM).
    #[arg(long, global = true, requires = "tls_client_key")]
    pub(crate) tls_client_cert: Option<PathBuf>,
    /// Private key of the client certificate (PEM).
    #[arg(long, global = true, requires = "tls_client_cert")]
    pub(crate) tls_client_key: Option<PathBuf>,
}

impl TargetArgs {
    /// Connects, with the target named in any error.
    pub(crate) async fn connect(&self) -> anyhow::Result<Executor> {
        if self.environment.is_some() || self.environments.is_some() {
            return self.connect_environment().await;
        }
        let target: Target = self.target.parse()?;
        let token = self.token()?;
        let options = ConnectOptions {
            token,
            tls_ca: self.tls_ca.clone(),
            tls_client_cert: self.tls_client_cert.clone(),
            tls_client_key: self.tls_client_key.clone(),
            ..ConnectOptions::default()
        };
        // The client's error names the target already.
        Ok(outpost_client::connect(&target, &options).await?)
    }

    /// Connects to an environment of the environments file through a registry, so the same
    /// readiness rules apply as for a harness: wait (up to its start timeout) until health is SERVING.
    async fn connect_environment(&self) -> anyhow::Result<Executor> {
        let path = match &self.environments {
            Some(path) => path.clone(),
            None => EnvironmentsConfig::default_path()?,
        };
        let config = EnvironmentsConfig::load(&path)?;
        let id = match (&self.environment, &config.default) {
            (Some(id), _) => id.clone(),
            (None, Some(default)) => default.to_string(),
            (None, None) => anyhow::bail!(
                "{} has no `default`; name an environment with --environment ID",
                path.display()
            ),
        };
        let mut spec = config
            .get(&id)
            .with_context(|| format!("no environment {id:?} in {}", path.display()))?
            .clone();
        anyhow::ensure!(
            spec.target.is_some(),
            "environment {id:?} in {} has no target yet (deferred); use --target",
            path.display()
        );
        if let Some(token) = self.token()? {
            spec.connect.token = Some(token);
        }
        if let Some(ca) = &self.tls_ca {
            spec.connect.tls_ca = Some(ca.clone());
        }
        spec.connect.tls_client_cert = self.tls_client_cert.clone();
        spec.connect.tls_client_key = self.tls_client_key.clone();
        // A little longer than the start timeout, so the supervisor's own verdict (with its reason) wins.
        let wait = spec.start_timeout.map_or(std::time::Duration::MAX, |t| {
            t + std::time::Duration::from_secs(1)
        });
        let registry = EnvironmentRegistry::new();
        registry.register(spec);
        match registry.wait_for_environment(&id, wait).await? {
            WaitOutcome::Ready(env) => Ok(env.executor().clone()),
            WaitOutcome::Failed(reason) => anyhow::bail!("environment {id:?}: {reason}"),
            WaitOutcome::TimedOut => anyhow::bail!("environment {id:?} was not ready in time"),
        }
    }

    fn token(&self) -> anyhow::Result<Option<String>> {
        Ok(match &self.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read token file {}", path.display()))?
                    .trim()
                    .to_owned(),
            ),
            None => None,
        })
    }
}
