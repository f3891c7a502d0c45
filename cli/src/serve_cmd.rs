//! `outpost serve`: run an executor. Flags override the `--config` file, which mirrors every flag.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use outpost_exec_server::auth::Token;
use outpost_exec_server::process::SandboxSettings;
use outpost_exec_server::{ExecutorOptions, ListenTarget, Listener, ServerConfig};
use outpost_sandbox::{ManagedRequirements, ProfileConfig};

/// Arguments of `outpost serve`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    outpost serve                                    # unix socket in $XDG_RUNTIME_DIR/outpost/\n  \
    outpost serve --listen tcp://127.0.0.1:7700 --token-file ~/.outpost-token\n  \
    outpost serve --listen tcp://0.0.0.0:7700 --token-file t --tls-cert c.pem --tls-key k.pem\n  \
    outpost serve --listen stdio                     # one connection on stdin/stdout (ssh, exec:)")]
pub(crate) struct ServeArgs {
    /// TOML file with any of these settings (keys as the long flags with `_`, limits under `[limits]`).
    #[arg(long, env = "OUTPOST_CONFIG")]
    config: Option<PathBuf>,
    /// `unix:PATH` (default: unix: in a private dir), `tcp://IP:PORT` (token required; TLS unless
    /// loopback), or `stdio`.
    #[arg(long)]
    listen: Option<String>,
    /// File holding the bearer token clients must present. Required for tcp://.
    #[arg(long, env = "OUTPOST_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// TLS certificate chain (PEM).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA bundle (mTLS).
    #[arg(long)]
    tls_client_ca: Option<PathBuf>,
    /// Workspace root (absolute, repeatable). Health stays NOT_SERVING until each one exists.
    #[arg(long = "workspace-root", value_name = "DIR")]
    workspace_roots: Vec<PathBuf>,
    /// Also accept unix-socket peers with this uid (repeatable; default: only our own uid).
    #[arg(long = "allow-peer-uid", value_name = "UID")]
    allowed_peer_uids: Vec<u32>,
    /// Stable executor id reported by Info (default: random per process).
    #[arg(long)]
    executor_id: Option<String>,
    /// TOML file with named permission profiles (`[permissions.NAME]` tables, `default_profile`).
    #[arg(long)]
    profiles_file: Option<PathBuf>,
    /// Profile for requests that name none (default :workspace).
    #[arg(long)]
    default_profile: Option<String>,
    /// Managed requirements, always applied (default $OUTPOST_MANAGED_CONFIG or
    /// /etc/outpost/requirements.toml; a missing file means: no unsandboxed runs, nothing else).
    #[arg(long)]
    managed_config: Option<PathBuf>,
    /// Operator opt-out: launch even when a sandbox layer a profile needs is missing (each missing
    /// layer is reported as degraded). Never the default.
    #[arg(long)]
    allow_degraded: bool,
    /// How long a detached session's processes keep running, in ms (default 30000).
    #[arg(long)]
    detach_ttl_ms: Option<u64>,
    /// Output retained per process, in bytes (default 1 MiB).
    #[arg(long)]
    output_ring_bytes: Option<usize>,
    /// Largest gRPC message in bytes (default 16 MiB).
    #[arg(long)]
    max_message_bytes: Option<usize>,
    /// Concurrent calls per connection (default 256).
    #[arg(long)]
    max_concurrent_streams: Option<u32>,
    /// HTTP/2 keepalive ping interval in ms (default 20000).
    #[arg(long)]
    keepalive_interval_ms: Option<u64>,
    /// Grace period for in-flight calls on SIGTERM/SIGINT in ms (default 10000).
    #[arg(long)]
    shutdown_grace_ms: Option<u64>,
}

impl ServeArgs {
    /// Applies flags over the config file.
    fn merged(self) -> anyhow::Result<ServerConfig> {
        let mut cfg = match &self.config {
            Some(path) => ServerConfig::load(path)?,
            None => ServerConfig::default(),
        };
        cfg.listen = self.listen.or(cfg.listen);
        cfg.token_file = self.token_file.or(cfg.token_file);
        cfg.tls_cert = self.tls_cert.or(cfg.tls_cert);
        cfg.tls_key = self.tls_key.or(cfg.tls_key);
        cfg.tls_client_ca = self.tls_client_ca.or(cfg.tls_client_ca);
        cfg.executor_id = self.executor_id.or(cfg.executor_id);
        cfg.profiles_file = self.profiles_file.or(cfg.profiles_file);
        cfg.default_profile = self.default_profile.or(cfg.default_profile);
        cfg.managed_config = self.managed_config.or(cfg.managed_config);
        cfg.allow_degraded |= self.allow_degraded;
        if !self.workspace_roots.is_empty() {
            cfg.workspace_roots = self.workspace_roots;
        }
        cfg.allowed_peer_uids.extend(self.allowed_peer_uids);
        let limits = &mut cfg.limits;
        limits.max_message_bytes = self.max_message_bytes.or(limits.max_message_bytes);
        limits.max_concurrent_streams = self
            .max_concurrent_streams
            .or(limits.max_concurrent_streams);
        limits.keepalive_interval_ms = self.keepalive_interval_ms.or(limits.keepalive_interval_ms);
        limits.shutdown_grace_ms = self.shutdown_grace_ms.or(limits.shutdown_grace_ms);
        limits.detach_ttl_ms = self.detach_ttl_ms.or(limits.detach_ttl_ms);
        limits.output_ring_bytes = self.output_ring_bytes.or(limits.output_ring_bytes);
        Ok(cfg)
    }
}

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.merged()?;
    let target: ListenTarget = cfg.listen.as_deref().unwrap_or("unix:").parse()?;
    let token = cfg
        .token_file
        .as_deref()
        .map(Token::from_file)
        .transpose()?;
    let tls = match (&cfg.tls_cert, &cfg.tls_key) {
        (Some(cert), Some(key)) => Some(outpost_exec_server::tls::server_config(
            cert,
            key,
            cfg.tls_client_ca.as_deref(),
        )?),
        (None, None) if cfg.tls_client_ca.is_some() => {
            anyhow::bail!("--tls-client-ca needs --tls-cert and --tls-key")
        }
        _ => None,
    };
    let sandbox = sandbox_settings(&cfg)?;
    let shutdown = shutdown_signal()?;
    let listener = Listener::bind(&target, tls.is_some(), token.is_some()).await?;
    let mut options = ExecutorOptions {
        token,
        tls,
        workspace_roots: cfg.workspace_roots,
        allowed_peer_uids: cfg.allowed_peer_uids,
        limits: cfg.limits.resolve(),
        http: cfg.http.resolve(),
        process: cfg.limits.process(),
        // This binary carries the hidden guard subcommand.
        orphan_guard: std::env::current_exe().ok(),
        sandbox,
        ..ExecutorOptions::default()
    };
    if let Some(id) = cfg.executor_id {
        options.executor_id = id;
    }
    tracing::info!(target = %listener.client_target(), executor_id = %options.executor_id, "outpost executor listening");
    outpost_exec_server::serve(listener, options, shutdown)
        .await
        .context("executor stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}

/// Profiles, default profile, managed requirements and the degraded opt-out from the config.
fn sandbox_settings(cfg: &ServerConfig) -> anyhow::Result<SandboxSettings> {
    let mut settings = SandboxSettings::default();
    if let Some(path) = &cfg.profiles_file {
        settings.profiles = ProfileConfig::load(path)?;
    }
    if let Some(name) = cfg
        .default_profile
        .clone()
        .or_else(|| settings.profiles.default_profile.clone())
    {
        settings
            .profiles
            .profile(&name)
            .with_context(|| format!("invalid default profile {name:?}"))?;
        settings.default_profile = name;
    }
    settings.managed = match &cfg.managed_config {
        Some(path) => ManagedRequirements::load(path)?,
        None => ManagedRequirements::load_default()?,
    };
    settings.allow_degraded = cfg.allow_degraded;
    if cfg.allow_degraded {
        tracing::warn!(
            "--allow-degraded: processes may run with sandbox layers missing (reported per launch)"
        );
    }
    Ok(settings)
}

/// Installs the SIGTERM/SIGINT handlers now (before the socket accepts anyone, so an early signal
/// drains instead of killing) and returns a future that resolves on the first of them.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: draining"),
            _ = int.recv() => tracing::info!("SIGINT: draining"),
        }
    })
}
