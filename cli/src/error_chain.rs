//! One-line error messages for the terminal.

use std::fmt::Write as _;

/// `err` and its causes joined by `": "`, like anyhow's `{:#}`, except that a cause is left out when
/// the message before it already ends with it: some libraries print their source inside their own
/// message, and the reader would see the same words twice.
pub(crate) fn one_line(err: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut previous = String::new();
    for cause in err.chain() {
        let message = cause.to_string();
        if !previous.is_empty() && previous.ends_with(&message) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        let _ = write!(out, "{message}");
        previous = message;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source inside its own message, as tonic's transport error does.
    #[derive(Debug)]
    struct Echoing(std::io::Error);

    impl std::fmt::Display for Echoing {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "transport error: {}", self.0)
        }
    }

    impl std::error::Error for Echoing {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_printed_is_left_out() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let err = anyhow::Error::new(Echoing(io)).context("cannot connect to unix:/x");
        assert_eq!(
            one_line(&err),
            "cannot connect to unix:/x: transport error: entity not found"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&plain), "outer: inner");
    }
}
