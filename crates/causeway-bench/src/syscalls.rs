//! System calls of processes over the measured time, counted by the
//! kernel's tracepoints through `perf stat` (`bench --syscalls`).
//!
//! `/proc` has no count of a process's system calls (`/proc/PID/io` sees
//! only those through the VFS, not a socket's `recv` or `send`), so this
//! attaches `perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_…` to
//! the processes when the measured time begins and stops it with SIGINT
//! when it ends. It needs `perf` on the PATH (Debian: `linux-perf`) and the
//! right to trace those processes: root, or `kernel.perf_event_paranoid`
//! at −1. Counting costs the traced processes a little (a tracepoint hit
//! per call); compare runs that both count, or neither.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// The calls counted, by group: each group sums its tracepoints.
const GROUPS: [(&str, &[&str]); 5] = [
    ("read", &["read", "readv", "recvfrom", "recvmsg"]),
    ("write", &["write", "writev", "sendto", "sendmsg"]),
    ("epoll", &["epoll_wait", "epoll_pwait"]),
    ("futex", &["futex"]),
    ("all", &[]),
];

/// Calls per committed transaction, by group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyscallsPerTxn {
    /// `read`, `readv`, `recvfrom`, `recvmsg`.
    pub read: f64,
    /// `write`, `writev`, `sendto`, `sendmsg`.
    pub write: f64,
    /// `epoll_wait`, `epoll_pwait`.
    pub epoll: f64,
    pub futex: f64,
    /// Every system call.
    pub all: f64,
}

/// Calls per second while counting, by group (as [`GROUPS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates([f64; 5]);

impl Rates {
    /// Divided by the committed transactions per second.
    pub fn per_txn(&self, throughput_tps: f64) -> SyscallsPerTxn {
        let d = throughput_tps.max(1e-9);
        let [read, write, epoll, futex, all] = self.0.map(|r| r / d);
        SyscallsPerTxn { read, write, epoll, futex, all }
    }
}

fn events() -> Vec<String> {
    let mut e = vec!["raw_syscalls:sys_enter".to_string()];
    for (_, calls) in GROUPS {
        e.extend(calls.iter().map(|c| format!("syscalls:sys_enter_{c}")));
    }
    e
}

const NO_PERF: &str = "--syscalls runs `perf stat`, which is not installed here (Debian: apt-get install linux-perf)";

/// `perf stat` counting [`events`] as `;`-separated values on its
/// standard error, for `target` (a command, or `-p PIDS`).
fn perf_stat(target: &[&str]) -> Command {
    let mut c = Command::new("perf");
    c.args(["stat", "-x", ";", "--no-big-num", "-e", &events().join(",")])
        .args(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// Whether `perf stat` can count these calls here: run once before a
/// run, so that a missing `perf`, a refusal to trace or a tracepoint this
/// kernel lacks is said at once, not after the run.
pub fn check() -> Result<()> {
    let out = perf_stat(&["--", "true"]).output().context(NO_PERF)?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || parse(&text, 1.0).is_none() {
        bail!(
            "--syscalls: `perf stat` cannot count system calls here (tracing needs root, or \
             kernel.perf_event_paranoid = -1, and the kernel's syscall tracepoints); it said: {}",
            text.trim()
        );
    }
    Ok(())
}

/// A `perf stat` counting the system calls of some processes. Dropped
/// without [`Counting::stop`] (a run that failed), it stops `perf`.
pub struct Counting {
    perf: Option<Child>,
    since: Instant,
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Some(mut perf) = self.perf.take() {
            let _ = perf.kill();
            let _ = perf.wait();
        }
    }
}

impl Counting {
    /// Starts counting the calls of `pids` (every thread of each).
    pub fn start(pids: &[u32]) -> Result<Counting> {
        if pids.is_empty() {
            bail!("no process to count the system calls of");
        }
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let perf = perf_stat(&["-p", &list.join(",")]).spawn().context(NO_PERF)?;
        Ok(Counting { perf: Some(perf), since: Instant::now() })
    }

    /// Stops counting; the calls per second since [`Counting::start`]
    /// (perf opens its counters a few milliseconds after it starts: the
    /// rates are that much low, about 1 % of a 5-second window).
    pub fn stop(mut self) -> Result<Rates> {
        let perf = self.perf.take().context("perf was stopped already")?;
        let secs = self.since.elapsed().as_secs_f64();
        // SAFETY: kill only sends a signal to the child we started.
        unsafe { libc::kill(perf.id() as libc::pid_t, libc::SIGINT) };
        let out = perf.wait_with_output().context("perf stat did not finish")?;
        let text = String::from_utf8_lossy(&out.stderr);
        parse(&text, secs).with_context(|| {
            format!(
                "perf stat counted nothing (tracing needs root, or kernel.perf_event_paranoid = -1); it said: {}",
                text.trim()
            )
        })
    }
}

/// Rates over `secs` from `perf stat -x ';'`'s lines: `count;unit;event;
/// …`. (Not over the run time perf prints: for counters of a task that is
/// its time on a CPU, summed over the threads.) `None` if the total was
/// not counted.
fn parse(text: &str, secs: f64) -> Option<Rates> {
    let mut total = None;
    let mut rates = [0.0; 5];
    for line in text.lines() {
        let f: Vec<&str> = line.split(';').collect();
        if f.len() < 3 {
            continue;
        }
        let Ok(count) = f[0].trim().parse::<f64>() else { continue };
        let rate = count / secs.max(1e-9);
        let event = f[2].trim();
        if event == "raw_syscalls:sys_enter" {
            total = Some(rate);
            continue;
        }
        let Some(call) = event.strip_prefix("syscalls:sys_enter_") else { continue };
        if let Some(g) = GROUPS.iter().position(|(_, calls)| calls.contains(&call)) {
            rates[g] += rate;
        }
    }
    rates[4] = total?;
    Some(Rates(rates))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_lines_sum_into_groups_as_rates_over_the_time_counted() {
        // Two seconds counted: 2,000 reads and 1,000 recvfrom are 1,500 reads
        // a second (perf's run time, a time on CPU, is not the window).
        let text = "\
2000;;syscalls:sys_enter_read;211914376;100.00;;
1000;;syscalls:sys_enter_recvfrom;211914376;100.00;;
400;;syscalls:sys_enter_writev;211914376;100.00;;
<not counted>;;syscalls:sys_enter_futex;0;0.00;;
9000;;raw_syscalls:sys_enter;211914376;100.00;;
";
        let r = parse(text, 2.0).expect("a total");
        let t = r.per_txn(100.0);
        assert_eq!((t.read, t.write, t.futex, t.epoll, t.all), (15.0, 2.0, 0.0, 0.0, 45.0));
        assert!(parse("<not counted>;;raw_syscalls:sys_enter;0;0.00;;\n", 2.0).is_none(), "no total, no rates");
        assert!(parse("", 2.0).is_none());
    }

    #[test]
    fn every_group_but_the_total_names_its_calls() {
        let e = events();
        assert_eq!(e[0], "raw_syscalls:sys_enter");
        assert_eq!(e.len(), 1 + GROUPS.iter().map(|(_, c)| c.len()).sum::<usize>());
    }
}
