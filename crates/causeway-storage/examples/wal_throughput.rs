//! Group-commit throughput of the log on this machine's disk: appends
//! records of about 200 bytes and syncs every 1, 8 or 64 of them, and
//! prints records/s and fsyncs/s, with the median of the runs.
//!
//! ```text
//! cargo run --release -p causeway-storage --example wal_throughput -- \
//!     [--dir DIR] [--syncs S] [--runs R] [--record-bytes B]
//! ```
//!
//! Each group size does `S` group commits (default 1000) into a fresh
//! directory under `DIR` (default: the current directory; point it at the
//! disk the log will live on, not a tmpfs). The runs alternate the group
//! sizes (1, 8, 64, 1, 8, 64, ...) so that drift in the disk's speed is
//! spread over all of them.

use causeway_storage::{Identity, Log};
use std::path::PathBuf;
use std::time::Instant;

const GROUPS: [usize; 3] = [1, 8, 64];

struct Args {
    dir: PathBuf,
    syncs: usize,
    runs: usize,
    record_bytes: usize,
}

fn parse_args() -> Args {
    let mut args = Args { dir: PathBuf::from("."), syncs: 1000, runs: 3, record_bytes: 200 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = || value.parse::<usize>().unwrap_or_else(|_| panic!("{flag}: not a number: {value}"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(&value),
            "--syncs" => args.syncs = number(),
            "--runs" => args.runs = number(),
            "--record-bytes" => args.record_bytes = number(),
            _ => panic!("unknown flag {flag}; flags: --dir --syncs --runs --record-bytes"),
        }
    }
    args
}

/// One measurement: records/s and fsyncs/s.
fn run(args: &Args, group: usize) -> (f64, f64) {
    let tmp = tempfile::tempdir_in(&args.dir).expect("a temporary directory under --dir");
    let (mut log, _) = Log::open(tmp.path(), &Identity::new("bench", "node")).expect("open");
    let mut record = vec![0u8; args.record_bytes];
    let records = args.syncs * group;
    let start = Instant::now();
    for i in 0..records {
        // Contents vary, as serialized records would.
        record[..8].copy_from_slice(&(i as u64).to_le_bytes());
        log.append(&record).expect("append");
        if (i + 1) % group == 0 {
            log.sync().expect("sync");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(log.synced(), records as u64);
    (records as f64 / secs, args.syncs as f64 / secs)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let args = parse_args();
    println!(
        "causeway-storage WAL: {} runs, {} group commits per group size, {}-byte records, under {}",
        args.runs,
        args.syncs,
        args.record_bytes,
        args.dir.display()
    );
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); GROUPS.len()];
    for r in 0..args.runs {
        for (g, &group) in GROUPS.iter().enumerate() {
            let (rps, fps) = run(&args, group);
            println!("run {r} group {group:>2}: {rps:>10.0} records/s {fps:>8.0} fsyncs/s");
            results[g].push((rps, fps));
        }
    }
    println!("median of {} runs:", args.runs);
    for (g, &group) in GROUPS.iter().enumerate() {
        let rps = median(results[g].iter().map(|r| r.0).collect());
        let fps = median(results[g].iter().map(|r| r.1).collect());
        println!("group {group:>2}: {rps:>10.0} records/s {fps:>8.0} fsyncs/s");
    }
}
