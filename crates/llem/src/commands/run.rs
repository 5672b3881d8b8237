//! `llem run`: plan the study, then measure it; with `--dry-run` print the plan.

use std::io::Write;

use llem_config::{ConfigError, Env, Overrides, PlanRequest};

use crate::cli::RunArgs;
use crate::exit;
use crate::render;

/// Runs `llem run` and returns the exit code.
pub fn run(args: &RunArgs) -> i32 {
    let env = Env::from_process();
    let request = PlanRequest {
        config: args.config.as_deref(),
        overrides: Overrides {
            model: args.model.clone(),
            engine: args.engine,
            n_prompts: args.n_prompts,
            output_dir: args.output.clone(),
            cycles: args.cycles,
            order: args.order,
        },
        dedup: !args.no_dedup,
        env: &env,
    };
    let plan = match llem_config::plan(&request) {
        Ok(p) => p,
        Err(e) => return config_error(&e, args.json),
    };
    if !args.dry_run {
        return super::execute::execute(&plan, args);
    }
    let out = if args.json {
        match serde_json::to_string_pretty(&plan) {
            Ok(s) => s + "\n",
            Err(e) => {
                eprintln!("llem: cannot serialise the plan: {e}");
                return exit::FAILURE;
            }
        }
    } else {
        render::plan(&plan)
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`llem run ... | head`) is not an error worth reporting.
    let _ = stdout.write_all(out.as_bytes());
    exit::OK
}

fn config_error(e: &ConfigError, json: bool) -> i32 {
    eprint!("{e}");
    if json {
        let v = serde_json::json!({ "errors": e.diagnostics });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    exit::CONFIG
}
