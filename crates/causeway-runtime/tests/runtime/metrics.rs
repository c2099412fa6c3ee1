//! The metrics endpoint as Prometheus scrapes it: every metric of the
//! right type, named by the conventions (a counter ends in `_total`, a
//! value with a unit names its base unit), and listed in docs/OPERATIONS.md.

use crate::common;

use bytes::Bytes;
use causeway_client::wire::{Request, Response};
use causeway_protocol::DcId;
use causeway_runtime::{config, start};
use common::Raw;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Every metric a node serves, with its type.
const EXPECTED: [(&str, &str); 29] = [
    ("transactions_started", "counter"),
    ("transactions_committed", "counter"),
    ("transactions_aborted", "counter"),
    ("operation_latency_seconds", "histogram"),
    ("read_only_round_trips", "counter"),
    ("reads_waited", "counter"),
    ("checkpoint_waits", "counter"),
    ("stream_spills", "counter"),
    ("stream_unspilled", "counter"),
    ("stream_spilled_bytes", "gauge"),
    ("read_wait_seconds", "histogram"),
    ("sent_bytes", "counter"),
    ("messages_sent", "counter"),
    ("stable_lag_seconds", "gauge"),
    ("queue_length", "gauge"),
    ("versions", "gauge"),
    // Listed for every protocol; samples only from replicas of replica groups (Geo-SDUR).
    ("group_leader", "gauge"),
    ("version_metadata_bytes", "gauge"),
    ("client_connections", "gauge"),
    ("client_connections_closed_by_limit", "counter"),
    ("client_logins", "counter"),
    ("peer_connected", "gauge"),
    ("peer_reconnects", "counter"),
    ("peer_envelopes_refused", "counter"),
    ("peer_messages_held", "counter"),
    ("peer_gaps", "counter"),
    ("peer_backlog_bytes", "gauge"),
    ("peer_backlogs_shed", "counter"),
    ("peer_messages_shed", "counter"),
];

fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<_> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body.split_once("\r\n\r\n").expect("an HTTP answer").1.to_string()
}

/// `# TYPE` lines: family name (without the `causeway_` prefix) → type.
fn types(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE causeway_"))
        .map(|l| {
            let (name, kind) = l.split_once(' ').expect("# TYPE name type");
            (name.to_string(), kind.to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_typed_and_named_by_prometheus_conventions() {
    let p = free_ports(6);
    let text = format!(
        "name = \"m\"\npartitions = 2\ntls = \"off\"\n[auth]\nanonymous = \"admin\"\n[[dc]]\nname = \"a\"\n\
         [[node]]\nname = \"a0\"\ndc = \"a\"\npartitions = [0]\npeer = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\nmetrics = \"127.0.0.1:{}\"\n\
         [[node]]\nname = \"a1\"\ndc = \"a\"\npartitions = [1]\npeer = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\n",
        p[0], p[1], p[2], p[3], p[4]
    );
    let plan = Arc::new(config::parse(&text, Path::new("metrics.toml")).expect("a valid config"));
    let a0 = start(plan.clone(), "a0").await.expect("a0 starts");
    let _a1 = start(plan, "a1").await.expect("a1 starts");
    // A transaction over both partitions, so that the peer link carries messages.
    let (mut c, _) = Raw::hello(a0.client_addr(DcId(0)).unwrap()).await;
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    for k in ["a", "b", "c", "d"] {
        let (key, value) = (Bytes::from(k), Bytes::from("1"));
        assert_eq!(c.call(Request::Write { key, value }).await, Some(Response::Written));
    }
    assert!(matches!(c.call(Request::Commit).await, Some(Response::Committed(_))));
    // The link to a1 reconnects: the reconnect counter counts it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    a0.drop_peer_connections();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let text = scrape(a0.metrics_addr.expect("a metrics endpoint")).await;
    let found = types(&text);
    let expected: BTreeMap<String, String> = EXPECTED.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect();
    assert_eq!(found, expected, "{text}");
    for line in text.lines().filter(|l| l.starts_with("causeway_")) {
        let name = line.split(['{', ' ']).next().unwrap().trim_start_matches("causeway_");
        let family = found
            .keys()
            .filter(|f| name.starts_with(f.as_str()))
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("{line}: no family"));
        let suffix = &name[family.len()..];
        match found[family].as_str() {
            "counter" => {
                assert!(suffix == "_total" || suffix == "_created", "a counter sample must end in _total: {line}")
            }
            "gauge" => assert_eq!(suffix, "", "a gauge sample is named as its family: {line}"),
            "histogram" => assert!(["_bucket", "_sum", "_count", "_created"].contains(&suffix), "{line}"),
            other => panic!("{line}: unexpected type {other}"),
        }
        // Base units only: seconds and bytes, never milliseconds, microseconds or kilobytes.
        for unit in ["_ms", "_us", "_millis", "_micros", "_kb", "_kib", "_mb"] {
            assert!(!name.contains(unit), "{line}: not a base unit");
        }
    }
    let reconnects = text
        .lines()
        .find(|l| l.starts_with("causeway_peer_reconnects_total{"))
        .unwrap_or_else(|| panic!("no reconnect sample: {text}"));
    let count: f64 = reconnects.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(count >= 1.0, "{reconnects}");

    // docs/OPERATIONS.md lists each one, under the name Prometheus shows,
    // with its type: `| names | type, or one type per name | what |`.
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/OPERATIONS.md")).unwrap();
    let table = &doc[doc.find("| metric | type | what |").expect("the metrics table")..];
    let table = &table[..table.find("\n\n").unwrap_or(table.len())];
    let mut listed = BTreeMap::new();
    for row in table.lines().skip(2) {
        let columns: Vec<&str> = row.trim_start_matches("| ").split(" | ").collect();
        let names: Vec<&str> = columns[0].split('`').skip(1).step_by(2).map(|n| n.split('{').next().unwrap()).collect();
        let kinds: Vec<&str> = columns[1].split(", ").collect();
        for (i, name) in names.iter().enumerate() {
            let kind = if kinds.len() == 1 { kinds[0] } else { kinds[i] };
            listed.insert(name.to_string(), kind.to_string());
        }
    }
    let shown: BTreeMap<String, String> = EXPECTED
        .iter()
        .map(|(name, kind)| {
            (if *kind == "counter" { format!("{name}_total") } else { name.to_string() }, kind.to_string())
        })
        .collect();
    assert_eq!(listed, shown, "docs/OPERATIONS.md's metrics table");
}
