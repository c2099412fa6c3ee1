//! CPU time of processes, from the kernel's accounting (`/proc`), split into
//! user and system (kernel) time. Elsewhere than Linux it reads nothing.

use serde::Serialize;

/// CPU seconds used, in user space and in the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuTime {
    pub user_s: f64,
    pub system_s: f64,
}

impl CpuTime {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    pub fn since(&self, earlier: CpuTime) -> CpuTime {
        CpuTime { user_s: self.user_s - earlier.user_s, system_s: self.system_s - earlier.system_s }
    }

    fn add(self, other: CpuTime) -> CpuTime {
        CpuTime { user_s: self.user_s + other.user_s, system_s: self.system_s + other.system_s }
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
    parse_stat(&stat, ticks_per_second())
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
    Some(CpuTime { user_s: user / ticks, system_s: system / ticks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime_after_a_name_with_spaces() {
        let stat = "4242 (tokio runtime) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(stat, 100.0), Some(CpuTime { user_s: 2.5, system_s: 0.75 }));
        assert_eq!(parse_stat("garbage", 100.0), None);
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
        }
    }
}
