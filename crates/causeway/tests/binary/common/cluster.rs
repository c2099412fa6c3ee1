//! A cluster of `causeway server` processes that a test kills with
//! SIGKILL and restarts with the commands that first started them (the
//! six-process layout of [`super::six`], or some of its nodes), and what
//! such tests ask of it: its nodes serving, its stable times moving, the
//! leaders of its replica groups, its history checked.

use super::six;
use super::{metric, metrics_text};
use causeway_history::{check_for, Guarantee};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Every node's stable times must be this close to its clock again...
pub const RESUMED_LAG: f64 = 2.0;
/// ...within this long after a restart.
pub const RESUME_WITHIN: Duration = Duration::from_secs(15);

/// The tests that run six servers under load (those of this file's
/// `Cluster`, and `multiprocess.rs`'s): one at a time, or they would
/// starve each other of the machine's cores (stable times lag, and
/// commits under contention fall, for that alone).
pub static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The servers, each restartable with the command that first started it.
pub struct Cluster {
    pub config: PathBuf,
    pub nodes: Vec<six::Node>,
    children: Vec<Option<Child>>,
    pub logs: PathBuf,
}

impl Cluster {
    /// A cluster of its own, under a directory named after `test`.
    pub fn new(test: &str) -> Cluster {
        let protocol = std::env::var("CAUSEWAY_PROTOCOL").unwrap_or_else(|_| "wren".into());
        Cluster::placed(test, &protocol, |_, _| true)
    }

    /// A cluster of `protocol` with the nodes of the replicas `holds(dc,
    /// partition)` admits.
    pub fn placed(test: &str, protocol: &str, holds: impl Fn(usize, usize) -> bool) -> Cluster {
        Cluster::configured(test, protocol, "", holds)
    }

    /// [`Cluster::placed`] with `extra` in the config file, after `[tuning]`.
    pub fn configured(test: &str, protocol: &str, extra: &str, holds: impl Fn(usize, usize) -> bool) -> Cluster {
        let dir = std::env::temp_dir().join(format!("causeway-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tuning = format!("[tuning]\napply_interval_ms = 5\nstabilization_interval_ms = 5\n\n{extra}");
        let (config, nodes) = six::write_config_placed(&dir, "killed", protocol, &tuning, six::loopback(), true, holds);
        let children = nodes.iter().map(|_| None).collect();
        Cluster { config, nodes, children, logs: dir }
    }

    /// Starts node `i` (again) with the same command; its stderr goes on
    /// being appended to its log file.
    pub fn start(&mut self, i: usize) {
        self.start_with(i, &[]);
    }

    /// Starts node `i` with `extra` arguments.
    pub fn start_with(&mut self, i: usize, extra: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{}.log", self.nodes[i].name)))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_causeway"))
            .args(["server", "--config", self.config.to_str().unwrap(), "--node", &self.nodes[i].name])
            .args(extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("a server starts");
        self.children[i] = Some(child);
    }

    /// Starts every node and waits until each serves.
    pub async fn start_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.start(i);
        }
        for i in 0..self.nodes.len() {
            self.wait_serving(i).await;
        }
    }

    /// The history of `txns` once every DC's state has settled: every DC
    /// must hold the same data, and the history must pass the checker (a
    /// failing one is saved beside the servers' logs).
    pub async fn converged_and_tcc(&self, txns: Vec<causeway_history::TxnRecord>) -> causeway_history::History {
        self.converged_and_checked(txns, Guarantee::Causal).await
    }

    /// [`Cluster::converged_and_tcc`], judged by the checker of `guarantee`.
    pub async fn converged_and_checked(
        &self,
        txns: Vec<causeway_history::TxnRecord>,
        guarantee: Guarantee,
    ) -> causeway_history::History {
        let history = six::history(txns, &self.nodes, "load-", Duration::from_secs(60)).await;
        let finals = &history.finals;
        assert!(finals.windows(2).all(|w| w[0].state == w[1].state), "the DCs did not converge");
        self.checked(history, guarantee)
    }

    /// The history must pass the checker (a failing one is saved beside the
    /// servers' logs), its final lines included.
    pub fn tcc(&self, history: causeway_history::History) -> causeway_history::History {
        self.checked(history, Guarantee::Causal)
    }

    /// The history must pass the checker of `guarantee` (a failing one is
    /// saved beside the servers' logs).
    pub fn checked(&self, history: causeway_history::History, guarantee: Guarantee) -> causeway_history::History {
        let verdict = check_for(&history, guarantee);
        let saved = self.logs.join("history.jsonl");
        if !verdict.keeps_model() {
            std::fs::write(&saved, history.to_jsonl_string()).unwrap();
        }
        assert!(verdict.keeps_model(), "{verdict}\nthe history is in {}", saved.display());
        history
    }

    /// Node `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.logs.join("data").join(&self.nodes[i].name)
    }

    /// SIGKILL: nothing is flushed, nothing said goodbye.
    pub fn kill(&mut self, i: usize) {
        let mut child = self.children[i].take().expect("a running server");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    pub async fn wait_serving(&mut self, i: usize) {
        let (node, child, logs) = (&self.nodes[i], &mut self.children[i], &self.logs);
        six::wait_serving(node, Duration::from_secs(30), || {
            if let Some(status) = child.as_mut().unwrap().try_wait().unwrap() {
                panic!("{} exited ({status}); see {}", node.name, logs.display());
            }
        })
        .await;
    }

    /// The largest stable-time lag of any replica of any node, local or remote.
    pub async fn worst_lag(&self) -> f64 {
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
    pub async fn stable_time_resumes(&self) -> Duration {
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

impl Cluster {
    /// Whether node `i` is running (started, not killed since).
    pub fn is_up(&self, i: usize) -> bool {
        self.children[i].is_some()
    }

    /// The running node whose replica leads partition `p`'s group, if one
    /// says so (the six-process layout: node `REGION-P` holds partition P).
    pub async fn leader_of(&self, p: usize) -> Option<usize> {
        for i in (0..self.nodes.len()).filter(|&i| self.is_up(i)) {
            if !self.nodes[i].name.ends_with(&format!("-{p}")) {
                continue;
            }
            let text = metrics_text(self.nodes[i].metrics).await;
            assert!(
                text.contains("causeway_group_leader{"),
                "{} reports no group_leader gauge:\n{text}",
                self.nodes[i].name
            );
            if metric(&text, "causeway_group_leader{") == 1.0 {
                return Some(i);
            }
        }
        None
    }

    /// Waits until a running node leads partition `p`'s group, for at most
    /// `within`: which, and how long it took.
    pub async fn wait_leader(&self, p: usize, within: Duration) -> (usize, Duration) {
        let since = Instant::now();
        loop {
            if let Some(i) = self.leader_of(p).await {
                return (i, since.elapsed());
            }
            assert!(
                since.elapsed() < within,
                "partition {p}'s group elected no leader in {within:?} (logs in {})",
                self.logs.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Transactions committed so far by the clients of the running nodes.
    pub async fn committed(&self) -> f64 {
        let mut sum = 0.0;
        for i in (0..self.nodes.len()).filter(|&i| self.is_up(i)) {
            sum += metric(&metrics_text(self.nodes[i].metrics).await, "causeway_transactions_committed_total");
        }
        sum
    }
}
