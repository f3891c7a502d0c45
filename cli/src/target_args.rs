//! `--target` and credential flags shared by every client command.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use outpost_client::{ConnectOptions, Executor, Target};

/// Where the executor is and how to authenticate.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// Executor to talk to: `exec:` (spawn a private one), `unix:/PATH`, `http://HOST:PORT`,
    /// `https://HOST:PORT`.
    #[arg(
        long,
        short = 't',
        global = true,
        env = "OUTPOST_TARGET",
        default_value = "exec:"
    )]
    pub(crate) target: String,
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
        let target: Target = self.target.parse()?;
        let token = match &self.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read token file {}", path.display()))?
                    .trim()
                    .to_owned(),
            ),
            None => None,
        };
        let options = ConnectOptions {
            token,
            tls_ca: self.tls_ca.clone(),
            tls_client_cert: self.tls_client_cert.clone(),
            tls_client_key: self.tls_client_key.clone(),
            ..ConnectOptions::default()
        };
        outpost_client::connect(&target, &options)
            .await
            .with_context(|| format!("cannot connect to {target}"))
    }
}
