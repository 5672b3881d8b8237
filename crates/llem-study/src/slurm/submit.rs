//! Submitting a study to Slurm: the study directory prepared as for a local run (or the one
//! to resume, compiled first), every cell's spec written, then one job array per cycle, each
//! after the one before (`--dependency=afterany`), and one small job after them all that
//! compiles the manifest and `study_result.json`. A search submits its first batch of
//! proposals as one array; the job after it picks the next batch ([`super::search`]).

use std::path::{Path, PathBuf};

use llem_config::StudyPlan;
use llem_config::plan::PlannedConfig;
use llem_results::layout;
use llem_results::time::{iso8601_utc, unix_now_s};
use llem_results::{CellStatus, Manifest, StudyStatus};

use super::commands;
use super::compile::{compile_and_write, jobs_of};
use super::record::{
    self, ArrayRecord, ControlRecord, DESIGN, JOBS, JobsRecord, SEARCH_DESIGN, SlurmOptions,
    SubmissionRecord, TaskLocks,
};
use crate::design::StudyDesign;
use crate::protocol::CellSpec;
use crate::runner::search::{SearchDesign, SearchPlanner};
use crate::runner::{ResumeFrom, StudyOptions, fresh_manifest, prepare, stage_cell, study_stamp};
use crate::{StudyError, resume};

/// A study's Slurm settings and how a compute node starts llem.
#[derive(Clone, Debug)]
pub struct SlurmExecution {
    /// `sbatch` settings.
    pub options: SlurmOptions,
    /// `/path/to/llem`, or `python -m llem`: the same path on every node (shared storage).
    pub command: Vec<String>,
}

/// One array of a submission: the cells of a cycle, by array task index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedArray {
    /// The cycle.
    pub cycle: u32,
    /// Manifest positions of its cells, task 0 first.
    pub cells: Vec<usize>,
}

/// A study handed to Slurm.
#[derive(Clone, Debug)]
pub struct Submission {
    /// The study directory.
    pub dir: PathBuf,
    /// The manifest as submitted.
    pub manifest: Manifest,
    /// The jobs.
    pub record: SubmissionRecord,
    /// A resumption rather than a new study.
    pub resumed: bool,
}

/// A search's cells to run: every cell not finished (a failed run is one of its
/// measurements), as one array keyed `batch`.
pub fn plan_search_array(manifest: &Manifest, batch: u32) -> Vec<PlannedArray> {
    let cells: Vec<usize> = manifest
        .experiments
        .iter()
        .enumerate()
        .filter(|(_, e)| !matches!(e.status, CellStatus::Completed | CellStatus::Failed))
        .map(|(i, _)| i)
        .collect();
    if cells.is_empty() {
        return Vec::new();
    }
    vec![PlannedArray {
        cycle: batch,
        cells,
    }]
}

/// The cells not completed, one array per cycle in the manifest's order, cells within a
/// cycle in the planned order (array index order is the order Slurm starts them in).
pub fn plan_arrays(manifest: &Manifest) -> Vec<PlannedArray> {
    let mut arrays: Vec<PlannedArray> = Vec::new();
    for (i, e) in manifest.experiments.iter().enumerate() {
        if e.status == CellStatus::Completed {
            continue;
        }
        match arrays.iter_mut().find(|a| a.cycle == e.cycle) {
            Some(a) => a.cells.push(i),
            None => arrays.push(PlannedArray {
                cycle: e.cycle,
                cells: vec![i],
            }),
        }
    }
    arrays
}

/// The arrays a new study of `plan` would be submitted as (`--dry-run`).
pub fn dry_run(plan: &StudyPlan) -> (Manifest, Vec<PlannedArray>) {
    let m = fresh_manifest(plan, "", "");
    let arrays = plan_arrays(&m);
    (m, arrays)
}

/// GPUs one cell asks for in `--gres` (`gpu:2`, `gpu:h100:2`, `gpu` = 1; other resources 0).
pub fn gpus_per_cell(gres: Option<&str>) -> u32 {
    let Some(g) = gres else { return 0 };
    g.split(',')
        .filter_map(|one| {
            let mut parts = one.trim().split(':');
            if parts.next()? != "gpu" {
                return None;
            }
            let last = parts.next_back();
            Some(match last {
                None => 1,
                Some(n) => n.parse::<u32>().unwrap_or(1),
            })
        })
        .sum()
}

/// The GPU-hours `cells` reserve at most: cells x GPUs per cell x `--time`; `None` without a
/// time limit or GPUs.
pub fn gpu_hours_reserved(options: &SlurmOptions, cells: usize) -> Option<f64> {
    let gpus = gpus_per_cell(options.gres.as_deref());
    let secs = llem_config::slurm_time_seconds(options.time.as_deref()?).ok()??;
    (gpus > 0).then(|| cells as f64 * f64::from(gpus) * secs as f64 / 3600.0)
}

/// The `sbatch` arguments of one array (before the script).
pub fn array_args(
    options: &SlurmOptions,
    job_name: &str,
    tasks: usize,
    after: Option<&str>,
    output: &Path,
) -> Vec<String> {
    let mut a = vec![format!("--job-name={job_name}")];
    let range = format!("0-{}", tasks.saturating_sub(1));
    a.push(match options.max_parallel {
        Some(m) => format!("--array={range}%{m}"),
        None => format!("--array={range}"),
    });
    a.push(format!("--output={}", output.display()));
    common_args(options, &mut a, true);
    if let Some(j) = after {
        a.push(format!("--dependency=afterany:{j}"));
    }
    a.extend(options.extra.iter().cloned());
    a
}

fn common_args(options: &SlurmOptions, a: &mut Vec<String>, cell: bool) {
    if let Some(p) = &options.partition {
        a.push(format!("--partition={p}"));
    }
    if let Some(x) = &options.account {
        a.push(format!("--account={x}"));
    }
    if cell {
        if let Some(g) = &options.gres {
            a.push(format!("--gres={g}"));
        }
        if let Some(t) = &options.time {
            a.push(format!("--time={t}"));
        }
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A batch script that execs llem with `args`.
pub(crate) fn write_script(
    path: &Path,
    command: &[String],
    args: &[String],
) -> Result<(), StudyError> {
    let line: Vec<String> = command.iter().chain(args).map(|s| shell_quote(s)).collect();
    let text = format!(
        "#!/bin/sh\n# Written by llem run --executor slurm; Slurm runs it on a compute node.\nexec {}\n",
        line.join(" ")
    );
    llem_results::write_atomic(path, text.as_bytes())?;
    Ok(())
}

/// A name Slurm shows in `squeue` (letters, digits, `-`, `_`).
pub(crate) fn job_name(study: &str) -> String {
    let s: String = study
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("llem-{s}")
}

/// Stages each cell not completed (as the local runner does before it starts one) and marks
/// it pending for this submission; a search's failed cells are measurements, kept as they are.
pub(crate) fn stage_cells(
    configs: &[PlannedConfig],
    sampling_interval: std::time::Duration,
    metrics_push: Option<&str>,
    search: bool,
    dir: &Path,
    manifest: &mut Manifest,
) -> Result<(), StudyError> {
    let by_hash: std::collections::HashMap<String, &PlannedConfig> =
        configs.iter().map(|c| (c.digest.short(), c)).collect();
    for e in &mut manifest.experiments {
        if e.status == CellStatus::Completed || (search && e.status == CellStatus::Failed) {
            continue;
        }
        let Some(pc) = by_hash.get(&e.config_hash) else {
            continue;
        };
        // Slurm tasks report to no parent that could serve their live figures: they push.
        let reporting = crate::runner::cell::Reporting {
            live_interval: None,
            metrics_push: metrics_push.map(str::to_string),
        };
        stage_cell(dir, e, pc, sampling_interval, &reporting)?;
        e.status = CellStatus::Pending;
        e.attempts += 1;
        e.error_type = None;
        e.error_message = None;
        e.started_at = None;
        e.completed_at = None;
        e.pid = None;
        e.node = None;
        e.result_file = None;
    }
    Ok(())
}

/// The study directory to resume, compiled from its tasks' files; refused while any of its
/// jobs is still queued or running.
fn settle_for_resume(opts: &StudyOptions, plan: &StudyPlan) -> Result<Option<PathBuf>, StudyError> {
    let Some(dir) = resume::resume_target(plan, &opts.results_dir, &opts.resume)? else {
        return Ok(None);
    };
    if record::slurm_dir(&dir).join(JOBS).exists() {
        let jobs = jobs_of(&dir)?;
        let ids = jobs.latest_job_ids();
        let queued = commands::queued(&ids)?;
        if !queued.is_empty() {
            let mut live: Vec<&String> = queued.keys().collect();
            live.sort();
            return Err(StudyError::StillRunning {
                dir,
                holder: format!(
                    "Slurm ({} tasks still queued or running: {}); wait, or scancel {}",
                    live.len(),
                    live.iter()
                        .take(5)
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    ids.join(" ")
                ),
            });
        }
        compile_and_write(&dir)?;
    }
    Ok(Some(dir))
}

/// `sbatch` refused: nothing of this submission is queued, and the manifest says so; `--resume`
/// submits it again.
pub(crate) fn refused(dir: &Path, manifest: &mut Manifest, e: &StudyError) {
    manifest.status = StudyStatus::Failed;
    manifest.end_time = Some(iso8601_utc(unix_now_s()));
    manifest.summary.warnings.push(format!(
        "not submitted: {e}; nothing of it is queued, --resume submits it"
    ));
    if let Err(w) = llem_results::write_json_atomic(&dir.join(layout::MANIFEST), manifest) {
        tracing::warn!("cannot write the manifest: {w}");
    }
}

/// Submits the study (or what is left of it, on resume).
pub fn submit(
    plan: &StudyPlan,
    opts: &StudyOptions,
    slurm: &SlurmExecution,
) -> Result<Submission, StudyError> {
    let resume_dir = settle_for_resume(opts, plan)?;
    let mut local = opts.clone();
    // Device locks are taken by each task on its node, not by the login node.
    local.lock_dir = None;
    local.resume = resume_dir.clone().map_or(ResumeFrom::New, ResumeFrom::Dir);
    // Without locks, nothing waits: there is nothing to tell.
    struct Silent;
    impl crate::Observer for Silent {
        fn event(&mut self, _: crate::StudyEvent<'_>) {}
    }
    let prepared = prepare(plan, &local, &mut Silent)?;
    let dir = prepared.dir.clone();
    let mut manifest = prepared.manifest.clone();
    let slurm_dir = record::slurm_dir(&dir);
    std::fs::create_dir_all(&slurm_dir).map_err(|source| StudyError::Io {
        what: "cannot create",
        path: slurm_dir.clone(),
        source,
    })?;
    let mut jobs: JobsRecord = record::read(&slurm_dir.join(JOBS))?.unwrap_or_default();
    jobs.command = slurm.command.clone();
    let search = SearchDesign::of(plan);
    if let Some(design) = &search {
        let gpus = gpus_per_cell(slurm.options.gres.as_deref()) as usize;
        let mut planner = SearchPlanner::of_design(design, gpus)?;
        let open = manifest
            .experiments
            .iter()
            .any(|e| !matches!(e.status, CellStatus::Completed | CellStatus::Failed));
        if !open && !planner.extend(&mut manifest, &dir) {
            return Err(StudyError::Refused(format!(
                "the search of {} has stopped ({}); nothing to submit",
                dir.display(),
                planner
                    .stopped
                    .map_or("it waits for no cell", |r| r.describe())
            )));
        }
        llem_results::write_json_atomic(&slurm_dir.join(SEARCH_DESIGN), design)?;
    }
    stage_cells(
        &plan.configs,
        opts.sampling_interval,
        opts.metrics_push.as_deref(),
        search.is_some(),
        &dir,
        &mut manifest,
    )?;
    let arrays = if search.is_some() {
        plan_search_array(&manifest, 1)
    } else {
        plan_arrays(&manifest)
    };
    if arrays.is_empty() {
        return Err(StudyError::Refused(format!(
            "every cell of {} is completed; nothing to submit",
            dir.display()
        )));
    }
    llem_results::write_json_atomic(&slurm_dir.join(DESIGN), &StudyDesign::of(plan))?;
    manifest.status = StudyStatus::Running;
    manifest.end_time = None;
    manifest.runner_pid = None;
    manifest.recount();
    llem_results::write_json_atomic(&dir.join(layout::MANIFEST), &manifest)?;

    // The runner URLs' credentials go to the tasks in their environment, not in a file.
    let credentials: Vec<(String, String)> =
        llem_config::credentials::env_var(plan.configs.iter().map(|c| &c.config))
            .into_iter()
            .collect();
    let number = jobs.submissions.len() as u32 + 1;
    let sub_dir = record::submission_dir(&dir, number);
    std::fs::create_dir_all(&sub_dir).map_err(|source| StudyError::Io {
        what: "cannot create",
        path: sub_dir.clone(),
        source,
    })?;
    let dir_arg = dir.display().to_string();
    let mut record = submission_record(plan, opts, slurm, number);
    record.search = search.is_some();
    record.control = control_cell(plan, opts, &dir, &sub_dir, number)?;
    jobs.submissions.push(record.clone());
    let name = job_name(&plan.study_name);
    let mut after: Option<String> = None;
    for a in &arrays {
        let script = sub_dir.join(format!("cycle-{}.sh", a.cycle));
        write_script(
            &script,
            &slurm.command,
            &[
                "__slurm-task".into(),
                dir_arg.clone(),
                number.to_string(),
                a.cycle.to_string(),
            ],
        )?;
        let mut args = array_args(
            &slurm.options,
            &name,
            a.cells.len(),
            after.as_deref(),
            &sub_dir.join(format!("cycle-{}_%a.out", a.cycle)),
        );
        args.push(script.display().to_string());
        let job = match commands::sbatch(&args, &credentials) {
            Ok(j) => j,
            Err(e) => {
                // Half a study queued would run without its later cycles: take it back.
                let ids: Vec<String> = record.arrays.iter().map(|x| x.job_id.clone()).collect();
                let _ = commands::cancel(&ids);
                refused(&dir, &mut manifest, &e);
                return Err(e);
            }
        };
        record.arrays.push(ArrayRecord {
            cycle: a.cycle,
            job_id: job.clone(),
            cells: a.cells.clone(),
        });
        if let Some(last) = jobs.submissions.last_mut() {
            *last = record.clone();
        }
        llem_results::write_json_atomic(&slurm_dir.join(JOBS), &jobs)?;
        after = Some(job);
    }
    // A search's compile job submits its next batch: it hands the tasks their credentials.
    let compile_env: &[(String, String)] = if record.search { &credentials } else { &[] };
    let compile = queue_compile(
        &slurm.command,
        &slurm.options,
        &name,
        &sub_dir,
        dir_arg,
        &record.arrays,
        compile_env,
    );
    record.compile_job = Some(compile.inspect_err(|e| refused(&dir, &mut manifest, e))?);
    if let Some(last) = jobs.submissions.last_mut() {
        *last = record.clone();
    }
    llem_results::write_json_atomic(&slurm_dir.join(JOBS), &jobs)?;
    for a in &record.arrays {
        for (t, &i) in a.cells.iter().enumerate() {
            if let Some(e) = manifest.experiments.get_mut(i) {
                e.slurm_job = Some(format!("{}_{t}", a.job_id));
            }
        }
    }
    llem_results::write_json_atomic(&dir.join(layout::MANIFEST), &manifest)?;
    Ok(Submission {
        dir,
        manifest,
        record,
        resumed: prepared.resumed,
    })
}

/// The record of submission `number`, before its jobs are queued.
fn submission_record(
    plan: &StudyPlan,
    opts: &StudyOptions,
    slurm: &SlurmExecution,
    number: u32,
) -> SubmissionRecord {
    let exec = &plan.execution;
    SubmissionRecord {
        number,
        submitted_at: iso8601_utc(unix_now_s()),
        deadline_unix_s: exec
            .wall_clock_timeout_hours
            .filter(|h| h.is_finite() && *h > 0.0)
            .map(|h| unix_now_s() + h * 3600.0),
        options: slurm.options.clone(),
        locks: TaskLocks {
            dir: opts.lock_dir.clone(),
            resources: opts.lock_resources.clone(),
        },
        no_gaps: opts.no_gaps,
        sampling_interval_ms: opts.sampling_interval.as_secs_f64() * 1000.0,
        metrics_push: opts.metrics_push.clone(),
        kill_grace_s: opts.kill_grace.as_secs_f64(),
        experiment_timeout_s: exec.experiment_timeout_seconds,
        gaps_s: (exec.experiment_gap_seconds, exec.cycle_gap_seconds),
        max_consecutive_failures: exec.max_consecutive_failures,
        breaker_cooldown_s: exec.circuit_breaker_cooldown_seconds,
        arrays: Vec::new(),
        compile_job: None,
        control: None,
        search: false,
    }
}

/// With `node_control`, writes the spec of the control cell each node measures first (the
/// study's first configuration) under the submission's directory.
fn control_cell(
    plan: &StudyPlan,
    opts: &StudyOptions,
    dir: &Path,
    sub_dir: &Path,
    number: u32,
) -> Result<Option<ControlRecord>, StudyError> {
    let Some(pc) = plan.configs.first().filter(|_| plan.execution.node_control) else {
        return Ok(None);
    };
    let spec = CellSpec {
        config: pc.config.clone(),
        config_hash: pc.digest.short(),
        experiment_id: format!("{}_control", study_stamp(dir)),
        // Each node's task points it at its own control cell.
        cell_dir: sub_dir.join("nodes"),
        baseline_cache_dir: dir.join(layout::STUDY_ARTEFACTS),
        sampling_interval_ms: opts.sampling_interval.as_secs_f64() * 1000.0,
        index: 0,
        cycle: 0,
        plan_warnings: pc.warnings.clone(),
        live_interval_ms: None,
        metrics_push: opts.metrics_push.clone(),
        label: Some(crate::runner::label_of(pc)),
    };
    let rel = format!("{}/sub-{number:03}/control_spec.json", record::SLURM_DIR);
    llem_results::write_json_atomic(&dir.join(&rel), &spec)?;
    Ok(Some(ControlRecord {
        label: crate::runner::label_of(pc),
        config_hash: pc.digest.short(),
        spec: rel,
    }))
}

/// Queues the job that compiles the study's results once every array has ended; if sbatch
/// refuses it, cancels the arrays (a study without its compile job would never finish).
pub(crate) fn queue_compile(
    command: &[String],
    options: &SlurmOptions,
    name: &str,
    sub_dir: &Path,
    dir_arg: String,
    arrays: &[ArrayRecord],
    env: &[(String, String)],
) -> Result<String, StudyError> {
    let compile_script = sub_dir.join("compile.sh");
    write_script(
        &compile_script,
        command,
        &["__slurm-compile".into(), dir_arg],
    )?;
    let ids: Vec<String> = arrays.iter().map(|x| x.job_id.clone()).collect();
    let mut args = vec![
        format!("--job-name={name}-compile"),
        format!("--output={}", sub_dir.join("compile.out").display()),
        format!("--dependency=afterany:{}", ids.join(":")),
        "--time=10".to_string(),
    ];
    common_args(options, &mut args, false);
    args.push(compile_script.display().to_string());
    commands::sbatch(&args, env).inspect_err(|_| {
        let _ = commands::cancel(&ids);
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gres_gpus_and_reserved_hours() {
        assert_eq!(gpus_per_cell(Some("gpu:1")), 1);
        assert_eq!(gpus_per_cell(Some("gpu:h100:2")), 2);
        assert_eq!(gpus_per_cell(Some("gpu")), 1);
        assert_eq!(gpus_per_cell(Some("gpu:2,nvme:1")), 2);
        assert_eq!(gpus_per_cell(Some("nvme:1")), 0);
        assert_eq!(gpus_per_cell(None), 0);
        let o = SlurmOptions {
            gres: Some("gpu:2".into()),
            time: Some("01:30:00".into()),
            ..SlurmOptions::default()
        };
        assert_eq!(gpu_hours_reserved(&o, 4), Some(12.0));
        let no_time = SlurmOptions {
            time: None,
            ..o.clone()
        };
        assert_eq!(gpu_hours_reserved(&no_time, 4), None);
    }

    #[test]
    fn array_arguments_carry_the_limit_dependency_and_extras() {
        let o = SlurmOptions {
            partition: Some("gpu".into()),
            gres: Some("gpu:1".into()),
            time: Some("02:00:00".into()),
            account: Some("acct".into()),
            max_parallel: Some(8),
            extra: vec!["--qos=high".into()],
        };
        let a = array_args(&o, "llem-s", 12, Some("41"), Path::new("/r/x_%a.out"));
        assert_eq!(
            a,
            [
                "--job-name=llem-s",
                "--array=0-11%8",
                "--output=/r/x_%a.out",
                "--partition=gpu",
                "--account=acct",
                "--gres=gpu:1",
                "--time=02:00:00",
                "--dependency=afterany:41",
                "--qos=high"
            ]
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(job_name("my study/1"), "llem-my_study_1");
    }
}
