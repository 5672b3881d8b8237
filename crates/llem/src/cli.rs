//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use llem_config::{Engine, ExperimentOrder};

/// Version string: package version and git commit.
pub const VERSION: &str = llem_app::host::VERSION_LINE;

/// llem measures what LLM inference costs: energy, throughput, latency and FLOPs.
#[derive(Debug, Parser)]
#[command(name = "llem", version = VERSION, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an experiment or a study; `--dry-run` shows the plan without running it.
    Run(RunArgs),
    /// Measure the energy of any command (perf-stat style); exits with the command's code.
    Measure(MeasureArgs),
    /// Run a study again and again: `--every 6h` or `--at 02:00` (local time); each run gets
    /// a new study directory. Runs in the foreground; Ctrl-C stops it.
    Schedule(ScheduleArgs),
    /// Show the environment, the user configuration and where each value comes from.
    Config(ConfigArgs),
    /// Check that this host can measure (sensors, GPU settings, engines, Docker, disk, clock),
    /// or, given a study file, everything that study needs; each problem with its fix.
    Doctor(DoctorArgs),
    /// Look at results: llem studies and cells, ML.ENERGY raw trees and compiled data.
    Results(ResultsArgs),
    /// Write one self-contained HTML report (inline SVG plots) for a results directory.
    Report(ReportArgs),
    /// Print a shell completion script: `llem completions bash > /etc/bash_completion.d/llem`.
    Completions(CompletionsArgs),
    /// Print the manual page, or write one per command into a directory.
    Man(ManArgs),
    /// Follow a study: `llem study status DIR`.
    Study(StudyArgs),
    /// Put back device settings (power limits, locked clocks, CPU frequency) that an llem
    /// which died left changed, from their journals.
    Restore,
    /// One study cell, run by `llem run` in a child process (not for direct use).
    #[command(name = "__cell", hide = true)]
    Cell(CellArgs),
    /// One Slurm array task: the cell its index names (not for direct use).
    #[command(name = "__slurm-task", hide = true)]
    SlurmTask(SlurmTaskArgs),
    /// Compiles a Slurm study's manifest and result once its arrays ended (not for direct use).
    #[command(name = "__slurm-compile", hide = true)]
    SlurmCompile(SlurmCompileArgs),
}

/// `llem doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// A study or experiment YAML: also check what its configurations need.
    pub config: Option<PathBuf>,
    /// Grade the exit code: 0 all ok, 1 warnings, 2 failures (default: 1 only on failures).
    #[arg(long)]
    pub check: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `llem completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// `llem man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `llem.1` and `llem-<command>.1` into this directory instead of printing `llem.1`.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `llem __cell`.
#[derive(Debug, Args)]
pub struct CellArgs {
    /// The cell's `cell_spec.json`.
    pub spec: PathBuf,
}

/// `llem schedule`.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// Start a run this long after the previous one started (e.g. 6h, 30m, 1d); with `--at`,
    /// the first run waits for that time of day.
    #[arg(long, value_parser = parse_duration)]
    pub every: Option<std::time::Duration>,
    /// Start a run every day at this local time (HH:MM, 24-hour); repeat for several times.
    #[arg(long, value_parser = parse_time_of_day)]
    pub at: Vec<llem_config::schedule::TimeOfDay>,
    /// Only start runs on these days: mon,...,sun, weekdays, weekends (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = parse_day)]
    pub days: Vec<Vec<u8>>,
    /// Start no run once this long has passed since the schedule began (e.g. 7d; at most a
    /// year).
    #[arg(long, value_parser = parse_total_duration)]
    pub duration: Option<std::time::Duration>,
    /// Stop after this many runs (default: until Ctrl-C, `--duration` or the file's
    /// `schedule.total_duration`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// The study, and how to run it.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `llem measure`.
#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Sampling interval: 100ms (default), 10ms, 0.5s, 1s; a bare number is milliseconds.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub interval: std::time::Duration,
    /// Energy sampler: auto, nvml, zeus, amdgpu, rapl, estimate, codecarbon.
    #[arg(long)]
    pub sampler: Option<llem_config::EnergySampler>,
    /// Measure idle power for this long first (e.g. 10s) and report baseline-adjusted energy.
    #[arg(long, value_parser = parse_duration)]
    pub baseline: Option<std::time::Duration>,
    /// How the baseline is obtained: fresh (default), cached (reused for 2 h), validated
    /// (cached, spot-checked every 5 uses); the cache lives in ~/.cache/llem.
    #[arg(long, default_value = "fresh", requires = "baseline")]
    pub baseline_strategy: llem_config::BaselineStrategy,
    /// Write measurement.json and timeseries.parquet into this directory.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Print the report as JSON on stdout (the text report goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Live metrics while it runs.
    #[command(flatten)]
    pub live: LiveArgs,
    /// The command to measure, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// Parses `100ms`, `10ms`, `0.5s`, `1s`, `250us`, `6h`, `1d`, or a bare number of
/// milliseconds; at most 30 days (`--interval`, `--baseline`, `--every`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, llem_config::ValueError> {
    llem_config::schedule::parse_duration(s, llem_config::schedule::MAX_DURATION_S)
}

fn parse_total_duration(s: &str) -> Result<std::time::Duration, llem_config::ValueError> {
    llem_config::schedule::parse_duration(s, llem_config::schedule::MAX_TOTAL_S)
}

fn parse_time_of_day(s: &str) -> Result<llem_config::schedule::TimeOfDay, llem_config::ValueError> {
    llem_config::schedule::parse_time_of_day(s)
}

fn parse_day(s: &str) -> Result<Vec<u8>, llem_config::ValueError> {
    llem_config::schedule::parse_days(&[s])
}

/// `llem run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Experiment or study YAML (optional with `--model`).
    pub config: Option<PathBuf>,
    /// Print the plan (configurations x cycles, in execution order) and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// With `--dry-run --json`: repeat each configuration, whole, in every run (by default
    /// `configurations` holds each once and runs name it by `config_index`).
    #[arg(long, requires_all = ["dry_run", "json"])]
    pub per_run_config: bool,
    /// Model for every experiment (Hugging Face id, directory or GGUF file).
    #[arg(short = 'm', long)]
    pub model: Option<String>,
    /// Engine for every experiment
    #[arg(short = 'e', long, value_parser = named::<Engine>(Engine::NAMES))]
    pub engine: Option<Engine>,
    /// Number of prompts for every experiment.
    #[arg(short = 'n', long = "n-prompts", value_parser = clap::value_parser!(u32).range(1..))]
    pub n_prompts: Option<u32>,
    /// Number of cycles (studies default to 3).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cycles: Option<u32>,
    /// Execution order of the cells across cycles.
    #[arg(long, value_parser = named::<ExperimentOrder>(ExperimentOrder::NAMES))]
    pub order: Option<ExperimentOrder>,
    /// Results directory.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Run each configuration even when another measures the same thing (they differ only in
    /// fields that do not change the measurement, such as the name).
    #[arg(long)]
    pub no_dedup: bool,
    /// Resolve the file's relative paths (`base:`, `_extends`) against this directory, not
    /// the file's own: the Python API writes a dict to a temporary file whose paths are the
    /// caller's.
    #[arg(long, value_name = "DIR", hide = true, requires = "config")]
    pub config_dir: Option<PathBuf>,
    /// No progress display; only errors and the final summary.
    #[arg(short, long)]
    pub quiet: bool,
    /// Log what happens (-v: llem and llama.cpp info, -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Telemetry sampling interval: 100ms, 10ms, 0.5s; a bare number is milliseconds.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub interval: std::time::Duration,
    /// Continue the most recent unfinished study of this file: completed cells are kept,
    /// everything else runs again.
    #[arg(long, conflicts_with = "resume_dir")]
    pub resume: bool,
    /// Continue the study in this directory.
    #[arg(long, value_name = "PATH")]
    pub resume_dir: Option<PathBuf>,
    /// Stop the study at the first failed cell (max_consecutive_failures = 1).
    #[arg(long, conflicts_with = "no_circuit_breaker")]
    pub fail_fast: bool,
    /// Never stop the study for failing cells (max_consecutive_failures = 0).
    #[arg(long)]
    pub no_circuit_breaker: bool,
    /// Wall-clock limit for the whole study, in hours; the cells left are skipped.
    #[arg(long, value_name = "HOURS", value_parser = positive_hours)]
    pub timeout: Option<f64>,
    /// Take no device locks (something else schedules the GPUs).
    #[arg(long)]
    pub no_lock: bool,
    /// When another llem run holds a device, wait for it (saying who holds it) instead of
    /// refusing; Ctrl-C stops the wait.
    #[arg(long, conflicts_with = "no_lock")]
    pub wait: bool,
    /// No pauses between cells and cycles (thermal recovery off).
    #[arg(long)]
    pub no_gaps: bool,
    /// Where the cells run: local (child processes here, the default) or slurm (one job
    /// array per cycle on this Slurm cluster; overrides study_execution.executor).
    #[arg(long, value_enum)]
    pub executor: Option<ExecutorArg>,
    /// Slurm settings (with `--executor slurm`).
    #[command(flatten)]
    pub slurm: SlurmArgs,
    /// Live metrics while it runs.
    #[command(flatten)]
    pub live: LiveArgs,
}

/// Live metrics (`llem run`, `llem measure`): see docs/energy.md, "Live metrics".
#[derive(Debug, Args, Clone, Default)]
pub struct LiveArgs {
    /// Serve live metrics for Prometheus at http://ADDR/metrics while llem runs: PORT and
    /// :PORT listen on the loopback only, HOST:PORT where named (e.g. 0.0.0.0:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Push live metrics over OTLP/HTTP (JSON) to this receiver, e.g.
    /// http://127.0.0.1:4318 (/v1/metrics is added when the URL has no path).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Time between OTLP pushes (default 10s; the final figures are pushed at the end).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "otlp_endpoint")]
    pub otlp_interval: Option<std::time::Duration>,
    /// Push live metrics to this Prometheus Pushgateway every second and at the end, e.g.
    /// http://gateway:9091 (a study's cells each push their own group: the way out of Slurm
    /// tasks).
    #[arg(long, value_name = "URL")]
    pub metrics_push: Option<String>,
}

impl LiveArgs {
    /// As the application's options.
    pub fn options(&self) -> llem_app::live::LiveOptions {
        llem_app::live::LiveOptions {
            listen: self.metrics_listen.clone(),
            otlp_endpoint: self.otlp_endpoint.clone(),
            otlp_interval: self
                .otlp_interval
                .unwrap_or(llem_app::live::DEFAULT_OTLP_INTERVAL),
            push_gateway: self.metrics_push.clone(),
        }
    }
}

/// `--executor`.
/// A value that is one of `names`, parsed by its own `FromStr` (whose error names the
/// nearest), and whose names the help lists and shell completion offers.
#[derive(Clone)]
struct Named<T> {
    names: &'static [&'static str],
    marker: std::marker::PhantomData<fn() -> T>,
}

fn named<T>(names: &'static [&'static str]) -> Named<T> {
    Named {
        names,
        marker: std::marker::PhantomData,
    }
}

impl<T> clap::builder::TypedValueParser for Named<T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Display,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        text.parse::<T>().map_err(|e| {
            let arg = arg.map_or_else(String::new, |a| format!(" for '{a}'"));
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value '{text}'{arg}: {e}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.names
                .iter()
                .map(|n| clap::builder::PossibleValue::new(*n)),
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExecutorArg {
    /// Child processes on this host.
    Local,
    /// Job arrays on a Slurm cluster.
    Slurm,
}

/// `sbatch` settings of `llem run --executor slurm`; each overrides the study file's
/// `study_execution.executor.slurm` field of the same name.
#[derive(Clone, Debug, Default, Args)]
pub struct SlurmArgs {
    /// Slurm partition.
    #[arg(long, help_heading = "Slurm")]
    pub partition: Option<String>,
    /// Generic resources per cell, e.g. gpu:1.
    #[arg(long, help_heading = "Slurm")]
    pub gres: Option<String>,
    /// Time limit per cell: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.
    #[arg(long, help_heading = "Slurm", value_parser = parse_slurm_time)]
    pub time: Option<String>,
    /// Account to charge.
    #[arg(long, help_heading = "Slurm")]
    pub account: Option<String>,
    /// Cells running at once (the %M of --array=0-N%M).
    #[arg(long, help_heading = "Slurm", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel: Option<u32>,
    /// A further sbatch argument, repeatable: --slurm-arg=--qos=high.
    #[arg(long = "slurm-arg", help_heading = "Slurm", allow_hyphen_values = true)]
    pub extra: Vec<String>,
}

fn parse_slurm_time(s: &str) -> Result<String, llem_config::ValueError> {
    llem_config::slurm_time_seconds(s).map(|_| s.trim().to_string())
}

/// `llem study`.
#[derive(Debug, Args)]
pub struct StudyArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: StudyCommand,
}

/// `llem study ...`.
#[derive(Debug, Subcommand)]
pub enum StudyCommand {
    /// Where a study stands: cells done, running, pending and failed (with why), per node,
    /// and an ETA. For a Slurm study, compiled from its tasks' files, squeue and sacct.
    Status {
        /// The study directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `llem __slurm-task`.
#[derive(Debug, Args)]
pub struct SlurmTaskArgs {
    /// The study directory.
    pub dir: PathBuf,
    /// The submission number.
    pub submission: u32,
    /// The cycle of this array.
    pub cycle: u32,
}

/// `llem __slurm-compile`.
#[derive(Debug, Args)]
pub struct SlurmCompileArgs {
    /// The study directory.
    pub dir: PathBuf,
}

/// `--timeout` (hours), by the app's rule (Python's `timeout_hours` is held to the same).
fn positive_hours(s: &str) -> Result<f64, String> {
    let hours = s.trim().parse::<f64>().unwrap_or(f64::NAN);
    llem_app::options::positive_hours("--timeout", hours).map_err(|e| e.to_string())
}

/// `llem results`.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// What to show.
    #[command(subcommand)]
    pub command: ResultsCommand,
}

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Every field, RFC 4180.
    Csv,
    /// `runs/llm.parquet` layout (reference column order, then llem's columns).
    Parquet,
    /// A JSON array, one object per run.
    Json,
    /// The headline columns as a Markdown table.
    Markdown,
    /// Boavizta's BoAmps energy report (format 1.1.0), one per run, as a JSON array.
    Boamps,
    /// Hugging Face's AI Energy Score: GPU Wh per 1,000 queries per configuration (CPU and
    /// RAM alongside) and, with --band-edges, its star rating.
    AiEnergyScore,
}

/// `llem results ...`.
#[derive(Debug, Subcommand)]
pub enum ResultsCommand {
    /// Studies and runs under DIR, one line each.
    List {
        /// A results directory (default: ./results).
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The headline metrics, warnings and configuration of a cell or study.
    Show {
        /// A cell directory, a study directory, or any results directory.
        target: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Two sets of runs side by side, metric by metric (means, 95 % CIs, B/A): two
    /// directories (A the baseline, B the candidate), one study's configurations split `--by`
    /// a field or configuration path, or two of them picked with `--pick A --pick B`.
    Compare {
        /// The baseline directory, or the study when B is not given.
        a: PathBuf,
        /// The candidate directory.
        b: Option<PathBuf>,
        /// Within one directory: compare the groups of this field or configuration path
        /// (`decoder.preset`), each against the first.
        #[arg(long, conflicts_with = "b")]
        by: Option<String>,
        /// Within one directory: a configuration to compare, by label or configuration hash
        /// (give two: baseline, then candidate).
        #[arg(long, conflicts_with_all = ["b", "by"])]
        pick: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every run under DIR in one file.
    Export {
        /// A results directory.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Write here (atomically) instead of standard output (required for parquet).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Export the diffusion runs (ML.ENERGY text-to-image / text-to-video) instead.
        #[arg(long)]
        diffusion: bool,
        /// The AI Energy Score task the runs measured (ai-energy-score only).
        #[arg(long, value_name = "TASK", default_value = "text_generation")]
        task: String,
        /// The task's published GPU Wh per 1,000 queries: MIN,MAX (five equal bands) or six
        /// edges E0,...,E5; rates each configuration 1-5 stars (ai-energy-score only).
        #[arg(
            long,
            value_name = "WH,...",
            value_delimiter = ',',
            allow_hyphen_values = true
        )]
        band_edges: Vec<f64>,
        /// Also write the rated configuration's label as an SVG here (ai-energy-score with
        /// --band-edges, one configuration).
        #[arg(long, value_name = "FILE")]
        label: Option<PathBuf>,
    },
    /// Filter and group runs: `--where 'engine=vllm' --where 'max_num_seqs>=8' --group-by model_id`.
    Query {
        /// A results directory.
        dir: PathBuf,
        /// FIELD OP VALUE with OP one of = != > >= < <= ~ (contains); repeatable (all must hold).
        #[arg(long = "where", value_name = "COND")]
        conditions: Vec<String>,
        /// Group by these fields (comma-separated or repeated).
        #[arg(long, value_delimiter = ',')]
        group_by: Vec<String>,
        /// Only runs that passed the stability rules.
        #[arg(long)]
        stable: bool,
        /// Print a JSON array, one object per run.
        #[arg(long)]
        json: bool,
        /// Query the diffusion runs (fields of seed 002's DiffusionRun: task, nickname,
        /// batch_size, num_gpus, energy_per_generation_joules, ...).
        #[arg(long)]
        diffusion: bool,
    },
}

/// `llem report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results directory (study, cells, ML.ENERGY raw or compiled data).
    pub dir: PathBuf,
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    pub output: PathBuf,
    /// Page title (default: the directory name).
    #[arg(long)]
    pub title: Option<String>,
    /// Only runs that passed the stability rules.
    #[arg(long)]
    pub stable: bool,
}

/// `llem config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// A sub-report.
    #[command(subcommand)]
    pub command: Option<ConfigCommand>,
    /// Also list defaults, every LLEM_* variable and build details.
    #[arg(short, long)]
    pub verbose: bool,
}

/// `llem config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the JSON Schema of configuration files (for editor completion).
    Schema {
        /// Which file's schema.
        #[arg(long, value_enum, default_value_t = SchemaKind::File)]
        kind: SchemaKind,
    },
    /// Write an experiment or study file in the other YAML dialect: llem's (the seed's) or
    /// the Python llem 0.7's.
    Convert {
        /// The file to convert.
        file: PathBuf,
        /// The dialect to write.
        #[arg(long, value_enum)]
        to: DialectArg,
        /// Write here (atomically) instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// The YAML dialects `llem config convert` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DialectArg {
    /// llem's own, the seed's grammar.
    Seed,
    /// The Python llem 0.7's (`llenergymeasure` 0.7.0).
    Llem07,
}

/// Schemas `llem config schema` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    /// An experiment or study file.
    File,
    /// One experiment.
    Experiment,
    /// The `study_execution:` block.
    StudyExecution,
    /// The user config file.
    User,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod fuzz {
    //! Every flag of every subcommand, given hostile values: parsing never panics, and a
    //! duration it accepts is one llem can sleep, sample or schedule by.

    use clap::CommandFactory;

    use llem_testkit::mutate;

    use super::*;

    const VALUES: &[&str] = &[
        "",
        "0",
        "-1",
        "1",
        "1e19s",
        "1e-300ms",
        "0.0000001us",
        "NaN",
        "inf",
        "-inf",
        "1e309",
        "4294967296",
        "18446744073709551616",
        "100ms",
        "25h",
        "31d",
        "1d",
        "12:00",
        "25:61",
        "vllm",
        "llamacpp",
        "shuffle",
        "json",
        "parquet",
        "/dev/zero",
        "\u{0}",
        "é",
        "--",
        "-",
        "x=1",
        "engine=vllm",
        "batch>=8",
        "3.5e-5s",
        " 7 ",
        "1,2",
    ];

    /// `(subcommand path, long flags)` of every command.
    fn commands() -> Vec<(Vec<String>, Vec<String>)> {
        fn walk(c: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, Vec<String>)>) {
            let flags = c
                .get_arguments()
                .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                .collect();
            out.push((path.clone(), flags));
            for s in c.get_subcommands() {
                let mut p = path.clone();
                p.push(s.get_name().to_string());
                walk(s, p, out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), Vec::new(), &mut out);
        out
    }

    #[test]
    fn no_flag_value_panics_the_parser() {
        let cmds = commands();
        assert!(cmds.len() > 10, "{cmds:?}");
        let mut rng = mutate::Rng::new(18);
        let (mut ok, mut refused) = (0u32, 0u32);
        for _ in 0..20_000 {
            let (path, flags) = rng.pick(&cmds).unwrap();
            let mut argv: Vec<String> = vec!["llem".into()];
            argv.extend(path.iter().cloned());
            for _ in 0..=rng.below(4) {
                match rng.below(3) {
                    0 => argv.push((*rng.pick(VALUES).unwrap()).to_string()),
                    _ => {
                        if let Some(f) = rng.pick(flags) {
                            argv.push(f.clone());
                            argv.push((*rng.pick(VALUES).unwrap()).to_string());
                        }
                    }
                }
            }
            let parsed = std::panic::catch_unwind(|| Cli::try_parse_from(&argv));
            match parsed {
                Ok(Ok(_)) => ok += 1,
                Ok(Err(_)) => refused += 1,
                Err(_) => panic!("the parser panicked on {argv:?}"),
            }
        }
        assert!(ok > 0 && refused > 0, "{ok} parsed, {refused} refused");
    }

    #[test]
    fn accepted_durations_are_positive_and_at_most_30_days() {
        for v in VALUES {
            for unit in ["", "us", "ms", "s", "m", "h", "d"] {
                let s = format!("{v}{unit}");
                if let Ok(d) = parse_duration(&s) {
                    assert!(
                        d >= std::time::Duration::from_micros(1)
                            && d.as_secs_f64() <= llem_config::schedule::MAX_DURATION_S,
                        "{s} -> {d:?}"
                    );
                }
            }
        }
        assert!(parse_duration("1e-300ms").is_err());
    }
}
