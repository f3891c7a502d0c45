//! rustls server configuration: certificate chain and key from PEM files, HTTP/2 by ALPN, and optional
//! client-certificate verification against a CA bundle (mTLS).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ServerError;

/// Builds the TLS configuration. With `client_ca`, clients must present a certificate signed by it.
///
/// # Errors
/// Unreadable or empty PEM files and certificates or keys that rustls rejects.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = read_certs("TLS certificate", cert)?;
    let key = read_key(key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ServerError::Tls)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs("client CA bundle", ca)? {
                roots.add(cert).map_err(ServerError::Tls)?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(ServerError::ClientCa)?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(ServerError::Tls)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

fn read_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, ServerError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|source| ServerError::Pem {
            what,
            path: path.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(ServerError::PemEmpty {
            what,
            path: path.to_owned(),
            expected: "CERTIFICATE block",
        });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServerError> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| ServerError::Pem {
        what: "TLS private key",
        path: path.to_owned(),
        source,
    })
}
