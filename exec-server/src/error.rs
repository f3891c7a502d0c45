//! Errors that stop the executor from starting or serving. Request-level errors are mapped to
//! `tonic::Status` by the service that owns them.

use std::io;
use std::path::PathBuf;

/// Why the executor could not start or keep serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listen target string could not be parsed.
    #[error("invalid listen target {target:?}: {reason}")]
    ListenTarget {
        /// The target as given.
        target: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A TCP listener on a non-loopback address was requested without TLS.
    #[error(
        "refusing to listen on non-loopback address {addr} without TLS: bearer tokens would cross the \
         network in clear text; configure --tls-cert and --tls-key, or listen on 127.0.0.1/::1"
    )]
    PlaintextNonLoopback {
        /// The requested address.
        addr: std::net::SocketAddr,
    },
    /// A TCP listener was requested without a bearer token.
    #[error(
        "a tcp:// listener requires a bearer token: pass --token-file or set OUTPOST_TOKEN_FILE"
    )]
    TcpWithoutToken,
    /// Binding a socket failed.
    #[error("cannot bind {what}")]
    Bind {
        /// The address or path.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The directory that holds the unix socket is not private to this user.
    #[error(
        "socket directory {path} must be owned by uid {uid} with mode 0700 (found uid {found_uid}, mode {found_mode:o})"
    )]
    SocketDirectoryNotPrivate {
        /// The directory.
        path: PathBuf,
        /// Our uid.
        uid: u32,
        /// Its owner.
        found_uid: u32,
        /// Its permission bits.
        found_mode: u32,
    },
    /// Another executor already answers on the unix socket path.
    #[error("another executor is already listening on {path}")]
    SocketInUse {
        /// The socket path.
        path: PathBuf,
    },
    /// Preparing the socket directory or file failed.
    #[error("cannot prepare unix socket {path}")]
    SocketSetup {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Reading a file named in the configuration failed.
    #[error("cannot read {what} {path}")]
    ReadFile {
        /// What the file is for ("token file", "TLS certificate", ...).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The token file exists but holds no token.
    #[error("token file {path} is empty")]
    EmptyToken {
        /// The path.
        path: PathBuf,
    },
    /// A PEM file held no usable item.
    #[error("{what} {path} contains no {expected}")]
    PemEmpty {
        /// What the file is for.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// What was expected in it.
        expected: &'static str,
    },
    /// A PEM file could not be read or parsed.
    #[error("cannot load {what} {path}")]
    Pem {
        /// What the file is for.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// rustls rejected the TLS configuration.
    #[error("invalid TLS configuration")]
    Tls(#[source] rustls::Error),
    /// rustls rejected the client CA bundle.
    #[error("invalid --tls-client-ca bundle")]
    ClientCa(#[source] rustls::server::VerifierBuilderError),
    /// The configuration file could not be parsed.
    #[error("invalid config file {path}")]
    Config {
        /// The path.
        path: PathBuf,
        /// The parse error (names the bad key).
        #[source]
        source: toml::de::Error,
    },
    /// A workspace root is not an absolute path.
    #[error("workspace root {0} must be an absolute path")]
    RelativeWorkspaceRoot(PathBuf),
    /// The orphan guard process could not be started.
    #[error("cannot start the orphan guard {bin}")]
    OrphanGuard {
        /// The binary.
        bin: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Accepting a connection failed in a way that is not transient.
    #[error("accept failed")]
    Accept(#[source] io::Error),
    /// The HTTP proxy service could not be set up (for example a malformed proxy variable).
    #[error("cannot set up the HTTP proxy service")]
    Http(#[from] crate::http::HttpError),
}
