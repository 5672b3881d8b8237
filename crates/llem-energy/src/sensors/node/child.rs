//! One call of an external tool (ipmitool, curl) with a deadline: a BMC that stops answering
//! must never hang the poller past its own timeout.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::sensor::SensorError;

/// What the tool said.
pub(super) struct Output {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `cmd` with `input` on its standard input, killed after `timeout`; `source` names the
/// node source in errors, `install` says how to get the tool.
pub(super) fn run(
    mut cmd: Command,
    input: &[u8],
    timeout: Duration,
    (source, install): (&'static str, &str),
) -> Result<Output, SensorError> {
    let error = |message: String| SensorError::Node {
        source_name: source,
        message,
    };
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| error(format!("cannot run {program} ({e}); {install}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // Small (a credential line at most): fits the pipe, and closing it ends the input.
        let _ = stdin.write_all(input);
    }
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(error(format!(
                    "{program} did not finish within {} s",
                    timeout.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(error(format!("waiting for {program}: {e}"))),
        }
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut stdout);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}
