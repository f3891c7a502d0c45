//! The `outpost.v1.Http` service: HTTP proxying through the executor's network for MCP servers and
//! OAuth endpoints that only the executor can reach.
//!
//! Requests are validated once at the boundary ([`FetchSpec`]); the destination policy (operator
//! allow/deny rules, then the SSRF guard in the DNS resolver, re-checked on every redirect hop) decides
//! what may be dialled; errors map to gRPC codes in one place (`impl From<HttpError> for Status`).
//!
//! # Layout
//! - [`config`]: the `[http]` table and the effective [`HttpOptions`].
//! - [`policy`]: URL rules, address classification and the guarded resolver.
//! - [`request`]: [`FetchSpec`] and header resolution (`value_from_env`).
//! - [`fetch`]: [`Fetcher`], the reqwest clients and the redirect loop.
//! - [`stream`]: request and response body streaming under limits.
//! - [`connection`]: per-connection ids and fetch slots.
//! - [`service`]: [`HttpService`], the thin tonic service.
//! - [`error`]: [`HttpError`] and its status mapping.

pub mod config;
pub mod connection;
pub mod error;
pub mod fetch;
pub mod policy;
pub mod request;
pub mod service;
pub mod stream;

pub use config::{HttpConfig, HttpOptions, UrlMatcher};
pub use connection::WithConnectionId;
pub use error::{Denied, HttpError};
pub use fetch::Fetcher;
pub use request::FetchSpec;
pub use service::HttpService;
