//! A throwaway OpenSSH server on loopback for `ssh://` tests: fresh host and user keys in a temp dir,
//! key-only login for the current user, and a client config that trusts nothing else.
//!
//! Tests that need it call [`Sshd::start`]; when sshd is not installed it returns `None` after
//! printing a loud notice, or fails when `OUTPOST_TEST_REQUIRE_SSHD=1` says it must be there.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;

/// Host alias the client config defines for this server.
pub const SSH_HOST: &str = "outpost-test";

/// A running sshd, killed on drop.
#[derive(Debug)]
pub struct Sshd {
    /// Loopback port it listens on.
    pub port: u16,
    /// The temp dir holding keys, configs and logs.
    pub dir: tempfile::TempDir,
    /// Client config (`ssh -F`): host alias, port, identity, no known-hosts checks.
    pub client_config: PathBuf,
    /// Managed requirements the remote side's `outpost sandbox --include-managed-config` applies
    /// (passed by sshd as `OUTPOST_MANAGED_CONFIG`).
    pub requirements: PathBuf,
    child: tokio::process::Child,
}

const SSHD: &str = "/usr/sbin/sshd";

impl Sshd {
    /// Starts sshd, or returns `None` (loudly) when it is not installed and not required.
    ///
    /// # Errors
    /// Any set-up failure, or sshd missing while `OUTPOST_TEST_REQUIRE_SSHD=1`.
    pub async fn start() -> anyhow::Result<Option<Self>> {
        if !Path::new(SSHD).is_file() {
            let required = std::env::var("OUTPOST_TEST_REQUIRE_SSHD").is_ok_and(|v| v == "1");
            anyhow::ensure!(
                !required,
                "{SSHD} is missing and OUTPOST_TEST_REQUIRE_SSHD=1: install openssh-server"
            );
            eprintln!(
                "\n!!! ssh tests NOT RUN: {SSHD} is not installed (apt-get install openssh-server \
                 openssh-client; set OUTPOST_TEST_REQUIRE_SSHD=1 to make this an error) !!!\n"
            );
            return Ok(None);
        }
        let dir = tempfile::tempdir()?;
        let d = dir.path().to_path_buf();
        for key in ["host_key", "user_key"] {
            let status = std::process::Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .status()
                .context("cannot run ssh-keygen (install openssh-client)")?;
            anyhow::ensure!(status.success(), "ssh-keygen failed for {key}");
        }
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys"))?;
        // sshd refuses to start without its privilege separation directory.
        std::fs::create_dir_all("/run/sshd")?;
        let port = crate::free_port()?;
        let requirements = d.join("requirements.toml");
        std::fs::write(&requirements, "")?;
        std::fs::write(d.join("sshd_config"), sshd_config(&d, port, &requirements))?;
        let client_config = d.join("ssh_config");
        std::fs::write(&client_config, client_config_text(&d, port))?;
        let log = std::fs::File::create(d.join("sshd.log"))?;
        let child = tokio::process::Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("cannot start sshd")?;
        let sshd = Self {
            port,
            dir,
            client_config,
            requirements,
            child,
        };
        sshd.wait_listening().await?;
        Ok(Some(sshd))
    }

    async fn wait_listening(&self) -> anyhow::Result<()> {
        for _ in 0..500 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let log = std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default();
        anyhow::bail!(
            "sshd did not listen on port {} within 5 s:\n{log}",
            self.port
        )
    }

    /// The command line for `OUTPOST_SSH_COMMAND` / `ssh_command`.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.client_config.display())
    }

    /// An `ssh://` target for this server running `bin` remotely.
    pub fn target(&self, bin: &Path) -> String {
        format!("ssh://{SSH_HOST}?bin={}", bin.display())
    }

    /// The sshd log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// The process id of sshd.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

fn sshd_config(dir: &Path, port: u16, requirements: &Path) -> String {
    let d = dir.display();
    format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
         AuthorizedKeysFile {d}/authorized_keys\nUsePAM no\nStrictModes no\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
         PermitRootLogin prohibit-password\nLogLevel ERROR\n\
         SetEnv OUTPOST_MANAGED_CONFIG={}\n",
        requirements.display()
    )
}

fn client_config_text(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "Host {SSH_HOST}\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {d}/user_key\n  \
         IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  \
         LogLevel ERROR\n"
    )
}
