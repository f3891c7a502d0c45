//! Throwaway TLS material for tests: a CA, a server certificate for 127.0.0.1 and localhost, and a
//! client certificate, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// PEM files of a generated CA, server and client identity.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// CA certificate (trust anchor for both sides).
    pub ca_cert: PathBuf,
    /// Server certificate, valid for 127.0.0.1 and localhost.
    pub server_cert: PathBuf,
    /// Server key.
    pub server_key: PathBuf,
    /// Client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// Client key.
    pub client_key: PathBuf,
}

impl TlsMaterial {
    /// Generates fresh material into `dir`.
    pub fn generate(dir: &Path) -> anyhow::Result<Self> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "outpost test CA");
        let ca = ca_params.self_signed(&ca_key)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate()?;
        let server_params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        let server = server_params.signed_by(&server_key, &issuer)?;

        let client_key = KeyPair::generate()?;
        let mut client_params = CertificateParams::new(vec!["outpost-client".to_owned()])?;
        client_params
            .distinguished_name
            .push(DnType::CommonName, "outpost test client");
        let client = client_params.signed_by(&client_key, &issuer)?;

        let write = |name: &str, pem: String| -> anyhow::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, pem)?;
            Ok(path)
        };
        Ok(Self {
            ca_cert: write("ca.pem", ca.pem())?,
            server_cert: write("server.pem", server.pem())?,
            server_key: write("server-key.pem", server_key.serialize_pem())?,
            client_cert: write("client.pem", client.pem())?,
            client_key: write("client-key.pem", client_key.serialize_pem())?,
        })
    }
}
