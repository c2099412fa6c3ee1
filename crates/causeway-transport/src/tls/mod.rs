//! Mutual TLS between the nodes of one cluster.
//!
//! Every node holds a certificate signed by the cluster's CA that names it:
//! its subject alternative names include [`identity`]`(node name)`, a DNS
//! name under a suffix that no real host uses. Both ends of a link present
//! their certificate and check the other's against the CA (TLS 1.3 only):
//!
//! * the dialer checks that the acceptor's certificate names the node it
//!   dialed (rustls's server-name check, on the identity name);
//! * the acceptor checks, once the hello says which node is calling, that
//!   the certificate presented names that node ([`PeerTls::names`]) — so a
//!   node can speak, and claim an incarnation, only for itself.
//!
//! A stranger without a certificate of the CA fails the TLS handshake and
//! never sees a byte of ours but the certificate's.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use thiserror::Error;

mod authority;
pub use authority::{Authority, Issued, CA_DAYS, NODE_CERT_DAYS};

/// The DNS suffix of node identities in certificates. `.invalid` is
/// reserved (RFC 2606): no host name a client dials can end with it, so a
/// node's host names in its certificate never pass for another node.
pub const IDENTITY_SUFFIX: &str = ".node.causeway.invalid";

/// The name in a certificate that says "this is node `name`".
pub fn identity(name: &str) -> String {
    format!("{name}{IDENTITY_SUFFIX}")
}

/// Whether `name` can be a node identity: a DNS label in lower case
/// (letters, digits, hyphens; not starting or ending with a hyphen; 1 to
/// 63 characters). Lower case only, because certificates compare names
/// case-blind: `Beta` and `beta` would pass for each other.
pub fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{path}: {what}")]
    Pem { path: String, what: String },
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
    #[error("the CA certificate: {0}")]
    Verifier(String),
}

/// The ring provider, TLS 1.3 only: no OpenSSL, no C build beyond ring's.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.display().to_string(), source })
}

/// Certificates in PEM text (all of them, in order); `what` names it in errors.
pub fn parse_certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { path: what.into(), what: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::Pem { path: what.into(), what: "holds no certificate".into() });
    }
    Ok(certs)
}

/// The private key in PEM text.
pub fn parse_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| TlsError::Pem { path: what.into(), what: format!("no private key: {e}") })
}

fn roots(ca: &[CertificateDer<'static>]) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in ca {
        roots.add(c.clone()).map_err(|e| TlsError::Verifier(e.to_string()))?;
    }
    Ok(Arc::new(roots))
}

fn server_verifier(ca: &[CertificateDer<'static>]) -> Result<Arc<WebPkiServerVerifier>, TlsError> {
    WebPkiServerVerifier::builder_with_provider(roots(ca)?, provider())
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))
}

/// Whether `chain` (the leaf first) chains to `ca`, is valid now, and
/// names node `name`: what a dialer checks of a peer, done ahead of time.
fn verify(ca: &[CertificateDer<'static>], chain: &[CertificateDer<'_>], name: &str) -> Result<(), TlsError> {
    use rustls::client::danger::ServerCertVerifier;
    let server_name = ServerName::try_from(identity(name)).map_err(|e| TlsError::Verifier(e.to_string()))?;
    let (leaf, rest) = chain.split_first().ok_or_else(|| TlsError::Verifier("no certificate".into()))?;
    server_verifier(ca)?
        .verify_server_cert(leaf, rest, &server_name, &[], rustls::pki_types::UnixTime::now())
        .map(|_| ())
        .map_err(TlsError::from)
}

/// A node's TLS material: the CA it trusts and the certificate it presents.
#[derive(Clone, Debug)]
pub struct NodeCredentials {
    pub ca: Vec<CertificateDer<'static>>,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
}

impl NodeCredentials {
    /// From the PEM files `causeway certs` writes.
    pub fn load(ca: &Path, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let shown = |p: &Path| p.display().to_string();
        Ok(NodeCredentials {
            ca: parse_certs(&read(ca)?, &shown(ca))?,
            chain: parse_certs(&read(cert)?, &shown(cert))?,
            key: Arc::new(parse_key(&read(key)?, &shown(key))?),
        })
    }

    /// From PEM text.
    pub fn from_pem(ca: &str, cert: &str, key: &str) -> Result<Self, TlsError> {
        Ok(NodeCredentials {
            ca: parse_certs(ca.as_bytes(), "the CA certificate")?,
            chain: parse_certs(cert.as_bytes(), "the node certificate")?,
            key: Arc::new(parse_key(key.as_bytes(), "the node key")?),
        })
    }

    /// Checks that the certificate chains to the CA, is valid now, and
    /// names node `name`: a certificate copied to the wrong node, or
    /// expired, is found when the node starts, not at every link.
    pub fn check(&self, name: &str) -> Result<(), TlsError> {
        verify(&self.ca, &self.chain, name)
            .map_err(|e| TlsError::Verifier(format!("the certificate does not do for node {name:?}: {e}")))
    }

    /// Its trust and its certificate as a client configuration: what a
    /// node dials its peers with (public for tests that play a node).
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let client = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_webpki_verifier(server_verifier(&self.ca)?)
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(client))
    }

    /// What a node's client listener presents (clients show no certificate).
    pub fn client_listener(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(config))
    }
}

/// Both ends of mutual TLS for a node's links to its peers.
#[derive(Clone)]
pub struct PeerTls {
    pub(crate) server: Arc<ServerConfig>,
    pub(crate) client: Arc<ClientConfig>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls")
    }
}

impl PeerTls {
    pub fn new(creds: &NodeCredentials) -> Result<Self, TlsError> {
        // No CA names in the certificate request: a caller learns nothing
        // of ours before it has shown a certificate.
        let verifier = WebPkiClientVerifier::builder_with_provider(roots(&creds.ca)?, provider())
            .clear_root_hint_subjects()
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(creds.chain.clone(), creds.key.clone_key())?;
        Ok(PeerTls { server: Arc::new(server), client: creds.client_config()? })
    }

    /// Whether `cert` (already verified against the CA by the handshake)
    /// names node `name`.
    pub fn names(cert: &CertificateDer<'_>, name: &str) -> bool {
        let Ok(server_name) = ServerName::try_from(identity(name)) else { return false };
        webpki::EndEntityCert::try_from(cert).is_ok_and(|ee| ee.verify_is_valid_for_subject_name(&server_name).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_that_can_be_identities() {
        for ok in ["virginia-0", "a", "n1", &"x".repeat(63)] {
            assert!(valid_node_name(ok), "{ok}");
            assert!(ServerName::try_from(identity(ok)).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a.b", "a_b", "a b", "ü", "N1", &"x".repeat(64)] {
            assert!(!valid_node_name(bad), "{bad}");
        }
    }
}
