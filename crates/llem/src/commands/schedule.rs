//! `llem schedule` (and `llem run` on a file with an enabled `schedule:` block): run a study
//! at intervals or times of day, each run a new study directory, in the foreground until
//! Ctrl-C, `--runs N` or the schedule's total duration.

use llem_app::ResumeFrom;
use llem_app::schedule::{ScheduleFlags, merged};
use llem_config::schedule::ScheduleSpec;
use llem_config::{Env, StudyPlan};

use crate::cli::{RunArgs, ScheduleArgs};
use crate::exit;

/// Runs `llem schedule`; returns the exit code.
pub fn run(args: &ScheduleArgs) -> i32 {
    if args.run.resume || args.run.resume_dir.is_some() {
        eprintln!(
            "llem: schedule starts a new study each time; --resume and --resume-dir do not apply"
        );
        return exit::CONFIG;
    }
    // Planned once up front: a broken file fails now, not at the first start hours later.
    let mut plan = match plan(&args.run) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let Some(spec) = merged(&flags(args), plan.schedule.as_ref()) else {
        eprintln!(
            "llem: say when to run: --every, --at, or an enabled `schedule:` block in the file \
             (schedule: {{enabled: true, interval: 6h}})"
        );
        return exit::CONFIG;
    };
    if args.run.dry_run {
        plan.schedule = Some(spec);
        llem_app::memory::fill(&mut plan);
        return super::run::print_plan(&plan, &args.run);
    }
    run_loop(&spec, &args.run, args.runs)
}

/// The flags' schedule fields.
fn flags(args: &ScheduleArgs) -> ScheduleFlags {
    ScheduleFlags {
        every: args.every,
        at: args.at.clone(),
        days: args.days.iter().flatten().copied().collect(),
        duration: args.duration,
    }
}

fn plan(args: &RunArgs) -> Result<StudyPlan, i32> {
    llem_app::plan(&crate::options::plan(args), &Env::from_process()).map_err(|e| {
        eprint!("{e}");
        exit::of(&e)
    })
}

/// Runs the study whenever `spec` says, until Ctrl-C, `max_runs` or the total duration.
pub fn run_loop(spec: &ScheduleSpec, args: &RunArgs, max_runs: Option<u32>) -> i32 {
    use llem_app::schedule::{RunEnd, ScheduleEnd, ScheduleEvent, run_schedule};
    eprintln!("llem: schedule {}", spec.describe());
    let interrupts = super::study::interrupt_counter();
    let mut worst = exit::OK;
    let end = run_schedule(
        spec,
        max_runs,
        &interrupts,
        &mut |ScheduleEvent::Waiting { next, done }| {
            eprintln!(
                "llem: next run at {} ({done} runs so far); Ctrl-C to stop",
                next.strftime("%Y-%m-%d %H:%M:%S %Z"),
            );
        },
        // Planned afresh each time: the file may have been edited between runs.
        &mut || {
            let code = match plan(args) {
                Ok(plan) => super::study::run_study(&plan, args, ResumeFrom::New),
                Err(code) => code,
            };
            if code != exit::OK && code != exit::INTERRUPTED {
                worst = code;
            }
            match code {
                exit::OK => RunEnd::Completed,
                exit::INTERRUPTED => RunEnd::Interrupted,
                _ => RunEnd::Failed,
            }
        },
    );
    match end {
        ScheduleEnd::Over { done, .. } => {
            eprintln!("llem: schedule over (its total duration is spent) after {done} runs");
            worst
        }
        ScheduleEnd::RunsDone { .. } => worst,
        ScheduleEnd::Interrupted { done } => {
            eprintln!("llem: schedule stopped after {done} runs");
            exit::INTERRUPTED
        }
        ScheduleEnd::NoNextStart => {
            eprintln!("llem: cannot compute the next start time");
            exit::FAILURE
        }
    }
}
