//! A node's TLS material, loaded from the files of its [`TlsPlan`] before
//! anything listens: a node without its certificate does not start.

use std::sync::Arc;

pub use causeway_transport::tls::{Authority, NODE_CERT_DAYS};
use causeway_transport::tls::{NodeCredentials, PeerTls};

use crate::error::StartError;
use crate::plan::{NodePlan, TlsPlan};

/// What a node secures its links with.
#[derive(Clone, Default)]
pub struct NodeTls {
    /// Mutual TLS to its peers; `None`: plain TCP.
    pub peers: Option<PeerTls>,
    /// What its client listeners present; `None`: plain TCP.
    pub clients: Option<Arc<rustls::ServerConfig>>,
}

impl NodeTls {
    pub fn load(plan: &TlsPlan, me: &NodePlan) -> Result<NodeTls, StartError> {
        let TlsPlan::Dir { dir, clients } = plan else { return Ok(NodeTls::default()) };
        let (cert, key) = TlsPlan::node_files(dir, &me.name);
        let creds = NodeCredentials::load(&TlsPlan::ca_file(dir), &cert, &key).map_err(|e| {
            StartError::Invalid(format!(
                "node {:?}: its TLS certificate: {e} (`causeway certs --config <file>` makes the cluster's)",
                me.name
            ))
        })?;
        let invalid = |e: causeway_transport::tls::TlsError| {
            StartError::Invalid(format!("node {:?}: its TLS certificate in {}: {e}", me.name, dir.display()))
        };
        creds.check(&me.name).map_err(invalid)?;
        Ok(NodeTls {
            peers: Some(PeerTls::new(&creds).map_err(invalid)?),
            clients: if *clients { Some(creds.client_listener().map_err(invalid)?) } else { None },
        })
    }
}
