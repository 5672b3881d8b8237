//! `llem run`: plan the study, then measure it; with `--dry-run` print the plan.

use std::io::Write;

use llem_config::Env;

use crate::cli::RunArgs;
use crate::exit;
use crate::render;

/// Runs `llem run` and returns the exit code.
pub fn run(args: &RunArgs) -> i32 {
    let env = Env::from_process();
    let plan = match llem_app::plan(&crate::options::plan(args), &env) {
        Ok(p) => p,
        Err(e) => return plan_error(&e, args.json),
    };
    if let (false, Some(spec)) = (args.dry_run, &plan.schedule) {
        // The file asks to run again and again (the Python llem's daemon mode).
        return super::schedule::run_loop(spec, args, None);
    }
    let slurm = match llem_app::slurm::resolve(
        &plan,
        &crate::options::executor(args),
        &crate::options::slurm(args),
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("llem: {e}");
            return exit::of(&e);
        }
    };
    if !args.dry_run {
        // Said whatever the verbosity: a machine left changed is never put back quietly.
        super::restore::leftovers_first();
        return super::execute::execute(&plan, args);
    }
    let mut plan = plan;
    llem_app::memory::fill(&mut plan);
    match slurm {
        None => print_plan(&plan, args),
        Some(o) if args.json => {
            let view = llem_config::plan::PlanJson {
                plan: &plan,
                per_run_config: args.per_run_config,
            };
            let v = serde_json::json!({
                "plan": view,
                "slurm": super::slurm::dry_run_json(&plan, &o),
            });
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            exit::OK
        }
        Some(o) => {
            let code = print_plan(&plan, args);
            let mut out = std::io::stdout().lock();
            super::slurm::print_dry_run(&plan, &o, &mut out);
            code
        }
    }
}

/// Prints the plan (`--dry-run`), with the schedule it would run on.
pub fn print_plan(plan: &llem_config::StudyPlan, args: &RunArgs) -> i32 {
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    // Streamed: the JSON of a 100 000-cell plan is a few hundred MB, never held whole.
    // A closed pipe (`llem run ... | head`) is not an error worth reporting.
    if args.json {
        let view = llem_config::plan::PlanJson {
            plan,
            per_run_config: args.per_run_config,
        };
        if let Err(e) = serde_json::to_writer_pretty(&mut stdout, &view) {
            if !e.is_io() {
                eprintln!("llem: cannot serialise the plan: {e}");
                return exit::FAILURE;
            }
            return exit::OK;
        }
        let _ = stdout.write_all(b"\n");
    } else {
        let _ = render::plan_to(plan, &mut render::IoText(&mut stdout));
        if let Some(s) = &plan.schedule {
            let _ = writeln!(stdout, "\nSchedule\n  {}", s.describe());
        }
    }
    let _ = stdout.flush();
    exit::OK
}

fn plan_error(e: &llem_app::AppError, json: bool) -> i32 {
    eprint!("{e}");
    if json {
        let v = serde_json::json!({ "errors": e.diagnostics() });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    exit::of(e)
}
