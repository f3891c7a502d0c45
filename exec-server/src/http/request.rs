//! [`FetchSpec`]: a validated request head, converted once at the boundary from `pb::RequestHead`,
//! and the resolution of its headers (including `value_from_env`) against the operator config.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use outpost_proto::pb;

use super::config::HttpOptions;
use super::error::HttpError;

/// Longest URL accepted.
pub const MAX_URL_BYTES: usize = 8192;
/// Most request headers accepted.
pub const MAX_HEADERS: usize = 256;

/// One request header as the client sent it.
#[derive(Debug, Clone)]
pub enum HeaderSource {
    /// A literal value.
    Text(HeaderValue),
    /// The value of an executor environment variable.
    Env(String),
}

/// A validated request head.
#[derive(Debug, Clone)]
pub struct FetchSpec {
    /// Method.
    pub method: Method,
    /// Absolute http(s) URL.
    pub url: url::Url,
    /// Headers in order.
    pub headers: Vec<(HeaderName, HeaderSource)>,
    /// Requested total timeout.
    pub timeout: Option<Duration>,
    /// Redirect hops to follow (0: stop).
    pub follow_max: u32,
    /// Requested response cap (0: the executor's).
    pub max_response_bytes: u64,
    /// Whether body frames follow.
    pub has_body: bool,
}

impl TryFrom<pb::RequestHead> for FetchSpec {
    type Error = HttpError;

    fn try_from(head: pb::RequestHead) -> Result<Self, HttpError> {
        let invalid = |field, reason| HttpError::Invalid { field, reason };
        let method = Method::from_bytes(head.method.as_bytes())
            .map_err(|_| invalid("head.method", "not an HTTP method token"))?;
        if head.url.len() > MAX_URL_BYTES {
            return Err(invalid("head.url", "longer than 8192 bytes"));
        }
        let url =
            url::Url::parse(&head.url).map_err(|_| invalid("head.url", "not an absolute URL"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("head.url", "scheme must be http or https"));
        }
        if url.host().is_none() {
            return Err(invalid("head.url", "has no host"));
        }
        if head.headers.len() > MAX_HEADERS {
            return Err(invalid("head.headers", "more than 256 headers"));
        }
        let headers = head
            .headers
            .into_iter()
            .map(convert_header)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            method,
            url,
            headers,
            timeout: (head.timeout_ms > 0).then(|| Duration::from_millis(head.timeout_ms)),
            follow_max: head.redirect.map_or(0, |r| r.follow_max),
            max_response_bytes: head.max_response_bytes,
            has_body: head.has_body,
        })
    }
}

fn convert_header(header: pb::Header) -> Result<(HeaderName, HeaderSource), HttpError> {
    let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|_| HttpError::Invalid {
        field: "head.headers.name",
        reason: "not an HTTP header name token",
    })?;
    let source = match header.value {
        Some(pb::header::Value::Text(text)) => {
            if text.contains(['\r', '\n', '\0']) {
                return Err(HttpError::Invalid {
                    field: "head.headers.text",
                    reason: "contains CR, LF or NUL",
                });
            }
            HeaderSource::Text(
                HeaderValue::from_str(&text).map_err(|_| HttpError::Invalid {
                    field: "head.headers.text",
                    reason: "not a valid header value",
                })?,
            )
        }
        Some(pb::header::Value::ValueFromEnv(var)) => HeaderSource::Env(var),
        None => {
            return Err(HttpError::Invalid {
                field: "head.headers.value",
                reason: "one of text or value_from_env is required",
            });
        }
    };
    Ok((name, source))
}

/// Headers ready to send, and whether they carry credentials (which forbids following redirects).
#[derive(Debug, Clone)]
pub struct ResolvedHeaders {
    /// The headers.
    pub map: HeaderMap,
    /// True when `Authorization`, a configured credential header, or an environment-sourced value is
    /// present.
    pub credentialed: bool,
}

/// Resolves `value_from_env` headers against the allow-list and reads the executor's environment.
///
/// # Errors
/// [`HttpError::EnvNotAllowed`] for a variable not allow-listed, [`HttpError::EnvUnusable`] for one
/// that is unset or not a valid header value.
pub fn resolve_headers(
    spec: &FetchSpec,
    options: &HttpOptions,
) -> Result<ResolvedHeaders, HttpError> {
    let mut map = HeaderMap::with_capacity(spec.headers.len());
    let mut credentialed = false;
    for (name, source) in &spec.headers {
        let value = match source {
            HeaderSource::Text(v) => v.clone(),
            HeaderSource::Env(var) => {
                credentialed = true;
                if !options.env_allow.iter().any(|allowed| allowed == var) {
                    return Err(HttpError::EnvNotAllowed {
                        header: name.to_string(),
                        var: var.clone(),
                    });
                }
                std::env::var(var)
                    .ok()
                    .and_then(|v| HeaderValue::from_str(&v).ok())
                    .ok_or_else(|| HttpError::EnvUnusable {
                        header: name.to_string(),
                        var: var.clone(),
                    })?
            }
        };
        if name == http::header::AUTHORIZATION
            || options
                .credential_headers
                .iter()
                .any(|c| c == name.as_str())
        {
            credentialed = true;
        }
        map.append(name.clone(), value);
    }
    Ok(ResolvedHeaders { map, credentialed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(url: &str) -> pb::RequestHead {
        pb::RequestHead {
            method: "GET".into(),
            url: url.into(),
            ..Default::default()
        }
    }

    fn field(err: HttpError) -> &'static str {
        match err {
            HttpError::Invalid { field, .. } => field,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn validation_names_fields() {
        assert_eq!(
            field(FetchSpec::try_from(head("ftp://x/")).unwrap_err()),
            "head.url"
        );
        assert_eq!(
            field(FetchSpec::try_from(head("/relative")).unwrap_err()),
            "head.url"
        );
        let mut h = head("http://x/");
        h.method = "GE T".into();
        assert_eq!(field(FetchSpec::try_from(h).unwrap_err()), "head.method");
        let mut h = head("http://x/");
        h.headers.push(pb::Header {
            name: "x-a".into(),
            value: Some(pb::header::Value::Text("a\r\nb: c".into())),
        });
        assert_eq!(
            field(FetchSpec::try_from(h).unwrap_err()),
            "head.headers.text"
        );
        let mut h = head("http://x/");
        h.headers.push(pb::Header {
            name: "bad name".into(),
            value: Some(pb::header::Value::Text("v".into())),
        });
        assert_eq!(
            field(FetchSpec::try_from(h).unwrap_err()),
            "head.headers.name"
        );
    }

    #[test]
    fn env_values_need_the_allow_list() {
        let mut h = head("http://x/");
        h.headers.push(pb::Header {
            name: "x-key".into(),
            value: Some(pb::header::Value::ValueFromEnv("PATH".into())),
        });
        let spec = FetchSpec::try_from(h).unwrap();
        let mut options = HttpOptions::default();
        assert!(matches!(
            resolve_headers(&spec, &options),
            Err(HttpError::EnvNotAllowed { .. })
        ));
        options.env_allow.push("PATH".into());
        let resolved = resolve_headers(&spec, &options).unwrap();
        assert!(resolved.credentialed);
        assert!(resolved.map.contains_key("x-key"));
    }
}
