//! Writing a history file and judging it, as `sim` and `demo` both do.

use anyhow::{Context, Result};
use causeway_history::{check, Guarantee, History};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

pub fn write_history(history: &History, path: &Path) -> Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut w = BufWriter::new(file);
    history.write_jsonl(&mut w).and_then(|_| w.flush()).with_context(|| format!("cannot write {}", path.display()))?;
    println!("  history        {} lines in {}", history.txns.len() + history.finals.len(), path.display());
    Ok(())
}

/// Checks the history and prints the verdict; returns whether the history
/// keeps the protocol's `guarantee`. A protocol that does not promise TCC
/// (EC) is judged all the same, but its violations of TCC are the expected
/// outcome, shown as counts per kind — unless they break its own promise.
pub fn judge(history: &History, guarantee: Guarantee) -> bool {
    let started = Instant::now();
    let verdict = check(history);
    let kept = verdict.upholds(guarantee);
    let headline = match (verdict.is_tcc(), kept) {
        (true, _) => "TCC: no violations".to_string(),
        (false, true) => {
            format!("violations found, as expected: this protocol does not promise TCC (it keeps {guarantee})")
        }
        (false, false) => format!("VIOLATIONS FOUND: the history breaks {guarantee}"),
    };
    println!(
        "  checker        {headline} ({} transactions in {:.3} s)",
        history.txns.len(),
        started.elapsed().as_secs_f64()
    );
    if !verdict.is_tcc() {
        let text = verdict.to_string();
        let shown = if kept { text.split("\n\n").next().unwrap_or("") } else { text.as_str() };
        println!("{shown}");
    }
    kept
}
