//! Mutual TLS on the peer links: the attacks of a process on the same
//! machine, each refused, while the genuine link keeps delivering.
//!
//! Node 1 ("alpha") sends to node 2 ("beta"). Node 9 ("mallory") is a
//! member with a genuine certificate of the cluster's CA, which plays the
//! node that tries to speak for another; a stranger has no certificate, or
//! one of another CA.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use causeway_transport::handshake::{self, Hello, Refusal, Reply, TRANSPORT_VERSION};
use causeway_transport::tls::{identity, Authority, NodeCredentials, PeerTls};
use causeway_transport::{Peer, Transport, TransportConfig};
use common::{config, eventually, hundred_more, listener, Inbox, Msg, CLUSTER};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const MALLORY: u32 = 9;

fn creds(ca: &Authority, name: &str) -> NodeCredentials {
    let issued = ca.issue(name, &["127.0.0.1".into()], &ca.cert_pem()).unwrap();
    NodeCredentials::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap()
}

fn with_tls(mut cfg: TransportConfig, creds: &NodeCredentials) -> TransportConfig {
    cfg.tls = Some(PeerTls::new(creds).unwrap());
    cfg
}

struct Setup {
    ca: Authority,
    a: Transport<Msg>,
    b: Transport<Msg>,
    inbox: Inbox,
    sent: u64,
}

/// Alpha sends to beta over mutual TLS; beta also knows mallory (who never listens).
async fn setup() -> Setup {
    let ca = Authority::new().unwrap();
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let inbox = Inbox::default();
    let a_cfg = with_tls(config(1, vec![Peer::new(2, ab).named("beta")]), &creds(&ca, "alpha"));
    let a = Transport::start_with_listener(a_cfg, la, Inbox::default().deliver()).await.unwrap();
    let peers = vec![
        Peer::new(1, aa).named("alpha"),
        Peer::new(MALLORY, "127.0.0.1:1".parse::<std::net::SocketAddr>().unwrap()).named("mallory"),
    ];
    let b = Transport::start_with_listener(with_tls(config(2, peers), &creds(&ca, "beta")), lb, inbox.deliver())
        .await
        .unwrap();
    let mut s = Setup { ca, a, b, inbox, sent: 0 };
    s.good_traffic_flows().await;
    s
}

impl Setup {
    async fn good_traffic_flows(&mut self) {
        hundred_more(&self.a, 1, 2, &self.inbox, &mut self.sent).await;
    }

    /// The genuine link still delivers, on the connection it always had.
    async fn finish(mut self) {
        self.good_traffic_flows().await;
        assert_eq!(self.b.stats().peer(1).unwrap().inbound_connections, 1, "alpha's link was never disturbed");
        assert_eq!(self.inbox.count(MALLORY), 0, "nothing was delivered as from mallory");
        self.a.shutdown().await;
        self.b.shutdown().await;
    }
}

/// Everything the other end sends until it closes (or 5 s pass).
async fn read_to_end(mut s: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    got
}

fn hello(node: u32, incarnation: u64) -> Vec<u8> {
    handshake::encode_frame(
        TRANSPORT_VERSION,
        &Hello { cluster: CLUSTER.into(), terms: Vec::new(), node, incarnation, base: 0, skipped: false },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_over_mutual_tls_deliver_in_order_both_ways() {
    let ca = Authority::new().unwrap();
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let (ia, ib) = (Inbox::default(), Inbox::default());
    let a = Transport::start_with_listener(
        with_tls(config(1, vec![Peer::new(2, ab).named("beta")]), &creds(&ca, "alpha")),
        la,
        ia.deliver(),
    )
    .await
    .unwrap();
    let b = Transport::start_with_listener(
        with_tls(config(2, vec![Peer::new(1, aa).named("alpha")]), &creds(&ca, "beta")),
        lb,
        ib.deliver(),
    )
    .await
    .unwrap();
    for i in 0..2000 {
        a.send(2, Msg::new(i)).unwrap();
        b.send(1, Msg::new(i)).unwrap();
    }
    ib.wait_for(1, 2000, Duration::from_secs(10)).await;
    ia.wait_for(2, 2000, Duration::from_secs(10)).await;
    ib.assert_exactly(1, 2000);
    ia.assert_exactly(2, 2000);
    assert_eq!(b.stats().protocol_errors, 0);
    a.shutdown().await;
    b.shutdown().await;
}

/// The attack of the issue: a local process claims node 1 with a newer
/// incarnation to take the link over. Without a certificate it gets no
/// further than the TLS handshake, learns neither the cluster's name nor an
/// incarnation, and the real link is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_without_a_certificate_learns_nothing_and_takes_nothing_over() {
    let s = setup().await;
    let mut raw = TcpStream::connect(s.b.local_addr()).await.unwrap();
    raw.write_all(&hello(1, u64::MAX)).await.unwrap();
    let got = read_to_end(raw).await;
    let cluster = CLUSTER.as_bytes();
    assert!(!got.windows(cluster.len()).any(|w| w == cluster), "the cluster's name leaked: {got:?}");
    assert!(!got.windows(4).any(|w| w == handshake::MAGIC), "a handshake reply was sent: {got:?}");
    eventually("the stranger is counted", Duration::from_secs(5), || s.b.stats().protocol_errors >= 1).await;

    // A stranger that speaks TLS (trusting our CA, to read what it gets, and
    // showing no certificate) sees beta's certificate and nothing that
    // names the cluster; its hello gets no answer.
    let config = rustls::ClientConfig::builder_with_provider(causeway_transport::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates({
            let mut roots = rustls::RootCertStore::empty();
            roots.add(creds(&s.ca, "beta").ca[0].clone()).unwrap();
            roots
        })
        .with_no_client_auth();
    let tcp = TcpStream::connect(s.b.local_addr()).await.unwrap();
    let name = ServerName::try_from(identity("beta")).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
    let shown: Vec<u8> = tls.get_ref().1.peer_certificates().unwrap().iter().flat_map(|c| c.to_vec()).collect();
    assert!(!shown.windows(cluster.len()).any(|w| w == cluster), "a certificate names the cluster");
    let _ = tls.write_all(&hello(1, u64::MAX)).await;
    let _ = tls.flush().await;
    let mut got = Vec::new();
    let read = timeout(Duration::from_secs(5), tls.read_to_end(&mut got)).await.expect("still open after 5 s");
    assert!(read.is_err() || got.is_empty(), "a stranger without a certificate was answered: {got:?}");
    eventually("the TLS stranger is counted", Duration::from_secs(5), || s.b.stats().protocol_errors >= 2).await;
    s.finish().await;
}

/// A certificate of another CA, even one naming alpha, is refused by the
/// acceptor; and a dialer refuses an acceptor that shows one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_another_ca_is_refused_both_ways() {
    let s = setup().await;
    let rogue_ca = Authority::new().unwrap();
    // As a dialer that trusts beta (our CA) but shows a rogue certificate
    // naming alpha: the acceptor refuses it, and nothing is delivered.
    let rogue = NodeCredentials { ca: creds(&s.ca, "alpha").ca, ..creds(&rogue_ca, "alpha") };
    let before = s.b.stats().protocol_errors;
    let tcp = TcpStream::connect(s.b.local_addr()).await.unwrap();
    let name = ServerName::try_from(identity("beta")).unwrap();
    let connector = tokio_rustls::TlsConnector::from(rogue.client_config().unwrap());
    // TLS 1.3: the dialer's side of the handshake ends before the acceptor
    // judges its certificate; the verdict comes as an alert on the next read.
    if let Ok(mut tls) = connector.connect(name, tcp).await {
        let _ = tls.write_all(&hello(1, u64::MAX)).await;
        let _ = tls.flush().await;
        let mut got = Vec::new();
        let read = timeout(Duration::from_secs(5), tls.read_to_end(&mut got)).await.expect("still open after 5 s");
        match read {
            Err(e) => assert!(e.to_string().contains("UnknownCA"), "refused for another reason: {e}"),
            Ok(_) => assert!(got.is_empty(), "the rogue was answered: {got:?}"),
        }
    }
    eventually("the rogue is counted", Duration::from_secs(5), || s.b.stats().protocol_errors > before).await;
    // As an acceptor: a transport that dials "beta" at the rogue's address
    // never connects, and the rogue delivers nothing to anyone.
    let (lr, ar) = listener();
    let rogue_inbox = Inbox::default();
    let rogue_beta = Transport::start_with_listener(
        with_tls(
            config(2, vec![Peer::new(1, "127.0.0.1:1".parse::<std::net::SocketAddr>().unwrap()).named("alpha")]),
            &creds(&rogue_ca, "beta"),
        ),
        lr,
        rogue_inbox.deliver(),
    )
    .await
    .unwrap();
    let (lc, _) = listener();
    let dialer = Transport::start_with_listener(
        with_tls(config(1, vec![Peer::new(2, ar).named("beta")]), &creds(&s.ca, "alpha")),
        lc,
        Inbox::default().deliver(),
    )
    .await
    .unwrap();
    dialer.send(2, Msg::new(0)).unwrap();
    eventually("the dialer tried and failed", Duration::from_secs(5), || {
        dialer.stats().peer(2).unwrap().connect_failures >= 2
    })
    .await;
    assert_eq!(rogue_inbox.count(1), 0, "the rogue acceptor received a message");
    assert!(!dialer.stats().peer(2).unwrap().connected);
    dialer.shutdown().await;
    rogue_beta.shutdown().await;
    s.finish().await;
}

/// A member of the cluster can speak only for itself: mallory's genuine
/// certificate does not let it claim to be alpha.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_claim_another_nodes_identity_or_incarnation() {
    let s = setup().await;
    let mallory = creds(&s.ca, "mallory");
    let connect = || async {
        let tcp = TcpStream::connect(s.b.local_addr()).await.unwrap();
        let name = ServerName::try_from(identity("beta")).unwrap();
        tokio_rustls::TlsConnector::from(mallory.client_config().unwrap()).connect(name, tcp).await.unwrap()
    };
    let mut tls = connect().await;
    tls.write_all(&hello(1, u64::MAX)).await.unwrap();
    tls.flush().await.unwrap();
    let got = read_to_end(&mut tls).await;
    let reply: Reply = handshake::decode(&got[4..]).unwrap();
    assert_eq!(reply, Reply::Refuse(Refusal::NotThatNode(1)));
    // The same certificate, claiming its own node, is accepted: the refusal
    // above is the name check, not something else.
    let mut tls = connect().await;
    tls.write_all(&hello(MALLORY, 1)).await.unwrap();
    tls.flush().await.unwrap();
    let mut len = [0; 4];
    tls.read_exact(&mut len).await.unwrap();
    let mut body = vec![0; u32::from_be_bytes(len) as usize];
    tls.read_exact(&mut body).await.unwrap();
    let reply: Reply = handshake::decode(&body).unwrap();
    assert!(matches!(reply, Reply::Accept { next: 0, .. }), "{reply:?}");
    drop(tls);
    s.finish().await;
}

#[test]
fn a_ca_rebuilt_from_its_key_signs_certificates_that_chain_to_the_first_one() {
    let first = Authority::new().unwrap();
    let again = Authority::from_key(&first.key_pem()).unwrap();
    // `issue` checks the chain against the CA certificate given.
    let issued = again.issue("gamma", &["db-3.example".into()], &first.cert_pem()).unwrap();
    let creds = NodeCredentials::from_pem(&first.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap();
    creds.check("gamma").unwrap();
    assert!(creds.check("alpha").is_err(), "gamma's certificate does not do for alpha");
    // Another key is another issuer: refused, not written.
    assert!(Authority::new().unwrap().issue("gamma", &[], &first.cert_pem()).is_err());
    // A host that would pass for a node identity is refused.
    assert!(first.issue("gamma", &[identity("alpha")], &first.cert_pem()).is_err());
}
