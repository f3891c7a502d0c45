//! Client errors. [`ClientError::Server`] is an answer from the executor; every other variant means
//! the call never got an answer (bad target, spawn or connect failure, broken transport).

use std::path::PathBuf;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The target string could not be parsed.
    #[error("invalid target {target:?}: {reason}")]
    InvalidTarget {
        /// The target as given.
        target: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No `outpost` binary could be found to spawn for `exec:`.
    #[error("cannot find the outpost binary for exec: (set OUTPOST_BIN or put outpost on PATH)")]
    BinaryNotFound,
    /// Spawning the executor child failed.
    #[error("cannot spawn executor {bin}")]
    Spawn {
        /// The binary.
        bin: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Reading or parsing a PEM certificate or key file failed.
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
    /// A PEM file held nothing usable.
    #[error("{what} {path} contains no usable {expected}")]
    PemEmpty {
        /// What the file is for.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// What was expected.
        expected: &'static str,
    },
    /// The TLS configuration was rejected.
    #[error("invalid TLS configuration")]
    Tls(#[source] rustls::Error),
    /// An https target was given without a CA bundle.
    #[error("https targets need a CA bundle: pass --tls-ca or set OUTPOST_TLS_CA")]
    MissingCa,
    /// The token is not a valid header value.
    #[error("the bearer token contains characters not allowed in an HTTP header")]
    InvalidToken,
    /// Establishing the connection failed.
    #[error("cannot connect to {target}")]
    Connect {
        /// The target.
        target: String,
        /// The underlying error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A find-up request was rejected before any call was made.
    #[error("invalid find-up request")]
    InvalidFindUp(#[from] outpost_proto::find_up::FindUpSpecError),
    /// A local consumer of streamed data failed (e.g. writing to stdout).
    #[error("cannot deliver streamed data locally")]
    Sink(#[source] std::io::Error),
    /// A process's event stream closed without an exit event.
    #[error("the process closed without reporting an exit")]
    NoExit,
    /// After an interrupted event stream the executor no longer knows the process (it restarted or the
    /// session expired): events after `last_seq` are lost.
    #[error(
        "process {process_id} was lost with its executor's session; events after seq {last_seq} are gone"
    )]
    ProcessLost {
        /// The process.
        process_id: String,
        /// The last event seen.
        last_seq: u64,
    },
    /// A registry environment did not come back while a call waited for it.
    #[error("environment {id} is not available: {reason}")]
    EnvironmentUnavailable {
        /// The environment id.
        id: String,
        /// Failed, timed out, replaced or removed, and why.
        reason: String,
    },
    /// The connection broke or never carried the call.
    #[error("transport failure: {}", .0.message())]
    Transport(#[source] tonic::Status),
    /// The executor answered with an error status.
    #[error("executor answered {}: {}", .0.code(), .0.message())]
    Server(tonic::Status),
}

impl ClientError {
    /// The gRPC status when the executor answered, for matching on codes.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Self::Server(s) => Some(s),
            _ => None,
        }
    }
}

impl From<tonic::Status> for ClientError {
    /// A status tonic synthesised from a transport error carries that error as its source; one parsed
    /// from the executor's trailers has none.
    fn from(status: tonic::Status) -> Self {
        if std::error::Error::source(&status).is_some() {
            Self::Transport(status)
        } else {
            Self::Server(status)
        }
    }
}
