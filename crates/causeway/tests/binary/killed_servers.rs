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
//! And a server whose disk is lost: deleted with its data directory and
//! started again with `--reseed`, it gets its partition's data back from
//! the other DCs.
//!
//! And PaRiS on partial replication (each partition in two of the three
//! DCs: four servers), and PrompTCC and Eiger in one DC (two servers), killed and
//! restarted the same way.
//!
//! Victims come from a seed (printed; `CAUSEWAY_SEED` replays a choice).
//! The protocol is Wren; `CAUSEWAY_PROTOCOL=cure` (or `h-cure`) runs another.
//! A failing history is saved beside the servers' logs.

use crate::common;

use causeway_protocol::{DcId, PartitionId, Topology};
use common::cluster::{Cluster, ONE_CLUSTER_AT_A_TIME, RESUMED_LAG};
use common::six::{self, REGIONS};
use common::{metric, metrics_text};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_killed_under_load_come_back_with_everything_they_acknowledged() {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let seed = std::env::var("CAUSEWAY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    eprintln!("killed servers: seed {seed} (CAUSEWAY_SEED={seed} replays the victims)");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cluster = Cluster::new("killed");
    cluster.start_all().await;

    let started = Instant::now();
    let run = six::start_load(&cluster.nodes, Duration::from_secs(40), 3, seed);

    // What is killed: single nodes at random (each a coordinator of some of
    // the load's clients, most of them in the middle of a commit at any
    // moment), and once a whole DC.
    enum Victim {
        Node(usize),
        Dc(usize),
    }
    let mut plan: Vec<Victim> = (0..5).map(|_| Victim::Node(rng.random_range(0..cluster.nodes.len()))).collect();
    plan.insert(2, Victim::Dc(rng.random_range(0..REGIONS.len())));
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
            eprintln!("killed servers: {} killed {:.1?} into the run", cluster.nodes[i].name, started.elapsed());
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
    cluster.converged_and_tcc(report.records).await;
    assert!(report.committed > 1000, "only {} transactions committed", report.committed);
    assert!(report.unknown > 0, "no kill caught a coordinator in the middle of a commit");
    resumed.sort();
    eprintln!(
        "killed servers: {kills} kills ({} restarts), {} transactions committed, {} aborted, {} unknown; \
         stable time resumed {:.1?}..{:.1?} (median {:.1?}) after a restart; verdict: TCC",
        resumed.len(),
        report.committed,
        report.aborted,
        report.unknown,
        resumed[0],
        resumed[resumed.len() - 1],
        resumed[resumed.len() / 2],
    );
}

/// A DC down for long while the others write, with `[peers] max_kept_mb =
/// 1` and 2 KiB values: the replicas of the other DCs keep at most 1 MiB
/// of groups for it in memory and spill the rest to disk; when it is back
/// they read them back and send them. Every DC ends with the same data,
/// the history passes the checker, and once the DC has acknowledged
/// everything the spills are forgotten (no bytes left on disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dc_down_for_long_catches_up_from_what_the_others_spilled_to_disk() {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let protocol = std::env::var("CAUSEWAY_PROTOCOL").unwrap_or_else(|_| "wren".into());
    let mut cluster = Cluster::configured("spilled", &protocol, "[peers]\nmax_kept_mb = 1\n", |_, _| true);
    cluster.start_all().await;
    let run = six::start_load_sized(&cluster.nodes, Duration::from_secs(20), 3, 0x5b111, "", Some(2048));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let down = [4, 5];
    for &i in &down {
        cluster.kill(i);
    }
    // Until the others have spilled for it, and a little more.
    let since = Instant::now();
    let mut spilled = 0.0;
    while spilled == 0.0 || since.elapsed() < Duration::from_secs(4) {
        assert!(
            since.elapsed() < Duration::from_secs(14),
            "nothing was spilled in 14 s (logs in {})",
            cluster.logs.display()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        spilled = 0.0;
        for n in &cluster.nodes[..4] {
            spilled += metric(&metrics_text(n.metrics).await, "causeway_stream_spilled_bytes");
        }
    }
    let on_disk: usize =
        (0..4).map(|i| std::fs::read_dir(cluster.data_dir(i).join("spill")).map_or(0, |d| d.count())).sum();
    assert!(on_disk > 0, "no spill directory under the data directories");
    eprintln!("spilled: {spilled} bytes on disk for the DC that is down, {:.1?} after it went", since.elapsed());
    for &i in &down {
        cluster.start(i);
    }
    for &i in &down {
        cluster.wait_serving(i).await;
    }
    cluster.stable_time_resumes().await;
    let report = run.await.unwrap().expect("the load runs through the outage");
    cluster.converged_and_tcc(report.records).await;
    let (mut read_back, mut left) = (0.0, f64::MAX);
    let settled = Instant::now();
    while left > 0.0 {
        assert!(settled.elapsed() < Duration::from_secs(10), "{left} bytes still spilled once the DC caught up");
        (read_back, left) = (0.0, 0.0);
        for n in &cluster.nodes {
            let text = metrics_text(n.metrics).await;
            read_back += metric(&text, "causeway_stream_unspilled_total");
            left += metric(&text, "causeway_stream_spilled_bytes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(read_back > 0.0, "the DC that came back was not sent anything read back from a spill");
    eprintln!("spilled: {} committed; {read_back} batches read back; nothing left on disk", report.committed);
}

/// PaRiS with each of the two partitions in two of the three DCs (Virginia
/// holds both, Oregon partition 0, Ireland partition 1): servers killed
/// under load — single ones, then Virginia whole — and restarted. The
/// history passes the checker, and every DC ends holding, for each key of
/// its partitions, what the others that hold it hold (`final_states` waits
/// for that; the checker judges the values).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paris_servers_killed_under_load_on_partial_replication_come_back() {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let seed = std::env::var("CAUSEWAY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x9a415_u64);
    eprintln!("killed paris servers: seed {seed} (CAUSEWAY_SEED={seed} replays the victims)");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let topology = Topology::round_robin(3, 2, 2).unwrap();
    let holds = |d: usize, p: usize| topology.holds(DcId(d as u16), PartitionId(p as u32));
    let mut cluster = Cluster::placed("killed-paris", "paris", holds);
    assert_eq!(cluster.nodes.len(), 4);
    cluster.start_all().await;

    let started = Instant::now();
    let run = six::start_load(&cluster.nodes, Duration::from_secs(30), 3, seed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let virginia: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| cluster.nodes[i].dc == 0).collect();
    let mut plan: Vec<Vec<usize>> = (0..3).map(|_| vec![rng.random_range(0..cluster.nodes.len())]).collect();
    plan.insert(1, virginia);
    for victims in plan {
        for &i in &victims {
            cluster.kill(i);
            eprintln!("killed paris servers: {} killed {:.1?} into the run", cluster.nodes[i].name, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(if victims.len() > 1 { 3000 } else { 1000 })).await;
        for &i in &victims {
            cluster.start(i);
        }
        for &i in &victims {
            cluster.wait_serving(i).await;
        }
        let took = cluster.stable_time_resumes().await;
        eprintln!("killed paris servers: restarted; the UST moves again everywhere in {took:.1?}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(29), "the kills outlasted the load: {:?}", started.elapsed());
    let report = run.await.unwrap().expect("the load runs through the kills");
    let settling = Instant::now();
    let history = six::history_of_some(report.records, &cluster.nodes, "load-", Duration::from_secs(60)).await;
    eprintln!("killed paris servers: final states read in {:.1?}", settling.elapsed());
    let partial: Vec<bool> = history.finals.iter().map(|f| f.partial).collect();
    assert_eq!(partial, [false, true, true], "Virginia holds both partitions, Oregon and Ireland one");
    cluster.tcc(history);
    assert!(report.committed > 200, "only {} transactions committed", report.committed);
    eprintln!(
        "killed paris servers: {} committed, {} aborted, {} unknown; verdict: TCC",
        report.committed, report.aborted, report.unknown
    );
}

/// PrompTCC in one DC (Virginia, two servers, one per partition): each
/// server killed under load in turn, then both, and restarted. Commits
/// whose coordinator died between the votes and the decision are ended by
/// the other partition; the history passes the checker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promptcc_servers_killed_under_load_come_back() {
    one_dc_servers_killed_under_load_come_back("promptcc", 0x97cc).await;
}

/// Eiger, the same way (its write-only transactions are PrompTCC's; a
/// reader's third round whose coordinator was killed times out and starts
/// its transaction again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eiger_servers_killed_under_load_come_back() {
    one_dc_servers_killed_under_load_come_back("eiger", 0xe16e).await;
}

async fn one_dc_servers_killed_under_load_come_back(protocol: &str, default_seed: u64) {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let seed = std::env::var("CAUSEWAY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default_seed);
    eprintln!("killed {protocol} servers: seed {seed}");
    let mut cluster = Cluster::placed(&format!("killed-{protocol}"), protocol, |d, _| d == 0);
    assert_eq!(cluster.nodes.len(), 2);
    cluster.start_all().await;
    let started = Instant::now();
    let run = six::start_load(&cluster.nodes, Duration::from_secs(15), 3, seed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    for victims in [vec![0], vec![1], vec![0, 1], vec![1]] {
        for &i in &victims {
            cluster.kill(i);
            eprintln!(
                "killed {protocol} servers: {} killed {:.1?} into the run",
                cluster.nodes[i].name,
                started.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        for &i in &victims {
            cluster.start(i);
        }
        for &i in &victims {
            cluster.wait_serving(i).await;
        }
        cluster.stable_time_resumes().await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(14), "the kills outlasted the load: {:?}", started.elapsed());
    let report = run.await.unwrap().expect("the load runs through the kills");
    cluster.converged_and_tcc(report.records).await;
    assert!(report.committed > 200, "only {} transactions committed", report.committed);
    eprintln!(
        "killed {protocol} servers: 5 kills, {} committed, {} aborted, {} unknown; verdict: TCC",
        report.committed, report.aborted, report.unknown
    );
}

/// A server whose disk is lost: after a first load (every DC writing), the
/// cluster settles; one server is killed, its data directory deleted, and
/// it is started again with `--reseed` while a second load (keys of its
/// own) runs. It fetches its partition's data from the other DCs: every DC
/// ends with the same data — the first load's keys, which nobody writes
/// again, included — and the history of both loads passes the checker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_disk_is_lost_is_re_seeded_from_the_other_dcs() {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let seed = std::env::var("CAUSEWAY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x1057_u64);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cluster = Cluster::new("lost-disk");
    cluster.start_all().await;
    let before = six::start_load_named(&cluster.nodes, Duration::from_secs(6), 3, seed, "before");
    let before = before.await.unwrap().expect("the first load runs");
    // Every write of the first load has reached the other DCs.
    cluster.stable_time_resumes().await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let victim = rng.random_range(0..cluster.nodes.len());
    let name = cluster.nodes[victim].name.clone();
    cluster.kill(victim);
    std::fs::remove_dir_all(cluster.data_dir(victim)).expect("the victim had a data directory");
    eprintln!("lost disk: {name} killed and its data directory deleted");
    let restarted = Instant::now();
    cluster.start_with(victim, &["--reseed"]);
    cluster.wait_serving(victim).await;
    // It listens at once, and re-seeds while the load runs.
    let after = six::start_load_named(&cluster.nodes, Duration::from_secs(8), 3, seed + 1, "after");
    let took = restarted.elapsed() + cluster.stable_time_resumes().await;
    eprintln!("lost disk: {name} re-seeded; stable time everywhere within {RESUMED_LAG} s of the clocks {took:.1?} after its start");
    let log = std::fs::read_to_string(cluster.logs.join(format!("{name}.log"))).unwrap();
    assert!(
        log.contains("re-seeds") && log.contains("re-seeded"),
        "{name} did not say it re-seeds, then re-seeded:\n{log}"
    );

    let after = after.await.unwrap().expect("the second load runs through the re-seed");
    let (committed, unknown) = (before.committed + after.committed, before.unknown + after.unknown);
    let mut txns = before.records;
    txns.extend(after.records);
    let history = cluster.converged_and_tcc(txns).await;
    let first_keys = history.finals[0].state.keys().filter(|k| k.starts_with("load-before-")).count();
    assert!(first_keys > 100, "only {first_keys} keys of the first load");
    assert!(after.committed > 1000, "only {} transactions committed after the loss", after.committed);
    eprintln!(
        "lost disk: {committed} transactions committed ({} after the loss), {unknown} unknown, \
         {first_keys} keys of the first load held alike by every DC; verdict: TCC",
        after.committed
    );
}
