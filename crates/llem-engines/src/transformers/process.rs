//! The worker process: the embedded script written to a temporary file and run with the
//! configured Python in its own process group; ops go to its stdin, events come back from
//! its stdout through a reader thread, its stderr goes to a log file in the cell directory.
//! Every way out (success, error, Ctrl-C, unwinding) drops the handle, which kills the group.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::protocol::{Event, Op};
use crate::engine::EngineError;
use crate::launch::{log_tail, open_log, remove_container, wait_exit};

/// The worker script, shipped inside the binary.
pub const SCRIPT: &str = include_str!("worker.py");

/// Lines of the worker's log quoted when it dies.
const TAIL_LINES: usize = 25;

/// What the reader thread passes on.
enum Line {
    Event(Box<Event>),
    /// A stdout line that is not an event (kept for the error message).
    Garbage(String),
    /// stdout closed: the worker exited or closed it.
    Closed,
}

/// A running worker.
pub struct WorkerProcess {
    child: Child,
    /// The docker CLI and the container's name, for a containerised worker.
    container: Option<(String, String)>,
    stdin: Option<ChildStdin>,
    events: Receiver<Line>,
    script: PathBuf,
    log_path: PathBuf,
    cancel: Option<Arc<AtomicBool>>,
    /// What was run, for messages.
    pub command: String,
}

/// How long to wait for one reply.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// At most this long in all.
    Total(Duration),
    /// At most this long without any event (a decoding worker reports at least every second).
    Silence(Duration),
}

/// Temporary script files are unique per process and call.
static SCRIPT_SEQ: AtomicU64 = AtomicU64::new(0);

fn write_script() -> Result<PathBuf, EngineError> {
    let n = SCRIPT_SEQ.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "llem-transformers-worker-{}-{n}.py",
        std::process::id()
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .or_else(|_| {
            // A stale file of a dead process with the same pid: replace it.
            let _ = std::fs::remove_file(&path);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
        })
        .map_err(|e| {
            EngineError::Config(format!(
                "cannot write the worker script {}: {e}",
                path.display()
            ))
        })?;
    f.write_all(SCRIPT.as_bytes())
        .map_err(|e| EngineError::Config(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// How the worker is started.
#[derive(Clone, Debug)]
pub enum Launch {
    /// `python` on this host, under torchrun with `ranks` processes when given.
    Local {
        /// The interpreter.
        python: String,
        /// torchrun's `--nproc-per-node` (`auto`: one per GPU).
        ranks: Option<String>,
    },
    /// `python3` in a container, attached through `docker run -i`; the script and the model
    /// directory are mounted at their host paths, so messages name real files.
    Docker {
        /// The docker CLI.
        docker: String,
        /// The image.
        image: String,
        /// Container name (removed with `docker rm -f` on every way out).
        name: String,
        /// Host directories mounted read-only at the same path.
        mounts: Vec<PathBuf>,
        /// Hugging Face cache mounted as the container's.
        hf_cache: Option<PathBuf>,
        /// `--gpus` value, when the host has NVIDIA GPUs.
        gpus: Option<String>,
        /// torchrun's `--nproc-per-node`.
        ranks: Option<String>,
    },
}

impl Launch {
    /// The command line for the worker script at `script`.
    pub fn argv(&self, script: &Path) -> Vec<String> {
        let torchrun = |ranks: &Option<String>| -> Vec<String> {
            match ranks {
                Some(n) => [
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc-per-node",
                ]
                .iter()
                .map(|s| (*s).to_string())
                .chain([n.clone()])
                .collect(),
                None => Vec::new(),
            }
        };
        let script = script.display().to_string();
        match self {
            Launch::Local { python, ranks } => {
                let mut v = vec![python.clone(), "-u".into()];
                v.extend(torchrun(ranks));
                v.push(script);
                v
            }
            Launch::Docker {
                docker,
                image,
                name,
                mounts,
                hf_cache,
                gpus,
                ranks,
            } => {
                let mut v = crate::launch::docker_run(
                    docker,
                    name,
                    llem_config::Engine::Transformers,
                    true,
                    gpus.clone(),
                    hf_cache.as_deref(),
                );
                v.extend(["-v".into(), format!("{script}:{script}:ro")]);
                for m in mounts {
                    let m = m.display();
                    v.extend(["-v".into(), format!("{m}:{m}:ro")]);
                }
                for k in ["PYTHONUNBUFFERED=1", "TQDM_DISABLE=1"] {
                    v.extend(["-e".into(), k.into()]);
                }
                v.push(image.clone());
                v.extend(["python3".into(), "-u".into()]);
                v.extend(torchrun(ranks));
                v.push(script);
                v
            }
        }
    }

    fn container(&self) -> Option<(String, String)> {
        match self {
            Launch::Docker { docker, name, .. } => Some((docker.clone(), name.clone())),
            Launch::Local { .. } => None,
        }
    }
}

impl WorkerProcess {
    /// Starts the worker as `launch` says, stderr appended to `log_path`, with `env` added.
    pub fn spawn(
        launch: &Launch,
        log_path: &Path,
        env: &[(String, String)],
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<WorkerProcess, EngineError> {
        let script = write_script()?;
        let log = open_log(log_path)?;
        let argv = launch.argv(&script);
        let Some((program, args)) = argv.split_first() else {
            return Err(EngineError::Config("empty worker command".into()));
        };
        let command = argv.join(" ");
        let spawned = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            // Progress bars and Python warnings are for the log, not for a terminal.
            .env("PYTHONUNBUFFERED", "1")
            .env("TQDM_DISABLE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&script);
                return Err(EngineError::Load {
                    model: String::new(),
                    reason: format!(
                        "cannot start the transformers worker with `{program}`: {e} (set \
                         `python:` in the user config or LLEM_PYTHON to a Python 3 that has \
                         torch and transformers)"
                    ),
                });
            }
        };
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (tx, rx) = channel();
        if let Some(out) = stdout {
            let spawn = std::thread::Builder::new()
                .name("llem-worker-events".into())
                .spawn(move || {
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if line.trim().is_empty() {
                            continue;
                        }
                        let msg = match serde_json::from_str::<Event>(&line) {
                            Ok(e) => Line::Event(Box::new(e)),
                            Err(_) => Line::Garbage(line),
                        };
                        if tx.send(msg).is_err() {
                            return;
                        }
                    }
                    let _ = tx.send(Line::Closed);
                });
            if let Err(e) = spawn {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_file(&script);
                return Err(EngineError::Config(format!(
                    "cannot start the worker reader: {e}"
                )));
            }
        }
        Ok(WorkerProcess {
            child,
            container: launch.container(),
            stdin,
            events: rx,
            script,
            log_path: log_path.to_path_buf(),
            cancel,
            command,
        })
    }

    /// The worker's process id (its group leader).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one op.
    pub fn send(&mut self, op: &Op) -> Result<(), EngineError> {
        let mut line = serde_json::to_vec(op)
            .map_err(|e| EngineError::Inference(format!("cannot encode a worker op: {e}")))?;
        line.push(b'\n');
        let written = self
            .stdin
            .as_mut()
            .map(|s| s.write_all(&line).and_then(|()| s.flush()));
        match written {
            Some(Ok(())) => Ok(()),
            _ => Err(self.died("while llem was sending it work")),
        }
    }

    /// The next event. A worker that exits, falls silent or is cancelled gives an error with
    /// its log's tail; an `error` event is returned as an event for the caller to word.
    pub fn recv(&mut self, wait: Wait) -> Result<Event, EngineError> {
        let start = Instant::now();
        let limit = match wait {
            Wait::Total(d) | Wait::Silence(d) => d,
        };
        loop {
            if self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                self.kill();
                return Err(EngineError::Cancelled);
            }
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() {
                let what = match wait {
                    Wait::Total(d) => format!("did not answer within {} s", d.as_secs()),
                    Wait::Silence(d) => {
                        format!("sent nothing for {} s (hung)", d.as_secs())
                    }
                };
                self.kill();
                return Err(EngineError::Inference(format!(
                    "the transformers worker {what}; it was killed. Its log ({}) ends:\n{}",
                    self.log_path.display(),
                    log_tail(&self.log_path, TAIL_LINES)
                )));
            }
            match self
                .events
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(Line::Event(e)) => return Ok(*e),
                Ok(Line::Garbage(l)) => {
                    tracing::warn!(line = %l, "worker wrote a line that is not an event");
                }
                Ok(Line::Closed) | Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.died("while llem waited for it"));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// The next reply to an op: like [`WorkerProcess::recv`], passing over heartbeats
    /// (`progress`, which a slow probe generation at load sends too) and unknown events.
    pub fn reply(&mut self, wait: Wait) -> Result<Event, EngineError> {
        loop {
            match self.recv(wait)? {
                Event::Progress { .. } | Event::Unknown => {}
                e => return Ok(e),
            }
        }
    }

    /// The error for a worker that is gone: how it ended and its log's tail.
    fn died(&mut self, when: &str) -> EngineError {
        // It closed stdout; give it a moment to finish exiting so the status is known.
        let how = match wait_exit(&mut self.child, Duration::from_secs(5)) {
            Some(s) => match s.signal() {
                Some(9) => "was killed by SIGKILL (the kernel's OOM killer does this when \
                            memory runs out)"
                    .to_string(),
                Some(sig) => format!("was killed by signal {sig}"),
                None => format!("exited with status {}", s.code().unwrap_or(-1)),
            },
            None => {
                self.kill();
                "closed its output".to_string()
            }
        };
        EngineError::Inference(format!(
            "the transformers worker {how} {when}. Its log ({}) ends:\n{}",
            self.log_path.display(),
            log_tail(&self.log_path, TAIL_LINES)
        ))
    }

    /// The container's name, for a containerised worker.
    pub fn container(&self) -> Option<&str> {
        self.container.as_ref().map(|(_, n)| n.as_str())
    }

    /// Kills the whole group and reaps the worker; a container goes too (killing `docker
    /// run` does not stop it).
    pub fn kill(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some((docker, name)) = self.container.take() {
            remove_container(&docker, &name);
        }
    }

    /// Asks the worker to exit, then makes sure it did.
    pub fn shutdown(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.send(&Op::Shutdown);
            self.stdin = None;
            wait_exit(&mut self.child, Duration::from_secs(10));
        }
        // Anything it forked (compile workers) goes with it.
        self.kill();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.shutdown();
        let _ = std::fs::remove_file(&self.script);
    }
}
