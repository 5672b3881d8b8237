//! `llem measure -- CMD`: the energy of any command, perf-stat style. The pipeline is
//! [`llem_app::command`]; this prints its report and maps its failures to exit codes.

use llem_app::command::CommandError;
use llem_config::{Env, UserSettings, source::SourceMap};

use crate::cli::MeasureArgs;
use crate::exit;

/// Runs `llem measure` and returns the exit code (the command's own when it ran).
pub fn run(args: &MeasureArgs) -> i32 {
    let env = Env::from_process();
    let mut sources = SourceMap::new();
    let user = match UserSettings::load(&env, &mut sources) {
        Ok(u) => u,
        Err(e) => {
            eprint!("{e}");
            return exit::CONFIG;
        }
    };
    crate::commands::restore::leftovers_first();
    let name = args.command.first().cloned().unwrap_or_default();
    let live = match super::live::start(
        &args.live.options(),
        "measure",
        &name,
        &[("measure", name.clone())],
    ) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let opts = llem_app::command::CommandOptions {
        command: args.command.clone(),
        sampler: args.sampler,
        interval: args.interval,
        baseline: args.baseline,
        baseline_strategy: args.baseline_strategy,
        output: args.output.clone(),
        live: live.as_ref().map(|l| {
            l.metrics.staleness(args.interval);
            l.metrics.board()
        }),
    };
    let outcome = llem_app::command::measure_command(&opts, &user.config, &mut |d| {
        eprintln!(
            "llem: measuring idle power for {:.1} s ...",
            d.as_secs_f64()
        )
    });
    super::live::finish(live);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("llem: {e}");
            return match &e {
                CommandError::Config(_) => exit::CONFIG,
                CommandError::Baseline(_) | CommandError::Energy(_) => exit::FAILURE,
                // A shell's codes: 127 not found, 126 found but not executable.
                CommandError::Spawn { source, .. } => {
                    if source.kind() == std::io::ErrorKind::NotFound {
                        127
                    } else {
                        126
                    }
                }
            };
        }
    };
    let code = outcome.measurement.exit_code;
    if let Some(e) = &outcome.write_error {
        eprintln!("llem: {e}");
        return if code == 0 { exit::FAILURE } else { code };
    }
    eprint!("{}", outcome.measurement.text());
    if args.json {
        match serde_json::to_string_pretty(&outcome.measurement) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("llem: {e}"),
        }
    }
    code
}
