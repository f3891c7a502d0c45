//! [`Fetcher`]: sends one request upstream through the SSRF-guarded reqwest clients and follows
//! redirects by hand, so every hop is re-checked against the policy.
//!
//! Two clients: `proxied` honours `HTTP(S)_PROXY`/`NO_PROXY` from the executor's environment; `direct`
//! never uses a proxy and serves URLs whose host is literally loopback. Both dial only addresses the
//! [`GuardedResolver`] vetted (when a proxy is used, the address checked is the proxy's; the proxy
//! resolves the destination itself, which is the operator's choice when they configure one).

use std::sync::Arc;

use http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, LOCATION, PROXY_AUTHORIZATION,
};
use http::{HeaderMap, Method, StatusCode};

use super::config::HttpOptions;
use super::error::HttpError;
use super::policy::{self, GuardedResolver};
use super::request::{FetchSpec, ResolvedHeaders};

/// The upstream response after any followed redirects.
#[derive(Debug)]
pub struct Upstream {
    /// The response; its body has not been read.
    pub response: reqwest::Response,
    /// URL that produced `response`.
    pub final_url: url::Url,
    /// Redirects followed.
    pub redirects: u32,
}

/// Sends requests under the executor's destination policy.
#[derive(Debug)]
pub struct Fetcher {
    options: Arc<HttpOptions>,
    proxied: reqwest::Client,
    direct: reqwest::Client,
}

impl Fetcher {
    /// Builds the clients.
    ///
    /// # Errors
    /// [`HttpError::ClientBuild`] when reqwest cannot build a client (for example a malformed proxy
    /// variable).
    pub fn new(options: Arc<HttpOptions>) -> Result<Self, HttpError> {
        // reqwest is built with `rustls-no-provider` (ring instead of aws-lc); it picks up the process
        // default provider, which we install here unless the binary already chose one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            proxied: build_client(&options, true)?,
            direct: build_client(&options, false)?,
            options,
        })
    }

    /// The effective options.
    pub fn options(&self) -> &HttpOptions {
        &self.options
    }

    /// Sends `spec` (with `body` on the first hop) and follows redirects as the policy allows.
    ///
    /// # Errors
    /// [`HttpError::Denied`] for the URL or any hop, [`HttpError::Upstream`] when the exchange fails,
    /// [`HttpError::BadRedirect`] for an unusable `Location`.
    pub async fn send(
        &self,
        spec: &FetchSpec,
        headers: ResolvedHeaders,
        mut body: Option<reqwest::Body>,
    ) -> Result<Upstream, HttpError> {
        let follow = spec.follow_max.min(self.options.max_redirects);
        let mut url = spec.url.clone();
        let mut method = spec.method.clone();
        let mut map = headers.map;
        let mut redirects = 0;
        let mut has_body = body.is_some();
        loop {
            policy::check_url(&self.options, &url)?;
            let client = if policy::is_literal_loopback(&url) {
                &self.direct
            } else {
                &self.proxied
            };
            let mut request = client
                .request(method.clone(), url.clone())
                .headers(map.clone());
            if let Some(body) = body.take() {
                request = request.body(body);
            }
            let response = request.send().await.map_err(HttpError::from_reqwest)?;
            let status = response.status();
            let done = !status.is_redirection() || redirects >= follow || headers.credentialed;
            let location = response.headers().get(LOCATION);
            if done || location.is_none() {
                return Ok(Upstream {
                    response,
                    final_url: url,
                    redirects,
                });
            }
            let next = location
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .ok_or(HttpError::BadRedirect {
                    status: status.as_u16(),
                })?;
            match rewrite_method(status, &method, has_body) {
                Some(next_method) => {
                    if next_method != method {
                        map.remove(CONTENT_TYPE);
                        map.remove(CONTENT_LENGTH);
                        has_body = false;
                    }
                    method = next_method;
                }
                // A streamed body cannot be replayed on a 307/308: hand the redirect to the client.
                None => {
                    return Ok(Upstream {
                        response,
                        final_url: url,
                        redirects,
                    });
                }
            }
            if next.origin() != url.origin() {
                strip_origin_bound(&mut map);
            }
            tracing::debug!(from = %url, to = %next, %status, "following redirect");
            url = next;
            redirects += 1;
        }
    }
}

/// The method of the next hop, or `None` when the hop would need the (already streamed) body again.
fn rewrite_method(status: StatusCode, method: &Method, has_body: bool) -> Option<Method> {
    match status {
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER
            if *method != Method::GET && *method != Method::HEAD =>
        {
            Some(Method::GET)
        }
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT if has_body => None,
        _ => Some(method.clone()),
    }
}

/// Removes headers that must not cross to another origin (credentials, and a `Host` meant for the
/// first one).
fn strip_origin_bound(map: &mut HeaderMap) {
    map.remove(HOST);
    map.remove(AUTHORIZATION);
    map.remove(COOKIE);
    map.remove(PROXY_AUTHORIZATION);
}

fn build_client(options: &HttpOptions, proxy: bool) -> Result<reqwest::Client, HttpError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(GuardedResolver::new(options.addresses))
        .connect_timeout(options.idle_timeout)
        .tcp_nodelay(true)
        // Responses are forwarded byte for byte; the harness decides about decoding.
        .referer(false);
    if !proxy {
        builder = builder.no_proxy();
    }
    builder.build().map_err(HttpError::ClientBuild)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_becomes_get_on_303_and_307_with_body_stops() {
        assert_eq!(
            rewrite_method(StatusCode::SEE_OTHER, &Method::POST, true),
            Some(Method::GET)
        );
        assert_eq!(
            rewrite_method(StatusCode::TEMPORARY_REDIRECT, &Method::POST, true),
            None
        );
        assert_eq!(
            rewrite_method(StatusCode::TEMPORARY_REDIRECT, &Method::GET, false),
            Some(Method::GET)
        );
    }
}
