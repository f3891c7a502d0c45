//! Connecting to a [`Target`]: the spawned `exec:` child speaking gRPC over its stdin/stdout, the same
//! over `ssh` for `ssh://` targets, unix sockets, plain HTTP/2 on loopback and TLS (rustls, optional
//! client certificate). Every call carries the bearer token when one is configured.
//!
//! # The ssh command
//! An `ssh://[user@]host[:port][?bin=PATH]` target runs
//! `ssh -T -o BatchMode=yes [-l user] [-p port] -- host PATH serve --listen stdio` (`PATH` defaults to
//! `outpost`). Like git's `GIT_SSH_COMMAND`, the `ssh` program can be replaced by a command line —
//! [`ConnectOptions::ssh_command`], else `OUTPOST_SSH_COMMAND` — which is run by `sh -c` with the
//! arguments above appended, so it may carry its own quoted options (`ssh -F "/path/my config"`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::AsyncBufReadExt;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::error::ClientError;
use crate::executor::Executor;
use crate::target::{SshTarget, Target};

/// How to authenticate and verify when connecting.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Bearer token; when `None`, `OUTPOST_TOKEN` is used if set.
    pub token: Option<String>,
    /// CA bundle that signs the executor's certificate (https); default `OUTPOST_TLS_CA`.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate chain for mTLS.
    pub tls_client_cert: Option<PathBuf>,
    /// Private key of the client certificate.
    pub tls_client_key: Option<PathBuf>,
    /// Name to verify in the server certificate; default: the URL's host.
    pub tls_server_name: Option<String>,
    /// Connect timeout; default 10 s.
    pub connect_timeout: Option<Duration>,
    /// Command line replacing `ssh` for `ssh://` targets; default `OUTPOST_SSH_COMMAND`, else `ssh`.
    pub ssh_command: Option<String>,
}

/// Placeholder authority for transports where the URI is not used to dial.
const LOCAL_URI: &str = "http://outpost.local";

/// Connects to `target` and returns a handle with typed calls.
///
/// # Errors
/// Target, credential and TLS problems, a failed spawn for `exec:`, and connection failures.
pub async fn connect(target: &Target, options: &ConnectOptions) -> Result<Executor, ClientError> {
    let token = options
        .token
        .clone()
        .or_else(|| std::env::var("OUTPOST_TOKEN").ok());
    let auth = BearerAuth::new(token.as_deref())?;
    let endpoint = |uri: &http::Uri| {
        Endpoint::from(uri.clone())
            .connect_timeout(options.connect_timeout.unwrap_or(Duration::from_secs(10)))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_timeout(Duration::from_secs(20))
            .keep_alive_while_idle(true)
            .initial_stream_window_size(4 * 1024 * 1024)
            .initial_connection_window_size(16 * 1024 * 1024)
            // Bulk streams (ReadFile, HTTP downloads) cost fewer frames with large HTTP/2 frames.
            .max_frame_size(256 * 1024)
    };
    let local = endpoint(&http::Uri::from_static(LOCAL_URI));
    let connect_err = |source| ClientError::Connect {
        target: target.to_string(),
        source,
    };
    let channel: Channel = match target {
        Target::Exec(bin) => {
            let bin = match bin {
                Some(bin) => bin.clone(),
                None => locate_outpost_binary()?,
            };
            let argv = [
                bin.into_os_string(),
                "serve".into(),
                "--listen".into(),
                "stdio".into(),
            ];
            local
                .connect_with_connector(stdio_connector(argv.to_vec(), "exec:"))
                .await
                .map_err(connect_err)?
        }
        Target::Ssh(ssh) => {
            let custom = options
                .ssh_command
                .clone()
                .or_else(|| std::env::var("OUTPOST_SSH_COMMAND").ok())
                .filter(|c| !c.trim().is_empty());
            let argv = ssh_argv(ssh, custom.as_deref()).into_iter().map(Into::into);
            local
                .connect_with_connector(stdio_connector(argv.collect(), "ssh"))
                .await
                .map_err(connect_err)?
        }
        Target::Unix(path) => {
            let path = path.clone();
            let connector = tower::service_fn(move |_: http::Uri| {
                let path = path.clone();
                async move {
                    tokio::net::UnixStream::connect(path)
                        .await
                        .map(TokioIo::new)
                }
            });
            local
                .connect_with_connector(connector)
                .await
                .map_err(connect_err)?
        }
        Target::Http(uri) => endpoint(uri).connect().await.map_err(connect_err)?,
        Target::Https(uri) => {
            let tls = client_tls_config(options)?;
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_matches(['[', ']'])
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let name = options
                .tls_server_name
                .clone()
                .unwrap_or_else(|| host.clone());
            let server_name =
                ServerName::try_from(name).map_err(|_| ClientError::InvalidTarget {
                    target: target.to_string(),
                    reason: "the TLS server name is not a valid DNS name or IP address",
                })?;
            let connector = tower::service_fn(move |_: http::Uri| {
                let (tls, host, server_name) = (tls.clone(), host.clone(), server_name.clone());
                async move {
                    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                    tcp.set_nodelay(true)?;
                    let stream = tokio_rustls::TlsConnector::from(tls)
                        .connect(server_name, tcp)
                        .await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            });
            local
                .connect_with_connector(connector)
                .await
                .map_err(connect_err)?
        }
    };
    Ok(Executor::new(channel, auth, target.to_string()))
}

/// `OUTPOST_BIN`, else this executable when it is `outpost`, else `outpost` on PATH.
fn locate_outpost_binary() -> Result<PathBuf, ClientError> {
    if let Some(bin) = std::env::var_os("OUTPOST_BIN").filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    // Inside the `outpost` command (its full binary, `outpost-core`): spawn this very binary, which
    // skips the front binary's extra exec.
    if let Ok(exe) = std::env::current_exe()
        && exe
            .file_name()
            .is_some_and(|n| n == "outpost" || n == "outpost-core")
    {
        return Ok(exe);
    }
    let path = std::env::var_os("PATH").ok_or(ClientError::BinaryNotFound)?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("outpost"))
        .find(|candidate| candidate.is_file())
        .ok_or(ClientError::BinaryNotFound)
}

type ChildIo = tokio::io::Join<tokio::process::ChildStdout, tokio::process::ChildStdin>;

/// The argument vector that runs `outpost serve --listen stdio` on the ssh target's host: `ssh` with
/// fixed options, or `sh -c '<custom> "$@"' ssh <same options>` for a custom ssh command line.
pub fn ssh_argv(target: &SshTarget, custom: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = ["-T", "-o", "BatchMode=yes"].map(String::from).to_vec();
    if let Some(user) = &target.user {
        args.extend(["-l".to_owned(), user.clone()]);
    }
    if let Some(port) = target.port {
        args.extend(["-p".to_owned(), port.to_string()]);
    }
    // `--` ends ssh's options; the target parser already refuses hosts starting with '-'.
    args.extend(["--".to_owned(), target.host.clone()]);
    args.push(target.bin.clone().unwrap_or_else(|| "outpost".to_owned()));
    args.extend(["serve", "--listen", "stdio"].map(String::from));
    match custom {
        None => std::iter::once("ssh".to_owned()).chain(args).collect(),
        Some(command) => ["sh", "-c", &format!("{command} \"$@\""), "ssh"]
            .map(String::from)
            .into_iter()
            .chain(args)
            .collect(),
    }
}

/// Pipe buffer asked for on a stdio transport: the HTTP/2 connection's bulk frames (256 KiB) then
/// cross in a few large writes instead of many 64 KiB ones.
const STDIO_PIPE_BYTES: libc::c_int = 1024 * 1024;

/// Enlarges a pipe's buffer; best effort (an unprivileged user may be capped by
/// `fs.pipe-max-size`, which only costs throughput).
fn grow_pipe(pipe: &impl std::os::fd::AsRawFd) {
    // SAFETY: F_SETPIPE_SZ takes an integer; the fd is an open pipe end owned by `pipe`.
    let _ = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, STDIO_PIPE_BYTES) };
}

/// A connector that spawns `argv` (a stdio executor: `outpost serve --listen stdio`, directly or
/// through ssh) for each connection.
fn stdio_connector(
    argv: Vec<std::ffi::OsString>,
    kind: &'static str,
) -> impl tower::Service<
    http::Uri,
    Response = TokioIo<ChildIo>,
    Error = std::io::Error,
    Future = impl Future<Output = std::io::Result<TokioIo<ChildIo>>> + Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |_: http::Uri| {
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]);
        async move { spawn_stdio_child(command, kind).map(TokioIo::new) }
    })
}

/// Spawns a child that serves one gRPC connection on its stdin/stdout (`outpost serve --listen stdio`,
/// directly or through ssh). Its stderr is drained into tracing so it can never fill up and block the
/// child; the child is reaped (and killed if the runtime goes away) by a task.
fn spawn_stdio_child(
    mut command: tokio::process::Command,
    kind: &'static str,
) -> std::io::Result<ChildIo> {
    let program = command.as_std().get_program().to_owned();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            let program = Path::new(&program).display();
            std::io::Error::new(e.kind(), format!("cannot spawn {program}: {e}"))
        })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("child stdio was not captured"));
    };
    grow_pipe(&stdout);
    grow_pipe(&stdin);
    let pid = child.id();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            // The executor's own errors (and ssh's complaints) matter to the user; everything else
            // (including warnings the client reports itself, like sandbox refusals) is debug detail.
            if line.contains(" ERROR ") || (kind == "ssh" && !line.contains(" outpost")) {
                tracing::warn!(target: "outpost::executor", pid, kind, "{line}");
            } else {
                tracing::debug!(target: "outpost::executor", pid, kind, "{line}");
            }
        }
    });
    tokio::spawn(async move {
        match child.wait().await {
            Ok(status) => tracing::debug!(pid, kind, %status, "stdio executor exited"),
            Err(err) => tracing::warn!(pid, kind, cause = %err, "cannot reap stdio executor"),
        }
    });
    Ok(tokio::io::join(stdout, stdin))
}

fn client_tls_config(options: &ConnectOptions) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let ca = options
        .tls_ca
        .clone()
        .or_else(|| std::env::var_os("OUTPOST_TLS_CA").map(PathBuf::from))
        .ok_or(ClientError::MissingCa)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs("CA bundle", &ca)? {
        roots.add(cert).map_err(ClientError::Tls)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(ClientError::Tls)?
    .with_root_certificates(roots);
    let mut config = match (&options.tls_client_cert, &options.tls_client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_certs("client certificate", cert)?;
            let key =
                PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error("client key", key, e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(ClientError::Tls)?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

fn read_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error(what, path, e))?;
    if certs.is_empty() {
        return Err(ClientError::PemEmpty {
            what,
            path: path.to_owned(),
            expected: "CERTIFICATE block",
        });
    }
    Ok(certs)
}

fn pem_error(
    what: &'static str,
    path: &Path,
    source: rustls::pki_types::pem::Error,
) -> ClientError {
    ClientError::Pem {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct BearerAuth(Option<MetadataValue<Ascii>>);

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "BearerAuth(<token>)"
        } else {
            "BearerAuth(None)"
        })
    }
}

impl BearerAuth {
    fn new(token: Option<&str>) -> Result<Self, ClientError> {
        token
            .map(|t| {
                format!("Bearer {}", t.trim())
                    .parse()
                    .map_err(|_| ClientError::InvalidToken)
            })
            .transpose()
            .map(Self)
    }
}

impl tonic::service::Interceptor for BearerAuth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(s: &str) -> SshTarget {
        match s.parse::<Target>() {
            Ok(Target::Ssh(t)) => t,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn ssh_argv_plain_and_custom() {
        let target = ssh("ssh://dev@h:2200?bin=/opt/outpost");
        assert_eq!(
            ssh_argv(&target, None),
            [
                "ssh",
                "-T",
                "-o",
                "BatchMode=yes",
                "-l",
                "dev",
                "-p",
                "2200",
                "--",
                "h",
                "/opt/outpost",
                "serve",
                "--listen",
                "stdio"
            ]
        );
        let custom = ssh_argv(&ssh("ssh://h"), Some("ssh -F '/tmp/my config'"));
        assert_eq!(
            custom[..4],
            ["sh", "-c", "ssh -F '/tmp/my config' \"$@\"", "ssh"]
        );
        assert_eq!(
            custom[4..],
            [
                "-T",
                "-o",
                "BatchMode=yes",
                "--",
                "h",
                "outpost",
                "serve",
                "--listen",
                "stdio"
            ]
        );
    }
}
