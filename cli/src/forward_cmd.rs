//! `outpost forward`: a local HTTP listener (HTTP/1.1 and HTTP/2) that forwards every request through
//! the executor to `--to` plus the request's path and query, streaming both ways, so any local HTTP
//! client (curl, an MCP inspector, a Python MCP client) can reach a server only the executor can
//! reach. Refusals before a response (policy, limits, unreachable upstream) become 4xx/5xx answers
//! whose body is the executor's message; a failure mid-body aborts the connection so the client sees
//! a truncated transfer, never a silently short one.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use futures_util::{StreamExt, TryStreamExt};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use outpost_client::http::{ExecutorHttpClient, HttpClientError, HttpRequest, RequestBody};

use crate::target_args::TargetArgs;

/// Arguments of `outpost forward`.
#[derive(Debug, Args)]
pub(crate) struct ForwardArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Local address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Base URL on the executor's network; each request goes to BASE_URL + path + query.
    #[arg(long = "to", value_name = "BASE_URL")]
    to: url::Url,
}

type Body = BoxBody<Bytes, HttpClientError>;

/// Headers that describe one hop and are never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
];

pub(crate) async fn run(args: ForwardArgs) -> anyhow::Result<ExitCode> {
    if !matches!(args.to.scheme(), "http" | "https") {
        anyhow::bail!("--to must be an http:// or https:// URL");
    }
    let executor = args.target.connect().await?;
    let client = ExecutorHttpClient::new(executor);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    // Scripts read this line to learn the port.
    println!("forwarding http://{local} -> {}", args.to);
    let base = args.to.as_str().trim_end_matches('/').to_owned();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted.context("accept failed")?,
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        };
        let _ = stream.set_nodelay(true);
        let (client, base) = (client.clone(), base.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let (client, base) = (client.clone(), base.clone());
                async move { Ok::<_, Infallible>(forward(&client, &base, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(err) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, cause = %err, "forwarded connection ended with an error");
            }
        });
    }
}

async fn forward(
    client: &ExecutorHttpClient,
    base: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = HttpRequest::new(parts.method, format!("{base}{path}"));
    request.headers = end_to_end(parts.headers);
    request.body = if hyper::body::Body::is_end_stream(&body) {
        RequestBody::Empty
    } else {
        let frames = body.into_data_stream().map_err(std::io::Error::other);
        RequestBody::Stream(frames.boxed())
    };
    match client.fetch(request).await {
        Ok(response) => {
            let mut out = Response::new(BodyExt::boxed(StreamBody::new(
                response.body.map_ok(Frame::data),
            )));
            *out.status_mut() = response.status;
            *out.headers_mut() = end_to_end(response.headers);
            out
        }
        Err(err) => refusal(&err),
    }
}

fn end_to_end(mut headers: HeaderMap) -> HeaderMap {
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
    headers
}

/// An HTTP answer for a fetch the executor refused or could not start.
fn refusal(err: &HttpClientError) -> Response<Body> {
    let status = match err.code() {
        Some(tonic::Code::PermissionDenied) => StatusCode::FORBIDDEN,
        Some(tonic::Code::InvalidArgument) => StatusCode::BAD_REQUEST,
        Some(tonic::Code::DeadlineExceeded) => StatusCode::GATEWAY_TIMEOUT,
        Some(tonic::Code::ResourceExhausted) => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::BAD_GATEWAY,
    };
    let message = format!("outpost forward: {}\n", outpost_proto::error_chain(err));
    let mut out = Response::new(
        Full::new(Bytes::from(message))
            .map_err(|e| match e {})
            .boxed(),
    );
    *out.status_mut() = status;
    out
}
