//! TLS to a server: the cluster's CA to check its certificate against.

use crate::Error;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;

/// How a [`Client`](crate::Client) speaks TLS to its server: it trusts the
/// cluster's CA (the `ca.pem` that `causeway certs` writes) and checks that
/// the server's certificate names the host it dialed (or
/// [`server_name`](ClientTls::server_name)). TLS 1.3 only.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) server_name: Option<String>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Trusts the CA certificates in the PEM file at `path`.
    pub fn from_ca_file(path: impl AsRef<Path>) -> Result<ClientTls, Error> {
        let path = path.as_ref();
        let pem = std::fs::read(path)
            .map_err(|e| Error::InvalidArgument(format!("cannot read the CA certificate {}: {e}", path.display())))?;
        ClientTls::from_ca_pem(&pem).map_err(|e| match e {
            Error::InvalidArgument(why) => Error::InvalidArgument(format!("{}: {why}", path.display())),
            other => other,
        })
    }

    /// Trusts the CA certificates in `pem`.
    pub fn from_ca_pem(pem: &[u8]) -> Result<ClientTls, Error> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| Error::InvalidArgument(format!("not a PEM certificate: {e}")))?;
            roots.add(cert).map_err(|e| Error::InvalidArgument(format!("not a CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(Error::InvalidArgument("no CA certificate in the PEM given".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| Error::InvalidArgument(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls { config: Arc::new(config), server_name: None })
    }

    /// Checks the server's certificate for `name` instead of the host of
    /// the address dialed (a server reached through a tunnel, say).
    pub fn server_name(mut self, name: impl Into<String>) -> ClientTls {
        self.server_name = Some(name.into());
        self
    }
}

/// The host part of `host:port`, `[v6]:port` or `v4:port`.
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}
