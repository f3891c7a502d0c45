//! Target strings name where an executor is.

use std::path::PathBuf;

use crate::error::ClientError;

/// Where to reach an executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `exec:` or `exec:/path/to/outpost`: spawn `outpost serve --listen stdio` as a child.
    Exec(Option<PathBuf>),
    /// `unix:/path/to/socket`.
    Unix(PathBuf),
    /// `http://HOST:PORT` (loopback; bearer token required by the server).
    Http(http::Uri),
    /// `https://HOST:PORT` (TLS; token and/or client certificate).
    Https(http::Uri),
}

impl std::str::FromStr for Target {
    type Err = ClientError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &'static str| ClientError::InvalidTarget {
            target: s.to_owned(),
            reason,
        };
        if let Some(rest) = s.strip_prefix("exec:") {
            return match rest {
                "" => Ok(Self::Exec(None)),
                path if path.starts_with('/') => Ok(Self::Exec(Some(PathBuf::from(path)))),
                _ => Err(bad(
                    "exec: takes an absolute path to the outpost binary, or nothing",
                )),
            };
        }
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(bad(
                    "unix: needs an absolute socket path, e.g. unix:/run/outpost.sock",
                ));
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        if s.starts_with("http://") || s.starts_with("https://") {
            let uri: http::Uri = s.parse().map_err(|_| bad("not a valid URL"))?;
            if uri.host().is_none() {
                return Err(bad("the URL has no host"));
            }
            if uri.path() != "/" && !uri.path().is_empty() {
                return Err(bad("the URL must not have a path"));
            }
            return Ok(if uri.scheme_str() == Some("https") {
                Self::Https(uri)
            } else {
                Self::Http(uri)
            });
        }
        Err(bad(
            "expected exec:, unix:/PATH, http://HOST:PORT or https://HOST:PORT",
        ))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exec(None) => f.write_str("exec:"),
            Self::Exec(Some(p)) => write!(f, "exec:{}", p.display()),
            Self::Unix(p) => write!(f, "unix:{}", p.display()),
            Self::Http(u) | Self::Https(u) => write!(f, "{u}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("exec:".parse::<Target>().unwrap(), Target::Exec(None));
        assert_eq!(
            "unix:/a/b".parse::<Target>().unwrap(),
            Target::Unix("/a/b".into())
        );
        assert!(matches!(
            "http://127.0.0.1:1".parse::<Target>().unwrap(),
            Target::Http(_)
        ));
        assert!(matches!(
            "https://h:1".parse::<Target>().unwrap(),
            Target::Https(_)
        ));
        for bad in ["unix:rel", "exec:rel", "ftp://x", "http://h:1/path", ""] {
            let err = bad.parse::<Target>().unwrap_err();
            assert!(err.to_string().contains("invalid target"), "{bad}: {err}");
        }
    }
}
