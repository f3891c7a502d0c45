//! Target strings name where an executor is.
//!
//! `ssh://[user@]host[:port][?bin=/path/to/outpost]` runs the executor on another host through `ssh`
//! (see [`crate::connect`](mod@crate::connect)); user, host and binary path are restricted to characters that need no
//! quoting, since ssh hands the remote command to the remote user's shell.

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
    /// `ssh://[user@]host[:port][?bin=/path]`: `outpost serve --listen stdio` on another host over ssh.
    Ssh(SshTarget),
}

/// Where an `ssh://` target runs its executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// Remote user (`-l`); default: ssh's own choice.
    pub user: Option<String>,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (`-p`); default: ssh's own choice.
    pub port: Option<u16>,
    /// The outpost binary on the remote host; default `outpost` on the remote PATH.
    pub bin: Option<String>,
}

impl SshTarget {
    fn parse(rest: &str) -> Result<Self, &'static str> {
        let (authority, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let bin = match query {
            None => None,
            Some(q) => {
                let path = q
                    .strip_prefix("bin=")
                    .ok_or("the only query parameter of ssh:// is bin=/path/to/outpost")?;
                if !path.starts_with('/') || !path.chars().all(is_path_char) {
                    return Err("bin= must be an absolute path of [A-Za-z0-9/._+-]");
                }
                Some(path.to_owned())
            }
        };
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        if let Some(user) = user
            && (user.is_empty() || user.starts_with('-') || !user.chars().all(is_name_char))
        {
            return Err("the ssh user must be [A-Za-z0-9._-] and not start with '-'");
        }
        let (host, port) = split_host_port(host_port)?;
        if host.is_empty()
            || host.starts_with('-')
            || !host.chars().all(|c| is_name_char(c) || c == ':')
        {
            return Err("the ssh host must be a name or address of [A-Za-z0-9.:_-]");
        }
        Ok(Self {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
            bin,
        })
    }
}

fn split_host_port(s: &str) -> Result<(&str, Option<u16>), &'static str> {
    let bad_port = "the ssh port must be a number from 1 to 65535";
    let parse_port = |p: &str| p.parse::<u16>().ok().filter(|p| *p != 0).ok_or(bad_port);
    if let Some(v6) = s.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed '[' in the ssh host")?;
        return match after {
            "" => Ok((host, None)),
            _ => Ok((
                host,
                Some(parse_port(after.strip_prefix(':').ok_or(bad_port)?)?),
            )),
        };
    }
    match s.split_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(port)?))),
        None => Ok((s, None)),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_path_char(c: char) -> bool {
    is_name_char(c) || matches!(c, '/' | '+')
}

impl std::fmt::Display for SshTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ssh://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        if let Some(bin) = &self.bin {
            write!(f, "?bin={bin}")?;
        }
        Ok(())
    }
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
        if let Some(rest) = s.strip_prefix("ssh://") {
            return SshTarget::parse(rest).map(Self::Ssh).map_err(bad);
        }
        Err(bad(
            "expected exec:, unix:/PATH, http://HOST:PORT, https://HOST:PORT or ssh://[USER@]HOST[:PORT]",
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
            Self::Ssh(ssh) => write!(f, "{ssh}"),
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
        for bad in [
            "unix:rel",
            "exec:rel",
            "ftp://x",
            "http://h:1/path",
            "",
            "ssh://",
            "ssh://-oProxyCommand=x",
            "ssh://h:0",
            "ssh://h?bin=rel",
            "ssh://h?bin=/a;b",
            "ssh://u$@h",
            "ssh://h?x=1",
        ] {
            let err = bad.parse::<Target>().unwrap_err();
            assert!(err.to_string().contains("invalid target"), "{bad}: {err}");
        }
    }

    #[test]
    fn ssh_targets_round_trip() {
        let t: Target = "ssh://dev@build-1.example:2222?bin=/opt/outpost/bin/outpost"
            .parse()
            .unwrap();
        let Target::Ssh(ssh) = &t else {
            panic!("not ssh: {t:?}")
        };
        assert_eq!(ssh.user.as_deref(), Some("dev"));
        assert_eq!(ssh.host, "build-1.example");
        assert_eq!(ssh.port, Some(2222));
        assert_eq!(ssh.bin.as_deref(), Some("/opt/outpost/bin/outpost"));
        assert_eq!(
            t.to_string(),
            "ssh://dev@build-1.example:2222?bin=/opt/outpost/bin/outpost"
        );
        let v6: Target = "ssh://[::1]:22".parse().unwrap();
        assert_eq!(v6.to_string(), "ssh://[::1]:22");
        let plain: Target = "ssh://host".parse().unwrap();
        assert_eq!(plain.to_string(), "ssh://host");
    }
}
