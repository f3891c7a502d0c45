//! A TCP relay that can cut every connection through it on demand while it keeps listening, so a test
//! can break the transport between a client and an executor that stays alive.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

/// Bytes copied per read in each direction (large, so the relay also serves as a throughput
/// baseline: a proxy hop with no framing at all).
const RELAY_BUFFER: usize = 256 * 1024;

/// A running relay; dropping it stops listening and cuts every connection.
#[derive(Debug)]
pub struct Relay {
    /// Address clients connect to.
    pub addr: SocketAddr,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    task: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

impl Relay {
    /// Starts a relay on 127.0.0.1 (port 0) that forwards to `upstream`.
    ///
    /// # Errors
    /// When the listening socket cannot be bound.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let registered = connections.clone();
        let task = tokio::spawn(async move {
            let mut set = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let handle = set.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional_with_sizes(
                            &mut client,
                            &mut server,
                            RELAY_BUFFER,
                            RELAY_BUFFER,
                        )
                        .await;
                    }
                });
                registered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(handle);
                while set.try_join_next().is_some() {}
            }
        });
        Ok(Self {
            addr,
            connections,
            task,
        })
    }

    /// Closes every connection made so far (both sides see the socket close); new ones still work.
    pub fn cut(&self) {
        for handle in self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            handle.abort();
        }
    }
}
