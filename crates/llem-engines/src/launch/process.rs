//! A launched server process and its log: a local process in its own process group, or a
//! `docker run` attached to a container. Every way out of a run (success, error, panic
//! unwinding, Ctrl-C) drops the handle, and dropping it stops the server.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::docker::remove_container;
use crate::engine::EngineError;

/// A port the kernel says is free now (bound to port 0, then released).
pub fn free_port() -> Result<u16, EngineError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| EngineError::Config(format!("no free local port: {e}")))
}

/// The last `max_lines` lines of a log file, credentials redacted.
pub fn log_tail(path: &Path, max_lines: usize) -> String {
    let Ok(mut f) = llem_config::files::open_regular(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines
        .get(lines.len().saturating_sub(max_lines)..)
        .unwrap_or_default()
        .join("\n");
    llem_config::redact::text(&tail, &[]).into_owned()
}

/// Opens (appending) the log a child process writes to.
pub fn open_log(path: &Path) -> Result<File, EngineError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| EngineError::Config(format!("cannot open the log {}: {e}", path.display())))
}

/// How a launched server is stopped.
#[derive(Debug)]
enum Stopper {
    /// A process group led by the child.
    Process,
    /// A container, by name (the child is `docker run` attached to it).
    Container(String),
}

/// A running server llem started (or `None` for an external one).
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    stopper: Stopper,
    log_path: PathBuf,
    grace: Duration,
}

impl ServerProcess {
    /// Starts `argv` in a new process group with stdout and stderr appended to `log_path`.
    pub fn spawn_local(
        argv: &[String],
        env: &[(String, String)],
        log_path: &Path,
    ) -> Result<ServerProcess, EngineError> {
        Self::spawn(argv, env, log_path, Stopper::Process)
    }

    /// Starts a container with `docker run` (attached, so its log lands in `log_path`); it is
    /// stopped and removed by name on drop.
    pub fn spawn_container(
        argv: &[String],
        name: &str,
        log_path: &Path,
    ) -> Result<ServerProcess, EngineError> {
        Self::spawn(argv, &[], log_path, Stopper::Container(name.to_string()))
    }

    fn spawn(
        argv: &[String],
        env: &[(String, String)],
        log_path: &Path,
        stopper: Stopper,
    ) -> Result<ServerProcess, EngineError> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| EngineError::Config("empty server command".into()))?;
        let log = open_log(log_path)?;
        let err_log = log
            .try_clone()
            .map_err(|e| EngineError::Config(format!("server log: {e}")))?;
        let command = argv.join(" ");
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .process_group(0)
            .spawn()
            .map_err(|e| EngineError::Load {
                model: command.clone(),
                reason: format!("cannot start `{program}`: {e}"),
            })?;
        Ok(ServerProcess {
            child,
            stopper,
            log_path: log_path.to_path_buf(),
            grace: Duration::from_secs(15),
        })
    }

    /// The server's process id (the group leader).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(description)` when the server has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        }
    }

    /// The end of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path, lines)
    }

    /// Seconds since the log last grew.
    pub fn log_silence(&self) -> Option<Duration> {
        std::fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
    }

    /// Stops the server: SIGTERM to the group (or `docker stop`), SIGKILL after the grace
    /// period, then reaps it.
    pub fn stop(&mut self) {
        if self.exited().is_some() {
            self.kill_group(Signal::SIGKILL);
            self.remove_container();
            return;
        }
        match &self.stopper {
            Stopper::Process => self.kill_group(Signal::SIGTERM),
            Stopper::Container(name) => {
                let _ = Command::new("docker")
                    .args(["stop", "-t", &self.grace.as_secs().to_string(), name])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        wait_exit(&mut self.child, self.grace);
        // Whatever the server forked (engine workers) goes with it.
        self.kill_group(Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.remove_container();
    }

    fn kill_group(&self, sig: Signal) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), sig);
        }
    }

    fn remove_container(&self) {
        if let Stopper::Container(name) = &self.stopper {
            remove_container("docker", name);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits up to `within` for `child` to exit; its status, or `None` while it still runs.
pub fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Finds `program` on `PATH` (or as given, when it holds a `/`).
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_server_and_its_children_are_gone_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let argv: Vec<String> = ["sh", "-c", "echo started; sleep 300 & sleep 300"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut p = ServerProcess::spawn_local(&argv, &[], &log).unwrap();
        let pgid = p.pid();
        std::thread::sleep(Duration::from_millis(300));
        assert!(p.exited().is_none());
        p.grace = Duration::from_secs(2);
        drop(p);
        // No live process of the group is left (orphans reaped late may linger as zombies
        // when PID 1 does not reap, so the state is read, not just the PID).
        let live: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                let after = stat.rsplit_once(") ").map(|x| x.1).unwrap_or("");
                let f: Vec<&str> = after.split_whitespace().collect();
                f.first() != Some(&"Z") && f.get(2) == Some(&pgid.to_string().as_str())
            })
            .collect();
        assert!(live.is_empty(), "process group {pgid} survived: {live:?}");
        assert!(log_tail(&log, 5).contains("started"));
    }
}
