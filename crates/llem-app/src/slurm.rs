//! Which Slurm settings a study runs with, and the executor that submits it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

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

/// Reads Slurm variable `name` of `env` as a number.
fn env_number<T: std::str::FromStr>(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
) -> Result<T, AppError> {
    let text = env(name).ok_or_else(|| AppError::Option {
        option: name.into(),
        message: "not set: this command runs inside a Slurm array task".into(),
    })?;
    text.trim().parse().map_err(|_| AppError::Option {
        option: name.into(),
        message: format!("not a number: {text:?}"),
    })
}

/// The array task this process is, from Slurm's environment as `env` reads it
/// (`SLURM_ARRAY_TASK_ID`, `SLURM_JOB_ID`; `SLURM_JOB_GPUS`, the GPUs it locks, as `gpuN`):
/// task `submission`/`cycle` of the study in `dir`, stopped by `interrupts`.
pub fn task_args(
    dir: &Path,
    submission: u32,
    cycle: u32,
    interrupts: Arc<AtomicUsize>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<llem_study::slurm::TaskArgs, AppError> {
    let task_index = env_number::<usize>(env, "SLURM_ARRAY_TASK_ID")?;
    let job = env_number::<u64>(env, "SLURM_JOB_ID")?;
    Ok(llem_study::slurm::TaskArgs {
        dir: dir.to_path_buf(),
        submission,
        cycle,
        task_index,
        job_id_raw: job.to_string(),
        node: node_identity(),
        lock_resources: env("SLURM_JOB_GPUS")
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.split(',').map(|g| format!("gpu{}", g.trim())).collect()),
        interrupts,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_task_is_its_array_index_and_job_and_locks_the_gpus_slurm_gave_it() {
        let env = env_of(&[
            ("SLURM_ARRAY_TASK_ID", " 3 "),
            ("SLURM_JOB_ID", "812"),
            ("SLURM_JOB_GPUS", "2, 5"),
        ]);
        let t = task_args(Path::new("/s"), 1, 2, Arc::default(), &env).unwrap();
        assert_eq!((t.task_index, t.job_id_raw.as_str()), (3, "812"));
        assert_eq!((t.submission, t.cycle), (1, 2));
        assert_eq!(t.lock_resources, Some(vec!["gpu2".into(), "gpu5".into()]));
        let no_gpus = env_of(&[("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_JOB_ID", "1")]);
        let t = task_args(Path::new("/s"), 1, 1, Arc::default(), &no_gpus).unwrap();
        assert_eq!(t.lock_resources, None);
    }

    #[test]
    fn outside_an_array_task_the_missing_variable_is_named() {
        let e = task_args(Path::new("/s"), 1, 1, Arc::default(), &env_of(&[])).unwrap_err();
        assert!(matches!(&e, AppError::Option { option, .. } if option == "SLURM_ARRAY_TASK_ID"));
        let bad = env_of(&[("SLURM_ARRAY_TASK_ID", "x"), ("SLURM_JOB_ID", "1")]);
        let e = task_args(Path::new("/s"), 1, 1, Arc::default(), &bad).unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
    }
}
