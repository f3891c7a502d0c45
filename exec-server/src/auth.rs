//! Bearer-token authentication as a tower layer around all routes. Health checks stay open so load
//! balancers and the harness can probe readiness; every other call needs `authorization: Bearer <token>`,
//! compared in constant time.

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};

use subtle::ConstantTimeEq;
use tower::{Layer, Service};

use crate::error::ServerError;

/// Path prefix of the gRPC health service, which never needs a token.
const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

/// A bearer token. Its `Debug` output never shows the secret.
#[derive(Clone)]
pub struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Wraps a token value.
    pub fn new(value: impl AsRef<[u8]>) -> Self {
        Self(Arc::from(value.as_ref()))
    }

    /// Reads a token file; surrounding whitespace (a trailing newline) is ignored.
    ///
    /// # Errors
    /// [`ServerError::ReadFile`] when unreadable, [`ServerError::EmptyToken`] when blank.
    pub fn from_file(path: &Path) -> Result<Self, ServerError> {
        let raw = std::fs::read(path).map_err(|source| ServerError::ReadFile {
            what: "token file",
            path: path.to_owned(),
            source,
        })?;
        let trimmed = raw.trim_ascii();
        if trimmed.is_empty() {
            return Err(ServerError::EmptyToken {
                path: path.to_owned(),
            });
        }
        Ok(Self::new(trimmed))
    }

    /// Whether an `authorization` header value carries this token.
    fn accepts(&self, header: Option<&http::HeaderValue>) -> bool {
        let Some(presented) = header.and_then(|h| h.as_bytes().strip_prefix(b"Bearer ")) else {
            return false;
        };
        presented.ct_eq(&self.0).into()
    }
}

/// Layer that requires a token when one is configured.
#[derive(Debug, Clone)]
pub struct AuthLayer {
    token: Option<Token>,
}

impl AuthLayer {
    /// `None` disables the check (allowed on unix sockets and stdio only).
    pub fn new(token: Option<Token>) -> Self {
        Self { token }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            inner,
            token: self.token.clone(),
        }
    }
}

/// Service produced by [`AuthLayer`].
#[derive(Debug, Clone)]
pub struct Authenticated<S> {
    inner: S,
    token: Option<Token>,
}

impl<S, B> Service<http::Request<B>> for Authenticated<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures_util::future::Either<
        S::Future,
        std::future::Ready<Result<Self::Response, Self::Error>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let allowed = match &self.token {
            None => true,
            Some(token) => {
                req.uri().path().starts_with(HEALTH_PREFIX)
                    || token.accepts(req.headers().get(http::header::AUTHORIZATION))
            }
        };
        if allowed {
            futures_util::future::Either::Left(self.inner.call(req))
        } else {
            tracing::warn!(
                path = req.uri().path(),
                "rejected call without a valid bearer token"
            );
            let status = tonic::Status::unauthenticated("missing or invalid bearer token");
            futures_util::future::Either::Right(std::future::ready(Ok(status.into_http())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        let token = Token::new("s3cret");
        let ok = http::HeaderValue::from_static("Bearer s3cret");
        let wrong = http::HeaderValue::from_static("Bearer s3cre");
        let no_scheme = http::HeaderValue::from_static("s3cret");
        assert!(token.accepts(Some(&ok)));
        assert!(!token.accepts(Some(&wrong)));
        assert!(!token.accepts(Some(&no_scheme)));
        assert!(!token.accepts(None));
        assert_eq!(format!("{token:?}"), "Token(<redacted>)");
    }

    #[test]
    fn token_file_trims_and_rejects_blank() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tok");
        std::fs::write(&path, "abc\n").unwrap();
        assert!(
            Token::from_file(&path)
                .unwrap()
                .accepts(Some(&http::HeaderValue::from_static("Bearer abc")))
        );
        std::fs::write(&path, " \n").unwrap();
        assert!(matches!(
            Token::from_file(&path),
            Err(ServerError::EmptyToken { .. })
        ));
    }
}
