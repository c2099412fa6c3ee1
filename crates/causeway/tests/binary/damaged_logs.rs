//! A `causeway server` killed with SIGKILL whose log is then damaged on
//! disk: a record corrupted in the middle stops the restart with a message
//! naming the file and the offset (recovering past it would lose durable
//! records); a last record cut short — a torn write — is cut off, said so,
//! and everything before it is served again.

use crate::common;

use causeway_client::Client;
use common::{free_ports, Servers};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One DC, one partition, one node with a data directory.
fn single_node(dir: &Path) -> (PathBuf, u16) {
    let ports = free_ports(2);
    let text = format!(
        "name = \"damaged\"\nprotocol = \"wren\"\npartitions = 1\ntls = \"off\"\n[auth]\nanonymous = \"admin\"\n[[dc]]\nname = \"a\"\n\
         [[node]]\nname = \"a0\"\ndc = \"a\"\npartitions = [0]\npeer = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\n\
         data_dir = \"data\"\n",
        ports[0], ports[1]
    );
    let config = dir.join("cluster.toml");
    std::fs::write(&config, text).unwrap();
    (config, ports[1])
}

fn server(config: &Path, stderr: Stdio) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_causeway"));
    c.args(["server", "--config", config.to_str().unwrap(), "--node", "a0"]).stdout(Stdio::null()).stderr(stderr);
    c
}

async fn wait_for(port: u16, servers: &mut Servers) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Client::connect(format!("127.0.0.1:{port}")).await.is_err() {
        assert!(servers.0[0].try_wait().unwrap().is_none(), "the server exited early");
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts the node, commits `count` transactions (`k{i}` = `v{i}`), and
/// kills it with SIGKILL. Returns the newest segment of the node's log.
async fn fill_and_kill(config: &Path, port: u16, count: usize) -> PathBuf {
    let mut servers = Servers(vec![server(config, Stdio::null()).spawn().unwrap()]);
    wait_for(port, &mut servers).await;
    let mut client = Client::connect(format!("127.0.0.1:{port}")).await.unwrap();
    for i in 0..count {
        client.begin().await.unwrap();
        client.write(format!("k{i}"), format!("v{i}")).await.unwrap();
        client.commit().await.unwrap();
    }
    // `Child::kill` is SIGKILL: nothing is flushed on the way out.
    servers.0[0].kill().unwrap();
    servers.0[0].wait().unwrap();
    let wal = config.parent().unwrap().join("data").join("wal");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&wal)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    segments.pop().expect("the node has a log segment")
}

/// Where the records of a segment end: past them the log holds zeros it
/// wrote ahead (`causeway-storage`'s `Options::preallocate_bytes`). Frames
/// are a length (u32 LE), a CRC (u32), a kind (1 or 2) and the payload,
/// after a 28-byte header.
fn records_end(segment: &[u8]) -> usize {
    let mut at = 28;
    while at + 9 <= segment.len() && segment[at + 8] != 0 {
        at += 9 + u32::from_le_bytes(segment[at..at + 4].try_into().unwrap()) as usize;
    }
    assert!(at <= segment.len() && segment[at..].iter().all(|&b| b == 0), "zeros after the records");
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_record_stops_the_restart_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = single_node(dir.path());
    let segment = fill_and_kill(&config, port, 200).await;
    let mut bytes = std::fs::read(&segment).unwrap();
    // A byte a third of the way into the records: good records follow the
    // damaged one, so this is no torn write.
    let at = records_end(&bytes) / 3;
    bytes[at] ^= 0x5a;
    std::fs::write(&segment, &bytes).unwrap();

    let out = server(&config, Stdio::piped()).stderr(Stdio::piped()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the server started on a corrupt log: {stderr}");
    let name = segment.file_name().unwrap().to_str().unwrap();
    assert!(stderr.contains("corrupt log") && stderr.contains(name), "{stderr}");
    let offset: u64 = stderr
        .split("at byte ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in: {stderr}"));
    assert!(offset <= at as u64, "the damage is at {at}, the message says {offset}: {stderr}");
    assert_eq!(std::fs::read(&segment).unwrap(), bytes, "the log is left as it was, for an operator to decide");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_last_record_is_cut_and_everything_before_it_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = single_node(dir.path());
    let segment = fill_and_kill(&config, port, 50).await;
    // The last record loses its last bytes, as a write torn by a power cut:
    // they never reached the zeros the log had written ahead of it.
    let mut bytes = std::fs::read(&segment).unwrap();
    let end = records_end(&bytes);
    bytes[end - 3..end].fill(0);
    std::fs::write(&segment, &bytes).unwrap();

    let log = dir.path().join("restart.log");
    let mut servers =
        Servers(vec![server(&config, Stdio::from(std::fs::File::create(&log).unwrap())).spawn().unwrap()]);
    wait_for(port, &mut servers).await;
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("torn"), "the cut is not reported: {stderr}");
    // The last record may be the last commit's: the 49 before it are whole.
    let keys: Vec<String> = (0..49).map(|i| format!("k{i}")).collect();
    let want: Vec<Option<bytes::Bytes>> = (0..49).map(|i| Some(format!("v{i}").into())).collect();
    let mut client = Client::connect(format!("127.0.0.1:{port}")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = client.read_only(&keys).await.unwrap();
        if got == want {
            break;
        }
        assert!(Instant::now() < deadline, "after the restart: {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And it commits on.
    client.begin().await.unwrap();
    client.write("after", "yes").await.unwrap();
    client.commit().await.unwrap();
}
