//! A TCP proxy that delays every byte by a fixed one-way latency in each direction, so a round trip
//! through it costs `2 * one_way` on top of the real one. Bytes are timestamped on arrival and released
//! when their time comes, so the delay does not throttle throughput (unlike sleeping per read).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A running delay proxy; stops (and drops its connections) when dropped.
#[derive(Debug)]
pub struct DelayProxy {
    /// Address clients connect to.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a proxy on 127.0.0.1 (port 0) that forwards to `upstream` with `one_way` delay each way.
///
/// # Errors
/// When the listening socket cannot be bound.
pub async fn start(upstream: SocketAddr, one_way: Duration) -> std::io::Result<DelayProxy> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((client, _)) = listener.accept().await {
            connections.spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::join!(pipe(cr, sw, one_way), pipe(sr, cw, one_way));
            });
        }
    });
    Ok(DelayProxy { addr, task })
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
