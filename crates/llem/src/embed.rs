//! Entry points for a program that embeds llem (the Python package, `llem-py`): the CLI's own
//! planning, measuring and study running, with the caller's event sink and stop flag in place
//! of the terminal's bars and signal handlers. Options arrive as `llem run` arguments, so they
//! are validated, defaulted and reported exactly as on the command line.

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use clap::Parser;
use llem_config::{Env, StudyPlan};
use llem_harness::{Event, ExperimentOutcome, HarnessError, Progress};
pub use llem_study::{Launcher, StudyOutcome};
use llem_study::{ResumeFrom, StudyEvent};

use crate::cli::RunArgs;
use crate::commands::execute::SingleError;

/// Why an embedded call did not do what it was asked.
#[derive(Debug)]
pub enum EmbedError {
    /// Invalid options or configuration; the message carries file:line:col and the nearest
    /// valid key, as the CLI prints them.
    Config(String),
    /// Stopped by the caller's flag (the run was cleaned up).
    Cancelled,
    /// Anything else that failed.
    Failed(String),
}

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Config(m) | Self::Failed(m) => f.write_str(m.trim_end()),
            Self::Cancelled => f.write_str("interrupted"),
        }
    }
}

/// `llem run`'s arguments on their own, parsed as the CLI parses them.
#[derive(Parser)]
#[command(name = "llem run", no_binary_name = true)]
struct RunOnly {
    #[command(flatten)]
    args: RunArgs,
}

/// A plan and the `llem run` arguments it came from.
pub struct Planned {
    /// The plan.
    pub plan: StudyPlan,
    args: RunArgs,
}

impl Planned {
    /// Configuration warnings, each once.
    pub fn warnings(&self) -> Vec<String> {
        crate::commands::study::plan_warnings(&self.plan)
    }

    /// Whether it is one experiment (measured in this process) rather than a study.
    pub fn is_single(&self) -> bool {
        self.plan.runs.len() == 1 && self.args.resume_dir.is_none() && !self.args.resume
    }
}

/// Plans what `args` (as after `llem run`) name.
pub fn plan<I, T>(args: I) -> Result<Planned, EmbedError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = RunOnly::try_parse_from(args)
        .map_err(|e| EmbedError::Config(e.render().to_string()))?
        .args;
    let env = Env::from_process();
    let plan = crate::commands::run::plan_of(&args, &env)
        .map_err(|e| EmbedError::Config(e.to_string()))?;
    Ok(Planned { plan, args })
}

/// The plan as `llem run --dry-run --json` prints it, memory estimates included.
pub fn plan_json(planned: &Planned, per_run_config: bool) -> Result<String, EmbedError> {
    let mut plan = planned.plan.clone();
    let env = Env::from_process();
    crate::memory::fill(
        &mut plan,
        crate::commands::run::model_cache_dir(&env).as_deref(),
    );
    let view = llem_config::plan::PlanJson {
        plan: &plan,
        per_run_config,
    };
    serde_json::to_string(&view).map_err(|e| EmbedError::Failed(e.to_string()))
}

/// Harness progress as JSON objects (the lines a study's cell prints), to `sink`.
struct JsonEvents<'a>(&'a mut dyn FnMut(String));

impl Progress for JsonEvents<'_> {
    fn event(&mut self, e: Event) {
        if let Ok(s) = serde_json::to_string(&crate::commands::cell::message_of(e)) {
            (self.0)(s);
        }
    }
}

/// Measures a single experiment in this process. Progress goes to `events` as JSON objects;
/// setting `cancel` stops the run at the next decode step, cleanly.
pub fn measure(
    planned: &Planned,
    events: &mut dyn FnMut(String),
    cancel: Arc<AtomicBool>,
) -> Result<ExperimentOutcome, EmbedError> {
    if !planned.is_single() {
        return Err(EmbedError::Config(format!(
            "this configuration plans {} runs (a study): use run_study",
            planned.plan.runs.len()
        )));
    }
    here_only(planned)?;
    crate::commands::execute::init_logging(planned.args.verbose);
    let args = &planned.args;
    crate::commands::execute::measure_one(
        &planned.plan,
        args.no_lock,
        args.interval,
        &mut JsonEvents(events),
        cancel,
    )
    .map_err(|e| match e {
        SingleError::Harness(HarnessError::Cancelled) => EmbedError::Cancelled,
        SingleError::Harness(e @ (HarnessError::Config(_) | HarnessError::Dataset(_))) => {
            EmbedError::Config(e.to_string())
        }
        e => EmbedError::Failed(e.to_string()),
    })
}

/// Study events as JSON objects, to `sink`.
struct StudyEvents<'a>(&'a mut dyn FnMut(String));

impl llem_study::Observer for StudyEvents<'_> {
    fn event(&mut self, e: StudyEvent<'_>) {
        let v = match e {
            StudyEvent::Started {
                dir,
                manifest,
                resumed,
            } => serde_json::json!({
                "event": "study_started",
                "dir": dir,
                "total": manifest.summary.total_experiments,
                "resumed": resumed,
            }),
            StudyEvent::CellStarted { entry, .. } => serde_json::json!({
                "event": "cell_started",
                "index": entry.index,
                "cycle": entry.cycle,
                "label": entry.config_summary,
            }),
            StudyEvent::Cell { entry, message } => serde_json::json!({
                "event": "cell",
                "index": entry.index,
                "message": message,
            }),
            StudyEvent::CellFinished { entry, .. } => serde_json::json!({
                "event": "cell_finished",
                "index": entry.index,
                "status": entry.status,
                "error": entry.error_message,
            }),
            StudyEvent::Waiting { reason, seconds } => serde_json::json!({
                "event": "waiting",
                "reason": format!("{reason:?}"),
                "seconds": seconds,
            }),
            StudyEvent::WaitLeft { left_s, .. } => {
                serde_json::json!({ "event": "wait_left", "left_s": left_s })
            }
            StudyEvent::Note(n) => serde_json::json!({ "event": "note", "message": n }),
        };
        (self.0)(v.to_string());
    }
}

/// Refuses a plan whose cells are to run on Slurm: Python runs them on this host only, and
/// running them here would ignore what the file asks.
fn here_only(planned: &Planned) -> Result<(), EmbedError> {
    match crate::commands::slurm::resolve(&planned.plan, &planned.args) {
        Ok(None) => Ok(()),
        Ok(Some(_)) => Err(EmbedError::Config(
            "this study runs on Slurm (study_execution.executor or --executor slurm); submit it \
             with the `llem run` command: from Python, studies run on this host only"
                .into(),
        )),
        Err(e) => Err(EmbedError::Config(e)),
    }
}

/// Runs (or resumes) a study: each cell as `launcher` started in a child process, progress
/// to `events`. Each increment of `interrupts` is one Ctrl-C: the first stops after the
/// current cell is terminated; the study ends `interrupted`, resumable.
pub fn study(
    planned: &Planned,
    launcher: Launcher,
    interrupts: Arc<AtomicUsize>,
    events: &mut dyn FnMut(String),
) -> Result<StudyOutcome, EmbedError> {
    here_only(planned)?;
    let args = &planned.args;
    let resume = if let Some(d) = &args.resume_dir {
        ResumeFrom::Dir(d.clone())
    } else if args.resume {
        ResumeFrom::Latest
    } else {
        ResumeFrom::New
    };
    let mut plan = planned.plan.clone();
    crate::commands::study::apply_overrides(&mut plan, args);
    let opts = crate::commands::study::study_options(&plan, args, resume, launcher, interrupts)
        .map_err(|e| EmbedError::Config(e.message))?;
    llem_study::run_study(&plan, &opts, &mut StudyEvents(events)).map_err(|e| match e {
        llem_study::StudyError::Drift { .. } | llem_study::StudyError::NothingToResume { .. } => {
            EmbedError::Config(e.to_string())
        }
        e => EmbedError::Failed(e.to_string()),
    })
}
