//! The circuit breaker across an array, as the seed defines it for a local study: closed; open
//! after `max_consecutive_failures` failed cells in a row; after the cooldown one half-open
//! probe cell; closed again when it completes, the study stopped when it fails (fail-fast:
//! stopped at once). Its state lives on shared storage, each file written by one task: the
//! cells' own status files (the count), `probe.json` (the probe, claimed by a hard link, so by
//! one task) and `breaker.json` (the trip, likewise). A task asks [`gate`] before its cell.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use llem_results::time::{iso8601_utc, unix_now_s};

use super::commands;
use super::record::{
    self, BREAKER, BreakerTrip, PROBE, ProbeClaim, SubmissionRecord, TASK_STATUS, TaskState,
    TaskStatus,
};
use super::task::rest;
use crate::StudyError;
use crate::breaker::{CircuitBreaker, Verdict};
use crate::protocol::CellMessage;

/// How often a task waiting on another's probe asks `squeue` whether that task still lives.
const PROBE_LIVENESS_CHECK: Duration = Duration::from_secs(30);
/// How long a claim may outlive its probe's recorded end (the task died between the two
/// writes) before a waiting task removes it.
const STALE_CLAIM: Duration = Duration::from_secs(30);

/// What a task does with its cell.
pub(super) enum Gate<'a> {
    /// Runs it; as the half-open probe when `Some`.
    Run(Option<Probe<'a>>),
    /// Skips it: the breaker stopped the study (why).
    Skip(String),
    /// A signal came while it waited.
    Interrupted,
}

/// What one task needs to know of itself.
pub(super) struct Me<'a> {
    /// Its cell directory, relative to the study directory.
    pub cell: &'a str,
    /// `ARRAYJOB_TASK`.
    pub slurm_job: &'a str,
}

/// Decides whether the task's cell runs, waiting while another task's probe is out.
pub(super) fn gate<'a>(
    dir: &'a Path,
    sub: &'a SubmissionRecord,
    cells: &[String],
    me: &Me<'_>,
    interrupts: &AtomicUsize,
    on_message: &mut dyn FnMut(&CellMessage),
) -> Result<Gate<'a>, StudyError> {
    let max = sub.max_consecutive_failures;
    let claim_path = record::slurm_dir(dir).join(PROBE);
    let mut waiting = Waiting::default();
    loop {
        if let Some(b) = record::read::<BreakerTrip>(&record::slurm_dir(dir).join(BREAKER))? {
            return Ok(Gate::Skip(format!(
                "the circuit breaker stopped the study: {}",
                b.message
            )));
        }
        if let Some(claim) = record::read::<ProbeClaim>(&claim_path)? {
            match waiting.probe(dir, sub, &claim)? {
                ProbeNow::Out => {
                    waiting.note_once(on_message, &claim);
                    if !rest(1.0, interrupts) {
                        return Ok(Gate::Interrupted);
                    }
                    continue;
                }
                ProbeNow::Failed(why) => {
                    trip(dir, sub, &format!("{} ({})", claim.message, why))?;
                    continue;
                }
                ProbeNow::Stale => {
                    let _ = std::fs::remove_file(&claim_path);
                    continue;
                }
                // Its end is recorded: it counts below like any cell's.
                ProbeNow::Ended => {}
            }
        }
        // The local runner's breaker decides, fed the array's failures in a row: one policy
        // (0 = off, 1 = fail fast without a probe) for both executors.
        let failures = trailing_failures(dir, sub.number, cells);
        let mut policy = CircuitBreaker::new(max);
        let verdict = (0..failures).fold(Verdict::Continue, |_, _| policy.record_failure());
        if verdict == Verdict::Continue {
            return Ok(Gate::Run(None));
        }
        let message = format!(
            "{failures} {} failed in a row across the array (max_consecutive_failures {max})",
            if failures == 1 { "cell" } else { "cells" }
        );
        if verdict == Verdict::Abort {
            let message = format!("{message}; the tasks not started are cancelled");
            trip(dir, sub, &message)?;
            return Ok(Gate::Skip(format!(
                "the circuit breaker stopped the study: {message}"
            )));
        }
        let claim = ProbeClaim {
            submission: sub.number,
            at: iso8601_utc(unix_now_s()),
            message: message.clone(),
            cell: me.cell.to_string(),
            slurm_job: me.slurm_job.to_string(),
        };
        if !create_once(&claim_path, &claim)? {
            // Another task became the probe first (or its claim is on its way out): wait.
            if !rest(1.0, interrupts) {
                return Ok(Gate::Interrupted);
            }
            continue;
        }
        let probe = Probe {
            dir,
            sub,
            path: claim_path,
            message: message.clone(),
            settled: false,
        };
        on_message(&CellMessage::Note {
            message: format!(
                "{message}: the circuit breaker is open; this cell is its half-open probe, after \
                 a {:.0} s cooldown",
                sub.breaker_cooldown_s
            ),
        });
        if !rest(sub.breaker_cooldown_s, interrupts) {
            // Dropping the probe releases the claim: another task probes instead.
            return Ok(Gate::Interrupted);
        }
        return Ok(Gate::Run(Some(probe)));
    }
}

/// The claim of a task whose cell is the half-open probe. [`Probe::settle`] closes the
/// breaker or trips it by how the cell ended; dropped unsettled (the task stopped before its
/// cell ended), it only releases the claim, so that another task probes.
pub(super) struct Probe<'a> {
    dir: &'a Path,
    sub: &'a SubmissionRecord,
    path: PathBuf,
    message: String,
    settled: bool,
}

impl Probe<'_> {
    /// The probe's cell ended as `end` (already in its status file).
    pub(super) fn settle(mut self, end: TaskState) -> Result<(), StudyError> {
        self.settled = true;
        if end == TaskState::Failed {
            trip(
                self.dir,
                self.sub,
                &format!(
                    "{}; after the cooldown the half-open probe failed too",
                    self.message
                ),
            )?;
        }
        let _ = std::fs::remove_file(&self.path);
        Ok(())
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Where another task's probe stands.
enum ProbeNow {
    /// Cooling down or running.
    Out,
    /// Its cell failed: the breaker trips.
    Failed(String),
    /// Its end is recorded (the claim goes next).
    Ended,
    /// Its claim outlived it: a task of another submission, one gone without recording its
    /// end, or one whose end was recorded a while ago.
    Stale,
}

/// A waiting task's view of the probe: when it last asked `squeue`, and since when the
/// probe's end has been recorded with the claim still there.
#[derive(Default)]
struct Waiting {
    last_queue_check: Option<Instant>,
    ended_since: Option<Instant>,
    noted: Option<String>,
}

impl Waiting {
    fn probe(
        &mut self,
        dir: &Path,
        sub: &SubmissionRecord,
        claim: &ProbeClaim,
    ) -> Result<ProbeNow, StudyError> {
        if claim.submission != sub.number {
            return Ok(ProbeNow::Stale);
        }
        let status: Option<TaskStatus> = record::read(&dir.join(&claim.cell).join(TASK_STATUS))?;
        let state = status
            .filter(|s| s.submission == sub.number)
            .map(|s| (s.state, s.error_type));
        match state {
            Some((TaskState::Failed, error)) => {
                return Ok(ProbeNow::Failed(format!(
                    "after the cooldown the half-open probe, {}, failed too: {}",
                    claim.slurm_job,
                    error.unwrap_or_default()
                )));
            }
            Some((TaskState::Running, _)) | None => {
                self.ended_since = None;
                let due = self
                    .last_queue_check
                    .is_none_or(|t| t.elapsed() >= PROBE_LIVENESS_CHECK);
                if due {
                    self.last_queue_check = Some(Instant::now());
                    // An `squeue` that fails says nothing: keep waiting.
                    let ids = [array_of(&claim.slurm_job).to_string()];
                    if commands::queued(&ids).is_ok_and(|q| !q.contains_key(&claim.slurm_job)) {
                        return Ok(ProbeNow::Stale);
                    }
                }
                return Ok(ProbeNow::Out);
            }
            Some(_) => {}
        }
        let since = *self.ended_since.get_or_insert_with(Instant::now);
        Ok(if since.elapsed() >= STALE_CLAIM {
            ProbeNow::Stale
        } else {
            ProbeNow::Ended
        })
    }

    /// Says once per probe that this task waits for it.
    fn note_once(&mut self, on_message: &mut dyn FnMut(&CellMessage), claim: &ProbeClaim) {
        if self.noted.as_deref() == Some(claim.slurm_job.as_str()) {
            return;
        }
        self.noted = Some(claim.slurm_job.clone());
        on_message(&CellMessage::Note {
            message: format!(
                "{}: the circuit breaker is open; waiting for its half-open probe ({})",
                claim.message, claim.slurm_job
            ),
        });
    }
}

/// `ARRAYJOB` of `ARRAYJOB_TASK`.
fn array_of(slurm_job: &str) -> &str {
    slurm_job.split_once('_').map_or(slurm_job, |(a, _)| a)
}

/// Failures in a row at the end of the array's finished cells, by the time they ended.
fn trailing_failures(dir: &Path, sub: u32, cells: &[String]) -> u32 {
    let mut ends: Vec<(String, bool)> = cells
        .iter()
        .filter_map(|c| {
            let s: TaskStatus = record::read(&dir.join(c).join(TASK_STATUS)).ok()??;
            if s.submission != sub {
                return None;
            }
            let failed = match s.state {
                TaskState::Completed => false,
                TaskState::Failed => true,
                // A signal is Slurm's doing (scancel, time limit), not the cell failing.
                TaskState::Running | TaskState::Interrupted | TaskState::Skipped => return None,
            };
            Some((s.finished_at?, failed))
        })
        .collect();
    ends.sort();
    ends.iter().rev().take_while(|(_, f)| *f).count() as u32
}

/// Writes `record` to `path` whole unless it exists (a hard link either creates it or finds
/// it there); whether this call created it.
fn create_once<T: serde::Serialize>(path: &Path, record: &T) -> Result<bool, StudyError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!("{name}.{}.tmp", std::process::id()));
    llem_results::write_json_atomic(&tmp, record)?;
    let created = std::fs::hard_link(&tmp, path).is_ok();
    let _ = std::fs::remove_file(&tmp);
    Ok(created)
}

/// Writes the breaker's record unless another task did first; then cancels the tasks not
/// started yet.
fn trip(dir: &Path, sub: &SubmissionRecord, message: &str) -> Result<(), StudyError> {
    let trip = BreakerTrip {
        at: iso8601_utc(unix_now_s()),
        message: message.to_string(),
    };
    if create_once(&record::slurm_dir(dir).join(BREAKER), &trip)? {
        let ids: Vec<String> = sub.arrays.iter().map(|a| a.job_id.clone()).collect();
        commands::cancel_pending(&ids)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::slurm::record::NodeIdentity;

    /// A submission with no arrays (so nothing to `scancel`) and a breaker of `max`.
    fn sub(max: u32) -> SubmissionRecord {
        SubmissionRecord {
            number: 1,
            submitted_at: String::new(),
            deadline_unix_s: None,
            options: Default::default(),
            locks: Default::default(),
            no_gaps: true,
            sampling_interval_ms: 100.0,
            metrics_push: None,
            kill_grace_s: 1.0,
            experiment_timeout_s: 60.0,
            gaps_s: (0.0, 0.0),
            max_consecutive_failures: max,
            breaker_cooldown_s: 0.0,
            arrays: Vec::new(),
            compile_job: None,
            control: None,
            search: false,
        }
    }

    /// A study directory with cells `c0..cN`, the first ones ended as `ends` say.
    fn study(ends: &[TaskState], n: usize) -> (tempfile::TempDir, Vec<String>) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(record::slurm_dir(d.path())).unwrap();
        let cells: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
        for c in &cells {
            std::fs::create_dir_all(d.path().join(c)).unwrap();
        }
        for (i, e) in ends.iter().enumerate() {
            end(d.path(), &cells[i], *e, i);
        }
        (d, cells)
    }

    fn end(dir: &Path, cell: &str, state: TaskState, second: usize) {
        let mut s = TaskStatus::started(1, format!("7_{cell}"), "70", &NodeIdentity::default());
        s.state = state;
        s.finished_at = (state != TaskState::Running).then(|| format!("t{second:03}"));
        s.error_type = (state == TaskState::Failed).then(|| "EngineError".to_string());
        llem_results::write_json_atomic(&dir.join(cell).join(TASK_STATUS), &s).unwrap();
    }

    fn gate_of<'a>(
        dir: &'a Path,
        sub: &'a SubmissionRecord,
        cells: &[String],
        me: &str,
    ) -> Gate<'a> {
        let me = Me {
            cell: me,
            slurm_job: "7_1",
        };
        gate(dir, sub, cells, &me, &AtomicUsize::new(0), &mut |_| {}).unwrap()
    }

    #[test]
    fn after_n_failures_the_next_cell_is_the_probe_and_its_success_closes_it() {
        let s = sub(2);
        let (d, cells) = study(&[TaskState::Failed, TaskState::Failed], 4);
        let claim = record::slurm_dir(d.path()).join(PROBE);
        let Gate::Run(Some(probe)) = gate_of(d.path(), &s, &cells, "c2") else {
            panic!("not the probe")
        };
        let c: ProbeClaim = record::read(&claim).unwrap().unwrap();
        assert_eq!((c.cell.as_str(), c.submission), ("c2", 1));
        end(d.path(), "c2", TaskState::Completed, 3);
        probe.settle(TaskState::Completed).unwrap();
        assert!(!claim.exists());
        assert!(!record::slurm_dir(d.path()).join(BREAKER).exists());
        // Closed: the next cell runs as usual.
        assert!(matches!(
            gate_of(d.path(), &s, &cells, "c3"),
            Gate::Run(None)
        ));
    }

    #[test]
    fn a_failed_probe_stops_the_study_for_the_tasks_that_wait_on_it() {
        let s = sub(2);
        let (d, cells) = study(&[TaskState::Failed, TaskState::Failed], 4);
        let Gate::Run(Some(probe)) = gate_of(d.path(), &s, &cells, "c2") else {
            panic!("not the probe")
        };
        // The probe's cell fails; before its task settles, another task looks.
        end(d.path(), "c2", TaskState::Failed, 3);
        let Gate::Skip(why) = gate_of(d.path(), &s, &cells, "c3") else {
            panic!("not skipped")
        };
        assert!(
            why.contains("half-open probe") && why.contains("EngineError"),
            "{why}"
        );
        probe.settle(TaskState::Failed).unwrap();
        let trip: BreakerTrip = record::read(&record::slurm_dir(d.path()).join(BREAKER))
            .unwrap()
            .unwrap();
        assert!(trip.message.contains("2 cells failed in a row"), "{trip:?}");
        assert!(!record::slurm_dir(d.path()).join(PROBE).exists());
    }

    #[test]
    fn a_probe_that_stops_before_its_cell_ends_hands_the_probe_on() {
        let s = sub(2);
        let (d, cells) = study(&[TaskState::Failed, TaskState::Failed], 4);
        let Gate::Run(Some(probe)) = gate_of(d.path(), &s, &cells, "c2") else {
            panic!("not the probe")
        };
        drop(probe);
        assert!(!record::slurm_dir(d.path()).join(PROBE).exists());
        assert!(!record::slurm_dir(d.path()).join(BREAKER).exists());
        assert!(matches!(
            gate_of(d.path(), &s, &cells, "c3"),
            Gate::Run(Some(_))
        ));
    }

    #[test]
    fn a_claim_of_an_earlier_submission_is_stale() {
        let s = sub(2);
        let (d, cells) = study(&[TaskState::Completed], 3);
        let old = ProbeClaim {
            submission: 0,
            at: String::new(),
            message: String::new(),
            cell: "c1".into(),
            slurm_job: "3_1".into(),
        };
        let claim = record::slurm_dir(d.path()).join(PROBE);
        llem_results::write_json_atomic(&claim, &old).unwrap();
        assert!(matches!(
            gate_of(d.path(), &s, &cells, "c1"),
            Gate::Run(None)
        ));
        assert!(!claim.exists());
    }

    #[test]
    fn fail_fast_trips_at_once_and_signals_do_not_count() {
        let (d, cells) = study(&[TaskState::Failed, TaskState::Interrupted], 3);
        assert!(matches!(
            gate_of(d.path(), &sub(2), &cells, "c2"),
            Gate::Run(None)
        ));
        let Gate::Skip(why) = gate_of(d.path(), &sub(1), &cells, "c2") else {
            panic!("not skipped")
        };
        assert!(why.contains("1 cell failed in a row"), "{why}");
        assert!(record::slurm_dir(d.path()).join(BREAKER).exists());
        assert!(!record::slurm_dir(d.path()).join(PROBE).exists());
    }
}
