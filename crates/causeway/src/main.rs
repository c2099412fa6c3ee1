//! The `causeway` command.

mod check;
mod sim;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Causeway: a geo-replicated, transactional causally consistent key-value store.
#[derive(Parser)]
#[command(name = "causeway", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a simulated multi-DC cluster under a workload, check its history, print a summary.
    Sim(sim::SimArgs),
    /// Check that a history file is transactionally causally consistent (exit 0 if so, 1 if not).
    Check(check::CheckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Check(args) => check::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
