//! `outpost http`: fetch a URL through the executor's network (curl-like). The body streams to
//! stdout as it arrives; `-i` prints the status line and headers first; `--fail` exits non-zero on
//! HTTP errors (status >= 400).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use futures_util::StreamExt;
use http::{HeaderName, HeaderValue, Method};
use outpost_client::http::{ExecutorHttpClient, HttpRequest, RequestBody};

use crate::target_args::TargetArgs;

/// Arguments of `outpost http`.
#[derive(Debug, Args)]
pub(crate) struct HttpArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// HTTP method.
    #[arg(short = 'X', long = "request", default_value = "GET")]
    method: String,
    /// Request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Header whose value the executor reads from its own environment variable (the operator must
    /// allow-list the variable): `Name=VARIABLE` (repeatable).
    #[arg(long = "header-from-env", value_name = "NAME=VARIABLE")]
    env_headers: Vec<String>,
    /// Request body: `@FILE` streams a file, `-` streams stdin, anything else is sent as is.
    #[arg(short = 'd', long = "data", value_name = "@FILE|-|TEXT")]
    data: Option<String>,
    /// Largest response body accepted, in bytes (default: the executor's limit).
    #[arg(long)]
    max_bytes: Option<u64>,
    /// Print the status line and response headers before the body.
    #[arg(short = 'i', long = "include")]
    include: bool,
    /// Exit with status 22 when the HTTP status is 400 or above.
    #[arg(short = 'f', long)]
    fail: bool,
    /// Follow redirects (re-checked by the executor's policy at every hop).
    #[arg(short = 'L', long = "location")]
    follow: bool,
    /// Most redirects to follow with `-L`.
    #[arg(long, default_value_t = 10)]
    max_redirs: u32,
    /// Total timeout in milliseconds (default: the executor's).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Absolute http:// or https:// URL, fetched from the executor's host.
    url: String,
}

/// curl's exit status for HTTP errors with `--fail`.
const EXIT_HTTP_ERROR: u8 = 22;

pub(crate) async fn run(args: HttpArgs) -> anyhow::Result<ExitCode> {
    let executor = args.target.connect().await?;
    let client = ExecutorHttpClient::new(executor);
    let method = Method::from_bytes(args.method.as_bytes())
        .with_context(|| format!("invalid method {:?}", args.method))?;
    let mut request = HttpRequest::new(method, args.url.clone());
    for header in &args.headers {
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("header {header:?} is not `Name: value`"))?;
        request.headers.append(
            HeaderName::from_bytes(name.trim().as_bytes())
                .with_context(|| format!("invalid header name {name:?}"))?,
            HeaderValue::from_str(value.trim())
                .with_context(|| format!("invalid value for header {name:?}"))?,
        );
    }
    for spec in &args.env_headers {
        let (name, var) = spec
            .split_once('=')
            .with_context(|| format!("--header-from-env {spec:?} is not `Name=VARIABLE`"))?;
        request
            .env_headers
            .push((name.trim().to_owned(), var.trim().to_owned()));
    }
    request.body = body(args.data.as_deref()).await?;
    request.max_response_bytes = args.max_bytes.unwrap_or(0);
    request.follow_redirects = if args.follow { args.max_redirs } else { 0 };
    request.timeout = args.timeout_ms.map(Duration::from_millis);
    let response = client
        .fetch(request)
        .await
        .with_context(|| format!("cannot fetch {}", args.url))?;
    let mut stdout = std::io::stdout().lock();
    if args.include {
        writeln!(stdout, "HTTP {}", response.status)?;
        for (name, value) in &response.headers {
            writeln!(
                stdout,
                "{name}: {}",
                String::from_utf8_lossy(value.as_bytes())
            )?;
        }
        writeln!(stdout)?;
        stdout.flush()?;
    }
    let status = response.status;
    let mut body = response.body;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.context("response body")?;
        stdout.write_all(&chunk)?;
        // Flush per chunk so server-sent events show up as they arrive.
        stdout.flush()?;
    }
    if args.fail && status.as_u16() >= 400 {
        eprintln!("outpost: {} answered {status}", args.url);
        return Ok(ExitCode::from(EXIT_HTTP_ERROR));
    }
    Ok(ExitCode::SUCCESS)
}

/// The request body named by `--data`.
async fn body(data: Option<&str>) -> anyhow::Result<RequestBody> {
    Ok(match data {
        None => RequestBody::Empty,
        Some("-") => RequestBody::Stream(read_stream(tokio::io::stdin())),
        Some(path) if path.starts_with('@') => {
            let path = &path[1..];
            let file = tokio::fs::File::open(path)
                .await
                .with_context(|| format!("cannot open {path}"))?;
            RequestBody::Stream(read_stream(file))
        }
        Some(text) => RequestBody::Bytes(Bytes::from(text.to_owned())),
    })
}

fn read_stream(
    reader: impl tokio::io::AsyncRead + Send + 'static,
) -> futures_util::stream::BoxStream<'static, std::io::Result<Bytes>> {
    tokio_util::io::ReaderStream::with_capacity(reader, 256 * 1024).boxed()
}
