//! A node whose cluster has TLS for clients: a client that trusts the
//! cluster's CA works as ever; one in the clear, or trusting another CA,
//! is refused with an error that says why; a node without its certificate
//! does not start.

use bytes::Bytes;
use causeway_client::{Client, ClientOptions, ClientTls, Error};
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::plan::TlsPlan;
use causeway_runtime::{start, ClusterPlan, StartError};
use causeway_transport::tls::Authority;
use std::path::Path;
use std::sync::Arc;

/// The files `causeway certs` would write for the embedded node.
fn certs(dir: &Path) -> Authority {
    let ca = Authority::new().unwrap();
    let issued = ca.issue("embedded", &["127.0.0.1".into()], &ca.cert_pem()).unwrap();
    std::fs::write(TlsPlan::ca_file(dir), ca.cert_pem()).unwrap();
    let (cert, key) = TlsPlan::node_files(dir, "embedded");
    std::fs::write(cert, issued.cert_pem).unwrap();
    std::fs::write(key, issued.key_pem).unwrap();
    ca
}

fn plan(dir: &Path) -> ClusterPlan {
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    plan.tls = TlsPlan::Dir { dir: dir.to_path_buf(), clients: true };
    plan
}

fn with_ca(pem: &str) -> ClientOptions {
    ClientOptions { tls: Some(ClientTls::from_ca_pem(pem.as_bytes()).unwrap()), ..ClientOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_speak_tls_with_the_clusters_ca_and_only_so() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certs(dir.path());
    let node = start(Arc::new(plan(dir.path())), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();

    let mut client = Client::connect_with(addr, with_ca(&ca.cert_pem())).await.unwrap();
    client.begin().await.unwrap();
    client.write("k", "over tls").await.unwrap();
    client.commit().await.unwrap();
    assert_eq!(client.read_only(&["k"]).await.unwrap(), vec![Some(Bytes::from("over tls"))]);

    match Client::connect(addr).await {
        Err(Error::NotCauseway { detail, .. }) => assert!(detail.contains("give the cluster's CA"), "{detail}"),
        other => panic!("a client in the clear got {other:?}"),
    }
    let stranger = Authority::new().unwrap();
    match Client::connect_with(addr, with_ca(&stranger.cert_pem())).await {
        Err(Error::Tls { detail, .. }) => assert!(detail.contains("certificate"), "{detail}"),
        other => panic!("a client trusting another CA got {other:?}"),
    }
    // The certificate names 127.0.0.1, not another host.
    let other_name = ClientOptions {
        tls: Some(ClientTls::from_ca_pem(ca.cert_pem().as_bytes()).unwrap().server_name("db.example")),
        ..ClientOptions::default()
    };
    assert!(matches!(Client::connect_with(addr, other_name).await, Err(Error::Tls { .. })));
    // The first client's session is unharmed by the refused ones.
    assert_eq!(client.read_only(&["k"]).await.unwrap(), vec![Some(Bytes::from("over tls"))]);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_its_certificate_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    match start(Arc::new(plan(dir.path())), "embedded").await {
        Err(StartError::Invalid(why)) => assert!(why.contains("causeway certs"), "{why}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("started without a certificate"),
    }
}
