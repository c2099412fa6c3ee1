//! `causeway check`: judge a history file against a consistency model.

use anyhow::{Context, Result};
use causeway_history::{check_for, guarantee_word, Guarantee, HistoryFile};
use clap::{Args, ValueEnum};
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// History file in Causeway's JSON Lines format (see docs/HISTORY.md).
    history: PathBuf,
    /// The model to judge the history against [default: the guarantee the history's meta line names, else tcc].
    #[arg(long, value_enum)]
    model: Option<Model>,
}

/// The models `check` judges; their names are the history format's words
/// for guarantees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Model {
    /// Transactional causal consistency: causal snapshots, atomic visibility, last-writer-wins arbitration that
    /// respects causality, convergence. Lost updates and write skew are allowed.
    Tcc,
    /// Serializability: everything TCC asks, and no cycle in the direct serialization graph (G0, G1c, G2: no lost
    /// update, write skew or read skew).
    Serializable,
    /// Eventual consistency: reads return committed values and the DCs converge; TCC's other violations are listed
    /// but allowed.
    Eventual,
}

impl Model {
    fn guarantee(self) -> Guarantee {
        match self {
            Model::Tcc => Guarantee::Causal,
            Model::Serializable => Guarantee::Serializable,
            Model::Eventual => Guarantee::Eventual,
        }
    }
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let file = File::open(&args.history).with_context(|| format!("cannot open {}", args.history.display()))?;
    let started = Instant::now();
    let HistoryFile { meta, history } = HistoryFile::read_jsonl(BufReader::new(file))
        .with_context(|| format!("{} is not a valid history", args.history.display()))?;
    let read = started.elapsed();
    let from_meta = meta.as_ref().and_then(|m| m.guarantee);
    let (guarantee, why) = match (args.model, from_meta) {
        (Some(model), _) => (model.guarantee(), "--model".to_string()),
        (None, Some(g)) => {
            let protocol = meta.as_ref().and_then(|m| m.protocol.as_deref());
            let of = protocol.map_or_else(String::new, |p| format!(" of protocol {p}"));
            (g, format!("the guarantee the history's meta line{of} names"))
        }
        (None, None) => (Guarantee::Causal, "the default: no --model, and the history names no guarantee".to_string()),
    };
    println!("model: {} ({why})", guarantee_word::of(guarantee));
    let report = check_for(&history, guarantee);
    let checked = started.elapsed() - read;
    println!("{report}");
    println!(
        "{} transactions, {} final states; read in {:.3} s, checked in {:.3} s",
        history.txns.len(),
        history.finals.len(),
        read.as_secs_f64(),
        checked.as_secs_f64()
    );
    Ok(if report.keeps_model() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
