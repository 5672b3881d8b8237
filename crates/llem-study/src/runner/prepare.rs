//! Before the first cell: the study directory (new, or the one to resume, checked for drift),
//! its locks, its artefacts and its manifest.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use llem_config::StudyPlan;
use llem_config::plan::PlannedConfig;
use llem_results::layout;
use llem_results::time::{dir_stamp_utc, iso8601_utc, unix_now_s};
use llem_results::{
    CellStatus, ExperimentResult, Manifest, ManifestEntry, StudyStatus, StudySummary,
};

use super::{Observer, ResumeFrom, StudyEvent, StudyOptions, io_err};
use crate::locks::{self, DeviceLocks, Holder};
use crate::{StudyError, artefacts, resume};

fn protocol_json(plan: &StudyPlan) -> serde_json::Value {
    let mut v = serde_json::to_value(&plan.execution).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "shuffle_seed_used".into(),
            serde_json::json!(plan.shuffle_seed),
        );
    }
    v
}

/// A configuration's label in tables: its sweep label, else model / engine.
pub fn label_of(pc: &PlannedConfig) -> String {
    if pc.label.is_empty() {
        format!("{} / {}", pc.config.model, pc.config.engine.as_str())
    } else {
        pc.label.clone()
    }
}

/// A pending entry: configuration `pc` at position `index`, its `cycle`-th run.
pub(crate) fn pending_entry(pc: &PlannedConfig, index: usize, cycle: u32) -> ManifestEntry {
    let hash = pc.digest.short();
    ManifestEntry {
        index,
        cell_dir: layout::cell_dir_name(
            index,
            cycle,
            &pc.config.model,
            pc.config.engine.as_str(),
            &hash,
        ),
        config_hash: hash,
        config_summary: label_of(pc),
        cycle,
        status: CellStatus::Pending,
        result_file: None,
        log_file: None,
        error_type: None,
        error_message: None,
        started_at: None,
        completed_at: None,
        pid: None,
        attempts: 0,
        node: None,
        slurm_job: None,
        elapsed_seconds: None,
        inference_seconds: None,
        energy_joules: None,
        adj_energy_joules: None,
        energy_scope: None,
        system_energy_joules: None,
        node_energy_joules: None,
        unattributed_joules: None,
        lifecycle_energy_joules: None,
        co2_g: None,
        system_co2_g: None,
        throughput_tok_s: None,
        mj_per_tok: None,
        mj_per_tok_adjusted: None,
        ttft_p50_ms: None,
        config: llem_results::manifest::RawConfig::of(&pc.config),
    }
}

/// The manifest of a new study: every run pending, in execution order; none for a search,
/// whose runs are added as it proposes them.
pub fn fresh_manifest(plan: &StudyPlan, llem_version: &str, host: &str) -> Manifest {
    let experiments = if plan.search.is_some() {
        Vec::new()
    } else {
        plan.runs
            .iter()
            .filter_map(|r| Some(pending_entry(plan.configs.get(r.config)?, r.index, r.cycle)))
            .collect()
    };
    let mut m = Manifest {
        schema_version: llem_results::manifest::MANIFEST_SCHEMA_VERSION.to_string(),
        study_name: plan.study_name.clone(),
        study_design_hash: plan.study_design_hash(),
        llem_version: llem_version.to_string(),
        source_file: plan
            .source
            .as_ref()
            .map(|p| absolute(p).display().to_string()),
        start_time: iso8601_utc(unix_now_s()),
        end_time: None,
        status: StudyStatus::Running,
        runner_pid: Some(std::process::id()),
        host: host.to_string(),
        measurement_protocol: protocol_json(plan),
        experiments,
        summary: StudySummary {
            unique_configurations: Some(plan.configs.len()),
            ..StudySummary::default()
        },
    };
    m.recount();
    m
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Holds the study directory's lock for the runner's lifetime; a held lock means "running".
fn lock_study_dir(dir: &Path) -> Result<std::fs::File, StudyError> {
    let path = dir.join(layout::STUDY_LOCK);
    match locks::try_lock_file(&path).map_err(io_err("cannot lock", &path))? {
        Some(f) => Ok(f),
        None => {
            let holder = resume::load_manifest(dir)
                .ok()
                .and_then(|m| m.runner_pid)
                .map_or_else(|| "another process".to_string(), |p| format!("PID {p}"));
            Err(StudyError::StillRunning {
                dir: dir.to_path_buf(),
                holder,
            })
        }
    }
}

fn take_device_locks(
    opts: &StudyOptions,
    plan: &StudyPlan,
    where_: &Path,
    obs: &mut dyn Observer,
) -> Result<Option<DeviceLocks>, StudyError> {
    let Some(dir) = &opts.lock_dir else {
        return Ok(None);
    };
    let holder = Holder {
        pid: std::process::id(),
        host: opts.host.clone(),
        started_at: iso8601_utc(unix_now_s()),
        purpose: format!("study '{}' in {}", plan.study_name, where_.display()),
    };
    let held = if opts.lock_wait {
        let stop = || opts.interrupts.load(Ordering::SeqCst) > 0;
        let mut on_wait = |e: &locks::LockError| {
            obs.event(StudyEvent::Note(&locks::waiting_note(e)));
        };
        locks::acquire_waiting(dir, &opts.lock_resources, &holder, &stop, &mut on_wait)?
            .ok_or(StudyError::Cancelled)?
    } else {
        locks::acquire(dir, &opts.lock_resources, &holder)?
    };
    tracing::info!(devices = ?held.resources(), "holding the device locks");
    Ok(Some(held))
}

/// Where the study lives and what it already did.
pub(crate) struct Prepared {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: Manifest,
    pub(crate) resumed: bool,
    _study_lock: std::fs::File,
    _device_locks: Option<DeviceLocks>,
}

pub(crate) fn prepare(
    plan: &StudyPlan,
    opts: &StudyOptions,
    obs: &mut dyn Observer,
) -> Result<Prepared, StudyError> {
    let fresh = fresh_manifest(plan, &opts.llem_version, &opts.host);
    let stamp = dir_stamp_utc(unix_now_s());
    let resume_dir = match &opts.resume {
        ResumeFrom::New => None,
        ResumeFrom::Latest => Some(resume::find_resumable(
            &opts.results_dir,
            &plan.study_name,
            fresh.source_file.as_deref().map(Path::new),
        )?),
        ResumeFrom::Dir(d) => Some(d.clone()),
    };
    if let Some(dir) = resume_dir {
        let old = resume::load_manifest(&dir)?;
        let study_lock = lock_study_dir(&dir)?;
        // Holding the lock, this runner is the directory's one writer: what a killed
        // writer left half-written is garbage.
        let removed = llem_results::remove_stale_temps(&dir);
        if removed > 0 {
            tracing::info!("removed {removed} temporary files left by a killed writer");
        }
        if old.study_design_hash != fresh.study_design_hash {
            return Err(StudyError::Drift {
                details: resume::drift_details(&dir, plan),
                dir,
                old: old.study_design_hash,
                new: fresh.study_design_hash,
            });
        }
        let device_locks = take_device_locks(opts, plan, &dir, obs)?;
        let mut manifest = if plan.search.is_some() {
            resume::merge_search(&old, fresh)
        } else {
            resume::merge(&old, fresh)
        };
        recover_finished_cells(&dir, &old, &mut manifest);
        artefacts::write_resumed(
            &dir.join(layout::STUDY_ARTEFACTS),
            &stamp,
            &opts.environment,
        )?;
        return Ok(Prepared {
            dir,
            manifest,
            resumed: true,
            _study_lock: study_lock,
            _device_locks: device_locks,
        });
    }
    // The locks first: a study that cannot take them leaves no directory behind.
    let nominal = layout::study_dir(&opts.results_dir, &plan.study_name, &stamp);
    let device_locks = take_device_locks(opts, plan, &nominal, obs)?;
    // Named when it starts, not when it began to wait for the devices.
    let stamp = dir_stamp_utc(unix_now_s());
    // Two studies of one name started in the same second get distinct directories.
    let dir = layout::create_study_dir(&opts.results_dir, &plan.study_name, &stamp).map_err(
        io_err("cannot create a study directory in", &opts.results_dir),
    )?;
    let study_lock = lock_study_dir(&dir)?;
    artefacts::write_new(&dir.join(layout::STUDY_ARTEFACTS), plan, &opts.environment)?;
    Ok(Prepared {
        dir,
        manifest: fresh,
        resumed: false,
        _study_lock: study_lock,
        _device_locks: device_locks,
    })
}

/// A cell whose result was written just before the runner died (it was `running` in the old
/// manifest, and its `result.json` reads): adopt it rather than measure it again.
fn recover_finished_cells(dir: &Path, old: &Manifest, manifest: &mut Manifest) {
    for e in &mut manifest.experiments {
        let was_running = old.experiments.iter().any(|o| {
            o.config_hash == e.config_hash && o.cycle == e.cycle && o.status == CellStatus::Running
        });
        if !was_running || e.status == CellStatus::Completed {
            continue;
        }
        let rel = format!("{}/{}", e.cell_dir, layout::RESULT);
        if let Some(r) = read_result(&dir.join(&rel)) {
            fill_completed(e, &r, rel, None);
        }
    }
    manifest.recount();
}

pub(crate) fn read_result(path: &Path) -> Option<ExperimentResult> {
    let text = llem_config::files::read_record_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

pub(crate) fn fill_completed(
    e: &mut ManifestEntry,
    r: &ExperimentResult,
    rel: String,
    elapsed: Option<f64>,
) {
    e.status = CellStatus::Completed;
    e.result_file = Some(rel);
    e.error_type = None;
    e.error_message = None;
    e.pid = None;
    e.completed_at
        .get_or_insert_with(|| iso8601_utc(unix_now_s()));
    if elapsed.is_some() {
        e.elapsed_seconds = elapsed;
    }
    e.inference_seconds = Some(r.total_inference_time_sec);
    e.energy_joules = Some(r.total_energy_j);
    e.adj_energy_joules = r.energy_adjusted_j;
    e.energy_scope = r.energy_scope.clone();
    e.system_energy_joules = r.system_energy_j;
    e.node_energy_joules = r.node_energy_j;
    e.unattributed_joules = r.unattributed_j;
    e.lifecycle_energy_joules = r.lifecycle_energy_j;
    e.co2_g = r.emissions.as_ref().and_then(|x| x.co2_g);
    e.system_co2_g = r.emissions.as_ref().and_then(|x| x.system_co2_g);
    e.throughput_tok_s = Some(r.avg_tokens_per_second);
    e.mj_per_tok = r.mj_per_tok_total;
    e.mj_per_tok_adjusted = r.mj_per_tok_adjusted;
    e.ttft_p50_ms = r.latency_stats.as_ref().and_then(|l| l.ttft_median_ms);
}
