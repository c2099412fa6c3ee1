//! A cluster's certificate authority, and the node certificates it signs
//! (what `causeway certs` writes).
//!
//! The CA's certificate is rebuilt from its key when more nodes are signed
//! later: a child certificate names its issuer by
//! distinguished name and key, so it chains to the `ca.pem` written the
//! first time. [`Authority::issue`] checks that it does.

use std::net::IpAddr;

use super::{identity, parse_certs, valid_node_name, verify, TlsError, IDENTITY_SUFFIX};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// How long a node certificate is valid: rotate before (docs/OPERATIONS.md).
pub const NODE_CERT_DAYS: i64 = 825;
/// How long the CA is valid.
pub const CA_DAYS: i64 = 3650;

/// A node's certificate and key, PEM-encoded.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

pub struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn err(e: impl std::fmt::Display) -> TlsError {
    TlsError::Verifier(e.to_string())
}

/// The CA's certificate for `key`. Its name comes from the key, not the
/// cluster: every node's certificate carries it as its issuer, and anyone
/// who starts a TLS handshake sees that — the cluster's name must not be.
fn ca_params(key: &KeyPair) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    let mut dn = DistinguishedName::new();
    // The public key's first bytes after its format byte: stable for the key.
    let id: String = key.public_key_raw().iter().skip(1).take(8).map(|b| format!("{b:02x}")).collect();
    dn.push(DnType::OrganizationName, "Causeway");
    dn.push(DnType::CommonName, format!("Causeway CA {id}"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(CA_DAYS);
    Ok(params)
}

impl Authority {
    /// A new CA, with a fresh key.
    pub fn new() -> Result<Self, TlsError> {
        let key = KeyPair::generate().map_err(err)?;
        let cert = ca_params(&key)?.self_signed(&key).map_err(err)?;
        Ok(Authority { cert, key })
    }

    /// The CA whose key is `key_pem`, to sign more nodes.
    pub fn from_key(key_pem: &str) -> Result<Self, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| err(format!("the CA key: {e}")))?;
        let cert = ca_params(&key)?.self_signed(&key).map_err(err)?;
        Ok(Authority { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A certificate for node `name`, valid for its identity and for the
    /// `hosts` clients and peers reach it by (IP addresses or DNS names);
    /// checked to chain to `ca_pem` (the CA certificate nodes will trust).
    pub fn issue(&self, name: &str, hosts: &[String], ca_pem: &str) -> Result<Issued, TlsError> {
        if !valid_node_name(name) {
            return Err(err(format!(
                "node name {name:?} cannot be named in a certificate: use lower-case letters, digits and inner hyphens"
            )));
        }
        let mut sans = vec![SanType::DnsName(identity(name).try_into().map_err(err)?)];
        for host in hosts {
            let san = match host.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) if host.to_ascii_lowercase().ends_with(IDENTITY_SUFFIX) => {
                    return Err(err(format!("host {host:?} ends with {IDENTITY_SUFFIX}, kept for node identities")));
                }
                Err(_) => SanType::DnsName(host.clone().try_into().map_err(|e| err(format!("host {host:?}: {e}")))?),
            };
            if !sans.contains(&san) {
                sans.push(san);
            }
        }
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.subject_alt_names = sans;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(NODE_CERT_DAYS);
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &self.cert, &self.key).map_err(err)?;
        let ca = parse_certs(ca_pem.as_bytes(), "the CA certificate")?;
        verify(&ca, std::slice::from_ref(cert.der()), name)
            .map_err(|e| err(format!("the certificate issued does not verify against the CA: {e}")))?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}
