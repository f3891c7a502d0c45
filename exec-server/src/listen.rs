//! Listen targets and binding them. A unix socket lives in a private (0700) directory and is created
//! 0600; a TCP listener on a non-loopback address is refused unless TLS is configured.

use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

use crate::error::ServerError;

/// Where the executor listens, as given by `--listen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenTarget {
    /// `unix:PATH`; `unix:` alone means the default path (see [`default_socket_path`]).
    Unix(Option<PathBuf>),
    /// `tcp://HOST:PORT` with a literal IP address.
    Tcp(SocketAddr),
    /// `stdio`: one HTTP/2 connection over stdin/stdout.
    Stdio,
}

impl std::str::FromStr for ListenTarget {
    type Err = ServerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason| ServerError::ListenTarget {
            target: s.to_owned(),
            reason,
        };
        if s == "stdio" {
            Ok(Self::Stdio)
        } else if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Ok(Self::Unix(None));
            }
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(bad("the socket path must be absolute"));
            }
            Ok(Self::Unix(Some(path)))
        } else if let Some(addr) = s.strip_prefix("tcp://") {
            addr.parse().map(Self::Tcp).map_err(|_| {
                bad("expected tcp://IP:PORT with a literal IP address, e.g. tcp://127.0.0.1:7700")
            })
        } else {
            Err(bad("expected unix:PATH, tcp://IP:PORT or stdio"))
        }
    }
}

/// The default socket: `$XDG_RUNTIME_DIR/outpost/outpost.sock`, else `$TMPDIR/outpost-$UID/outpost.sock`.
pub fn default_socket_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("outpost").join("outpost.sock"),
        None => std::env::temp_dir()
            .join(format!("outpost-{}", nix::unistd::geteuid()))
            .join("outpost.sock"),
    }
}

/// A bound listener, ready for [`serve`](crate::serve).
#[derive(Debug)]
pub enum Listener {
    /// A unix socket; the file is removed when the listener is dropped.
    Unix(UnixListener, SocketFileGuard),
    /// A TCP socket.
    Tcp(TcpListener),
    /// Standard input and output of this process.
    Stdio,
}

impl Listener {
    /// Binds `target`. `tls` says whether TLS is configured, `token` whether a bearer token is.
    ///
    /// # Errors
    /// Refuses plaintext non-loopback TCP ([`ServerError::PlaintextNonLoopback`]), TCP without a token,
    /// a socket directory that is not private, a socket path another executor answers on, and bind errors.
    pub async fn bind(target: &ListenTarget, tls: bool, token: bool) -> Result<Self, ServerError> {
        match target {
            ListenTarget::Stdio => Ok(Self::Stdio),
            ListenTarget::Tcp(addr) => {
                if !tls && !addr.ip().is_loopback() {
                    return Err(ServerError::PlaintextNonLoopback { addr: *addr });
                }
                if !token {
                    return Err(ServerError::TcpWithoutToken);
                }
                let listener =
                    TcpListener::bind(addr)
                        .await
                        .map_err(|source| ServerError::Bind {
                            what: addr.to_string(),
                            source,
                        })?;
                Ok(Self::Tcp(listener))
            }
            ListenTarget::Unix(path) => {
                let path = path.clone().unwrap_or_else(default_socket_path);
                bind_unix(&path).await
            }
        }
    }

    /// The address clients should use, e.g. `unix:/run/user/0/outpost/outpost.sock`.
    pub fn client_target(&self) -> String {
        match self {
            Self::Unix(_, guard) => format!("unix:{}", guard.0.display()),
            Self::Tcp(l) => l
                .local_addr()
                .map_or_else(|_| "tcp://?".into(), |a| format!("http://{a}")),
            Self::Stdio => "stdio".into(),
        }
    }
}

/// Removes the socket file when the listener goes away.
#[derive(Debug)]
pub struct SocketFileGuard(PathBuf);

impl Drop for SocketFileGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn bind_unix(path: &Path) -> Result<Listener, ServerError> {
    let setup = |source| ServerError::SocketSetup {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    ensure_private_dir(dir)?;
    if path.exists() {
        // A live socket means another executor; a dead one is left over from a crash.
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(ServerError::SocketInUse {
                path: path.to_owned(),
            });
        }
        std::fs::remove_file(path).map_err(setup)?;
    }
    let listener = UnixListener::bind(path).map_err(|source| ServerError::Bind {
        what: path.display().to_string(),
        source,
    })?;
    // The 0700 directory already keeps others out; 0600 also protects a socket in a shared dir.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(setup)?;
    Ok(Listener::Unix(listener, SocketFileGuard(path.to_owned())))
}

/// Creates `dir` 0700 if missing; refuses an existing one that is not ours or not 0700.
fn ensure_private_dir(dir: &Path) -> Result<(), ServerError> {
    let uid = nix::unistd::geteuid().as_raw();
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|source| ServerError::SocketSetup {
            path: dir.to_owned(),
            source,
        })?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| ServerError::SocketSetup {
                path: dir.to_owned(),
                source,
            },
        )?;
    }
    let meta = std::fs::metadata(dir).map_err(|source| ServerError::SocketSetup {
        path: dir.to_owned(),
        source,
    })?;
    let mode = meta.mode() & 0o777;
    if meta.uid() != uid || mode & 0o077 != 0 {
        return Err(ServerError::SocketDirectoryNotPrivate {
            path: dir.to_owned(),
            uid,
            found_uid: meta.uid(),
            found_mode: mode,
        });
    }
    Ok(())
}

/// Send buffer asked for on accepted unix streams (the kernel caps it at `net.core.wmem_max`).
const UNIX_SEND_BUFFER: usize = 4 * 1024 * 1024;

/// Widens a unix stream's send buffer: a unix stream's in-flight bytes are charged to the sender
/// alone, and the default (~208 KiB) wakes both sides for every few frames of a bulk transfer.
/// Best effort: a refusal only costs throughput.
pub fn widen_send_buffer(stream: &tokio::net::UnixStream) {
    use nix::sys::socket::{setsockopt, sockopt};
    if let Err(err) = setsockopt(stream, sockopt::SndBuf, &UNIX_SEND_BUFFER) {
        tracing::debug!(cause = %err, "could not widen the unix send buffer");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        assert_eq!(
            "stdio".parse::<ListenTarget>().unwrap(),
            ListenTarget::Stdio
        );
        assert_eq!(
            "unix:".parse::<ListenTarget>().unwrap(),
            ListenTarget::Unix(None)
        );
        assert_eq!(
            "tcp://127.0.0.1:0".parse::<ListenTarget>().unwrap(),
            ListenTarget::Tcp("127.0.0.1:0".parse().unwrap())
        );
        for bad in ["unix:rel/path", "tcp://localhost:1", "http://x", ""] {
            assert!(
                bad.parse::<ListenTarget>().is_err(),
                "{bad} should be rejected"
            );
        }
    }

    #[tokio::test]
    async fn non_loopback_without_tls_is_refused() {
        let target: ListenTarget = "tcp://0.0.0.0:0".parse().unwrap();
        let err = Listener::bind(&target, false, true).await.unwrap_err();
        assert!(err.to_string().contains("without TLS"), "{err}");
    }

    #[tokio::test]
    async fn shared_socket_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let target = ListenTarget::Unix(Some(dir.path().join("s.sock")));
        let err = Listener::bind(&target, false, false).await.unwrap_err();
        assert!(
            matches!(err, ServerError::SocketDirectoryNotPrivate { .. }),
            "{err}"
        );
    }
}
