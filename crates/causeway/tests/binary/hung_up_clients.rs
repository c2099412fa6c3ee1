//! Clients that hang up mid-request do not take the server down. A
//! server answers a request cut short with an error; when the client has
//! reset the connection, that write fails — and with SIGPIPE at its
//! default, the failed write killed the whole process (found by holding
//! partial frames open and closing them, issue 12).

use crate::common;

use common::{cluster_config, free_ports, Servers};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_outlives_clients_that_reset_mid_frame() {
    let dir = std::env::temp_dir().join(format!("causeway-hangup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = free_ports(4);
    let config = dir.join("cluster.toml");
    std::fs::write(&config, cluster_config(&ports)).unwrap();
    let mut servers: Servers = common::running_cluster(&config, &ports);
    let addr = format!("127.0.0.1:{}", ports[1]);

    let mut hello = Vec::new();
    let body = postcard::to_allocvec(&causeway_client::wire::RequestFrame {
        id: 1,
        request: causeway_client::wire::Request::Hello {
            version: causeway_client::wire::WIRE_VERSION,
            client: "x".into(),
            credentials: None,
        },
    })
    .unwrap();
    hello.extend_from_slice(&(body.len() as u32).to_be_bytes());
    hello.extend_from_slice(&body);
    for _ in 0..3 {
        let mut conns = Vec::new();
        for _ in 0..20 {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            s.write_all(&hello).await.unwrap();
            s.write_all(&1000u32.to_be_bytes()).await.unwrap();
            s.write_all(&[0; 10]).await.unwrap();
            conns.push(s);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for s in conns {
            // A reset, not a FIN: the server's next write to it fails.
            s.set_zero_linger().unwrap();
            drop(s);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for (i, child) in servers.0.iter_mut().enumerate() {
        assert!(child.try_wait().unwrap().is_none(), "server {i} died: {:?}", child.try_wait());
    }
    let mut client = causeway_client::Client::connect(addr.as_str()).await.unwrap();
    client.read_only(&["k"]).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
