//! `llem schedule`: run a study at intervals or times of day, each run a new study directory,
//! in the foreground until Ctrl-C (or `--runs N`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use jiff::{Timestamp, Zoned};
use llem_config::{Env, Overrides, PlanRequest};
use llem_study::ResumeFrom;
use llem_study::schedule::{Schedule, next_start};

use crate::cli::ScheduleArgs;
use crate::exit;

/// Runs `llem schedule`; returns the exit code.
pub fn run(args: &ScheduleArgs) -> i32 {
    let schedule = match args.every {
        Some(d) => Schedule::Every(d),
        None => Schedule::At(args.at.clone()),
    };
    if args.run.resume || args.run.resume_dir.is_some() || args.run.dry_run {
        eprintln!(
            "llem: schedule starts a new study each time; --resume, --resume-dir and --dry-run do not apply"
        );
        return exit::CONFIG;
    }
    let interrupts = super::study::interrupt_counter();
    let mut last_start: Option<Timestamp> = None;
    let mut done = 0u32;
    let mut worst = exit::OK;
    loop {
        let now = Zoned::now();
        let Some(next) = next_start(&schedule, last_start, &now) else {
            eprintln!("llem: cannot compute the next start time");
            return exit::FAILURE;
        };
        if next.timestamp() > now.timestamp() {
            eprintln!(
                "llem: next run at {} ({} runs so far); Ctrl-C to stop",
                next.strftime("%Y-%m-%d %H:%M:%S %Z"),
                done
            );
        }
        while Timestamp::now() < next.timestamp() {
            if interrupts.load(Ordering::SeqCst) > 0 {
                eprintln!("llem: schedule stopped after {done} runs");
                return exit::INTERRUPTED;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        last_start = Some(Timestamp::now());
        // Planned afresh each time: the file may have been edited between runs.
        let env = Env::from_process();
        let request = PlanRequest {
            config: args.run.config.as_deref(),
            overrides: Overrides {
                model: args.run.model.clone(),
                engine: args.run.engine,
                n_prompts: args.run.n_prompts,
                output_dir: args.run.output.clone(),
                cycles: args.run.cycles,
                order: args.run.order,
            },
            dedup: !args.run.no_dedup,
            env: &env,
        };
        let code = match llem_config::plan(&request) {
            Ok(mut plan) => {
                super::study::apply_overrides(&mut plan, &args.run);
                super::study::run_study(&plan, &args.run, ResumeFrom::New)
            }
            Err(e) => {
                eprint!("{e}");
                exit::CONFIG
            }
        };
        done += 1;
        if code == exit::INTERRUPTED || interrupts.load(Ordering::SeqCst) > 0 {
            eprintln!("llem: schedule stopped after {done} runs");
            return exit::INTERRUPTED;
        }
        if code != exit::OK {
            worst = code;
        }
        if args.runs.is_some_and(|n| done >= n) {
            return worst;
        }
    }
}
