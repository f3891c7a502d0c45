//! An HTTP/1.1 server for proxy tests and the bench. It records every request (path and headers)
//! and notices when a client drops a response it is still streaming.
//!
//! Routes: `/hello`; `/headers` (the request headers as JSON); `/redirect?to=URL[&status=N]`;
//! `/bytes?n=N` (N bytes with a Content-Length) and `/chunked?n=N` (without); `/slow-head?ms=N`
//! (headers after N ms); `/sse?n=N&interval_ms=M` (N events whose data is the microseconds since
//! [`Upstream::epoch`] when each was sent); `/upload` (answers the number of body bytes received);
//! `/hang` (one line, then nothing until the client goes away, which [`Upstream::closed`] reports).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::time::Instant;

type Body = BoxBody<Bytes, Infallible>;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Path and query.
    pub path: String,
    /// Headers.
    pub headers: HeaderMap,
}

#[derive(Debug)]
struct State {
    recorded: Mutex<Vec<Recorded>>,
    closed: Notify,
    epoch: Instant,
}

/// A running upstream server; stops when dropped.
#[derive(Debug)]
pub struct Upstream {
    /// Bound address.
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    /// Starts on 127.0.0.1:0.
    ///
    /// # Errors
    /// When binding fails.
    pub async fn start() -> std::io::Result<Self> {
        Self::on(TcpListener::bind("127.0.0.1:0").await?)
    }

    /// Serves on `listener`.
    ///
    /// # Errors
    /// When the address cannot be read.
    pub fn on(listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            recorded: Mutex::default(),
            closed: Notify::new(),
            epoch: Instant::now(),
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let state = shared.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(route(&state, req).await) }
                    });
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Ok(Self { addr, state, task })
    }

    /// `http://ADDR` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.state.recorded.lock().expect("not poisoned").clone()
    }

    /// Resolves when a client drops a `/hang` response.
    pub async fn closed(&self) {
        self.state.closed.notified().await;
    }

    /// The instant SSE timestamps count from.
    pub fn epoch(&self) -> Instant {
        self.state.epoch
    }
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    url::form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = status;
    response
}

fn streamed(stream: impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static) -> Body {
    BodyExt::boxed(StreamBody::new(stream.map(|b| Ok(Frame::data(b)))))
}

async fn route(state: &Arc<State>, req: Request<Incoming>) -> Response<Body> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    state.recorded.lock().expect("not poisoned").push(Recorded {
        path: path.clone(),
        headers: req.headers().clone(),
    });
    let q = query(&req);
    let num = |k: &str| q.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    match req.uri().path() {
        "/hello" => full(StatusCode::OK, "hello"),
        "/headers" => {
            let map: serde_json::Map<_, _> = req
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                .collect();
            full(StatusCode::OK, serde_json::Value::Object(map).to_string())
        }
        "/redirect" => {
            let status = StatusCode::from_u16(num("status") as u16).unwrap_or(StatusCode::FOUND);
            let mut response = full(status, "");
            if let Some(to) = q.get("to").and_then(|t| t.parse().ok()) {
                response.headers_mut().insert(http::header::LOCATION, to);
            }
            response
        }
        "/bytes" | "/chunked" => bytes_response(num("n"), req.uri().path() == "/bytes"),
        "/slow-head" => {
            tokio::time::sleep(Duration::from_millis(num("ms"))).await;
            full(StatusCode::OK, "late")
        }
        "/sse" => sse_response(
            state.epoch,
            num("n"),
            Duration::from_millis(num("interval_ms")),
        ),
        "/upload" => {
            let mut body = req.into_body();
            let mut total = 0u64;
            while let Some(Ok(frame)) = body.frame().await {
                total += frame.data_ref().map_or(0, |d| d.len() as u64);
            }
            full(StatusCode::OK, total.to_string())
        }
        "/hang" => hang_response(state.clone()),
        _ => full(StatusCode::NOT_FOUND, "no such route"),
    }
}

fn bytes_response(n: u64, with_length: bool) -> Response<Body> {
    const CHUNK: u64 = 256 * 1024;
    let block = Bytes::from(vec![b'x'; CHUNK as usize]);
    let chunks = futures_util::stream::iter((0..n.div_ceil(CHUNK)).map(move |i| {
        let len = CHUNK.min(n - i * CHUNK) as usize;
        block.slice(..len)
    }));
    let mut response = Response::new(streamed(chunks));
    if with_length {
        response
            .headers_mut()
            .insert(http::header::CONTENT_LENGTH, n.into());
    }
    response
}

fn sse_response(epoch: Instant, n: u64, interval: Duration) -> Response<Body> {
    let events = futures_util::stream::unfold(0u64, move |i| async move {
        if i >= n {
            return None;
        }
        if i > 0 {
            tokio::time::sleep(interval).await;
        }
        let micros = epoch.elapsed().as_micros();
        Some((Bytes::from(format!("id: {i}\ndata: {micros}\n\n")), i + 1))
    });
    let mut response = Response::new(streamed(events));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// Notifies `closed` when dropped, i.e. when hyper drops the body because the client went away.
struct CloseGuard(Arc<State>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        self.0.closed.notify_waiters();
        self.0.closed.notify_one();
    }
}

fn hang_response(state: Arc<State>) -> Response<Body> {
    let guard = CloseGuard(state);
    let first = futures_util::stream::once(async { Bytes::from_static(b"start\n") });
    let rest = futures_util::stream::once(async move {
        let _guard = guard;
        std::future::pending::<Bytes>().await
    });
    Response::new(streamed(first.chain(rest)))
}
