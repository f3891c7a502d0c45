//! Errors of `Http.Fetch` and their one mapping to gRPC status codes.

use std::time::Duration;

/// A destination refused by policy; `rule` names the rule so an operator can find it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("destination {target} denied by rule: {rule}")]
pub struct Denied {
    /// The rule, e.g. `deny prefix "http://10."` or `cloud metadata addresses (allow_metadata = false)`.
    pub rule: String,
    /// The URL or `host (ip)` that was refused.
    pub target: String,
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// A request field is invalid; `field` names it.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field, e.g. `head.url`.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The destination policy refused the URL or an address it resolved to.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// `value_from_env` named a variable the operator did not allow-list.
    #[error(
        "header {header}: environment variable {var} is not in the executor's [http] env_allow list"
    )]
    EnvNotAllowed {
        /// The header.
        header: String,
        /// The variable.
        var: String,
    },
    /// `value_from_env` named an allow-listed variable that is unset or not a valid header value.
    #[error("header {header}: environment variable {var} is unset or not a valid header value")]
    EnvUnusable {
        /// The header.
        header: String,
        /// The variable.
        var: String,
    },
    /// The connection already has the maximum number of fetches in flight.
    #[error("too many concurrent fetches on this connection (limit {limit})")]
    TooManyFetches {
        /// The configured limit.
        limit: usize,
    },
    /// The response body exceeded the cap.
    #[error("response body exceeds the limit of {limit} bytes")]
    ResponseTooLarge {
        /// The effective cap.
        limit: u64,
    },
    /// The exchange took longer than allowed.
    #[error("{which} timeout of {after:?} elapsed")]
    Timeout {
        /// `total` or `idle`.
        which: &'static str,
        /// The limit.
        after: Duration,
    },
    /// A redirect's `Location` header is missing or not a valid URL.
    #[error("redirect {status} has an unusable Location header")]
    BadRedirect {
        /// The redirect status.
        status: u16,
    },
    /// Connecting to or talking with the upstream server failed.
    #[error("upstream request failed")]
    Upstream(#[source] reqwest::Error),
    /// The client's request body stream failed.
    #[error("request body stream failed")]
    RequestBody(#[source] tonic::Status),
    /// The HTTP client could not be built (TLS roots, proxy settings).
    #[error("cannot build the HTTP client")]
    ClientBuild(#[source] reqwest::Error),
}

impl HttpError {
    /// Classifies a reqwest error: a policy denial raised by the guarded resolver surfaces as
    /// [`HttpError::Denied`]; a timeout as [`HttpError::Timeout`] when `total` is given.
    pub fn from_reqwest(err: reqwest::Error) -> Self {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
        while let Some(e) = source {
            if let Some(denied) = e.downcast_ref::<Denied>() {
                return Self::Denied(denied.clone());
            }
            source = e.source();
        }
        Self::Upstream(err)
    }

    /// The gRPC code this error maps to (also reported in `FetchEnd.error_code`).
    pub fn code(&self) -> tonic::Code {
        match self {
            Self::Invalid { .. } => tonic::Code::InvalidArgument,
            Self::Denied(_) | Self::EnvNotAllowed { .. } => tonic::Code::PermissionDenied,
            Self::EnvUnusable { .. } => tonic::Code::FailedPrecondition,
            Self::TooManyFetches { .. } | Self::ResponseTooLarge { .. } => {
                tonic::Code::ResourceExhausted
            }
            Self::Timeout { .. } => tonic::Code::DeadlineExceeded,
            Self::BadRedirect { .. } | Self::Upstream(_) => tonic::Code::Unavailable,
            Self::RequestBody(status) => status.code(),
            Self::ClientBuild(_) => tonic::Code::Internal,
        }
    }

    /// The message sent to the client: this error and its source chain, so "connection refused" and
    /// similar causes reach the harness.
    pub fn client_message(&self) -> String {
        outpost_proto::error_chain(self)
    }
}

impl From<HttpError> for tonic::Status {
    fn from(err: HttpError) -> Self {
        let code = err.code();
        let message = err.client_message();
        if code == tonic::Code::Internal {
            tracing::error!(cause = %message, "fetch failed");
        } else {
            tracing::debug!(cause = %message, "fetch failed");
        }
        tonic::Status::new(code, message)
    }
}
