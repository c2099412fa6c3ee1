//! `causeway check`: judge a history file.

use anyhow::{Context, Result};
use causeway_history::{check, History};
use clap::Args;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// History file in Causeway's JSON Lines format (see docs/HISTORY.md).
    history: PathBuf,
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let file = File::open(&args.history).with_context(|| format!("cannot open {}", args.history.display()))?;
    let started = Instant::now();
    let history = History::read_jsonl(BufReader::new(file))
        .with_context(|| format!("{} is not a valid history", args.history.display()))?;
    let read = started.elapsed();
    let report = check(&history);
    let checked = started.elapsed() - read;
    println!("{report}");
    println!(
        "{} transactions, {} final states; read in {:.3} s, checked in {:.3} s",
        history.txns.len(),
        history.finals.len(),
        read.as_secs_f64(),
        checked.as_secs_f64()
    );
    Ok(if report.is_tcc() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
