use super::*;

const GOOD: &str = r#"
name = "test"
protocol = "wren"
partitions = 2
tls = "off"

[auth]
anonymous = "write"

[tuning]
apply_interval_ms = 2.5

[limits]
max_value_bytes = 1000

[[dc]]
name = "virginia"
[[dc]]
name = "oregon"

[[node]]
name = "v0"
dc = "virginia"
partitions = [0, 1]
peer = "127.0.0.1:7000"
client = "127.0.0.1:7100"
metrics = "127.0.0.1:9100"

[[node]]
name = "o0"
dc = "oregon"
partitions = [0]
peer = "127.0.0.1:7001"
client = "127.0.0.1:7101"

[[node]]
name = "o1"
dc = "oregon"
partitions = [1]
peer = "127.0.0.1:7002"
client = "127.0.0.1:7102"
"#;

fn error_of(text: &str) -> String {
    match parse(text, Path::new("cluster.toml")) {
        Ok(_) => panic!("accepted a bad config:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_good_config_resolves_to_a_plan() {
    let plan = parse(GOOD, Path::new("cluster.toml")).unwrap();
    assert_eq!(plan.name, "test");
    assert_eq!(plan.protocol, ProtocolKind::Wren);
    assert_eq!((plan.topology.dc_count(), plan.topology.partition_count()), (2, 2));
    assert!(plan.topology.is_fully_replicated());
    assert_eq!(plan.tuning.apply_interval_us, 2500);
    assert_eq!(plan.tuning.stabilization_interval_us, Tuning::default().stabilization_interval_us);
    assert_eq!(plan.limits.max_value_bytes, 1000);
    assert_eq!(plan.limits.max_key_bytes, Limits::default().max_key_bytes);
    assert_eq!(plan.nodes.len(), 3);
    assert!(plan.nodes[2].replicas.contains(&ReplicaId::new(1, 1)));
    assert_eq!(plan.nodes[0].metrics, Some(HostAddr::Ip("127.0.0.1:9100".parse().unwrap())));
    assert!(plan.wan.is_none());
    assert_eq!(plan.auth, crate::auth::AuthPlan::anonymous(causeway_wire::Role::Write));
    assert_eq!(plan.max_clock_offset, crate::plan::MAX_CLOCK_OFFSET);
    assert_eq!(plan.max_peer_backlog_bytes, 256 << 20);
    assert_eq!(plan.tuning.max_kept_bytes, 64 << 20);
}

#[test]
fn auth_names_its_users_file_relative_to_the_config_and_its_limits() {
    let text = GOOD.replacen(
        "anonymous = \"write\"",
        "users = \"users.toml\"\nmax_failed_logins = 3\nfailed_login_window_s = 30",
        1,
    );
    let text = text.replacen("partitions = 2\n", "partitions = 2\nmax_clock_offset_ms = 250\n", 1);
    let text = text.replacen("[limits]", "[peers]\nmax_backlog_mb = 64\nmax_kept_mb = 2\n[limits]", 1);
    let plan = parse(&text, Path::new("/etc/causeway/cluster.toml")).unwrap();
    assert_eq!(plan.auth.users_file, Some(PathBuf::from("/etc/causeway/users.toml")));
    assert_eq!(plan.auth.anonymous, None, "no anonymous role unless given");
    assert_eq!((plan.auth.max_failed_logins, plan.auth.failed_login_window), (3, std::time::Duration::from_secs(30)));
    assert_eq!(plan.max_clock_offset, std::time::Duration::from_millis(250));
    assert_eq!(plan.max_peer_backlog_bytes, 64 << 20);
    assert_eq!(plan.tuning.max_kept_bytes, 2 << 20);
}

#[test]
fn wan_emulation_uses_the_rtt_matrix() {
    let text = GOOD.replace("[[dc]]\nname = \"virginia\"", "[wan]\nemulate = true\n\n[[dc]]\nname = \"virginia\"");
    let plan = parse(&text, Path::new("cluster.toml")).unwrap();
    let wan = plan.wan.expect("emulation on");
    // Virginia–Oregon: 70 ms RTT in config/wan.toml.
    assert_eq!(wan.between(DcId(0), DcId(1)), std::time::Duration::from_millis(35));
}

#[test]
fn mistakes_are_named_with_where_they_are() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "\"127.0.0.1:7001\"",
            "\"127.0.0.1:7000\"",
            "duplicate address 127.0.0.1:7000: used by node \"v0\" (peer) and by node \"o0\" (peer)",
        ),
        ("client = \"127.0.0.1:7101\"", "client = \"127.0.0.1:9100\"", "duplicate address 127.0.0.1:9100"),
        (
            "partitions = [1]\npeer",
            "partitions = [0]\npeer",
            "partition 0 of DC \"oregon\" is held by two nodes: \"o0\" and \"o1\"",
        ),
        (
            "partitions = [1]\npeer",
            "partitions = [5]\npeer",
            "node \"o1\": partition 5 does not exist (partitions are 0 to 1)",
        ),
        (
            "dc = \"oregon\"\npartitions = [0]",
            "dc = \"ohio\"\npartitions = [0]",
            "node \"o0\": unknown DC \"ohio\" (declared DCs: oregon, virginia)",
        ),
        ("protocol = \"wren\"", "protocol = \"paxos\"", "protocol: unknown protocol \"paxos\""),
        (
            "partitions = [1]\npeer",
            "partitions = [1]\nclock_offset_ms = 600\npeer",
            "the clock offsets of DC 1 spread over 600 ms; they must agree within 500 ms",
        ),
        ("partitions = 2\n", "partitions = 0\n", "partitions must be at least 1"),
        (
            "apply_interval_ms = 2.5",
            "apply_interval_ms = -1",
            "[tuning] apply_interval_ms = -1: must be a positive number",
        ),
        ("max_value_bytes = 1000", "max_value_bytes = 0", "[limits] max_value_bytes must be at least 1"),
        ("max_value_bytes = 1000", "max_value_bytes = 1000000", "so a read answer or a write set fits in one message"),
        ("partitions = 2\n", "partitions = 2\ntoken_key = \"short\"\n", "token_key must be at least 16 characters"),
        ("name = \"o1\"", "name = \"o0\"", "node \"o0\" is declared twice"),
        (
            "client = \"127.0.0.1:7102\"",
            "client = \"127.0.0.1:0\"",
            "node \"o1\": client address \"127.0.0.1:0\" needs a port other than 0",
        ),
        ("[limits]", "[limitz]", "unknown field `limitz`"),
        (
            "peer = \"127.0.0.1:7002\"",
            "peer = \"localhost\"",
            "node \"o1\": peer address \"localhost\" needs a port: write host:port",
        ),
        (
            "peer = \"127.0.0.1:7002\"",
            "peer = \"localhost:http\"",
            "node \"o1\": peer address \"localhost:http\" has no valid port (\"http\" is not a number from 1 to 65535)",
        ),
        ("partitions = [0, 1]", "partitions = [0, 1", "cluster.toml: TOML parse error at line"),
        ("tls = \"off\"\n", "", "no tls setting: give [tls] dir = \"certs\""),
        ("tls = \"off\"", "tls = \"on\"", "tls = \"on\": write tls = \"off\", or a [tls] table"),
        ("tls = \"off\"", "tls = false", "tls: found boolean, where tls = \"off\""),
        ("tls = \"off\"", "[tls]\ndir = \"certs\"\nclient = true", "[tls] unknown field `client`"),
        ("tls = \"off\"", "[tls]\nclients = true", "[tls] missing field `dir`"),
        ("[auth]\nanonymous = \"write\"\n", "", "no [auth] table: say who may connect as a client"),
        ("anonymous = \"write\"", "anonymous = \"root\"", "[auth] anonymous = \"root\": a role"),
        ("anonymous = \"write\"", "max_failed_logins = 3", "[auth] admits nobody: say who may connect"),
        ("anonymous = \"write\"", "anonymous = \"read\"\nmax_failed_logins = 0", "max_failed_logins = 0"),
        ("anonymous = \"write\"", "users = \"\"", "[auth] users is empty"),
        ("anonymous = \"write\"", "anonymous = \"read\"\npassword = \"x\"", "unknown field `password`"),
        (
            "anonymous = \"write\"",
            "anonymous = \"read\"\nfailed_login_window_s = 0",
            "failed_login_window_s = 0: from 1 to 86400",
        ),
        ("partitions = 2\n", "partitions = 2\nmax_clock_offset_ms = 0\n", "max_clock_offset_ms = 0: from 1"),
        (
            "partitions = [1]\npeer",
            "partitions = [1]\nclock_offset_ms = 400\npeer",
            "the clock offsets spread over 400 ms, not less than max_clock_offset_ms = 300",
        ),
        ("[limits]", "[peers]\nmax_backlog_mb = 8\n[limits]", "[peers] max_backlog_mb = 8: from 64"),
        ("[limits]", "[peers]\nmax_kept_mb = 0\n[limits]", "[peers] max_kept_mb = 0: from 1 to 65536"),
    ];
    for (from, to, expected) in cases {
        assert!(GOOD.contains(from), "case {from:?} does not apply");
        let mut text = GOOD.replacen(from, to, 1);
        if expected.contains("max_clock_offset_ms = 300") {
            text = text.replacen("partitions = 2\n", "partitions = 2\nmax_clock_offset_ms = 300\n", 1);
        }
        let message = error_of(&text);
        assert!(message.contains(expected), "for {to:?}: expected {expected:?} in\n{message}");
    }
}

#[test]
fn a_partition_no_node_holds_and_partial_placement_for_wren_are_refused() {
    // Oregon's nodes hold partition 0 only: Wren needs full replication.
    let partial =
        GOOD.replacen("partitions = [1]\npeer = \"127.0.0.1:7002\"", "partitions = [0]\npeer = \"127.0.0.1:7002\"", 1);
    let partial = partial.replacen("name = \"o1\"\ndc = \"oregon\"", "name = \"o1\"\ndc = \"virginia\"", 1);
    let message = error_of(&partial.replacen("partitions = [0, 1]", "partitions = [1]", 1));
    assert!(message.contains("Wren needs full replication"), "{message}");
    // Nobody holds partition 2.
    let message = error_of(&GOOD.replacen("partitions = 2\n", "partitions = 3\n", 1));
    assert!(message.contains("partition 2 has no replica"), "{message}");
}

#[test]
fn host_names_stay_names_until_used() {
    let text = GOOD
        .replacen("peer = \"127.0.0.1:7001\"", "peer = \"localhost:7001\"", 1)
        .replacen("client = \"127.0.0.1:7101\"", "client = \"localhost:7101\"", 1)
        // Another node's name need not resolve yet (its DNS record may
        // appear only once it runs): loading never resolves.
        .replacen("peer = \"127.0.0.1:7002\"", "peer = \"o1.not-yet.invalid:7002\"", 1);
    let plan = parse(&text, Path::new("cluster.toml")).unwrap();
    let o0 = &plan.nodes[1];
    // The other nodes dial the name, resolved again at every reconnect;
    // the node itself resolves it when it starts.
    assert_eq!(o0.peer, Some(HostAddr::Name("localhost:7001".into())));
    assert!(o0.peer.as_ref().unwrap().resolve().unwrap().ip().is_loopback());
    assert_eq!(o0.clients[0].1, HostAddr::Name("localhost:7101".into()));
    assert_eq!(plan.nodes[2].peer, Some(HostAddr::Name("o1.not-yet.invalid:7002".into())));
    assert_eq!(plan.nodes[0].peer, Some(HostAddr::Ip("127.0.0.1:7000".parse().unwrap())));
    // Two spellings of one name are one place.
    let twice = GOOD.replacen("peer = \"127.0.0.1:7001\"", "peer = \"LOCALHOST:7100\"", 1).replacen(
        "client = \"127.0.0.1:7100\"",
        "client = \"localhost:7100\"",
        1,
    );
    assert!(error_of(&twice).contains("duplicate address"), "{}", error_of(&twice));
}

/// The PaRiS example places its partitions as `--replication 2` does.
#[test]
fn the_paris_example_places_partitions_round_robin() {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/cluster-paris.toml"));
    let plan = load(path).expect("the example is valid");
    assert_eq!(plan.protocol, ProtocolKind::Paris);
    let oregon_reads_p1_in_virginia = Topology::round_robin(3, 4, 2).unwrap().prefer(DcId(1), PartitionId(1), DcId(0));
    assert_eq!(*plan.topology, oregon_reads_p1_in_virginia.unwrap());
    assert_eq!(plan.topology.serving_dc(DcId(1), PartitionId(1)), DcId(0));
    assert_eq!(plan.nodes.len(), 8);
    let text = std::fs::read_to_string(path).unwrap();
    for (to, expected) in [
        ("preferred = { 1 = \"ireland\", 0 = \"virginia\" }", "preferred 0 = \"virginia\": dc1 holds p0 itself"),
        ("preferred = { 1 = \"oregon\" }", "p1 has no replica in dc1 to prefer (it lives in dc0, dc2)"),
        ("preferred = { 1 = \"mars\" }", "no DC is named \"mars\" (the DCs: \"ireland\", \"oregon\", \"virginia\")"),
        ("preferred = { one = \"virginia\" }", "\"one\" is not a partition number"),
        ("preferred = { 9 = \"virginia\" }", "p9 does not exist"),
    ] {
        let message = parse(&text.replacen("preferred = { 1 = \"virginia\" }", to, 1), path).unwrap_err().to_string();
        assert!(message.contains(expected), "for {to:?}: expected {expected:?} in\n{message}");
    }
}

#[test]
fn a_tls_table_names_the_certificates_relative_to_the_file() {
    let text = GOOD.replacen("tls = \"off\"", "[tls]\ndir = \"certs\"", 1);
    let plan = parse(&text, Path::new("conf/cluster.toml")).unwrap();
    assert_eq!(plan.tls, TlsPlan::Dir { dir: PathBuf::from("conf/certs"), clients: true });
    let text = GOOD.replacen("tls = \"off\"", "[tls]\ndir = \"/etc/cw\"\nclients = false", 1);
    let plan = parse(&text, Path::new("conf/cluster.toml")).unwrap();
    assert_eq!(plan.tls, TlsPlan::Dir { dir: PathBuf::from("/etc/cw"), clients: false });
    assert_eq!(parse(GOOD, Path::new("cluster.toml")).unwrap().tls, TlsPlan::Off);
    // A certificate names its node: under TLS a name must be a DNS label.
    let text = text.replacen("name = \"o1\"", "name = \"o_1\"", 1);
    assert!(error_of(&text).contains("node \"o_1\": under TLS a node's name goes in its certificate"));
}

/// Geo-SDUR's example deployments parse: each partition a group of three,
/// "WAN 1" with two members of a partition in one DC (numbered in the order
/// of their nodes), "WAN 2" one per DC; and `[ordered]` is read and checked.
#[test]
fn replica_groups_come_from_the_nodes_that_list_a_partition() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let wan1 = load(&root.join("cluster-sdur-wan1.toml")).unwrap();
    assert_eq!(wan1.protocol, ProtocolKind::Sdur);
    let p0 = wan1.topology.members_of(PartitionId(0));
    assert_eq!(p0.len(), 3);
    assert_eq!(p0.iter().filter(|m| m.dc == DcId(2)).count(), 2, "partition 0's majority in EU: {p0:?}");
    assert!(wan1.topology.has_groups());
    let eu_0b = &wan1.nodes[wan1.node_index("eu-0b").unwrap()];
    assert_eq!(eu_0b.replicas, vec![ReplicaId { dc: DcId(2), partition: PartitionId(0), member: 1 }]);
    let wan2 = load(&root.join("cluster-sdur-wan2.toml")).unwrap();
    assert!(!wan2.topology.has_groups() && wan2.topology.is_fully_replicated());
    assert_eq!(wan2.tuning.ordered.election_us, 1_000_000);

    let sdur = GOOD.replace("protocol = \"wren\"", "protocol = \"sdur\"");
    let with = |section: &str| format!("{sdur}\n[ordered]\n{section}\n");
    let plan = parse(&with("reorder_threshold = 80\ndelay_ms = 20\nbloom_bits = 1024"), Path::new("c.toml")).unwrap();
    let o = &plan.tuning.ordered;
    assert_eq!((o.reorder_threshold, o.bloom_bits), (80, Some(1024)));
    assert_eq!(o.delaying, causeway_protocol::DelayTuning::Fixed { delay_us: 20_000 });
    let rtt = parse(&with("delay_ms = \"rtt\""), Path::new("c.toml")).unwrap();
    assert!(matches!(rtt.tuning.ordered.delaying, causeway_protocol::DelayTuning::FromRtt { .. }));
    for (bad, says) in [
        ("delay_ms = \"soon\"", "a number of milliseconds (0 to 60000) or \"rtt\""),
        ("bloom_bits = 8", "bloom_bits = 8"),
        ("election_ms = 50", "must exceed twice heartbeat_ms"),
        ("quorum = 2", "unknown field"),
    ] {
        let e = error_of(&with(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
}
