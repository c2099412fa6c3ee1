//! `kill -9` under load: the six-process cluster (3 DCs × 2 partitions,
//! WAN emulated, a data directory per node) serves a workload while servers
//! are killed with SIGKILL and restarted with the same command — single
//! nodes at random, coordinators in the middle of commits, and a whole DC.
//! The load goes on through it (its clients reconnect); afterwards the
//! history, `unknown` outcomes included, must pass the checker, every DC
//! must hold the same data, and after each restart the stable times of
//! every node must move again within seconds (read from the metrics
//! endpoints).
//!
//! Victims come from a seed (printed; `CAUSEWAY_SEED` replays a choice).
//!
//! Ignored until the bug it finds is fixed: about half of its runs end
//! with a few causal violations (out of ~50,000 transactions) — a read in
//! the DC of a restarted node misses a newer write of another DC that
//! precedes it causally. The failing history is saved beside the servers'
//! logs.

mod common;

use causeway_client::Client;
use causeway_history::{check, History, Status};
use causeway_load::{settle, LoadConfig};
use causeway_protocol::{DcId, Topology};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use common::free_ports;
use common::metrics_text;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REGIONS: [&str; 3] = ["virginia", "oregon", "ireland"];
/// Every node's stable times must be this close to its clock again...
const RESUMED_LAG: f64 = 2.0;
/// ...within this long after a restart.
const RESUME_WITHIN: Duration = Duration::from_secs(15);

struct Node {
    name: String,
    dc: usize,
    client: SocketAddr,
    metrics: SocketAddr,
}

/// The servers, each restartable with the command that first started it.
struct Cluster {
    config: PathBuf,
    nodes: Vec<Node>,
    children: Vec<Option<Child>>,
    logs: PathBuf,
}

impl Cluster {
    fn new() -> Cluster {
        let dir = std::env::temp_dir().join(format!("causeway-killed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ports = free_ports(18);
        let mut text = String::from(
            "name = \"killed\"\nprotocol = \"wren\"\npartitions = 2\ntoken_key = \"a shared secret for tests\"\n\n\
             [tuning]\napply_interval_ms = 5\nstabilization_interval_ms = 5\n\n[wan]\nemulate = true\n\n",
        );
        for r in REGIONS {
            text += &format!("[[dc]]\nname = \"{r}\"\n\n");
        }
        let mut nodes = Vec::new();
        for (d, r) in REGIONS.iter().enumerate() {
            for p in 0..2 {
                let i = d * 2 + p;
                let name = format!("{r}-{p}");
                let (peer, client, metrics) = (ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]);
                text += &format!(
                    "[[node]]\nname = \"{name}\"\ndc = \"{r}\"\npartitions = [{p}]\npeer = \"127.0.0.1:{peer}\"\n\
                     client = \"127.0.0.1:{client}\"\nmetrics = \"127.0.0.1:{metrics}\"\ndata_dir = \"data/{name}\"\n\n"
                );
                nodes.push(Node {
                    name,
                    dc: d,
                    client: ([127, 0, 0, 1], client).into(),
                    metrics: ([127, 0, 0, 1], metrics).into(),
                });
            }
        }
        let config = dir.join("cluster.toml");
        std::fs::write(&config, text).unwrap();
        let children = nodes.iter().map(|_| None).collect();
        Cluster { config, nodes, children, logs: dir }
    }

    /// Starts node `i` (again) with the same command; its stderr goes on
    /// being appended to its log file.
    fn start(&mut self, i: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{}.log", self.nodes[i].name)))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_causeway"))
            .args(["server", "--config", self.config.to_str().unwrap(), "--node", &self.nodes[i].name])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a server starts");
        self.children[i] = Some(child);
    }

    /// SIGKILL: nothing is flushed, nothing said goodbye.
    fn kill(&mut self, i: usize) {
        let mut child = self.children[i].take().expect("a running server");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    async fn wait_serving(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Client::connect(self.nodes[i].client).await.is_err() {
            let child = self.children[i].as_mut().unwrap();
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{} exited ({status}); see {}", self.nodes[i].name, self.logs.display());
            }
            assert!(Instant::now() < deadline, "{} did not come up", self.nodes[i].name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The largest stable-time lag of any replica of any node, local or remote.
    async fn worst_lag(&self) -> f64 {
        let mut worst: f64 = 0.0;
        for n in &self.nodes {
            let text = metrics_text(n.metrics).await;
            let lags: Vec<f64> = text
                .lines()
                .filter(|l| l.starts_with("causeway_stable_lag_seconds{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
                .collect();
            assert!(!lags.is_empty(), "{} reports no stable lag: {text}", n.name);
            worst = lags.into_iter().fold(worst, f64::max);
        }
        worst
    }

    /// How long after now every node's stable times are near its clock again.
    async fn stable_time_resumes(&self) -> Duration {
        let since = Instant::now();
        loop {
            let worst = self.worst_lag().await;
            if worst < RESUMED_LAG {
                return since.elapsed();
            }
            assert!(
                since.elapsed() < RESUME_WITHIN,
                "stable time did not resume: a replica still lags {worst:.1} s (logs in {})",
                self.logs.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn now_us() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros()
}

/// A small deterministic generator: the victims replay from the seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "open bug (issue 11): about half the runs find causal violations (a read in the DC of a \
            restarted node misses a newer write that precedes it causally); run with -- --ignored to reproduce"]
async fn servers_killed_under_load_come_back_with_everything_they_acknowledged() {
    let seed = std::env::var("CAUSEWAY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    eprintln!("killed servers: seed {seed} (CAUSEWAY_SEED={seed} replays the victims)");
    let mut rng = Rng(seed);
    let mut cluster = Cluster::new();
    for i in 0..cluster.nodes.len() {
        cluster.start(i);
    }
    for i in 0..cluster.nodes.len() {
        cluster.wait_serving(i).await;
    }

    let endpoints: Vec<_> = cluster.nodes.iter().map(|n| (DcId(n.dc as u16), n.client)).collect();
    let load = LoadConfig {
        endpoints: endpoints.clone(),
        clients_per_dc: 4,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(40),
        workload: WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: 4,
            writes_per_txn: 3,
            partitions_per_txn: 2,
            keys_per_partition: 200,
            ..WorkloadConfig::default()
        }),
        seed,
        run_id: String::new(),
        key_prefix: "load-".into(),
        record: true,
        value_size: None,
        phases: None,
    };
    let topology = Arc::new(Topology::full(3, 2).unwrap());
    let started = Instant::now();
    let run = tokio::spawn(causeway_load::run(load, topology, None, |_| {}));

    // What is killed: single nodes at random (each a coordinator of some of
    // the load's clients, most of them in the middle of a commit at any
    // moment), and once a whole DC.
    enum Victim {
        Node(usize),
        Dc(usize),
    }
    let n = cluster.nodes.len();
    let plan =
        [Victim::Node(rng.below(n)), Victim::Node(rng.below(n)), Victim::Dc(rng.below(3)), Victim::Node(rng.below(n))]
            .into_iter()
            .chain([Victim::Node(rng.below(n)), Victim::Node(rng.below(n))]);
    let (mut kills, mut resumed) = (0, Vec::new());
    tokio::time::sleep(Duration::from_secs(3)).await;
    for victim in plan {
        let (victims, down) = match victim {
            Victim::Node(i) => (vec![i], Duration::from_millis(1000)),
            Victim::Dc(d) => (vec![2 * d, 2 * d + 1], Duration::from_millis(3000)),
        };
        for &i in &victims {
            cluster.kill(i);
            kills += 1;
            eprintln!("killed servers: {} killed at {} µs", cluster.nodes[i].name, now_us());
        }
        tokio::time::sleep(down).await;
        for &i in &victims {
            cluster.start(i);
        }
        for &i in &victims {
            cluster.wait_serving(i).await;
        }
        let names: Vec<_> = victims.iter().map(|&i| cluster.nodes[i].name.as_str()).collect();
        let took = cluster.stable_time_resumes().await;
        eprintln!("killed servers: {} restarted; stable time resumed everywhere in {took:.1?}", names.join(" and "));
        resumed.push(took);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(38), "the kills outlasted the load: {:?}", started.elapsed());

    let report = run.await.unwrap().expect("the load runs through the kills");
    let unknown = report.records.iter().filter(|t| t.status == Status::Unknown).count();
    let finals_at: Vec<_> = endpoints.iter().map(|(d, a)| (d.0, *a)).collect();
    let finals = settle::final_states(&finals_at, "load-", Duration::from_secs(60)).await.expect("dumps");
    assert_eq!(finals.len(), 3, "one final line per DC");
    assert!(finals.iter().all(|f| !f.partial), "the two nodes of each DC cover both partitions");
    assert!(finals.windows(2).all(|w| w[0].state == w[1].state), "the DCs did not converge");
    let history = History { txns: report.records, finals };
    let verdict = check(&history);
    let saved = cluster.logs.join("history.jsonl");
    if !verdict.is_tcc() {
        std::fs::write(&saved, history.to_jsonl_string()).unwrap();
    }
    assert!(verdict.is_tcc(), "{verdict}\nthe history is in {}", saved.display());
    assert!(report.committed > 1000, "only {} transactions committed", report.committed);
    assert!(unknown > 0, "no kill caught a coordinator in the middle of a commit");
    resumed.sort();
    eprintln!(
        "killed servers: {kills} kills ({} restarts), {} transactions committed, {} aborted, {unknown} unknown; \
         stable time resumed {:.1?}..{:.1?} (median {:.1?}) after a restart; verdict: TCC",
        resumed.len(),
        report.committed,
        report.aborted,
        resumed[0],
        resumed[resumed.len() - 1],
        resumed[resumed.len() / 2],
    );
}
