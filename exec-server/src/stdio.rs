//! Standard input and output as one bidirectional byte stream, for `--listen stdio`.

use tokio::io::{Join, Stdin, Stdout};

/// stdin (read half) joined with stdout (write half). Logs must go to stderr only: a single stray byte
/// on stdout corrupts the HTTP/2 connection.
pub(crate) fn stream() -> Join<Stdin, Stdout> {
    tokio::io::join(tokio::io::stdin(), tokio::io::stdout())
}
