//! `llem run`'s flags as the application's typed options.

use llem_app::{ExecutorChoice, Launcher, PlanOptions, ResumeFrom, RunOptions, SlurmOverrides};

use crate::cli::{ExecutorArg, RunArgs};

/// What to plan.
pub fn plan(args: &RunArgs) -> PlanOptions {
    PlanOptions {
        config: args.config.clone(),
        config_dir: args.config_dir.clone(),
        overrides: llem_app::options::Overrides {
            model: args.model.clone(),
            engine: args.engine,
            n_prompts: args.n_prompts,
            output_dir: args.output.clone(),
            cycles: args.cycles,
            order: args.order,
        },
        dedup: !args.no_dedup,
    }
}

/// How one experiment runs.
pub fn run(args: &RunArgs) -> RunOptions {
    RunOptions {
        lock: !args.no_lock,
        wait_for_devices: args.wait,
        sampling_interval: args.interval,
        live: None,
    }
}

/// Whether the flags ask to resume, and which study.
pub fn resume(args: &RunArgs) -> Option<ResumeFrom> {
    if let Some(d) = &args.resume_dir {
        Some(ResumeFrom::Dir(d.clone()))
    } else if args.resume {
        Some(ResumeFrom::Latest)
    } else {
        None
    }
}

/// Where the flags put the cells.
pub fn executor(args: &RunArgs) -> ExecutorChoice {
    match args.executor {
        None => ExecutorChoice::AsPlanned,
        Some(ExecutorArg::Local) => ExecutorChoice::Local,
        Some(ExecutorArg::Slurm) => ExecutorChoice::Slurm,
    }
}

/// The `sbatch` flags given.
pub fn slurm(args: &RunArgs) -> SlurmOverrides {
    let a = &args.slurm;
    SlurmOverrides {
        partition: a.partition.clone(),
        gres: a.gres.clone(),
        time: a.time.clone(),
        account: a.account.clone(),
        max_parallel: a.max_parallel,
        extra: a.extra.clone(),
    }
}

/// How a study runs, its cells started by `launcher`.
pub fn study(args: &RunArgs, resume: ResumeFrom, launcher: Launcher) -> llem_app::StudyOptions {
    llem_app::StudyOptions {
        resume,
        fail_fast: args.fail_fast,
        circuit_breaker: !args.no_circuit_breaker,
        timeout_hours: args.timeout,
        gaps: !args.no_gaps,
        lock: !args.no_lock,
        wait_for_devices: args.wait,
        sampling_interval: args.interval,
        executor: executor(args),
        slurm: slurm(args),
        launcher,
        live_reports: false,
        metrics_push: None,
    }
}
