//! A study run again and again (`llem schedule`, a file's `schedule:` block): at intervals or
//! times of day, each run a new study, until stopped, a number of runs, or the schedule's
//! total duration.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jiff::{Timestamp, Zoned};
use llem_config::schedule::ScheduleSpec;
use llem_study::schedule::{Next, next_start};

/// What the schedule is doing, for the front end to show.
#[derive(Debug)]
pub enum ScheduleEvent {
    /// Waiting for the next run, which starts at this time; `done` runs so far.
    Waiting {
        /// When the next run starts.
        next: Zoned,
        /// Runs so far.
        done: u32,
    },
}

/// How one run of the study ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// It ran to its end, completed.
    Completed,
    /// It failed, or the study did not complete.
    Failed,
    /// The user stopped it.
    Interrupted,
}

/// Why the schedule ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleEnd {
    /// Its total duration is spent.
    Over {
        /// Runs made.
        done: u32,
        /// Whether any run failed.
        any_failed: bool,
    },
    /// The number of runs asked for was made.
    RunsDone {
        /// Whether any run failed.
        any_failed: bool,
    },
    /// Stopped by the user (between runs or during one).
    Interrupted {
        /// Runs made.
        done: u32,
    },
    /// The next start time cannot be computed (a date out of range).
    NoNextStart,
}

/// How often a wait for the next start looks for Ctrl-C.
const WAIT_STEP: Duration = Duration::from_millis(200);

/// Runs `run_once` whenever `spec` says, until `interrupts` counts up, `max_runs` runs are
/// made, or the schedule's total duration is spent. `run_once` plans afresh each time (the
/// file may have been edited between runs) and runs the study.
pub fn run_schedule(
    spec: &ScheduleSpec,
    max_runs: Option<u32>,
    interrupts: &AtomicUsize,
    on_event: &mut dyn FnMut(ScheduleEvent),
    run_once: &mut dyn FnMut() -> RunEnd,
) -> ScheduleEnd {
    let began = Timestamp::now();
    let mut last_start: Option<Timestamp> = None;
    let mut done = 0u32;
    let mut any_failed = false;
    loop {
        let now = Zoned::now();
        let next = match next_start(spec, last_start, began, &now) {
            Some(Next::At(z)) => z,
            Some(Next::Over) => return ScheduleEnd::Over { done, any_failed },
            None => return ScheduleEnd::NoNextStart,
        };
        if next.timestamp() > now.timestamp() {
            on_event(ScheduleEvent::Waiting {
                next: next.clone(),
                done,
            });
        }
        while Timestamp::now() < next.timestamp() {
            if interrupts.load(Ordering::SeqCst) > 0 {
                return ScheduleEnd::Interrupted { done };
            }
            std::thread::sleep(WAIT_STEP);
        }
        last_start = Some(Timestamp::now());
        let end = run_once();
        done += 1;
        if end == RunEnd::Interrupted || interrupts.load(Ordering::SeqCst) > 0 {
            return ScheduleEnd::Interrupted { done };
        }
        any_failed |= end == RunEnd::Failed;
        if max_runs.is_some_and(|n| done >= n) {
            return ScheduleEnd::RunsDone { any_failed };
        }
    }
}

/// What `llem schedule`'s flags say, each field replacing the file's.
#[derive(Clone, Debug, Default)]
pub struct ScheduleFlags {
    /// `--every`.
    pub every: Option<Duration>,
    /// `--at`, each a local time of day.
    pub at: Vec<llem_config::schedule::TimeOfDay>,
    /// `--days`, as day numbers (Monday 0).
    pub days: Vec<u8>,
    /// `--duration`: the schedule's total duration.
    pub duration: Option<Duration>,
}

/// The schedule: the file's block, with each field the flags give replacing it (`--every`
/// and `--at` together replace both of the block's `interval` and `at`); `None` when neither
/// says when to run.
pub fn merged(flags: &ScheduleFlags, block: Option<&ScheduleSpec>) -> Option<ScheduleSpec> {
    let mut s = block.cloned().unwrap_or_default();
    if flags.every.is_some() || !flags.at.is_empty() {
        s.interval = flags.every;
        s.at.clone_from(&flags.at);
        if block.is_none() {
            // Flags alone run until stopped; the file's block keeps its total duration.
            s.total_duration = None;
        }
    }
    if !flags.days.is_empty() {
        s.days.clone_from(&flags.days);
        s.days.sort_unstable();
        s.days.dedup();
    }
    if flags.duration.is_some() {
        s.total_duration = flags.duration;
    }
    (s.interval.is_some() || !s.at.is_empty()).then_some(s)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn every_second() -> ScheduleSpec {
        ScheduleSpec {
            interval: Some(Duration::from_secs(1)),
            ..ScheduleSpec::default()
        }
    }

    #[test]
    fn it_runs_the_number_asked_and_remembers_a_failure() {
        let interrupts = AtomicUsize::new(0);
        let mut ends = vec![RunEnd::Completed, RunEnd::Failed].into_iter();
        let mut waits = 0;
        let end = run_schedule(
            &every_second(),
            Some(2),
            &interrupts,
            &mut |ScheduleEvent::Waiting { done, .. }| {
                waits += 1;
                assert_eq!(done, 1);
            },
            &mut || ends.next().unwrap(),
        );
        assert_eq!(end, ScheduleEnd::RunsDone { any_failed: true });
        assert_eq!(waits, 1, "the first run starts at once, the second waits");
    }

    #[test]
    fn an_interrupted_run_ends_the_schedule() {
        let interrupts = AtomicUsize::new(0);
        let end = run_schedule(
            &every_second(),
            None,
            &interrupts,
            &mut |_| panic!("no wait after an interrupted run"),
            &mut || RunEnd::Interrupted,
        );
        assert_eq!(end, ScheduleEnd::Interrupted { done: 1 });
    }

    #[test]
    fn flags_replace_the_files_fields_one_by_one() {
        let hour = Duration::from_secs(3600);
        let block = ScheduleSpec {
            interval: Some(6 * hour),
            days: vec![5, 6],
            total_duration: Some(24 * hour),
            ..ScheduleSpec::default()
        };
        // Days only: the file's interval and total stay.
        let days = ScheduleFlags {
            days: vec![2, 0, 2],
            ..ScheduleFlags::default()
        };
        let s = merged(&days, Some(&block)).unwrap();
        assert_eq!(
            (s.interval, s.days.as_slice(), s.total_duration),
            (Some(6 * hour), &[0u8, 2][..], Some(24 * hour))
        );
        // --every replaces the interval, and the file keeps its total duration.
        let every = ScheduleFlags {
            every: Some(hour),
            ..ScheduleFlags::default()
        };
        let s = merged(&every, Some(&block)).unwrap();
        assert_eq!(
            (s.interval, s.total_duration),
            (Some(hour), Some(24 * hour))
        );
        // Flags alone run until stopped, unless --duration says otherwise.
        assert_eq!(merged(&every, None).unwrap().total_duration, None);
        let bounded = ScheduleFlags {
            duration: Some(2 * hour),
            ..every
        };
        assert_eq!(
            merged(&bounded, None).unwrap().total_duration,
            Some(2 * hour)
        );
        // Nothing says when: no schedule.
        assert!(merged(&ScheduleFlags::default(), None).is_none());
        assert!(merged(&days, None).is_none());
    }
}
