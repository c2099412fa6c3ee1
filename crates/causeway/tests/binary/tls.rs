//! A cluster over TLS, as an operator runs it: `causeway certs`, two
//! `causeway server` processes linked by mutual TLS, and the shell with the
//! cluster's CA (without it, the shell is told what to give).

use crate::common;

use common::{cluster_config, free_ports, running_cluster};
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn causeway(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn a_tls_cluster_serves_the_shell_that_trusts_its_ca() {
    let dir = std::env::temp_dir().join(format!("causeway-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = free_ports(4);
    let config = dir.join("cluster.toml");
    let text_of_config = cluster_config(&ports).replace("tls = \"off\"\n", "[tls]\ndir = \"certs\"\n");
    assert!(text_of_config.contains("[tls]"), "the helper's config changed: {text_of_config}");
    std::fs::write(&config, text_of_config).unwrap();
    let out = causeway(&["certs", "--config", config.to_str().unwrap()], "");
    assert!(out.status.success(), "{}", text(&out));
    let _servers = running_cluster(&config, &ports);
    let ca = dir.join("certs/ca.pem");
    let addr = format!("127.0.0.1:{}", ports[1]);

    // Both partitions, so the write crosses the TLS link between the nodes.
    let script = "begin\nwrite k1 one\nwrite k2 two\ncommit\nro k1 k2\n";
    let mut out = causeway(&["shell", "--connect", &addr, "--ca", ca.to_str().unwrap()], script);
    // The first read-only transaction may come before the commit is stable.
    for _ in 0..50 {
        if text(&out).contains("two") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        out = causeway(&["shell", "--connect", &addr, "--ca", ca.to_str().unwrap()], "ro k1 k2\n");
    }
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("one") && text(&out).contains("two"), "{}", text(&out));

    let out = causeway(&["shell", "--connect", &addr], "ro k1\n");
    assert!(!out.status.success());
    assert!(text(&out).contains("give the cluster's CA"), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
