//! A study: its cells in child processes on this host, or a Slurm job array; new or resumed.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use llem_config::StudyPlan;
use llem_study::{Execution, Executor, Observer};

use crate::{AppError, StudyOptions, host};

/// Between SIGTERM and SIGKILL for a cell being stopped: long enough for the harness to finish
/// its decode step and remove its partial files.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Devices the cells of `plan` use on this machine, to lock.
pub fn lock_resources(plan: &StudyPlan) -> Vec<String> {
    llem_harness::devices::lock_resources(plan.configs.iter().map(|pc| &pc.config))
}

/// The plan with the caller's fail-fast, circuit-breaker and wall-clock settings over the
/// file's `study_execution`.
pub fn with_overrides(plan: &StudyPlan, opts: &StudyOptions) -> StudyPlan {
    let mut plan = plan.clone();
    let x = &mut plan.execution;
    if opts.fail_fast {
        x.max_consecutive_failures = 1;
    }
    if !opts.circuit_breaker {
        x.max_consecutive_failures = 0;
    }
    if let Some(h) = opts.timeout_hours {
        x.wall_clock_timeout_hours = Some(h);
    }
    plan
}

/// Refuses, before any cell starts, a plan with a configuration that cannot run on this
/// machine: a typo in a model path would otherwise fail every cell overnight.
pub fn check_runnable(plan: &StudyPlan) -> Result<(), AppError> {
    let assets = host::assets_dir();
    let python = plan.user.python.as_deref();
    let mut problems: Vec<String> = crate::device::check(plan);
    for pc in &plan.configs {
        let outcome = llem_harness::lifecycle::check_runnable(&pc.config, &assets, python)
            .map_err(|e| e.to_string())
            .and_then(|_| replay_fits(&pc.config, plan.execution.experiment_timeout_seconds));
        if let Err(line) = outcome
            && !problems.contains(&line)
        {
            problems.push(line);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(AppError::NotRunnable(problems))
    }
}

/// A trace replayed to its end lasts as long as its file says, which the plan cannot know:
/// read, it must fit the cell limit, or every cell of it would be killed before its end.
fn replay_fits(cfg: &llem_config::ExperimentConfig, limit_s: f64) -> Result<(), String> {
    let Some(trace) = cfg
        .traffic
        .as_deref()
        .and_then(|t| t.trace.as_ref())
        .filter(|t| t.duration_seconds.is_none())
    else {
        return Ok(());
    };
    let span_s = llem_engines::workload::trace::replay::read(trace)
        .map_err(|e| format!("traffic.trace: {e}"))?
        .span_s;
    let need_s = span_s + cfg.fixed_cell_seconds();
    if need_s >= limit_s {
        return Err(format!(
            "traffic.trace: the replay of {} lasts {span_s:.0} s (to the trace's end), and with \
             the cell's fixed waits {need_s:.0} s, but a cell is stopped after {limit_s:.0} s \
             (study_execution.experiment_timeout_seconds): set traffic.trace.duration_seconds \
             (the derived limit then includes it) or a longer timeout",
            trace.path
        ));
    }
    Ok(())
}

/// The study runner's options for `plan`, cells stopped when `interrupts` counts up.
fn runner_options(
    plan: &StudyPlan,
    opts: &StudyOptions,
    interrupts: Arc<AtomicUsize>,
) -> llem_study::StudyOptions {
    let resources = lock_resources(plan);
    llem_study::StudyOptions {
        launcher: opts.launcher.clone(),
        results_dir: plan.output_dir.clone().into(),
        resume: opts.resume.clone(),
        lock_dir: opts.lock.then(host::lock_dir),
        environment: llem_harness::environment::snapshot(
            &resources,
            host::VERSION,
            Some(host::GIT_COMMIT),
        ),
        host: host::hostname(),
        lock_resources: resources,
        lock_wait: opts.wait_for_devices,
        no_gaps: !opts.gaps,
        kill_grace: KILL_GRACE,
        sampling_interval: opts.sampling_interval,
        live_interval: opts
            .live_reports
            .then_some(crate::live::CELL_REPORT_INTERVAL),
        metrics_push: opts.metrics_push.clone(),
        llem_version: host::VERSION.to_string(),
        interrupts,
    }
}

/// Runs (or resumes) the study `plan` names, here or on Slurm, telling `observer` what
/// happens. Each increment of `interrupts` is one Ctrl-C: the first stops after the current
/// cell is terminated, and the study ends `interrupted`, resumable. A study that ends early
/// (circuit breaker, wall-clock limit, interrupted) is an `Ok` outcome with that status.
pub fn run_study(
    plan: &StudyPlan,
    opts: &StudyOptions,
    observer: &mut dyn Observer,
    interrupts: Arc<AtomicUsize>,
) -> Result<Execution, AppError> {
    let plan = with_overrides(plan, opts);
    let slurm = match (
        crate::slurm::resolve(&plan, &opts.executor, &opts.slurm)?,
        &opts.executor,
    ) {
        (None, crate::ExecutorChoice::AsPlanned) => {
            crate::slurm::recorded_options(&plan, &opts.resume)
        }
        (s, _) => s,
    };
    let executor: Box<dyn Executor> = match slurm {
        Some(options) => Box::new(crate::slurm::executor(options, &opts.launcher.program)),
        None => Box::new(llem_study::Local),
    };
    for r in crate::device::restore_leftovers() {
        observer.event(llem_study::StudyEvent::Note(&crate::device::describe(&r)));
    }
    check_runnable(&plan)?;
    let runner = runner_options(&plan, opts, interrupts);
    let mut restoring = Restoring { inner: observer };
    Ok(executor.execute(&plan, &runner, &mut restoring)?)
}

/// Passes every event on; after each cell, restores the device settings of a cell process
/// that died before it could (killed, out of memory), saying so.
struct Restoring<'a> {
    inner: &'a mut dyn Observer,
}

impl Observer for Restoring<'_> {
    fn event(&mut self, e: llem_study::StudyEvent<'_>) {
        let finished = matches!(e, llem_study::StudyEvent::CellFinished { .. });
        self.inner.event(e);
        if finished {
            for r in crate::device::restore_leftovers() {
                let line = crate::device::describe(&r);
                self.inner.event(llem_study::StudyEvent::Note(&line));
            }
        }
    }
}
