//! Which Slurm settings a study runs with, and the executor that submits it.

use std::path::Path;

use llem_config::{ExecutorConfig, StudyPlan};
use llem_study::ResumeFrom;
use llem_study::slurm::{NodeIdentity, SlurmExecution, SlurmOptions};

use crate::{AppError, ExecutorChoice, SlurmOverrides};

/// The Slurm settings the study runs with, or `None` for a local run: the caller's executor
/// over the file's `study_execution.executor`, each given setting over the file's field.
/// Slurm settings with a local executor are refused, not ignored.
pub fn resolve(
    plan: &StudyPlan,
    executor: &ExecutorChoice,
    given: &SlurmOverrides,
) -> Result<Option<SlurmOptions>, AppError> {
    let from_file = match &plan.execution.executor {
        ExecutorConfig::Local => None,
        ExecutorConfig::Slurm(c) => Some(c.clone()),
    };
    let slurm = match (executor, from_file) {
        (ExecutorChoice::Local, _) | (ExecutorChoice::AsPlanned, None) => None,
        (ExecutorChoice::Slurm, f) | (ExecutorChoice::AsPlanned, f @ Some(_)) => {
            Some(f.unwrap_or_default())
        }
    };
    let Some(c) = slurm else {
        if plan.execution.node_control {
            return Err(AppError::Conflict(
                "study_execution.node_control measures a control cell on each node of a \
                 Slurm study; add --executor slurm, or remove it"
                    .into(),
            ));
        }
        let names = given_flags(given);
        if !names.is_empty() {
            return Err(AppError::Conflict(format!(
                "{} only apply to a Slurm study; add --executor slurm (or \
                     study_execution.executor: slurm in the file)",
                names.join(", ")
            )));
        }
        return Ok(None);
    };
    let mut extra = c.extra;
    extra.extend(given.extra.iter().cloned());
    Ok(Some(SlurmOptions {
        partition: given.partition.clone().or(c.partition),
        gres: given.gres.clone().or(c.gres),
        time: given.time.clone().or(c.time),
        account: given.account.clone().or(c.account),
        max_parallel: given.max_parallel.or(c.max_parallel),
        extra,
    }))
}

/// The settings given, by the names the CLI spells them with.
fn given_flags(given: &SlurmOverrides) -> Vec<&'static str> {
    [
        (given.partition.is_some(), "--partition"),
        (given.gres.is_some(), "--gres"),
        (given.time.is_some(), "--time"),
        (given.account.is_some(), "--account"),
        (given.max_parallel.is_some(), "--max-parallel"),
        (!given.extra.is_empty(), "--slurm-arg"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

/// The Slurm settings of the study a resume continues, when it was submitted to Slurm and
/// neither the caller nor the file names an executor: a study is resumed where it ran.
pub fn recorded_options(plan: &StudyPlan, resume: &ResumeFrom) -> Option<SlurmOptions> {
    let dir = llem_study::resume_target(plan, Path::new(&plan.output_dir), resume).ok()??;
    let jobs = llem_study::slurm::compile::jobs_of(&dir).ok()?;
    jobs.latest().map(|s| s.options.clone())
}

/// How a compute node starts llem: `LLEM_SLURM_COMMAND` when the site installs it elsewhere,
/// else `program` (shared storage puts it at the same path on every node).
fn node_command(program: &Path) -> Vec<String> {
    match std::env::var("LLEM_SLURM_COMMAND") {
        Ok(c) if !c.trim().is_empty() => c.split_whitespace().map(String::from).collect(),
        _ => vec![program.display().to_string()],
    }
}

/// The Slurm executor of a study with these settings, its nodes running `program`.
pub fn executor(options: SlurmOptions, program: &Path) -> llem_study::Slurm {
    llem_study::Slurm(SlurmExecution {
        options,
        command: node_command(program),
    })
}

/// This node as the task sees it: host name, and the GPUs Slurm gave the job (NVML; those
/// `SLURM_JOB_GPUS` names when it is set).
pub fn node_identity() -> NodeIdentity {
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(crate::host::hostname);
    let Ok(nvml) = llem_energy::sensors::nvml::init() else {
        return NodeIdentity {
            node,
            ..NodeIdentity::default()
        };
    };
    let allowed: Option<Vec<u32>> = std::env::var("SLURM_JOB_GPUS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let gpus = llem_energy::sensors::gpu_state::gpu_states(&nvml)
        .unwrap_or_default()
        .into_iter()
        .filter(|g| allowed.as_ref().is_none_or(|a| a.contains(&g.nvml_index)))
        .map(|g| llem_study::slurm::GpuIdentity {
            index: g.nvml_index,
            uuid: g.uuid,
            name: g.name,
        })
        .collect();
    NodeIdentity {
        node,
        gpus,
        gpu_driver: nvml.sys_driver_version().ok(),
    }
}
