//! `llem measure -- CMD`: the energy of any command, perf-stat style. The pipeline is
//! [`llem_harness::command`]; this prints its report and maps its failures to exit codes.

use llem_config::{EnergySampler, Env, UserSettings, source::SourceMap};
use llem_energy::SensorEnv;
use llem_harness::command::{CommandError, CommandRequest, measure_command};

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
    let m = &user.config.measurement;
    let req = CommandRequest {
        command: args.command.clone(),
        sampler: args
            .sampler
            .or(m.energy_sampler)
            .unwrap_or(EnergySampler::Auto),
        sensor_env: SensorEnv::from_process(m.cpu_tdp_w),
        interval: args.interval,
        baseline: args.baseline.map(|d| llem_config::BaselineConfig {
            duration_seconds: d.as_secs_f64(),
            strategy: args.baseline_strategy,
            ..llem_config::BaselineConfig::default()
        }),
        measurement: m.clone(),
        cache_dir: llem_app::host::cache_dir(),
        output: args.output.clone(),
        llem_version: llem_app::host::VERSION.to_string(),
    };
    let outcome = measure_command(&req, &mut |d| {
        eprintln!(
            "llem: measuring idle power for {:.1} s ...",
            d.as_secs_f64()
        )
    });
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
