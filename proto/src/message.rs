//! The one-line message of an error and its causes, as both ends print it: in gRPC status messages,
//! environment failure reasons and the CLI's error line.

/// An error with its sources, `outer: inner: ...`. A cause is left out when the message before it
/// already ends with it: some libraries (tonic's transport error, for one) print their source
/// inside their own message, and the reader would see the same words twice.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut previous = out.clone();
    let mut source = err.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !previous.ends_with(&message) {
            out.push_str(": ");
            out.push_str(&message);
        }
        previous = message;
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
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

    /// Context that does not repeat its source.
    #[derive(Debug)]
    struct Context(&'static str, Echoing);

    impl std::fmt::Display for Context {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Context {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn chain_says_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let err = Context("cannot connect to unix:/x", Echoing(io));
        assert_eq!(
            super::error_chain(&err),
            "cannot connect to unix:/x: transport error: entity not found"
        );
    }
}
