//! Errors of the session and process services, and their one mapping to gRPC status codes.

use tonic::{Code, Status};

use outpost_proto::error_chain;

/// Why a session or process request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// A request field is invalid; the message names it.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field, e.g. `argv` or `cwd`.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The session does not exist (never created, or expired after its detach TTL).
    #[error("session {0:?} not found (it may have expired after its detach TTL)")]
    UnknownSession(String),
    /// The session is attached on another stream.
    #[error("session {0:?} is already attached")]
    AlreadyAttached(String),
    /// No such process in the session.
    #[error("process {0:?} not found in this session")]
    UnknownProcess(String),
    /// The caller-chosen process id is taken.
    #[error("process id {0:?} already exists in this session")]
    DuplicateProcess(String),
    /// The session has too many processes.
    #[error("the session already runs {0} processes, the executor's limit")]
    TooManyProcesses(usize),
    /// A named profile is not known to the executor.
    #[error("profile: unknown permission profile {0:?}")]
    UnknownProfile(String),
    /// The program could not be found or executed.
    #[error("argv[0]: cannot execute {program:?}: {reason}")]
    NotExecutable {
        /// The program.
        program: String,
        /// Why (not found, not executable).
        reason: &'static str,
    },
    /// Stdin was not piped, or was closed already.
    #[error(
        "stdin of process {0:?} is closed (start it with pipe_stdin, and do not write after CloseStdin)"
    )]
    StdinClosed(String),
    /// The process has no terminal to resize.
    #[error("process {0:?} has no terminal")]
    NoTty(String),
    /// Writing to the child failed.
    #[error("cannot write to the stdin of process {id:?}")]
    StdinWrite {
        /// The process.
        id: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Setting up pipes or a terminal for the child failed.
    #[error("cannot set up {what} for the child")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Spawning failed after the program was found: a child set-up step (sandbox layer) or exec failed.
    #[error("cannot start the process")]
    Spawn(#[source] std::io::Error),
    /// The process cannot be signalled (it has exited).
    #[error("cannot signal process {id:?}")]
    Signal {
        /// The process.
        id: String,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
    /// The executor is shutting down.
    #[error("the executor is shutting down")]
    ShuttingDown,
}

impl From<ProcessError> for Status {
    fn from(err: ProcessError) -> Self {
        use ProcessError as E;
        let code = match &err {
            E::Invalid { .. } | E::UnknownProfile(_) => Code::InvalidArgument,
            E::UnknownSession(_) | E::UnknownProcess(_) | E::NotExecutable { .. } => Code::NotFound,
            E::AlreadyAttached(_) | E::StdinClosed(_) | E::NoTty(_) | E::Signal { .. } => {
                Code::FailedPrecondition
            }
            E::DuplicateProcess(_) => Code::AlreadyExists,
            E::TooManyProcesses(_) => Code::ResourceExhausted,
            E::ShuttingDown => Code::Unavailable,
            E::StdinWrite { .. } | E::Setup { .. } | E::Spawn(_) => Code::Internal,
        };
        if code == Code::Internal {
            tracing::error!(error = %error_chain(&err), "process request failed");
        } else {
            tracing::debug!(%err, "process request refused");
        }
        Status::new(code, error_chain(&err))
    }
}
