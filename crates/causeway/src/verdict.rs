//! Writing a history file and judging it, as `sim` and `demo` both do.

use anyhow::{Context, Result};
use causeway_history::{check, History};
use causeway_protocol::ProtocolKind;
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

/// Checks the history and prints the verdict; returns whether the run
/// passes. A protocol that does not promise TCC (EC) is judged all the same,
/// but its violations are the expected outcome, shown as counts per kind.
pub fn judge(history: &History, protocol: ProtocolKind) -> bool {
    let started = Instant::now();
    let verdict = check(history);
    let promised = protocol.is_tcc();
    println!(
        "  checker        {} ({} transactions in {:.3} s)",
        match (verdict.is_tcc(), promised) {
            (true, _) => "TCC: no violations",
            (false, true) => "VIOLATIONS FOUND",
            (false, false) => "violations found, as expected: this protocol does not promise TCC",
        },
        history.txns.len(),
        started.elapsed().as_secs_f64()
    );
    if !verdict.is_tcc() {
        let text = verdict.to_string();
        let shown = if promised { text.as_str() } else { text.split("\n\n").next().unwrap_or("") };
        println!("{shown}");
    }
    verdict.is_tcc() || !promised
}
