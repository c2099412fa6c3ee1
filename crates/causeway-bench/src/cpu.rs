//! CPU time of processes, from the kernel's accounting (`/proc`), split into
//! user and system (kernel) time, with the kernel's counts of context
//! switches (`voluntary_ctxt_switches`, a thread gave up the CPU to wait;
//! `nonvoluntary_ctxt_switches`, it was preempted), summed over the threads
//! alive when read (`/proc/PID/task/*/status`). Elsewhere than Linux it
//! reads nothing.
//!
//! System calls are not counted here: `/proc/PID/io`'s `syscr` and `syscw`
//! see only the calls that go through the VFS (read, writev), not a
//! socket's recv or send, so they would undercount what a server does;
//! [`crate::syscalls`] counts every call by tracing (`--syscalls`).

use serde::Serialize;

/// CPU seconds used, in user space and in the kernel, and the kernel's
/// counts of context switches (see the module's documentation; 0 where
/// they cannot be read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuTime {
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl CpuTime {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    pub fn since(&self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user_s: self.user_s - earlier.user_s,
            system_s: self.system_s - earlier.system_s,
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
        }
    }

    fn add(self, other: CpuTime) -> CpuTime {
        CpuTime {
            user_s: self.user_s + other.user_s,
            system_s: self.system_s + other.system_s,
            voluntary_switches: self.voluntary_switches + other.voluntary_switches,
            involuntary_switches: self.involuntary_switches + other.involuntary_switches,
        }
    }
}

/// This process, every thread.
pub fn this_process() -> Option<CpuTime> {
    of_pid("self")
}

/// The sum over `pids`; `None` if any cannot be read.
pub fn of_processes(pids: &[u32]) -> Option<CpuTime> {
    pids.iter().try_fold(CpuTime::default(), |acc, pid| Some(acc.add(of_pid(&pid.to_string())?)))
}

fn of_pid(pid: &str) -> Option<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut t = parse_stat(&stat, ticks_per_second())?;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
            t.voluntary_switches += field(&status, "voluntary_ctxt_switches:").unwrap_or(0);
            t.involuntary_switches += field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
        }
    }
    Some(t)
}

/// The number after `name` on the line that begins with it.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok())
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Fields 14 and 15 of `/proc/PID/stat` (utime, stime, in clock ticks),
/// counted after the command name, which may itself hold spaces.
fn parse_stat(stat: &str, ticks: f64) -> Option<CpuTime> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some(CpuTime { user_s: user / ticks, system_s: system / ticks, ..CpuTime::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime_after_a_name_with_spaces() {
        let stat = "4242 (tokio runtime) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(stat, 100.0), Some(CpuTime { user_s: 2.5, system_s: 0.75, ..CpuTime::default() }));
        assert_eq!(parse_stat("garbage", 100.0), None);
    }

    #[test]
    fn reads_counters_by_name_and_not_by_a_longer_name() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(field(status, "voluntary_ctxt_switches:"), Some(12));
        assert_eq!(field(status, "nonvoluntary_ctxt_switches:"), Some(3));
        assert_eq!(field("", "voluntary_ctxt_switches:"), None);
    }

    #[test]
    fn this_process_uses_some_cpu() {
        let before = this_process();
        // Spin for 100 ms of wall time (the kernel counts in 10 ms ticks).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(100) {
            x = std::hint::black_box(x).wrapping_mul(31).wrapping_add(1);
        }
        let after = this_process();
        if cfg!(target_os = "linux") {
            let (a, b) = (before.expect("/proc/self/stat reads"), after.expect("/proc/self/stat reads"));
            assert!(b.since(a).total_s() > 0.0, "{a:?} then {b:?}");
            // Sleeping is a voluntary switch.
            std::thread::sleep(std::time::Duration::from_millis(1));
            let c = this_process().expect("/proc/self reads");
            assert!(c.voluntary_switches > a.voluntary_switches, "{a:?} then {c:?}");
        }
    }
}
