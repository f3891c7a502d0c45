//! [`HttpClientError`]: why a fetch through the executor failed.

/// Boxed error from a credential provider.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a fetch through the executor failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpClientError {
    /// The executor refused or failed the call before a response head (policy denial, invalid input,
    /// limit, unreachable upstream); the status code says which.
    #[error(transparent)]
    Executor(#[from] crate::ClientError),
    /// The executor broke the protocol (for example a body frame before the head).
    #[error("executor protocol error: {0}")]
    Protocol(&'static str),
    /// The transfer failed after the response head (the executor's `FetchEnd` error).
    #[error("transfer failed after {body_bytes} bytes: {message}")]
    Transfer {
        /// The executor's message.
        message: String,
        /// The gRPC code the same failure would have had before the head.
        code: tonic::Code,
        /// Body bytes received before the failure.
        body_bytes: u64,
    },
    /// A body exceeded the size this adapter accepts.
    #[error("response body exceeds {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// The credential provider failed.
    #[error("credential provider failed")]
    Credentials(#[source] BoxError),
    /// A header name or value is not valid HTTP.
    #[error("invalid header {name:?}")]
    InvalidHeader {
        /// The header name as given.
        name: String,
    },
    /// A request body stream failed.
    #[error("request body stream failed")]
    RequestBody(#[source] std::io::Error),
}

impl HttpClientError {
    /// The gRPC code of the executor's answer, when there was one.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Self::Executor(e) => e.status().map(tonic::Status::code),
            Self::Transfer { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<tonic::Status> for HttpClientError {
    fn from(status: tonic::Status) -> Self {
        Self::Executor(crate::ClientError::from(status))
    }
}
