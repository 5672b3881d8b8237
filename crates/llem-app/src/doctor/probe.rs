//! Runs a program to learn something (a version, whether a daemon answers), never for longer
//! than a limit: a hung `docker info` must not hang the doctor.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::ProbeError;

/// What a probe printed.
pub struct Probed {
    /// Exit status 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `program args`, killed after `limit`; `Err` says why it did not run to the end.
pub fn run(program: &str, args: &[&str], limit: Duration) -> Result<Probed, ProbeError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ProbeError::Spawn {
            program: program.to_string(),
            source,
        })?;
    // Readers on threads: a chatty program must not block on a full pipe while we wait.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.take(1 << 20).read_to_string(&mut s);
        }
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.take(1 << 20).read_to_string(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ProbeError::TimedOut {
                    command: format!("{program} {}", args.join(" ")),
                    limit_s: limit.as_secs(),
                });
            }
            Err(source) => {
                return Err(ProbeError::Wait {
                    program: program.to_string(),
                    source,
                });
            }
        }
    };
    Ok(Probed {
        success: status.success(),
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    })
}

/// The first non-empty line of `s`, trimmed.
pub fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The last non-empty line of `s`, trimmed.
pub fn last_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
}
