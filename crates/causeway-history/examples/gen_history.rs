//! Writes a synthetic TCC history as JSON Lines, or times the checker on it.
//!
//! ```text
//! cargo run --release -p causeway-history --example gen_history -- 100000 > h.jsonl
//! cargo run --release -p causeway-history --example gen_history -- 100000 --check
//! ```
//!
//! Options: `N` (transactions, default 100000), `--sessions S` (100),
//! `--dcs D` (3), `--keys K` (10000), `--reads R` (20 per transaction),
//! `--writes W` (at most 2 per update), `--seed X` (1), `--unknown P` (0: the
//! percent of updates recorded with status `unknown`), `--check` (generate,
//! check in memory and print the verdict and the time instead of the
//! history), `--serializable` (with `--check`: judge serializability, not
//! TCC). With `--dcs 1` every transaction sees all earlier ones, so the
//! history is serial, hence serializable.

use causeway_history::synth::{generate, SynthConfig};
use causeway_history::{check_for, Guarantee};
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let mut config = SynthConfig::default();
    let mut time_check = false;
    let mut model = Guarantee::Causal;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> usize {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--check" => time_check = true,
            "--serializable" => model = Guarantee::Serializable,
            "--reads" => config.reads_per_txn = number("--reads"),
            "--writes" => config.max_writes_per_txn = number("--writes"),
            "--sessions" => config.sessions = number("--sessions"),
            "--dcs" => config.dcs = number("--dcs"),
            "--keys" => config.keys = number("--keys"),
            "--seed" => config.seed = number("--seed") as u64,
            "--unknown" => config.unknown_percent = number("--unknown").min(100) as u32,
            "-h" | "--help" => {
                eprintln!(
                    "usage: gen_history [N] [--sessions S] [--dcs D] [--keys K] [--reads R] [--writes W] [--seed X] \
                     [--unknown P] [--check [--serializable]]"
                );
                return ExitCode::SUCCESS;
            }
            n => match n.parse() {
                Ok(n) => config.txns = n,
                Err(_) => {
                    eprintln!("unknown argument {n:?}; try --help");
                    return ExitCode::from(2);
                }
            },
        }
    }

    let started = Instant::now();
    let history = generate(&config);
    let generated = started.elapsed();
    if !time_check {
        let mut out = BufWriter::new(io::stdout().lock());
        if let Err(e) = history.write_jsonl(&mut out).and_then(|_| out.flush()) {
            eprintln!("cannot write the history: {e}");
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let report = check_for(&history, model);
    let checked = started.elapsed();
    println!("{report}");
    println!(
        "generated {} transactions in {:.3} s; checked in {:.3} s",
        history.txns.len(),
        generated.as_secs_f64(),
        checked.as_secs_f64()
    );
    if report.keeps_model() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
