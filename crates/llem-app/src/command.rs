//! `measure_command()`: the energy of any command, perf-stat style, with this machine's
//! sensors and user config.

use std::path::PathBuf;
use std::time::Duration;

use llem_config::user_config::UserConfig;
use llem_config::{BaselineStrategy, EnergySampler};
pub use llem_harness::command::{CommandError, CommandMeasurement, CommandOutcome};

/// What to measure and how.
#[derive(Clone, Debug)]
pub struct CommandOptions {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The energy sampler; `None` takes the user config's, else `auto`.
    pub sampler: Option<EnergySampler>,
    /// Telemetry sampling interval.
    pub interval: Duration,
    /// Measure idle power for this long first, and subtract it.
    pub baseline: Option<Duration>,
    /// How the baseline is obtained.
    pub baseline_strategy: BaselineStrategy,
    /// Write `measurement.json` and `timeseries.parquet` here.
    pub output: Option<PathBuf>,
    /// Where the sampler publishes its running figures for live metrics.
    pub live: Option<llem_energy::LiveBoard>,
}

/// Measures `opts.command` with the sensors of this machine. `on_baseline` is told how long
/// the idle measurement before it will take.
pub fn measure_command(
    opts: &CommandOptions,
    user: &UserConfig,
    on_baseline: &mut dyn FnMut(Duration),
) -> Result<CommandOutcome, CommandError> {
    let m = &user.measurement;
    let req = llem_harness::command::CommandRequest {
        command: opts.command.clone(),
        sampler: opts
            .sampler
            .or(m.energy_sampler)
            .unwrap_or(EnergySampler::Auto),
        sensor_env: llem_energy::SensorEnv::from_process(m.cpu_tdp_w).with_node(&m.node_power),
        interval: opts.interval,
        baseline: opts.baseline.map(|d| llem_config::BaselineConfig {
            duration_seconds: d.as_secs_f64(),
            strategy: opts.baseline_strategy,
            ..llem_config::BaselineConfig::default()
        }),
        measurement: m.clone(),
        cache_dir: crate::host::cache_dir(),
        output: opts.output.clone(),
        llem_version: crate::host::VERSION.to_string(),
        live: opts.live.clone(),
    };
    llem_harness::command::measure_command(&req, on_baseline)
}
