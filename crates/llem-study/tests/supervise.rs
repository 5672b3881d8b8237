//! The cell supervisor against real child processes (shell scripts standing in for a cell,
//! since a real engine cannot be made to segfault or ignore SIGTERM on demand): crash by
//! signal, hang past the timeout with SIGTERM ignored, graceful stop, a grandchild left
//! behind, progress lines and a completed result.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use std::path::Path;
use std::time::{Duration, Instant};

use llem_study::supervise::{CellEnd, CellLimits, StopRequest, group_members, run_cell};
use llem_study::{CellMessage, Launcher, StopCause};

fn sh(script: &str) -> Launcher {
    Launcher {
        program: "sh".into(),
        args: vec!["-c".into(), script.into(), "cell".into()],
        env: Vec::new(),
    }
}

struct Ran {
    end: CellEnd,
    pid: u32,
    messages: Vec<CellMessage>,
    took: Duration,
}

fn run(
    dir: &Path,
    script: &str,
    timeout_s: f64,
    stop_after: Option<(Duration, StopRequest)>,
) -> Ran {
    let spec = dir.join("cell_spec.json");
    std::fs::write(&spec, "{}").unwrap();
    let mut pid = 0;
    let mut messages = Vec::new();
    let start = Instant::now();
    let mut stop = || match stop_after {
        Some((after, req)) if start.elapsed() >= after => req,
        _ => StopRequest::None,
    };
    let r = run_cell(
        &sh(script),
        &spec,
        &dir.join("cell.log"),
        CellLimits {
            timeout: Duration::from_secs_f64(timeout_s),
            kill_grace: Duration::from_millis(500),
        },
        &mut |p| pid = p,
        &mut |m| messages.push(m.clone()),
        &mut stop,
    )
    .unwrap();
    Ran {
        end: r.end,
        pid,
        messages,
        took: start.elapsed(),
    }
}

#[test]
fn a_crash_is_a_failure_that_names_the_signal_and_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "echo '{\"type\":\"phase\",\"phase\":\"load\",\"total\":null,\"detail\":\"x\"}'; \
         echo 'GGML_ASSERT failed' >&2; kill -SEGV $$",
        30.0,
        None,
    );
    match &r.end {
        CellEnd::Failed {
            error_type,
            message,
        } => {
            assert_eq!(error_type, "Crashed");
            assert!(message.contains("SIGSEGV"), "{message}");
            assert!(message.contains("GGML_ASSERT failed"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(&r.messages[..], [CellMessage::Phase { phase, .. }] if phase == "load"));
    assert!(group_members(r.pid).is_empty());
}

#[test]
fn a_hang_past_the_timeout_is_killed_with_its_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    // SIGTERM ignored by the shell and (inherited) by its sleeping child: only SIGKILL works.
    let r = run(
        dir.path(),
        "trap '' TERM; sleep 60 & sleep 60; wait",
        0.5,
        None,
    );
    match &r.end {
        CellEnd::Failed {
            error_type,
            message,
        } => {
            assert_eq!(error_type, "Timeout");
            assert!(message.contains("SIGKILL"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    // Timeout 0.5 s + grace 0.5 s, not the 60 s of the sleeps.
    assert!(r.took < Duration::from_secs(10), "{:?}", r.took);
    assert!(
        group_members(r.pid).is_empty(),
        "{:?}",
        group_members(r.pid)
    );
}

#[test]
fn a_cell_that_honours_sigterm_stops_without_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "trap 'exit 130' TERM; while true; do sleep 0.05; done",
        30.0,
        Some((
            Duration::from_millis(300),
            StopRequest::Terminate(StopCause::User),
        )),
    );
    match &r.end {
        CellEnd::Stopped { cause, message } => {
            assert_eq!(*cause, StopCause::User);
            assert!(message.contains("it stopped"), "{message}");
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_second_ctrl_c_kills_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "trap '' TERM; sleep 60",
        30.0,
        Some((
            Duration::from_millis(200),
            StopRequest::Kill(StopCause::User),
        )),
    );
    assert!(
        matches!(&r.end, CellEnd::Stopped { cause: StopCause::User, message } if message.contains("SIGKILL")),
        "{:?}",
        r.end
    );
    assert!(r.took < Duration::from_secs(5));
}

#[test]
fn grandchildren_do_not_outlive_the_cell() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), "sleep 60 & exit 3", 30.0, None);
    assert!(
        matches!(&r.end, CellEnd::Failed { error_type, message } if error_type == "ExitCode" && message.contains("code 3")),
        "{:?}",
        r.end
    );
    assert!(
        group_members(r.pid).is_empty(),
        "{:?}",
        group_members(r.pid)
    );
}

#[test]
fn progress_lines_arrive_and_a_reported_result_completes() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "echo 'llama.cpp chatter on stdout'; \
         echo '{\"type\":\"advance\",\"done\":1,\"tokens\":8,\"elapsed_s\":0.5,\"power_w\":12.5}'; \
         echo '{}' > \"$(dirname \"$1\")/result.json\"; \
         echo '{\"type\":\"completed\",\"result_file\":\"result.json\"}'",
        30.0,
        None,
    );
    assert_eq!(
        r.end,
        CellEnd::Completed {
            result_file: dir.path().join("result.json")
        }
    );
    assert_eq!(r.messages.len(), 2, "{:?}", r.messages);
    assert!(matches!(
        r.messages[0],
        CellMessage::Advance { tokens: 8, power_w: Some(p), .. } if p == 12.5
    ));
}

#[test]
fn a_reported_failure_keeps_its_type_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "echo '{\"type\":\"failed\",\"error_type\":\"EngineError\",\"message\":\"bad gguf\"}'; exit 1",
        30.0,
        None,
    );
    assert_eq!(
        r.end,
        CellEnd::Failed {
            error_type: "EngineError".into(),
            message: "bad gguf".into()
        }
    );
}
