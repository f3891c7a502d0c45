//! In-process executors for tests: the real server on a real socket, stopped on drop.

use std::path::PathBuf;

use outpost_client::{ConnectOptions, Executor, Target};
use outpost_exec_server::auth::Token;
use outpost_exec_server::{ExecutorOptions, ListenTarget, Listener};
use tokio::sync::oneshot;

use crate::tls::TlsMaterial;

/// Which transport an in-process executor listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A unix socket in a fresh private directory.
    Unix,
    /// Plain TCP on 127.0.0.1 with a bearer token.
    Tcp,
    /// TLS on 127.0.0.1 with a bearer token.
    Tls,
    /// TLS on 127.0.0.1 requiring a client certificate (and a token).
    MutualTls,
}

/// A running in-process executor. Dropping it shuts the server down.
#[derive(Debug)]
pub struct InProcessExecutor {
    /// Target string for clients.
    pub target: String,
    /// Connect options that authenticate against this executor.
    pub options: ConnectOptions,
    /// TLS material when the transport uses TLS.
    pub tls: Option<TlsMaterial>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// The token every test executor with a token uses.
pub const TEST_TOKEN: &str = "test-token-4f1c";

impl InProcessExecutor {
    /// Starts an executor on `transport` with default options.
    pub async fn start(transport: Transport) -> anyhow::Result<Self> {
        Self::start_with(transport, ExecutorOptions::default()).await
    }

    /// Starts an executor on `transport`; token and TLS fields of `options` are set by the transport.
    pub async fn start_with(
        transport: Transport,
        mut options: ExecutorOptions,
    ) -> anyhow::Result<Self> {
        crate::init_tracing();
        let dir = tempfile::tempdir()?;
        let mut connect = ConnectOptions::default();
        let mut tls = None;
        let target = match transport {
            Transport::Unix => {
                ListenTarget::Unix(Some(dir.path().join("run").join("outpost.sock")))
            }
            Transport::Tcp | Transport::Tls | Transport::MutualTls => {
                options.token = Some(Token::new(TEST_TOKEN));
                connect.token = Some(TEST_TOKEN.to_owned());
                ListenTarget::Tcp("127.0.0.1:0".parse()?)
            }
        };
        if matches!(transport, Transport::Tls | Transport::MutualTls) {
            let material = TlsMaterial::generate(dir.path())?;
            let client_ca =
                (transport == Transport::MutualTls).then_some(material.ca_cert.as_path());
            options.tls = Some(outpost_exec_server::tls::server_config(
                &material.server_cert,
                &material.server_key,
                client_ca,
            )?);
            connect.tls_ca = Some(material.ca_cert.clone());
            if transport == Transport::MutualTls {
                connect.tls_client_cert = Some(material.client_cert.clone());
                connect.tls_client_key = Some(material.client_key.clone());
            }
            tls = Some(material);
        }
        let listener =
            Listener::bind(&target, options.tls.is_some(), options.token.is_some()).await?;
        let mut client_target = listener.client_target();
        if options.tls.is_some() {
            client_target = client_target.replacen("http://", "https://", 1);
        }
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(err) = outpost_exec_server::serve(listener, options, shutdown).await {
                tracing::error!(cause = %err, "test executor failed");
            }
        });
        Ok(Self {
            target: client_target,
            options: connect,
            tls,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        })
    }

    /// Connects an authenticated client.
    pub async fn connect(&self) -> anyhow::Result<Executor> {
        Ok(outpost_client::connect(&self.target.parse::<Target>()?, &self.options).await?)
    }

    /// Connects with custom options (e.g. a wrong token).
    pub async fn connect_with(&self, options: &ConnectOptions) -> anyhow::Result<Executor> {
        Ok(outpost_client::connect(&self.target.parse::<Target>()?, options).await?)
    }

    /// Stops the server and waits for the drain to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Socket path for unix executors.
    pub fn socket_path(&self) -> Option<PathBuf> {
        self.target.strip_prefix("unix:").map(PathBuf::from)
    }
}

impl Drop for InProcessExecutor {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
