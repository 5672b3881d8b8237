//! A search study on Slurm: each batch of proposals runs as one job array, and the study's
//! compile job after it reads what the array measured, asks the search for its next batch and
//! submits that array with another compile job after it, until the search stops; the last
//! one compiles `study_result.json`. The search is the one the local runner makes (the same
//! proposals for the same seed and measurements); it needs only the study directory, where
//! the submission saved its candidates (`_slurm/search_design.json`).

use std::path::Path;

use llem_config::credentials::RUNNER_CREDENTIALS_ENV;
use llem_results::layout;

use super::compile::{Compiled, compile_and_write, compile_with, write_compiled};
use super::record::{self, ArrayRecord, BREAKER, JOBS, SEARCH_DESIGN};
use super::submit::{
    array_args, gpus_per_cell, job_name, plan_search_array, queue_compile, refused, stage_cells,
    write_script,
};
use crate::StudyError;
use crate::runner::search::{SearchDesign, SearchPlanner};

/// What a search's compile job did.
#[derive(Debug)]
pub enum SearchStep {
    /// It submitted the next batch.
    Next {
        /// The batch number.
        batch: u32,
        /// Its array job.
        array: String,
        /// Its cells.
        cells: usize,
        /// The compile job after it.
        compile_job: String,
    },
    /// The search is over (stopped by its rule, or halted): the study is compiled.
    Settled(Box<Compiled>),
}

/// Why the search must not go on although it has not stopped: the circuit breaker tripped, or
/// the study's wall-clock limit passed.
fn halted(dir: &Path, deadline_unix_s: Option<f64>) -> Option<String> {
    if record::slurm_dir(dir).join(BREAKER).exists() {
        return Some("the circuit breaker tripped".into());
    }
    deadline_unix_s
        .filter(|d| llem_results::time::unix_now_s() >= *d)
        .map(|_| "the study's wall-clock limit passed".into())
}

/// One step of a search's compile job: the next batch submitted, or the study settled. A study
/// that is no search is compiled as always.
pub fn step(dir: &Path) -> Result<SearchStep, StudyError> {
    let sdir = record::slurm_dir(dir);
    let Some(design) = record::read::<SearchDesign>(&sdir.join(SEARCH_DESIGN))? else {
        return compile_and_write(dir).map(|c| SearchStep::Settled(Box::new(c)));
    };
    let compiled = compile_with(dir, false)?;
    let mut jobs = compiled.jobs.clone();
    let Some(mut sub) = jobs.latest().cloned().filter(|s| s.search) else {
        return compile_and_write(dir).map(|c| SearchStep::Settled(Box::new(c)));
    };
    let mut manifest = compiled.manifest;
    if let Some(why) = halted(dir, sub.deadline_unix_s) {
        let note = format!("search halted before its next batch: {why}; --resume continues it");
        if !manifest.summary.warnings.contains(&note) {
            manifest.summary.warnings.push(note);
        }
        llem_results::write_json_atomic(&dir.join(layout::MANIFEST), &manifest)?;
        return settle(dir);
    }
    let gpus = gpus_per_cell(sub.options.gres.as_deref()) as usize;
    let mut planner = SearchPlanner::of_design(&design, gpus)?;
    if !planner.extend(&mut manifest, dir) {
        return settle(dir);
    }
    let interval = std::time::Duration::from_secs_f64(sub.sampling_interval_ms / 1000.0);
    stage_cells(
        planner.configs(),
        interval,
        sub.metrics_push.as_deref(),
        true,
        dir,
        &mut manifest,
    )?;
    let batch = sub.arrays.iter().map(|a| a.cycle).max().unwrap_or(0) + 1;
    let Some(array) = plan_search_array(&manifest, batch).pop() else {
        return settle(dir);
    };
    manifest.recount();
    llem_results::write_json_atomic(&dir.join(layout::MANIFEST), &manifest)?;

    // The tasks' credentials came to this job in its environment; they go on in theirs.
    let env: Vec<(String, String)> = std::env::var(RUNNER_CREDENTIALS_ENV)
        .ok()
        .map(|v| (RUNNER_CREDENTIALS_ENV.to_string(), v))
        .into_iter()
        .collect();
    let sub_dir = record::submission_dir(dir, sub.number);
    let name = job_name(&manifest.study_name);
    let dir_arg = dir.display().to_string();
    let script = sub_dir.join(format!("cycle-{batch}.sh"));
    write_script(
        &script,
        &jobs.command,
        &[
            "__slurm-task".into(),
            dir_arg.clone(),
            sub.number.to_string(),
            batch.to_string(),
        ],
    )?;
    let mut args = array_args(
        &sub.options,
        &name,
        array.cells.len(),
        None,
        &sub_dir.join(format!("cycle-{batch}_%a.out")),
    );
    args.push(script.display().to_string());
    let job = match super::commands::sbatch(&args, &env) {
        Ok(j) => j,
        Err(e) => {
            refused(dir, &mut manifest, &e);
            return Err(e);
        }
    };
    let submitted = ArrayRecord {
        cycle: batch,
        job_id: job.clone(),
        cells: array.cells.clone(),
    };
    let next = queue_compile(
        &jobs.command,
        &sub.options,
        &name,
        &sub_dir,
        dir_arg,
        std::slice::from_ref(&submitted),
        &env,
    );
    sub.arrays.push(submitted);
    let next = match next {
        Ok(n) => n,
        Err(e) => {
            refused(dir, &mut manifest, &e);
            return Err(e);
        }
    };
    sub.compile_job = Some(next.clone());
    if let Some(last) = jobs.submissions.last_mut() {
        *last = sub;
    }
    llem_results::write_json_atomic(&sdir.join(JOBS), &jobs)?;
    for (t, &i) in array.cells.iter().enumerate() {
        if let Some(e) = manifest.experiments.get_mut(i) {
            e.slurm_job = Some(format!("{job}_{t}"));
        }
    }
    llem_results::write_json_atomic(&dir.join(layout::MANIFEST), &manifest)?;
    Ok(SearchStep::Next {
        batch,
        array: job,
        cells: array.cells.len(),
        compile_job: next,
    })
}

/// The study compiled and written as it ends.
fn settle(dir: &Path) -> Result<SearchStep, StudyError> {
    let c = compile_with(dir, true)?;
    write_compiled(dir, &c)?;
    Ok(SearchStep::Settled(Box::new(c)))
}
