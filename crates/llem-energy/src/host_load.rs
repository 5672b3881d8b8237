//! Who else used the CPU during a measurement: the machine's busy time (`/proc/stat`) less
//! that of this process and its descendants (`/proc/<pid>/stat`). A CPU energy figure covers
//! the whole package, so another process's load is in it; an estimate (TDP x utilisation)
//! charges that load to the run outright.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Share of the machine's CPU time other processes used above which a run says so.
pub const NOTABLE_OTHER_SHARE: f64 = 0.05;

/// CPU time counters at one moment, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSnapshot {
    /// Busy time of every CPU (`/proc/stat`'s aggregate line, idle and iowait left out).
    pub busy_ticks: u64,
    /// All time of every CPU, idle included.
    pub total_ticks: u64,
    /// Time of this process and its live descendants, with what they reaped (`utime + stime
    /// + cutime + cstime`).
    pub ours_ticks: u64,
}

/// The CPU over an interval: shares of the machine's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostLoad {
    /// Used by this process and its descendants, 0-1.
    pub ours_share: f64,
    /// Used by every other process, 0-1.
    pub others_share: f64,
}

/// Reads the counters under `proc_root` (`/proc`) for the process `pid`; `None` where the
/// files are not there or not as expected (not Linux, a restricted `/proc`).
pub fn snapshot(proc_root: &Path, pid: u32) -> Option<CpuSnapshot> {
    let stat = std::fs::read_to_string(proc_root.join("stat")).ok()?;
    let (busy, total) = crate::sensors::estimate::aggregate_cpu_times(&stat)?;
    Some(CpuSnapshot {
        busy_ticks: busy,
        total_ticks: total,
        ours_ticks: tree_ticks(proc_root, pid)?,
    })
}

/// This process's counters now, from `/proc`: the start of a measurement.
pub fn start() -> Option<CpuSnapshot> {
    snapshot(Path::new("/proc"), std::process::id())
}

/// The CPU since `start` (this process's counters, read again now).
pub fn since(start: Option<CpuSnapshot>) -> Option<HostLoad> {
    between(&start?, &self::start()?)
}

/// What happened between two snapshots; `None` when no time passed.
pub fn between(a: &CpuSnapshot, b: &CpuSnapshot) -> Option<HostLoad> {
    let total = b
        .total_ticks
        .checked_sub(a.total_ticks)
        .filter(|t| *t > 0)? as f64;
    let busy = b.busy_ticks.saturating_sub(a.busy_ticks) as f64;
    let ours = (b.ours_ticks.saturating_sub(a.ours_ticks) as f64).min(busy);
    Some(HostLoad {
        ours_share: ours / total,
        others_share: (busy - ours).max(0.0) / total,
    })
}

/// What a run says of `load`, when other processes used a notable share of the CPU; `ours`
/// names what was measured (`llem and its engine`, `the command`).
pub fn warning(load: &HostLoad, ours: &str) -> Option<String> {
    (load.others_share > NOTABLE_OTHER_SHARE).then(|| {
        format!(
            "other processes used {:.0} % of this machine's CPU time during the measurement \
             ({ours} {:.0} %; /proc): the CPU energy includes what they drew (a CPU estimate \
             charges all of it to this run)",
            load.others_share * 100.0,
            load.ours_share * 100.0
        )
    })
}

/// One process's `(parent, ticks)` from its `stat` file.
fn process_stat(path: &Path) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
    let field = |n: usize| f.get(n - 3).and_then(|x| x.parse::<u64>().ok());
    let ppid = u32::try_from(field(4)?).ok()?;
    let ticks = field(14)? + field(15)? + field(16)? + field(17)?;
    Some((ppid, ticks))
}

/// Ticks of `pid` and every live descendant.
fn tree_ticks(proc_root: &Path, pid: u32) -> Option<u64> {
    let mut procs: HashMap<u32, (u32, u64)> = HashMap::new();
    for entry in std::fs::read_dir(proc_root).ok()?.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path: PathBuf = entry.path().join("stat");
        // A process may end between the listing and the read: it is simply not counted.
        if let Some(s) = process_stat(&path) {
            procs.insert(p, s);
        }
    }
    let own = procs.get(&pid)?.1;
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (p, (parent, _)) in &procs {
        children.entry(*parent).or_default().push(*p);
    }
    let (mut sum, mut stack) = (own, vec![pid]);
    while let Some(p) = stack.pop() {
        for c in children.get(&p).into_iter().flatten() {
            if *c != pid {
                sum += procs.get(c).map_or(0, |s| s.1);
                stack.push(*c);
            }
        }
    }
    Some(sum)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A `/proc` with the aggregate CPU line and processes `(pid, ppid, utime, cutime)`.
    fn write_proc(root: &Path, busy: u64, idle: u64, procs: &[(u32, u32, u64, u64)]) {
        std::fs::write(
            root.join("stat"),
            format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 2 3 4\n"),
        )
        .unwrap();
        for (pid, ppid, utime, cutime) in procs {
            let dir = root.join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            // A name with a space and a parenthesis, as the kernel allows.
            std::fs::write(
                dir.join("stat"),
                format!(
                    "{pid} (tricky (name) x) S {ppid} 1 1 0 -1 0 0 0 0 0 {utime} 0 {cutime} 0 20 0 1 0\n"
                ),
            )
            .unwrap();
        }
    }

    #[test]
    fn others_are_the_machines_busy_time_less_our_process_tree() {
        let d = tempfile::tempdir().unwrap();
        // Us (10) with a child (11) and grandchild (12); 20 is someone else's.
        write_proc(
            d.path(),
            1000,
            1000,
            &[
                (10, 1, 100, 0),
                (11, 10, 50, 0),
                (12, 11, 25, 0),
                (20, 1, 500, 0),
            ],
        );
        let a = snapshot(d.path(), 10).unwrap();
        assert_eq!(
            (a.busy_ticks, a.total_ticks, a.ours_ticks),
            (1000, 2000, 175)
        );
        // 1000 ticks later: 600 busy, of which our tree 200 (the grandchild was reaped by
        // the child, its time now in the child's cutime).
        std::fs::remove_dir_all(d.path().join("12")).unwrap();
        write_proc(
            d.path(),
            1600,
            1400,
            &[(10, 1, 200, 0), (11, 10, 100, 75), (20, 1, 900, 0)],
        );
        let b = snapshot(d.path(), 10).unwrap();
        let load = between(&a, &b).unwrap();
        assert!((load.ours_share - 0.2).abs() < 1e-12, "{load:?}");
        assert!((load.others_share - 0.4).abs() < 1e-12, "{load:?}");
        let w = warning(&load, "the command").unwrap();
        assert!(
            w.starts_with("other processes used 40 % of this machine's CPU"),
            "{w}"
        );
        assert!(w.contains("(the command 20 %"), "{w}");
        // A quiet machine says nothing; no time passed is no figure.
        let quiet = HostLoad {
            ours_share: 0.5,
            others_share: 0.01,
        };
        assert_eq!(warning(&quiet, "us"), None);
        assert_eq!(between(&a, &a), None);
        assert_eq!(snapshot(d.path(), 99), None, "a process that is not there");
    }

    #[test]
    fn this_machines_proc_reads() {
        let s = snapshot(Path::new("/proc"), std::process::id()).unwrap();
        assert!(s.total_ticks >= s.busy_ticks && s.busy_ticks >= s.ours_ticks);
    }
}
