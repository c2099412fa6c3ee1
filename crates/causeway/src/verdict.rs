//! Writing a history file and judging it, as `sim` and `demo` both do.

use crate::output::OutputFile;
use anyhow::Result;
use causeway_history::{check_for, Guarantee, History, HistoryFile, HistoryMeta};
use std::time::Instant;

/// Writes the history of a run of `protocol` into `out`, headed by a meta
/// line that names the protocol and its guarantee, so that `causeway check`
/// judges it against that guarantee unless told otherwise.
pub fn write_history_of(history: &History, protocol: &str, guarantee: Guarantee, out: OutputFile) -> Result<()> {
    let path = out.path().display().to_string();
    let meta = HistoryMeta { protocol: Some(protocol.to_string()), guarantee: Some(guarantee) };
    out.write(|w| HistoryFile::write_parts(Some(&meta), history, w))?;
    println!("  history        {} lines in {path}", history.txns.len() + history.finals.len() + 1);
    Ok(())
}

/// Checks the history against the protocol's `guarantee` (serializability
/// included) and prints the verdict; returns whether the history keeps it.
/// A protocol that does not promise TCC (EC) is judged by TCC's passes all
/// the same, but its violations of TCC are the expected outcome, shown as
/// counts per kind — unless they break its own promise.
pub fn judge(history: &History, guarantee: Guarantee) -> bool {
    let started = Instant::now();
    let verdict = check_for(history, guarantee);
    let kept = verdict.keeps_model();
    let headline = match (verdict.violations.is_empty(), kept) {
        // "TCC: no violations", or "serializable: no violations".
        (true, _) => format!("{}: no violations", verdict.judged_as()),
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
    if !verdict.violations.is_empty() {
        let text = verdict.to_string();
        let shown = if kept { text.split("\n\n").next().unwrap_or("") } else { text.as_str() };
        println!("{shown}");
    }
    kept
}
