//! Writing a history file and judging it, as `sim` and `demo` both do.

use crate::output::OutputFile;
use anyhow::Result;
use causeway_history::{check, Guarantee, History};
use std::time::Instant;

/// Writes the history into `out` (opened before the run) and says where.
pub fn write_history(history: &History, out: OutputFile) -> Result<()> {
    let path = out.path().display().to_string();
    out.write(|w| history.write_jsonl(w))?;
    println!("  history        {} lines in {path}", history.txns.len() + history.finals.len());
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
