//! Runs one cell as a child process in its own process group and watches it: progress lines
//! from its stdout, its stderr into the cell's log, the per-cell timeout (SIGTERM to the group,
//! SIGKILL after a grace period), the user's Ctrl-C, and how it ended.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::protocol::{CellMessage, PARENT_PID_ENV};

/// How to start a cell: `program args... <cell_spec.json>`.
#[derive(Clone, Debug)]
pub struct Launcher {
    /// The executable (`llem` itself).
    pub program: PathBuf,
    /// Arguments before the spec path (the hidden subcommand).
    pub args: Vec<OsString>,
    /// Variables set for the cell on top of the runner's environment (the runner URLs'
    /// credentials, which its spec file does not hold).
    pub env: Vec<(String, String)>,
}

/// What the runner asks of a running cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopRequest {
    /// Keep going.
    None,
    /// Terminate it (SIGTERM, SIGKILL after the grace period): first Ctrl-C, wall-clock limit.
    Terminate(StopCause),
    /// Kill it now (second Ctrl-C).
    Kill(StopCause),
}

/// Why a cell is stopped from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    /// The user pressed Ctrl-C (or the runner got SIGTERM).
    User,
    /// The study's wall-clock limit passed.
    WallClock,
}

/// How a cell ended.
#[derive(Clone, Debug, PartialEq)]
pub enum CellEnd {
    /// It wrote its result.
    Completed {
        /// `result.json`.
        result_file: PathBuf,
    },
    /// It ended without a result.
    Failed {
        /// `EngineError`, `Crashed`, `Timeout`, `ExitCode`, `MissingResult`, ...
        error_type: String,
        /// What happened, with the log's last lines where they help.
        message: String,
    },
    /// It was stopped from outside.
    Stopped {
        /// Who stopped it.
        cause: StopCause,
        /// What was done to it.
        message: String,
    },
}

/// A finished cell.
#[derive(Clone, Debug)]
pub struct CellRun {
    /// How it ended.
    pub end: CellEnd,
    /// Wall-clock seconds from spawn to exit.
    pub elapsed_s: f64,
    /// Processes of the cell's group still alive 1 s after SIGKILL (stuck in the kernel).
    pub survivors: Vec<u32>,
    /// Server processes the cell started and left running (it died without stopping
    /// them); the runner killed them.
    pub orphaned_servers: Vec<u32>,
}

/// Limits of one cell.
#[derive(Clone, Copy, Debug)]
pub struct CellLimits {
    /// `experiment_timeout_seconds`.
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

/// The cell could not even be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the cell process {program}: {source}")]
pub struct SpawnError {
    /// What was started.
    pub program: String,
    /// The cause.
    pub source: std::io::Error,
}

const POLL: Duration = Duration::from_millis(50);

fn signal_group(pid: u32, sig: Signal) {
    if let Ok(p) = i32::try_from(pid) {
        // ESRCH (already gone) is the expected outcome once the group has exited.
        let _ = killpg(Pid::from_raw(p), sig);
    }
}

/// Starts the cell process in its own group, stdout piped, stderr into `log_path`.
fn spawn(launcher: &Launcher, spec_path: &Path, log_path: &Path) -> Result<Child, SpawnError> {
    let spawn_err = |source| SpawnError {
        program: launcher.program.display().to_string(),
        source,
    };
    let log = File::create(log_path).map_err(spawn_err)?;
    Command::new(&launcher.program)
        .args(&launcher.args)
        .arg(spec_path)
        .env(PARENT_PID_ENV, std::process::id().to_string())
        .envs(launcher.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        // Its own group: the terminal's Ctrl-C reaches the runner only, and a kill reaches
        // everything the cell started.
        .process_group(0)
        .spawn()
        .map_err(spawn_err)
}

/// The cell's progress lines, parsed on a thread of their own.
fn read_messages(child: &mut Child) -> mpsc::Receiver<CellMessage> {
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(m) = CellMessage::parse(&line)
                    && tx.send(m).is_err()
                {
                    break;
                }
            }
        });
    }
    rx
}

/// How the runner ended a cell: why and when its group was sent SIGTERM, and whether SIGKILL
/// followed.
#[derive(Default)]
struct Ending {
    terminated: Option<(Termination, Instant)>,
    killed: bool,
}

impl Ending {
    /// Applies a stop request, the timeout and the kill grace to the group of `pid`.
    fn enforce(&mut self, pid: u32, request: StopRequest, started: Instant, limits: CellLimits) {
        match request {
            StopRequest::Kill(cause) if !self.killed => {
                signal_group(pid, Signal::SIGKILL);
                self.killed = true;
                // A kill from outside is reported as that, even over an earlier timeout.
                self.terminated = Some((Termination::Stop(cause), Instant::now()));
            }
            StopRequest::Terminate(cause) if self.terminated.is_none() => {
                signal_group(pid, Signal::SIGTERM);
                self.terminated = Some((Termination::Stop(cause), Instant::now()));
            }
            _ => {}
        }
        if self.terminated.is_none() && started.elapsed() > limits.timeout {
            signal_group(pid, Signal::SIGTERM);
            self.terminated = Some((Termination::Timeout, Instant::now()));
        }
        if let Some((_, at)) = self.terminated
            && !self.killed
            && at.elapsed() > limits.kill_grace
        {
            signal_group(pid, Signal::SIGKILL);
            self.killed = true;
        }
    }
}

/// Kills whatever is left of the group of `pid` and waits up to 1 s for it to go; returns the
/// processes still there (stuck in the kernel).
fn reap_group(pid: u32) -> Vec<u32> {
    signal_group(pid, Signal::SIGKILL);
    let mut survivors = group_members(pid);
    let until = Instant::now() + Duration::from_secs(1);
    while !survivors.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        survivors = group_members(pid);
    }
    survivors
}

/// A cell that died without stopping its server (SIGKILL, crash) leaves it running in its
/// own group or container: stops those too, and returns the processes that were still there.
fn stop_orphaned_servers(reported: &Reported) -> Vec<u32> {
    let mut orphaned = Vec::new();
    for &g in &reported.server_groups {
        let left = group_members(g);
        if !left.is_empty() {
            signal_group(g, Signal::SIGKILL);
            orphaned.extend(left);
        }
    }
    for name in &reported.containers {
        let _ = Command::new("docker")
            .args(["rm", "-f", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    orphaned
}

/// Starts a cell and supervises it to the end.
///
/// `on_spawn` gets the child's PID (also its process-group id) before anything else happens;
/// `on_message` every progress line; `stop` is polled every 50 ms.
pub fn run_cell(
    launcher: &Launcher,
    spec_path: &Path,
    log_path: &Path,
    limits: CellLimits,
    on_spawn: &mut dyn FnMut(u32),
    on_message: &mut dyn FnMut(&CellMessage),
    stop: &mut dyn FnMut() -> StopRequest,
) -> Result<CellRun, SpawnError> {
    let started = Instant::now();
    let mut child = spawn(launcher, spec_path, log_path)?;
    let pid = child.id();
    on_spawn(pid);
    let rx = read_messages(&mut child);

    let mut reported = Reported::default();
    let mut ending = Ending::default();
    let mut last_check = Instant::now();
    let status = loop {
        match rx.recv_timeout(POLL) {
            Ok(m) => {
                reported.take(m, on_message);
                // A chatty cell must not starve the checks below.
                if last_check.elapsed() < POLL {
                    continue;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Stdout closed (the cell is exiting): the wait below must not spin.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(POLL),
        }
        last_check = Instant::now();
        if let Some(status) = try_wait(&mut child) {
            break status;
        }
        ending.enforce(pid, stop(), started, limits);
    };
    let elapsed_s = started.elapsed().as_secs_f64();
    // Whatever the cell started and left behind goes with it.
    let survivors = reap_group(pid);
    // Lines written just before exit; a grandchild holding the pipe cannot stall us past 1 s.
    let drain_until = Instant::now() + Duration::from_secs(1);
    while let Ok(m) = rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
        reported.take(m, on_message);
    }
    let orphaned_servers = stop_orphaned_servers(&reported);
    let end = classify(
        status,
        ending.terminated.map(|(t, _)| t),
        ending.killed,
        limits,
        reported,
        spec_path.parent().unwrap_or(Path::new(".")),
        log_path,
    );
    Ok(CellRun {
        end,
        elapsed_s,
        survivors,
        orphaned_servers,
    })
}

/// What the cell said about its own end, and the servers it started.
#[derive(Default)]
struct Reported {
    completed: Option<String>,
    failed: Option<(String, String)>,
    server_groups: Vec<u32>,
    containers: Vec<String>,
}

impl Reported {
    fn take(&mut self, m: CellMessage, on_message: &mut dyn FnMut(&CellMessage)) {
        on_message(&m);
        match m {
            CellMessage::Failed {
                error_type,
                message,
            } => self.failed = Some((error_type, message)),
            CellMessage::Completed { result_file } => self.completed = Some(result_file),
            CellMessage::Server { pgid, container } => {
                self.server_groups.extend(pgid);
                self.containers.extend(container);
            }
            _ => {}
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Termination {
    Timeout,
    Stop(StopCause),
}

fn try_wait(child: &mut Child) -> Option<ExitStatus> {
    match child.try_wait() {
        Ok(s) => s,
        // Cannot happen for our own child; treat as gone so the loop ends.
        Err(_) => Some(ExitStatus::from_raw(1 << 8)),
    }
}

#[allow(clippy::too_many_arguments)]
fn classify(
    status: ExitStatus,
    terminated: Option<Termination>,
    killed: bool,
    limits: CellLimits,
    reported: Reported,
    cell_dir: &Path,
    log_path: &Path,
) -> CellEnd {
    let how = if killed {
        format!(
            "sent SIGTERM, then SIGKILL (no exit within {:.0} s)",
            limits.kill_grace.as_secs_f64()
        )
    } else {
        "sent SIGTERM; it stopped".to_string()
    };
    match terminated {
        Some(Termination::Timeout) => {
            return CellEnd::Failed {
                error_type: "Timeout".into(),
                message: format!(
                    "ran past experiment_timeout_seconds = {} s; the cell's process group was {how}",
                    limits.timeout.as_secs_f64()
                ),
            };
        }
        Some(Termination::Stop(cause)) => {
            let who = match cause {
                StopCause::User => "interrupted by the user",
                StopCause::WallClock => "stopped at the study's wall-clock limit",
            };
            return CellEnd::Stopped {
                cause,
                message: format!("{who}; the cell's process group was {how}"),
            };
        }
        None => {}
    }
    if status.success()
        && let Some(rel) = reported.completed
    {
        let path = cell_dir.join(rel);
        if path.is_file() {
            return CellEnd::Completed { result_file: path };
        }
        return CellEnd::Failed {
            error_type: "MissingResult".into(),
            message: format!("the cell reported {} but it is not there", path.display()),
        };
    }
    if let Some((error_type, message)) = reported.failed {
        return CellEnd::Failed {
            error_type,
            message,
        };
    }
    let tail = log_tail(log_path, 3);
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!("; last log lines: {tail}")
    };
    // A cell that died without saying why on a full filesystem died of it: say so, and
    // where, rather than the signal of whatever failed to write first.
    if !status.success()
        && let Some(message) = disk_full(cell_dir, free_bytes(cell_dir))
    {
        return CellEnd::Failed {
            error_type: "DiskFull".into(),
            message,
        };
    }
    if let Some(sig) = status.signal() {
        let name =
            Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.to_string());
        return CellEnd::Failed {
            error_type: "Crashed".into(),
            message: format!(
                "the cell process died of {name}{}{tail}",
                if status.core_dumped() {
                    " (core dumped)"
                } else {
                    ""
                }
            ),
        };
    }
    match status.code() {
        Some(0) => CellEnd::Failed {
            error_type: "MissingResult".into(),
            message: format!("the cell process exited 0 without reporting a result{tail}"),
        },
        Some(code) => CellEnd::Failed {
            error_type: "ExitCode".into(),
            message: format!("the cell process exited with code {code}{tail}"),
        },
        None => CellEnd::Failed {
            error_type: "Crashed".into(),
            message: format!("the cell process ended abnormally{tail}"),
        },
    }
}

/// Below this many free bytes a filesystem counts as full (a cell writes its artefacts in
/// one go; a few blocks left is as good as none).
const FULL_BELOW_BYTES: u64 = 1 << 20;

/// Bytes an unprivileged writer may still use on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    // The field types differ between targets (u32 on some 32-bit libcs).
    #[allow(clippy::useless_conversion)]
    let (blocks, size) = (
        u64::from(s.blocks_available()),
        u64::from(s.fragment_size()),
    );
    Some(blocks.saturating_mul(size))
}

/// The failure message of a cell whose results filesystem is full, if it is.
fn disk_full(dir: &Path, free: Option<u64>) -> Option<String> {
    let free = free.filter(|&b| b < FULL_BELOW_BYTES)?;
    Some(format!(
        "No space left on device: the filesystem of {} has {free} bytes free; the cell could \
         not write its results or its log",
        dir.display()
    ))
}

/// Live (not zombie) processes whose process group is `pgid`, from `/proc`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|f| f.parse::<u32>().ok());
        if state != Some("Z") && pgrp == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

/// The last `n` non-empty lines of a log, joined with ` | ` (at most the last 4 KiB read),
/// credentials redacted.
pub fn log_tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = llem_config::files::open_regular(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines
        .get(lines.len().saturating_sub(n)..)
        .unwrap_or_default()
        .join(" | ");
    llem_config::redact::text(&tail, &[]).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_full_results_filesystem_is_named_as_the_cause() {
        let dir = Path::new("/results/s/cell");
        let msg = disk_full(dir, Some(4096)).unwrap();
        assert!(msg.starts_with("No space left on device"), "{msg}");
        assert!(msg.contains("/results/s/cell has 4096 bytes free"), "{msg}");
        assert!(disk_full(dir, Some(10 << 30)).is_none());
        assert!(disk_full(dir, None).is_none());
        // The probe reads the real filesystem: this one is not full.
        let here = tempfile::tempdir().unwrap();
        let free = free_bytes(here.path()).unwrap();
        assert!(free > 0);
    }
}
