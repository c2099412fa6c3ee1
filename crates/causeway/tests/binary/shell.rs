//! `causeway shell` driven by scripts on standard input, against a mock server.

use causeway_client::testing::{Behavior, MockConfig, MockServer};
use causeway_client::wire::Limits;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use tokio::runtime::Runtime;

/// A mock server on a runtime of its own (it serves while the test blocks on the shell).
fn mock(config: MockConfig) -> (Runtime, MockServer) {
    let runtime = Runtime::new().unwrap();
    let server = runtime.block_on(MockServer::start_with(config)).unwrap();
    (runtime, server)
}

fn shell(addr: &str, script: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["shell", "--connect", addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // The shell may exit before it reads everything (it could not connect).
    let _ = child.stdin.take().unwrap().write_all(script.as_bytes());
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_script_begins_reads_writes_and_commits() {
    let (_rt, server) = mock(MockConfig { dc: 2, ..MockConfig::default() });
    let script = r#"
# a comment, then a blank line

begin
read x y
write x 1
write y "hello world"
write z "\xff\x00"
read x y z
commit
ro x y z missing
begin
commit
dump
quit
this line is never read
"#;
    let out = shell(&server.addr().to_string(), script);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
    assert_eq!(stderr(&out), "");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    // The values the script wrote, as `read`, `ro` and `dump` show them.
    let xyz = ["x = 1", r#"y = "hello world""#, r#"z = "\xff\x00""#];
    let expected = [
        &["started", "x = (none)", "y = (none)", "written", "written", "written"][..],
        &xyz,
        &["committed at ts=1 dc=2 txid=1"],
        &xyz,
        &["missing = (none)", "started", "committed (no writes)"],
        &xyz,
    ]
    .concat();
    assert_eq!(lines, expected);
    assert_eq!(server.get("y").as_deref(), Some(&b"hello world"[..]));
    assert_eq!(server.get("z").as_deref(), Some(&b"\xff\x00"[..]));
}

#[test]
fn errors_are_printed_and_a_failed_script_exits_1() {
    let limits = Limits { max_value_bytes: 4, ..Limits::default() };
    let (_rt, server) = mock(MockConfig { limits, ..MockConfig::default() });
    let script = "read x\nbegin\nwrite x toolong\nfrobnicate\nwrite x\nwrite x ok\ncommit\nro x\n";
    let out = shell(&server.addr().to_string(), script);
    assert_eq!(out.status.code(), Some(1), "{}\n{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("error: line 1: no transaction is active"), "{err}");
    assert!(err.contains("error: line 3: value (bytes): 7, over the limit of 4"), "{err}");
    assert!(err.contains("error: line 4: unknown command \"frobnicate\""), "{err}");
    assert!(err.contains("error: line 5: usage: write K V"), "{err}");
    // The refused write left the transaction unable to commit: the write
    // after it did not commit alone.
    assert!(
        err.contains("error: line 7: the transaction was aborted, not committed: an operation in it was refused (value (bytes): 7, over the limit of 4)"),
        "{err}"
    );
    // The commands after the errors ran.
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), ["started", "written", "x = (none)"]);
}

#[test]
fn a_script_never_commits_part_of_a_transaction() {
    let (_rt, server) = mock(MockConfig::default());
    let addr = server.addr().to_string();
    // 129 writes where a transaction holds 128: the commit commits nothing.
    let mut script = String::from("begin\n");
    for i in 0..129 {
        script.push_str(&format!("write k{i} v\n"));
    }
    script.push_str("commit\n");
    let out = shell(&addr, &script);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("error: line 130: writes in one transaction: 129, over the limit of 128"), "{err}");
    assert!(err.contains("error: line 131: the transaction was aborted, not committed"), "{err}");
    assert!(!stdout(&out).contains("committed"), "{}", stdout(&out));
    assert_eq!(server.get("k0"), None, "not one of the 128 writes committed");
    // A write over the value limit, then commit: not "committed (no writes)".
    let big = "x".repeat(70_000);
    let out = shell(&addr, &format!("begin\nwrite a {big}\ncommit\n"));
    assert_eq!(out.status.code(), Some(1));
    assert!(!stdout(&out).contains("committed"), "{}", stdout(&out));
    assert!(stderr(&out).contains("line 3: the transaction was aborted, not committed"), "{}", stderr(&out));
}

#[test]
fn delete_removes_a_key() {
    let (_rt, server) = mock(MockConfig::default());
    let out = shell(&server.addr().to_string(), "begin\nwrite k v\ncommit\nbegin\ndelete k\nread k\ncommit\nro k\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert_eq!(lines[3..], ["started", "deleted", "k = (none)", "committed at ts=2 dc=0 txid=2", "k = (none)"]);
    assert_eq!(server.get("k"), None);
}

#[test]
fn a_script_that_ends_inside_a_transaction_aborts_it_and_fails() {
    let (_rt, server) = mock(MockConfig::default());
    let out = shell(&server.addr().to_string(), "begin\nwrite k v\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the script ended inside a transaction; it was aborted"), "{}", stderr(&out));
    assert_eq!(server.get("k"), None);
}

#[test]
fn a_port_that_speaks_something_else_is_not_a_causeway_server() {
    use std::io::{Read, Write as _};
    // An HTTP server, as a node's metrics endpoint is: it answers a
    // Causeway hello with an HTTP error.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(1) {
            let mut stream = stream.unwrap();
            let _ = stream.read(&mut [0u8; 64]);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let started = std::time::Instant::now();
    let out = shell(&addr, "info\n");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&format!("{addr} is not a Causeway server")), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "it said so at once");
}

#[test]
fn a_token_printed_by_one_shell_resumes_in_another() {
    let (_rt, server) = mock(MockConfig::default());
    let addr = server.addr().to_string();
    let first = shell(&addr, "begin\nwrite k v\ncommit\ntoken\n");
    assert!(first.status.success(), "{}", stderr(&first));
    let token = stdout(&first).lines().last().unwrap().to_string();
    assert!(!token.is_empty() && token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");

    let second = shell(&addr, &format!("resume {token}\nro k\ntoken\nresume nothex\n"));
    assert_eq!(second.status.code(), Some(1));
    assert_eq!(stdout(&second).lines().collect::<Vec<_>>(), ["resumed", "k = v", token.as_str()]);
    assert!(stderr(&second).contains("line 4: invalid session token"), "{}", stderr(&second));
}

#[test]
fn info_and_help() {
    let (_rt, server) = mock(MockConfig { dc: 1, ..MockConfig::default() });
    let out = shell(&server.addr().to_string(), "info\nhelp\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("dc         1"), "{text}");
    assert!(text.contains("protocol   mock"), "{text}");
    assert!(text.contains("limits     key 1024 bytes"), "{text}");
    assert!(text.contains("resume TOKEN"), "{text}");
    assert!(text.contains("exit status is 1 if any command"), "{text}");
}

#[test]
fn a_lost_connection_stops_the_script() {
    let (_rt, server) = mock(MockConfig { behavior: Behavior::CloseAfterHello, ..MockConfig::default() });
    let out = shell(&server.addr().to_string(), "begin\nbegin\n");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("line 1: the connection to the server is closed"), "{err}");
    assert!(err.contains("stopping"), "{err}");
    assert!(!err.contains("line 2"), "{err}");
}

#[test]
fn an_unreachable_server_exits_2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = shell(&format!("127.0.0.1:{port}"), "info\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));
}
