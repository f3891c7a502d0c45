//! Standard input and output as one bidirectional byte stream, for `--listen stdio`.
//!
//! When stdin and stdout are pipes (an `exec:` client or ssh spawned us), they are driven by the
//! reactor directly (non-blocking, no copy); otherwise (a terminal, a file, a socket) tokio's
//! blocking-thread stdio is used.

use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite, Join};
use tokio::net::unix::pipe;

/// The read half of the stdio transport.
pub(crate) type Input = Pin<Box<dyn AsyncRead + Send>>;
/// The write half of the stdio transport.
pub(crate) type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// stdin (read half) joined with stdout (write half). Logs must go to stderr only: a single stray byte
/// on stdout corrupts the HTTP/2 connection. The pipes are driven through duplicates, which
/// `try_clone_to_owned` makes close-on-exec: processes the executor spawns must never inherit the
/// transport, or the client would not see it close when the executor exits.
pub(crate) fn stream() -> Join<Input, Output> {
    let input: Input = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(pipe) => Box::pin(pipe),
        Err(err) => {
            tracing::debug!(cause = %err, "stdin is not a pipe; using blocking stdio");
            Box::pin(tokio::io::stdin())
        }
    };
    let output: Output = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(pipe) => Box::pin(pipe),
        Err(err) => {
            tracing::debug!(cause = %err, "stdout is not a pipe; using blocking stdio");
            Box::pin(tokio::io::stdout())
        }
    };
    tokio::io::join(input, output)
}
