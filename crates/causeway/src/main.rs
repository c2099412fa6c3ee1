//! The `causeway` command.

mod args;
mod bench;
mod certs;
mod check;
mod demo;
mod login;
mod output;
mod serve;
mod shell;
mod sim;
mod user;
mod verdict;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: glibc's malloc serialized the
/// runtime's threads on its arena locks (measured: docs/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
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
    /// Check a history file against a consistency model: TCC, serializability or eventual consistency (the history's meta line, or --model; exit 0 if it keeps it, 1 if not, 2 if it cannot be read).
    Check(check::CheckArgs),
    /// Start a local 3-DC cluster, run a workload against it, print a summary and the checker's verdict.
    Demo(demo::DemoArgs),
    /// Benchmark a cluster with closed-loop clients: throughput, latency, read waits, visibility, bytes, CPU.
    Bench(bench::BenchArgs),
    /// Run a series of benchmarks (protocols × clients × partitions × DCs × mixes × localities) and draw the papers' figures.
    Sweep(bench::SweepArgs),
    /// Draw the figures of one or more sweeps again from their sweep.json.
    Plot(bench::PlotArgs),
    /// Run one node of a cluster described by a config file.
    Server(serve::ServerArgs),
    /// Make the cluster's CA and a TLS certificate for each node of a config file.
    Certs(certs::CertsArgs),
    /// Add, remove or list the users who may log in to a cluster, and their roles.
    User(user::UserArgs),
    /// Run a whole multi-DC cluster in this process and serve clients until interrupted.
    Dev(serve::DevArgs),
    /// Open a shell on a server: begin, read, write and commit by hand (or from a script on stdin).
    #[command(after_help = shell::HELP)]
    Shell(shell::ShellArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Only for commands that hold no socket: with the default disposition,
    // a write to a socket its peer closed kills the process — a client that
    // hangs up would take a server (or a bench's embedded one) down with it.
    if matches!(cli.command, Command::Sim(_) | Command::Check(_) | Command::User(_)) {
        quiet_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Check(args) => check::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::bench(args),
        Command::Sweep(args) => bench::sweep(args),
        Command::Plot(args) => bench::plot(args),
        Command::Server(args) => serve::server(args),
        Command::Certs(args) => certs::run(args),
        Command::User(args) => user::run(args),
        Command::Dev(args) => serve::dev(args),
        Command::Shell(args) => shell::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`causeway sim |
/// head`) would panic. Restore the default: the process ends quietly, as
/// command-line tools do. Never in a process with sockets (see `main`).
#[cfg(unix)]
fn quiet_on_closed_pipe() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGPIPE: i32 = 13;
    const SIG_DFL: usize = 0;
    // SAFETY: installing the default disposition for SIGPIPE before any
    // thread starts; no handler code runs in this process.
    unsafe {
        signal(SIGPIPE, SIG_DFL);
    }
}

#[cfg(not(unix))]
fn quiet_on_closed_pipe() {}
