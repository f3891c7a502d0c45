//! The `[http]` table of `outpost.toml`: the operator's destination policy for `Http.Fetch` (URL
//! allow/deny matchers, which address classes the SSRF guard admits), the environment variables that
//! `value_from_env` may read, headers that count as credentials, and the proxy's limits.
//!
//! Matchers are validated while the file is parsed (a bad regex fails `ServerConfig::load` with the
//! key named), so a running executor never holds an invalid rule.

use std::time::Duration;

use serde::Deserialize;

/// `[http]` table. Every field is optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// When non-empty, a URL must match one of these to be fetched.
    #[serde(default)]
    pub allow: Vec<UrlMatcher>,
    /// A URL matching any of these is refused (deny wins over allow).
    #[serde(default)]
    pub deny: Vec<UrlMatcher>,
    /// Admit loopback addresses (127.0.0.0/8, ::1). Default true: executor-only MCP servers often live there.
    pub allow_loopback: Option<bool>,
    /// Admit private ranges (RFC 1918, fc00::/7, 100.64.0.0/10). Default true.
    pub allow_private: Option<bool>,
    /// Admit link-local addresses (169.254.0.0/16, fe80::/10). Default false.
    pub allow_link_local: Option<bool>,
    /// Admit cloud metadata endpoints (169.254.169.254, fd00:ec2::254, 100.100.100.200). Default false.
    pub allow_metadata: Option<bool>,
    /// Environment variables that a request header may take its value from (`value_from_env`).
    #[serde(default)]
    pub env_allow: Vec<String>,
    /// Header names besides `Authorization` that carry credentials or assertions: a request carrying
    /// one is never redirected.
    #[serde(default)]
    pub credential_headers: Vec<String>,
    /// Largest response body per request, in bytes (default 64 MiB; requests may ask for less).
    pub max_response_bytes: Option<u64>,
    /// Concurrent fetches per client connection (default 64).
    pub max_concurrent_fetches: Option<usize>,
    /// Longest pause between two upstream reads or writes, in milliseconds (default 60000).
    pub idle_timeout_ms: Option<u64>,
    /// Default and upper bound of a whole exchange, in milliseconds (default 300000).
    pub total_timeout_ms: Option<u64>,
    /// Most redirect hops a request may ask to follow (default 10).
    pub max_redirects: Option<u32>,
}

/// One allow or deny rule on the URL, as written in the config: exactly one of the three keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "MatcherSpec")]
pub struct UrlMatcher {
    kind: MatchKind,
    source: String,
}

#[derive(Debug, Clone)]
enum MatchKind {
    Exact(String),
    Prefix(String),
    Regex(regex::Regex),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatcherSpec {
    exact: Option<String>,
    prefix: Option<String>,
    regex: Option<String>,
}

/// Why a matcher in `[http]` was rejected at load.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatcherError {
    /// Not exactly one of `exact`, `prefix`, `regex` was given.
    #[error("a URL matcher needs exactly one of `exact`, `prefix` or `regex`")]
    Shape,
    /// The regex does not compile.
    #[error("invalid regex {pattern:?}")]
    Regex {
        /// The pattern as written.
        pattern: String,
        /// The compile error.
        #[source]
        source: regex::Error,
    },
}

impl TryFrom<MatcherSpec> for UrlMatcher {
    type Error = MatcherError;

    fn try_from(spec: MatcherSpec) -> Result<Self, MatcherError> {
        match (spec.exact, spec.prefix, spec.regex) {
            (Some(url), None, None) => Ok(Self {
                source: format!("exact {url:?}"),
                kind: MatchKind::Exact(url),
            }),
            (None, Some(prefix), None) => Ok(Self {
                source: format!("prefix {prefix:?}"),
                kind: MatchKind::Prefix(prefix),
            }),
            (None, None, Some(pattern)) => {
                // Anchored on both ends: a regex rule matches the whole URL, never a substring.
                let anchored = format!("^(?:{pattern})$");
                let re = regex::Regex::new(&anchored).map_err(|source| MatcherError::Regex {
                    pattern: pattern.clone(),
                    source,
                })?;
                Ok(Self {
                    source: format!("regex {pattern:?}"),
                    kind: MatchKind::Regex(re),
                })
            }
            _ => Err(MatcherError::Shape),
        }
    }
}

impl UrlMatcher {
    /// Builds a matcher from its config form, e.g. for tests and programmatic configuration.
    ///
    /// # Errors
    /// [`MatcherError::Regex`] when `kind` is `"regex"` and the pattern does not compile;
    /// [`MatcherError::Shape`] for an unknown kind.
    pub fn new(kind: &str, value: &str) -> Result<Self, MatcherError> {
        let v = Some(value.to_owned());
        let spec = match kind {
            "exact" => MatcherSpec {
                exact: v,
                prefix: None,
                regex: None,
            },
            "prefix" => MatcherSpec {
                exact: None,
                prefix: v,
                regex: None,
            },
            "regex" => MatcherSpec {
                exact: None,
                prefix: None,
                regex: v,
            },
            _ => return Err(MatcherError::Shape),
        };
        Self::try_from(spec)
    }

    /// Whether `url` (serialized, as fetched) matches.
    pub fn matches(&self, url: &str) -> bool {
        match &self.kind {
            MatchKind::Exact(u) => u == url,
            MatchKind::Prefix(p) => url.starts_with(p.as_str()),
            MatchKind::Regex(re) => re.is_match(url),
        }
    }

    /// The rule as written, for denial messages.
    pub fn describe(&self) -> &str {
        &self.source
    }
}

/// Effective proxy settings of a running executor (defaults applied).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Allow rules (empty: everything not denied).
    pub allow: Vec<UrlMatcher>,
    /// Deny rules.
    pub deny: Vec<UrlMatcher>,
    /// Address classes the SSRF guard admits.
    pub addresses: AddressPolicy,
    /// Variables `value_from_env` may read.
    pub env_allow: Vec<String>,
    /// Lower-case header names (besides `authorization`) that mark a request as credentialed.
    pub credential_headers: Vec<String>,
    /// Response body cap per request.
    pub max_response_bytes: u64,
    /// Concurrent fetches per client connection.
    pub max_concurrent_fetches: usize,
    /// Longest pause between upstream reads/writes.
    pub idle_timeout: Duration,
    /// Default and upper bound of one exchange.
    pub total_timeout: Duration,
    /// Most redirect hops a request may ask for.
    pub max_redirects: u32,
}

/// Which address classes the SSRF guard admits. Public addresses are always admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPolicy {
    /// 127.0.0.0/8, ::1.
    pub loopback: bool,
    /// RFC 1918, unique-local, shared address space.
    pub private: bool,
    /// 169.254.0.0/16, fe80::/10.
    pub link_local: bool,
    /// Cloud metadata endpoints.
    pub metadata: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpConfig::default().resolve()
    }
}

impl HttpConfig {
    /// Applies the configured values over the defaults.
    pub fn resolve(&self) -> HttpOptions {
        HttpOptions {
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            addresses: AddressPolicy {
                loopback: self.allow_loopback.unwrap_or(true),
                private: self.allow_private.unwrap_or(true),
                link_local: self.allow_link_local.unwrap_or(false),
                metadata: self.allow_metadata.unwrap_or(false),
            },
            env_allow: self.env_allow.clone(),
            credential_headers: self
                .credential_headers
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            max_response_bytes: self.max_response_bytes.unwrap_or(64 * 1024 * 1024),
            max_concurrent_fetches: self.max_concurrent_fetches.unwrap_or(64),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms.unwrap_or(60_000)),
            total_timeout: Duration::from_millis(self.total_timeout_ms.unwrap_or(300_000)),
            max_redirects: self.max_redirects.unwrap_or(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Wrapper = crate::ServerConfig;

    #[test]
    fn bad_regex_fails_at_load() {
        let err = toml::from_str::<Wrapper>("[http]\ndeny = [{ regex = \"(\" }]\n").unwrap_err();
        assert!(err.to_string().contains("invalid regex"), "{err}");
    }

    #[test]
    fn matcher_needs_one_kind() {
        let err =
            toml::from_str::<Wrapper>("[http]\nallow = [{ exact = \"a\", prefix = \"b\" }]\n")
                .unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
    }

    #[test]
    fn regex_is_full_match() {
        let m = UrlMatcher::new("regex", "https://api\\.example\\.com/.*").unwrap();
        assert!(m.matches("https://api.example.com/x"));
        assert!(!m.matches("http://evil/?https://api.example.com/x"));
    }

    #[test]
    fn defaults_admit_loopback_not_metadata() {
        let o = HttpOptions::default();
        assert!(o.addresses.loopback && o.addresses.private);
        assert!(!o.addresses.link_local && !o.addresses.metadata);
    }
}
