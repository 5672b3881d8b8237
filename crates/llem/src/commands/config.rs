//! `llem config`: what this build contains, where the user config is, and where every
//! effective setting comes from; `llem config schema` prints JSON Schemas.

use std::fmt::Write;

use llem_config::source::SourceMap;
use llem_config::user_config::{Env, UserSettings, known_env_vars, user_config_path};
use llem_config::{Engine, schema};

use crate::cli::{ConfigArgs, ConfigCommand, SchemaKind, VERSION};
use crate::exit;

/// Runs `llem config` and returns the exit code.
pub fn run(args: &ConfigArgs) -> i32 {
    if let Some(ConfigCommand::Convert { file, to, output }) = &args.command {
        return convert(file, *to, output.as_deref());
    }
    if let Some(ConfigCommand::Schema { kind }) = &args.command {
        let s = match kind {
            SchemaKind::File => schema::file_schema(),
            SchemaKind::Experiment => schema::experiment_schema().clone(),
            SchemaKind::StudyExecution => schema::study_execution_schema().clone(),
            SchemaKind::User => schema::user_config_schema().clone(),
        };
        println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
        return exit::OK;
    }
    let env = Env::from_process();
    let mut sources = SourceMap::new();
    match UserSettings::load(&env, &mut sources) {
        Ok(settings) => {
            print!("{}", report(&env, &settings, &sources, args.verbose));
            exit::OK
        }
        Err(e) => {
            eprint!("{e}");
            eprintln!("(user config: {})", user_config_path(&env).display());
            exit::CONFIG
        }
    }
}

/// `llem config convert`.
fn convert(
    file: &std::path::Path,
    to: crate::cli::DialectArg,
    output: Option<&std::path::Path>,
) -> i32 {
    use llem_config::dialect07::{Dialect, convert};
    let to = match to {
        crate::cli::DialectArg::Seed => Dialect::Llem,
        crate::cli::DialectArg::Llem07 => Dialect::Llem07,
    };
    let text = match convert(file, to) {
        Ok(t) => t,
        Err(e) => {
            eprint!("{e}");
            return exit::CONFIG;
        }
    };
    match output {
        Some(p) => match llem_results::write_atomic(p, text.as_bytes()) {
            Ok(()) => {
                eprintln!("wrote {}", p.display());
                exit::OK
            }
            Err(e) => {
                eprintln!("llem: {e}");
                exit::FAILURE
            }
        },
        None => {
            crate::commands::results::emit(&text);
            exit::OK
        }
    }
}

fn report(env: &Env, s: &UserSettings, sources: &SourceMap, verbose: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "llem {VERSION}");
    let _ = writeln!(
        out,
        "  build        {} ({})",
        llem_app::host::TARGET,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    let _ = writeln!(out, "\nUser config");
    let state = if s.file_found {
        "found"
    } else {
        "not found; built-in defaults apply"
    };
    let _ = writeln!(out, "  file         {} ({state})", s.path.display());
    let set = s.set_values(sources);
    if set.is_empty() {
        let _ = writeln!(out, "  (nothing set)");
    }
    let width = set.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    for (key, value, origin) in &set {
        let _ = writeln!(out, "  {key:<width$}  {value}  ({origin})");
    }
    if verbose {
        let _ = writeln!(
            out,
            "\n  defaults when unset: results_dir ./results, model_cache_dir ~/.cache/huggingface,"
        );
        let _ = writeln!(
            out,
            "  experiment_gap_seconds 60, cycle_gap_seconds 300, energy_sampler auto, datacenter_pue 1.0"
        );
    }

    let _ = writeln!(out, "\nEngines (default runner)");
    for e in Engine::ALL {
        let runner = llem_config::RunnerSpec::default_for(*e)
            .map_or_else(|| "external:<url>".to_string(), |r| r.to_string());
        let state = llem_app::doctor::engine_availability(*e, s.config.python.as_deref());
        let _ = writeln!(out, "  {:<13} {:<15} {state}", e.as_str(), runner);
    }
    let _ = writeln!(
        out,
        "\nEnergy sensors (energy_sampler: auto uses GPUs + RAPL, else the estimate; node: \
         measurement.node_power)"
    );
    let sensors = llem_app::doctor::sensor_inventory(&s.config.measurement);
    for family in &sensors.families {
        match &family.unavailable {
            Some(why) => {
                let _ = writeln!(out, "  {:<13} absent: {why}", family.sampler);
            }
            None => {
                for (i, d) in family.found.iter().enumerate() {
                    let name = if i == 0 { family.sampler } else { "" };
                    let _ = writeln!(out, "  {name:<13} {d}");
                }
            }
        }
    }
    if verbose {
        let _ = writeln!(
            out,
            "  roots: powercap {}, sysfs {}, hwmon {} (LLEM_POWERCAP_ROOT, LLEM_SYSFS_ROOT, \
             LLEM_HWMON_ROOT)",
            sensors.powercap_root.display(),
            sensors.sysfs_root.display(),
            sensors.hwmon_root.display()
        );
    }

    let vars: Vec<(&str, &str)> = env.llem_vars().collect();
    if !vars.is_empty() || verbose {
        let _ = writeln!(out, "\nEnvironment");
        for (k, v) in &vars {
            // People paste this output into bug reports.
            if llem_config::redact::is_secret_name(k) {
                let _ = writeln!(out, "  {k}={}", llem_config::redact::masked(v));
            } else {
                let _ = writeln!(out, "  {k}={v}");
            }
        }
        if verbose {
            let _ = writeln!(out, "  known variables: {}", known_env_vars().join(", "));
        }
    }
    if !s.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for w in &s.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    out
}
