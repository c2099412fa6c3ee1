//! Users and roles as an operator and their users meet them: `causeway user`
//! writes the users file, two `causeway server` processes over TLS check
//! logins against it, and the shell logs in with `--user` and the password
//! in `CAUSEWAY_PASSWORD` — refused without credentials or with a wrong
//! password, and refused a write or an operator hook its role lacks.

use crate::common;

use common::{cluster_config, free_ports, running_cluster};
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn causeway(args: &[&str], stdin: &str, password: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_causeway"));
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.env_remove("CAUSEWAY_PASSWORD");
    if let Some(p) = password {
        command.env("CAUSEWAY_PASSWORD", p);
    }
    let mut child = command.spawn().expect("the binary runs");
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn users_log_in_with_their_role_and_strangers_do_not() {
    let dir = std::env::temp_dir().join(format!("causeway-logins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = free_ports(4);
    let config = dir.join("cluster.toml");
    let text_of_config = cluster_config(&ports)
        .replace("tls = \"off\"\n", "[tls]\ndir = \"certs\"\n")
        .replace("[auth]\nanonymous = \"admin\"\n", "[auth]\nusers = \"users.toml\"\n");
    assert!(text_of_config.contains("users = \"users.toml\""), "the helper's config changed: {text_of_config}");
    std::fs::write(&config, &text_of_config).unwrap();
    let cfg = config.to_str().unwrap();

    // The operator adds two users: the password from standard input.
    let out = causeway(&["user", "add", "--config", cfg, "alice", "--role", "write"], "alice-secret\n", None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("added user \"alice\" (write)"), "{}", text(&out));
    let out = causeway(&["user", "add", "--config", cfg, "bob", "--role", "read"], "", Some("bob-secret"));
    assert!(out.status.success(), "{}", text(&out));
    let out = causeway(&["user", "add", "--config", cfg, "eve", "--role", "root"], "x\n", None);
    assert!(!out.status.success() && text(&out).contains("read, write or admin"), "{}", text(&out));
    let out = causeway(&["user", "add", "--config", cfg, "eve", "--role", "read"], "short\n", None);
    assert!(!out.status.success() && text(&out).contains("at least 8 characters"), "{}", text(&out));
    let out = causeway(&["user", "list", "--config", cfg], "", None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "alice\twrite\nbob\tread\n");
    let stored = std::fs::read_to_string(dir.join("users.toml")).unwrap();
    assert!(!stored.contains("alice-secret") && stored.contains("$argon2id$"), "{stored}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("users.toml")).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the users file is readable by others: {mode:o}");
    }

    let out = causeway(&["certs", "--config", cfg], "", None);
    assert!(out.status.success(), "{}", text(&out));
    let out = causeway(&["server", "--config", cfg, "--node", "a0", "--check"], "", None);
    assert!(text(&out).contains("2 users in"), "{}", text(&out));
    assert!(text(&out).contains("anonymous clients refused"), "{}", text(&out));
    let _servers = running_cluster(&config, &ports);
    let ca = dir.join("certs/ca.pem");
    let (ca, addr) = (ca.to_str().unwrap(), format!("127.0.0.1:{}", ports[1]));
    let shell = |extra: &[&str], script: &str, password: Option<&str>| {
        let mut args = vec!["shell", "--connect", &addr, "--ca", ca];
        args.extend_from_slice(extra);
        causeway(&args, script, password)
    };

    // No credentials, a wrong password, an unknown user: refused.
    let out = shell(&[], "ro k\n", None);
    assert!(!out.status.success() && text(&out).contains("no anonymous client"), "{}", text(&out));
    let out = shell(&["--user", "alice"], "ro k\n", Some("not-her-secret"));
    assert!(!out.status.success() && text(&out).contains("unknown user or wrong password"), "{}", text(&out));
    let out = shell(&["--user", "alice"], "ro k\n", None);
    assert!(!out.status.success() && text(&out).contains("CAUSEWAY_PASSWORD"), "{}", text(&out));

    // Alice writes; Bob reads, and is refused a write and the operator hooks.
    let out = shell(&["--user", "alice"], "begin\nwrite k1 one\ncommit\n", Some("alice-secret"));
    assert!(out.status.success(), "{}", text(&out));
    let out = shell(&["--user", "bob"], "begin\nwrite k1 two\ncommit\n", Some("bob-secret"));
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("needs the role write; this connection has read"), "{}", text(&out));
    let out = shell(&["--user", "bob"], "dump\n", Some("bob-secret"));
    assert!(text(&out).contains("needs the role admin"), "{}", text(&out));
    let mut out = shell(&["--user", "bob"], "ro k1\n", Some("bob-secret"));
    for _ in 0..50 {
        if text(&out).contains("one") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        out = shell(&["--user", "bob"], "ro k1\n", Some("bob-secret"));
    }
    assert!(out.status.success() && text(&out).contains("one"), "{}", text(&out));
    assert!(!text(&out).contains("two"), "the refused write took effect: {}", text(&out));

    // Bob is removed: within a second or so the nodes refuse him.
    let out = causeway(&["user", "remove", "--config", cfg, "bob"], "", None);
    assert!(out.status.success(), "{}", text(&out));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let out = shell(&["--user", "bob"], "ro k1\n", Some("bob-secret"));
        if !out.status.success() {
            assert!(text(&out).contains("unknown user or wrong password"), "{}", text(&out));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "bob was still let in");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
