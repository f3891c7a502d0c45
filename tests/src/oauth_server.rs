//! A small OAuth 2.1 authorization server plus a protected resource, as a real HTTP server (hyper), for
//! the end-to-end OAuth flow through the executor:
//!
//! - `/.well-known/oauth-protected-resource[/...]`: resource metadata naming this server;
//! - `/.well-known/oauth-authorization-server`: authorization server metadata (RFC 8414);
//! - `POST /register`: dynamic client registration (RFC 7591), public clients;
//! - `GET /authorize`: approves at once and redirects to `redirect_uri` with a code (the "browser");
//! - `POST /token`: `authorization_code` (PKCE S256 verified) and `refresh_token` grants;
//! - `/mcp`: the protected resource; 200 with a live access token, else 401 with a challenge.
//!
//! [`OAuthServer::revoke_access_tokens`] invalidates every access token, so a client must refresh.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;

#[derive(Debug, Default)]
struct Inner {
    clients: HashSet<String>,
    /// code -> (code_challenge, client_id)
    codes: HashMap<String, (String, String)>,
    access: HashSet<String>,
    refresh: HashSet<String>,
    next: u64,
    counts: Counts,
}

/// What the server has done, for assertions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Dynamic registrations.
    pub registrations: u32,
    /// Authorization codes exchanged (PKCE verified).
    pub code_exchanges: u32,
    /// Refresh grants served.
    pub refreshes: u32,
    /// Requests to the resource that carried a live token.
    pub authorized_resource_calls: u32,
}

/// A running OAuth server; stops when dropped.
#[derive(Debug)]
pub struct OAuthServer {
    /// Bound address.
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OAuthServer {
    /// Starts on 127.0.0.1:0.
    ///
    /// # Errors
    /// When binding fails.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Mutex::new(Inner::default()));
        let shared = inner.clone();
        let base = format!("http://{addr}");
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (inner, base) = (shared.clone(), base.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let (inner, base) = (inner.clone(), base.clone());
                        async move { Ok::<_, Infallible>(route(&inner, &base, req).await) }
                    });
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Ok(Self { addr, inner, task })
    }

    /// The protected resource URL.
    pub fn resource_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Invalidates every access token (refresh tokens stay valid).
    pub fn revoke_access_tokens(&self) {
        self.inner.lock().expect("not poisoned").access.clear();
    }

    /// Counters so far.
    pub fn counts(&self) -> Counts {
        self.inner.lock().expect("not poisoned").counts
    }
}

fn json_response(status: StatusCode, value: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn form(bytes: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(bytes).into_owned().collect()
}

async fn route(inner: &Mutex<Inner>, base: &str, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let query = form(req.uri().query().unwrap_or_default().as_bytes());
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut inner = inner.lock().expect("not poisoned");
    match path.as_str() {
        p if p.starts_with("/.well-known/oauth-protected-resource") => json_response(
            StatusCode::OK,
            json!({"resource": format!("{base}/mcp"), "authorization_servers": [base],
                   "scopes_supported": ["mcp"], "bearer_methods_supported": ["header"]}),
        ),
        "/.well-known/oauth-authorization-server" => json_response(
            StatusCode::OK,
            json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                   "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
                   "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token"],
                   "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
                   "scopes_supported": ["mcp"]}),
        ),
        "/register" => register(&mut inner, &body),
        "/authorize" => authorize(&mut inner, &query),
        "/token" => token(&mut inner, &form(&body)),
        "/mcp" => resource(&mut inner, base, auth.as_deref()),
        _ => json_response(StatusCode::NOT_FOUND, json!({"error": "not_found"})),
    }
}

fn register(inner: &mut Inner, body: &[u8]) -> Response<Full<Bytes>> {
    let Ok(serde_json::Value::Object(mut request)) = serde_json::from_slice(body) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": "invalid_client_metadata"}),
        );
    };
    inner.next += 1;
    inner.counts.registrations += 1;
    let client_id = format!("client-{}", inner.next);
    inner.clients.insert(client_id.clone());
    request.insert("client_id".into(), json!(client_id));
    request.insert("token_endpoint_auth_method".into(), json!("none"));
    json_response(StatusCode::CREATED, serde_json::Value::Object(request))
}

fn authorize(inner: &mut Inner, q: &HashMap<String, String>) -> Response<Full<Bytes>> {
    let (Some(client), Some(challenge), Some(redirect)) = (
        q.get("client_id"),
        q.get("code_challenge"),
        q.get("redirect_uri"),
    ) else {
        return json_response(StatusCode::BAD_REQUEST, json!({"error": "invalid_request"}));
    };
    if !inner.clients.contains(client)
        || q.get("code_challenge_method").map(String::as_str) != Some("S256")
    {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": "unauthorized_client"}),
        );
    }
    inner.next += 1;
    let code = format!("code-{}", inner.next);
    inner
        .codes
        .insert(code.clone(), (challenge.clone(), client.clone()));
    let mut location = url::Url::parse(redirect).expect("redirect_uri is a URL");
    location.query_pairs_mut().append_pair("code", &code);
    if let Some(state) = q.get("state") {
        location.query_pairs_mut().append_pair("state", state);
    }
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::FOUND;
    response.headers_mut().insert(
        http::header::LOCATION,
        location.as_str().parse().expect("a URL is a header value"),
    );
    response
}

fn issue_tokens(inner: &mut Inner) -> Response<Full<Bytes>> {
    inner.next += 1;
    let (access, refresh) = (format!("at-{}", inner.next), format!("rt-{}", inner.next));
    inner.access.insert(access.clone());
    inner.refresh.insert(refresh.clone());
    json_response(
        StatusCode::OK,
        json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
               "refresh_token": refresh, "scope": "mcp"}),
    )
}

fn token(inner: &mut Inner, f: &HashMap<String, String>) -> Response<Full<Bytes>> {
    let bad = |e: &str| json_response(StatusCode::BAD_REQUEST, json!({"error": e}));
    match f.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let (Some(code), Some(verifier)) = (f.get("code"), f.get("code_verifier")) else {
                return bad("invalid_request");
            };
            let Some((challenge, client)) = inner.codes.remove(code) else {
                return bad("invalid_grant");
            };
            let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            if computed != challenge || f.get("client_id").is_some_and(|c| *c != client) {
                return bad("invalid_grant");
            }
            inner.counts.code_exchanges += 1;
            issue_tokens(inner)
        }
        Some("refresh_token") => {
            let Some(refresh) = f.get("refresh_token") else {
                return bad("invalid_request");
            };
            if !inner.refresh.remove(refresh) {
                return bad("invalid_grant");
            }
            inner.counts.refreshes += 1;
            issue_tokens(inner)
        }
        _ => bad("unsupported_grant_type"),
    }
}

fn resource(inner: &mut Inner, base: &str, auth: Option<&str>) -> Response<Full<Bytes>> {
    let token = auth.and_then(|a| a.strip_prefix("Bearer "));
    if token.is_some_and(|t| inner.access.contains(t)) {
        inner.counts.authorized_resource_calls += 1;
        return json_response(StatusCode::OK, json!({"ok": true}));
    }
    let mut response = json_response(StatusCode::UNAUTHORIZED, json!({"error": "invalid_token"}));
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
    );
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        challenge.parse().expect("ASCII challenge"),
    );
    response
}
