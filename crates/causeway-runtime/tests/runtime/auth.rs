//! Client logins and roles, as a stranger and as each kind of user meets
//! them: no credentials where the cluster admits no anonymous client, a
//! wrong password, an unknown user, too many failures from one address, a
//! role that may not make a request (a reader's write, a writer's dump), and
//! the users file changed under a running node.

use bytes::Bytes;
use causeway_client::{Client, ClientOptions, Credentials, Error, Role};
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::auth::{hash_password, AuthPlan, User, Users};
use causeway_runtime::{start, ClusterPlan};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn users_file(path: &Path, users: &[(&str, Role, &str)]) {
    let mut file = Users::default();
    for &(name, role, password) in users {
        file.upsert(User { name: name.into(), role, password_hash: hash_password(password).unwrap() });
    }
    std::fs::write(path, file.to_toml()).unwrap();
}

fn plan(users: &Path, anonymous: Option<Role>, max_failed_logins: u32) -> ClusterPlan {
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    plan.auth = AuthPlan {
        anonymous,
        users_file: Some(users.to_path_buf()),
        max_failed_logins,
        failed_login_window: Duration::from_secs(60),
    };
    plan
}

fn as_user(user: &str, password: &str) -> ClientOptions {
    ClientOptions {
        credentials: Some(Credentials { user: user.into(), password: password.into() }),
        ..ClientOptions::default()
    }
}

async fn login(addr: SocketAddr, user: &str, password: &str) -> Result<Client, Error> {
    Client::connect_with(addr, as_user(user, password)).await
}

fn refused(r: Result<Client, Error>) -> String {
    match r {
        Err(Error::Unauthenticated(why)) => why,
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(c) => panic!("logged in as {}", c.server().role),
    }
}

/// The node's metrics text.
fn logins(node: &causeway_runtime::NodeHandle, outcome: &str) -> u64 {
    let text = node.metrics.encode();
    let line = format!("causeway_client_logins_total{{outcome=\"{outcome}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_may_do_what_it_names_and_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    users_file(
        &users,
        &[
            ("reader", Role::Read, "reader-pass"),
            ("writer", Role::Write, "writer-pass"),
            ("ops", Role::Admin, "ops-pass"),
        ],
    );
    let node = start(Arc::new(plan(&users, None, 5)), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();

    // Without credentials: refused, and the connection is closed.
    let why = refused(Client::connect(addr).await);
    assert!(why.contains("no anonymous client"), "{why}");

    let mut writer = login(addr, "writer", "writer-pass").await.unwrap();
    assert_eq!(writer.server().role, Role::Write);
    // A password verified once is remembered — the right one only.
    let again = login(addr, "writer", "writer-pass").await.unwrap();
    assert_eq!(again.server().role, Role::Write);
    refused(login(addr, "writer", "writer-pasS").await);
    writer.begin().await.unwrap();
    writer.write("k", "v1").await.unwrap();
    writer.commit().await.unwrap();
    for forbidden in
        [writer.dump().await.map(|_| ()), writer.drop_peer_connections().await, writer.stats(false).await.map(|_| ())]
    {
        match forbidden {
            Err(Error::Forbidden { need: Role::Admin, have: Role::Write, .. }) => {}
            other => panic!("a writer's operator hook gave {other:?}"),
        }
    }
    // The connection lives on after a refusal.
    assert_eq!(writer.read_only(&["k"]).await.unwrap(), vec![Some(Bytes::from("v1"))]);

    let mut reader = login(addr, "reader", "reader-pass").await.unwrap();
    assert_eq!(reader.server().role, Role::Read);
    assert_eq!(reader.read_only(&["k"]).await.unwrap(), vec![Some(Bytes::from("v1"))]);
    reader.begin().await.unwrap();
    assert_eq!(reader.read(&["k"]).await.unwrap(), vec![Some(Bytes::from("v1"))]);
    // A refused write leaves its transaction unable to commit: nothing of
    // it takes effect. (The write is pipelined: its refusal may come with
    // the commit.)
    let write = reader.write("k", "v2").await;
    let commit = reader.commit().await;
    match (&write, &commit) {
        (Err(Error::Forbidden { need: Role::Write, have: Role::Read, .. }), Err(_)) => {}
        (Ok(()), Err(Error::RefusedEarlier { cause })) if cause.contains("needs the role write") => {}
        _ => panic!("a reader's write gave {write:?}, its commit {commit:?}"),
    }
    assert_eq!(writer.read_only(&["k"]).await.unwrap(), vec![Some(Bytes::from("v1"))]);

    let mut ops = login(addr, "ops", "ops-pass").await.unwrap();
    assert_eq!(ops.server().role, Role::Admin);
    ops.stats(false).await.unwrap();
    let dump = ops.dump().await.unwrap();
    assert!(dump.entries.iter().any(|(k, v)| k == "k" && v == "v1"), "{dump:?}");

    assert_eq!(logins(&node, "user"), 4);
    assert_eq!(logins(&node, "bad_credentials"), 1);
    assert_eq!(logins(&node, "anonymous_refused"), 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_and_unknown_users_are_refused_alike_and_limited_per_source() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    users_file(&users, &[("alice", Role::Write, "alice-pass")]);
    let node = start(Arc::new(plan(&users, Some(Role::Read), 3)), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();

    let wrong = refused(login(addr, "alice", "not-her-pass").await);
    let unknown = refused(login(addr, "mallory", "alice-pass").await);
    assert_eq!(wrong, unknown, "a refusal does not tell which names exist");
    assert_eq!(wrong, "unknown user or wrong password");
    // Credentials that fail do not fall back to the anonymous role.
    let empty = refused(login(addr, "", "").await);
    assert_eq!(empty, wrong);

    // Three failures from this address: the next login is refused unchecked,
    // the right password too.
    let limited = refused(login(addr, "alice", "alice-pass").await);
    assert!(limited.contains("too many failed logins from 127.0.0.1"), "{limited}");
    assert_eq!(logins(&node, "bad_credentials"), 3);
    assert_eq!(logins(&node, "rate_limited"), 1);

    // An anonymous client is not held by the failures: it sends no password.
    let mut anonymous = Client::connect(addr).await.unwrap();
    assert_eq!(anonymous.server().role, Role::Read);
    anonymous.read_only(&["k"]).await.unwrap();
    anonymous.begin().await.unwrap();
    assert!(
        matches!(anonymous.write("k", "v").await, Err(Error::Forbidden { .. })) || anonymous.commit().await.is_err()
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_users_file_takes_effect_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    users_file(&users, &[("alice", Role::Write, "alice-pass")]);
    let node = start(Arc::new(plan(&users, None, 100)), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();
    login(addr, "alice", "alice-pass").await.unwrap();

    // Alice's password changes, Bob is added as a reader.
    users_file(&users, &[("alice", Role::Write, "alice-new-pass"), ("bob", Role::Read, "bob-pass")]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match login(addr, "bob", "bob-pass").await {
            Ok(bob) => {
                assert_eq!(bob.server().role, Role::Read);
                break;
            }
            Err(Error::Unauthenticated(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("bob was not let in: {e}"),
        }
    }
    refused(login(addr, "alice", "alice-pass").await);
    login(addr, "alice", "alice-new-pass").await.unwrap();

    // A file that no longer parses is refused; the users read before stay.
    std::fs::write(&users, "[[user]]\nname = \"x\"\nrole = \"root\"\n").unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    login(addr, "bob", "bob-pass").await.unwrap();
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_users_file_is_wrong_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    for (text, want) in [
        (None, "cannot read"),
        (Some("[[user]]\nname = \"a\"\nrole = \"read\"\npassword_hash = \"plain text\"\n"), "PHC"),
        (Some(""), "no client could connect"),
    ] {
        match text {
            Some(t) => std::fs::write(&users, t).unwrap(),
            None => {
                let _ = std::fs::remove_file(&users);
            }
        }
        match start(Arc::new(plan(&users, None, 5)), "embedded").await {
            Err(e) => assert!(e.to_string().contains(want), "{e}"),
            Ok(_) => panic!("started with users file {text:?}"),
        }
    }
}
