//! `llem run --executor slurm` (submit, `--dry-run`, resume) and the two hidden commands a
//! Slurm study runs on its compute nodes: `__slurm-task` (one cell) and `__slurm-compile`
//! (the manifest and result once the arrays ended).

use std::io::Write;
use std::path::Path;

use llem_config::StudyPlan;
use llem_study::slurm::record::TaskState;
use llem_study::slurm::submit::{PlannedArray, dry_run, gpu_hours_reserved, gpus_per_cell};
use llem_study::slurm::{SlurmOptions, Submission};

use crate::cli::{RunArgs, SlurmCompileArgs, SlurmTaskArgs};
use crate::exit;

/// What was submitted, and how to follow it; returns the exit code.
pub fn print_submission(s: &Submission, args: &RunArgs) -> i32 {
    let cells: usize = s.record.arrays.iter().map(|a| a.cells.len()).sum();
    if s.record.search {
        eprintln!(
            "llem: {} search {}: its first batch of {} cells as job {}; job {} reads what it \
             measured and submits the next batch, until the search stops",
            submitted(s),
            s.dir.display(),
            cells,
            s.record.arrays.first().map_or("-", |a| a.job_id.as_str()),
            s.record.compile_job.as_deref().unwrap_or("-"),
        );
    } else {
        print_arrays(s, cells);
    }
    eprintln!("  follow with: llem study status {}", s.dir.display());
    if args.json {
        let v = serde_json::json!({
            "study_dir": s.dir,
            "submission": s.record,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    exit::OK
}

/// "submitted", or "resubmitted" for a resumed study.
fn submitted(s: &Submission) -> &'static str {
    if s.resumed {
        "resubmitted"
    } else {
        "submitted"
    }
}

/// The arrays of a grid's submission, one per cycle.
fn print_arrays(s: &Submission, cells: usize) {
    eprintln!(
        "llem: {} study {}: {} cells in {} job arrays (one per cycle, each after the one \
         before), then job {} compiles the result",
        submitted(s),
        s.dir.display(),
        cells,
        s.record.arrays.len(),
        s.record.compile_job.as_deref().unwrap_or("-"),
    );
    for a in &s.record.arrays {
        eprintln!(
            "  cycle {}: job {} ({} tasks)",
            a.cycle,
            a.job_id,
            a.cells.len()
        );
    }
}

/// One task of a planned array.
#[derive(serde::Serialize)]
struct TaskView<'a> {
    task: usize,
    index: usize,
    cell_dir: &'a str,
    config_hash: &'a str,
    label: &'a str,
}

/// One planned array.
#[derive(serde::Serialize)]
struct ArrayView<'a> {
    cycle: u32,
    tasks: Vec<TaskView<'a>>,
}

/// The Slurm part of `--dry-run`, for the text and the JSON alike.
#[derive(serde::Serialize)]
struct DryRun<'a> {
    options: &'a SlurmOptions,
    arrays: Vec<ArrayView<'a>>,
    /// A search's proposals per array; its arrays are not known before it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    search_batch: Option<u32>,
    /// Cells (a search's: its budget, the most it can run).
    cells: usize,
    gpus_per_cell: u32,
    gpu_hours_reserved: Option<f64>,
}

/// The arrays of a new submission of `m` (planned by `dry_run`), task by task.
fn dry_run_view<'a>(
    m: &'a llem_results::Manifest,
    arrays: &[PlannedArray],
    options: &'a SlurmOptions,
) -> DryRun<'a> {
    let arrays: Vec<ArrayView<'a>> = arrays
        .iter()
        .map(|a| ArrayView {
            cycle: a.cycle,
            tasks: a
                .cells
                .iter()
                .enumerate()
                .filter_map(|(task, &i)| {
                    let e = m.experiments.get(i)?;
                    Some(TaskView {
                        task,
                        index: e.index,
                        cell_dir: &e.cell_dir,
                        config_hash: &e.config_hash,
                        label: &e.config_summary,
                    })
                })
                .collect(),
        })
        .collect();
    let cells = arrays.iter().map(|a| a.tasks.len()).sum();
    DryRun {
        options,
        arrays,
        search_batch: None,
        cells,
        gpus_per_cell: gpus_per_cell(options.gres.as_deref()),
        gpu_hours_reserved: gpu_hours_reserved(options, cells),
    }
}

/// The Slurm part of `--dry-run --json`: the arrays, which task runs which cell, GPU-hours.
pub fn dry_run_json(plan: &StudyPlan, options: &SlurmOptions) -> serde_json::Value {
    let (m, arrays) = dry_run(plan);
    serde_json::to_value(view_of(plan, &m, &arrays, options)).unwrap_or_default()
}

/// The dry run of `plan`: a search's budget stands for its cells, in batches.
fn view_of<'a>(
    plan: &StudyPlan,
    m: &'a llem_results::Manifest,
    arrays: &[PlannedArray],
    options: &'a SlurmOptions,
) -> DryRun<'a> {
    let mut v = dry_run_view(m, arrays, options);
    if let Some(spec) = &plan.search {
        let budget = spec.budget.runs(plan.runs.len()) as usize;
        v.search_batch = Some(spec.batch.max(1));
        v.cells = budget;
        v.gpu_hours_reserved = gpu_hours_reserved(options, budget);
    }
    v
}

/// `--dry-run` text for a Slurm study, after the plan.
pub fn print_dry_run(plan: &StudyPlan, options: &SlurmOptions, out: &mut dyn Write) {
    let (m, arrays) = dry_run(plan);
    let v = view_of(plan, &m, &arrays, options);
    match v.search_batch {
        Some(batch) => {
            let _ = writeln!(
                out,
                "\nSlurm: the search submits its proposals {batch} at a time, each batch one job \
                 array; a small job after each reads what it measured and submits the next, \
                 until the search stops (at most {} cells)",
                v.cells
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nSlurm: {} job arrays, one per cycle, each after the one before \
                 (--dependency=afterany); cells start in their planned order within a cycle",
                v.arrays.len()
            );
        }
    }
    let args = llem_study::slurm::submit::array_args(
        options,
        "llem-…",
        v.search_batch
            .map(|b| b as usize)
            .or(v.arrays.first().map(|a| a.tasks.len()))
            .unwrap_or(0),
        None,
        Path::new("<study>/_slurm/sub-001/cycle-0_%a.out"),
    );
    let _ = writeln!(out, "  sbatch {}", args.join(" "));
    for a in &v.arrays {
        let _ = writeln!(
            out,
            "  cycle {} (array 0-{}):",
            a.cycle,
            a.tasks.len().saturating_sub(1)
        );
        for t in &a.tasks {
            let _ = writeln!(out, "    task {:>3} -> #{:03} {}", t.task, t.index, t.label);
        }
    }
    if plan.execution.node_control
        && let Some(pc) = plan.configs.first()
    {
        let _ = writeln!(
            out,
            "  node control: each node measures #1's configuration ({}) once, before its first \
             cell (not counted in the GPU-hours below)",
            llem_study::runner::label_of(pc)
        );
    }
    let (cells, gpus) = (v.cells, v.gpus_per_cell);
    match v.gpu_hours_reserved {
        Some(h) => {
            let _ = writeln!(
                out,
                "  GPU-hours reserved at most: {cells} cells x {gpus} GPU x {} = {h:.1}",
                options.time.as_deref().unwrap_or("-")
            );
        }
        None if gpus == 0 => {
            let _ = writeln!(out, "  GPU-hours: none asked (no gpu in --gres)");
        }
        None => {
            let _ = writeln!(
                out,
                "  GPU-hours: unbounded until --time sets a limit per cell ({cells} cells x {gpus} GPU)"
            );
        }
    }
    let timeout = plan.execution.experiment_timeout_seconds;
    if let Some(t) = options.time.as_deref()
        && let Ok(Some(secs)) = llem_config::slurm_time_seconds(t)
        && (secs as f64) < timeout
    {
        let _ = writeln!(
            out,
            "  warning: --time {t} is shorter than the cell timeout ({timeout:.0} s); Slurm may \
             end a cell that llem would let finish"
        );
    }
}

/// `llem __slurm-task DIR SUBMISSION CYCLE`: runs the cell of `SLURM_ARRAY_TASK_ID`.
pub fn task(a: &SlurmTaskArgs) -> i32 {
    llem_app::logging::init(0);
    let env = |name: &str| std::env::var(name).ok();
    let interrupts = super::study::interrupt_counter();
    let args = match llem_app::slurm::task_args(&a.dir, a.submission, a.cycle, interrupts, &env) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("llem: {e}");
            return exit::of(&e);
        }
    };
    println!(
        "llem: task {} of cycle {} on {} (job {})",
        args.task_index, a.cycle, args.node.node, args.job_id_raw
    );
    let mut print = |m: &llem_study::CellMessage| match m {
        llem_study::CellMessage::Phase { phase, detail, .. } => println!("  {phase}: {detail}"),
        llem_study::CellMessage::PhaseDone { phase, summary } => {
            println!("  {phase} done: {summary}");
        }
        llem_study::CellMessage::Note { message } => println!("  note: {message}"),
        llem_study::CellMessage::Failed {
            error_type,
            message,
        } => println!("  failed ({error_type}): {message}"),
        _ => {}
    };
    match llem_study::slurm::run_task(&args, &mut print) {
        Ok(end) => {
            println!("llem: task ended: {end:?}");
            match end {
                TaskState::Completed | TaskState::Skipped => exit::OK,
                TaskState::Failed | TaskState::Running => exit::FAILURE,
                TaskState::Interrupted => exit::INTERRUPTED,
            }
        }
        Err(e) => {
            eprintln!("llem: {e}");
            exit::FAILURE
        }
    }
}

/// `llem __slurm-compile DIR`: the manifest and, once settled, `study_result.json`; for a
/// search, the next batch of proposals until the search stops.
pub fn compile(a: &SlurmCompileArgs) -> i32 {
    match llem_study::slurm::search_step(&a.dir) {
        Ok(llem_study::slurm::SearchStep::Next {
            batch,
            array,
            cells,
            compile_job,
        }) => {
            println!(
                "llem: search batch {batch}: {cells} cells as job {array}; job {compile_job} \
                 reads them and picks the next"
            );
            exit::OK
        }
        Ok(llem_study::slurm::SearchStep::Settled(c)) => {
            let s = &c.manifest.summary;
            println!(
                "llem: study {}: {} completed, {} failed, {} skipped, {} left",
                c.manifest.status.as_str(),
                s.completed,
                s.failed,
                s.skipped,
                s.pending
            );
            exit::OK
        }
        Err(e) => {
            eprintln!("llem: {e}");
            exit::FAILURE
        }
    }
}
