//! A real `outpost serve` child process for tests and the benchmark, killed on drop.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use outpost_client::{ConnectOptions, Executor, Target};

/// A running `outpost serve` process.
#[derive(Debug)]
pub struct ServeProcess {
    /// Target clients use.
    pub target: String,
    /// Options that authenticate against it.
    pub options: ConnectOptions,
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl ServeProcess {
    /// Starts `outpost serve` on a private unix socket, with `extra` arguments.
    pub async fn unix(extra: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let sock = dir.path().join("run").join("outpost.sock");
        let listen = format!("unix:{}", sock.display());
        Self::spawn(
            dir,
            &listen,
            format!("unix:{}", sock.display()),
            None,
            extra,
        )
        .await
    }

    /// Starts `outpost serve` on the unix socket `sock` (e.g. to restart an executor on the socket of
    /// one that was killed), with `extra` arguments.
    pub async fn unix_at(sock: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let target = format!("unix:{}", sock.display());
        Self::spawn(dir, &target, target.clone(), None, extra).await
    }

    /// Starts `outpost serve` on 127.0.0.1:`port` with a bearer token.
    pub async fn tcp(port: u16, extra: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let listen = format!("tcp://127.0.0.1:{port}");
        let target = format!("http://127.0.0.1:{port}");
        Self::spawn(dir, &listen, target, Some(crate::TEST_TOKEN), extra).await
    }

    async fn spawn(
        dir: tempfile::TempDir,
        listen: &str,
        target: String,
        token: Option<&str>,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let mut cmd = tokio::process::Command::new(crate::outpost_bin());
        cmd.args(["serve", "--listen", listen]).args(extra);
        let mut options = ConnectOptions::default();
        if let Some(token) = token {
            let path = dir.path().join("token");
            std::fs::write(&path, token)?;
            cmd.arg("--token-file").arg(&path);
            options.token = Some(token.to_owned());
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let process = Self {
            target,
            options,
            child,
            _dir: dir,
        };
        process.wait_ready().await?;
        Ok(process)
    }

    async fn wait_ready(&self) -> anyhow::Result<()> {
        for _ in 0..500 {
            if let Ok(client) = self.connect().await
                && client.info().await.is_ok()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!(
            "outpost serve on {} did not come up within 5 s",
            self.target
        )
    }

    /// Connects an authenticated client.
    pub async fn connect(&self) -> anyhow::Result<Executor> {
        Ok(outpost_client::connect(&self.target.parse::<Target>()?, &self.options).await?)
    }

    /// Connects through another address (e.g. a delay proxy in front of this executor).
    pub async fn connect_via(&self, target: &str) -> anyhow::Result<Executor> {
        Ok(outpost_client::connect(&target.parse::<Target>()?, &self.options).await?)
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `signal` to the executor (e.g. SIGTERM to make it drain).
    ///
    /// # Errors
    /// When the process is gone or the signal cannot be sent.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| anyhow::anyhow!("already reaped"))?;
        let pid = i32::try_from(pid)?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)?;
        Ok(())
    }

    /// Kills the executor (SIGKILL) and waits until it is gone.
    ///
    /// # Errors
    /// When it cannot be killed or reaped.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// A free loopback TCP port (bound and released; good enough for tests on one machine).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Creates `depth` nested directories under `root` and returns the deepest one.
pub fn nested_dirs(root: &Path, depth: usize) -> std::io::Result<std::path::PathBuf> {
    let mut dir = root.to_path_buf();
    for i in 0..depth {
        dir.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
