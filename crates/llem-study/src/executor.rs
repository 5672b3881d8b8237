//! Where a study's cells run, behind one seam: [`Local`] runs them one at a time as child
//! processes of this one; [`Slurm`] hands them to a cluster as job arrays and returns once
//! they are queued. Both write the same study directory, manifest and result.

use llem_config::StudyPlan;

use crate::StudyError;
use crate::runner::{Observer, StudyOptions, StudyOutcome, run_study};
use crate::slurm::{SlurmExecution, Submission, submit};

/// What an executor did with the study.
#[derive(Clone, Debug)]
pub enum Execution {
    /// The study ran here, to its end or until it was stopped.
    Finished(StudyOutcome),
    /// The cells are queued on a cluster; `llem study status` follows them.
    Submitted(Submission),
}

/// Runs or submits a study's cells (those not completed, on resume).
pub trait Executor {
    /// Runs the study (or submits it) with `opts`, telling `obs` what happens.
    fn execute(
        &self,
        plan: &StudyPlan,
        opts: &StudyOptions,
        obs: &mut dyn Observer,
    ) -> Result<Execution, StudyError>;
}

/// Child processes on this host, one cell at a time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Local;

impl Executor for Local {
    fn execute(
        &self,
        plan: &StudyPlan,
        opts: &StudyOptions,
        obs: &mut dyn Observer,
    ) -> Result<Execution, StudyError> {
        run_study(plan, opts, obs).map(Execution::Finished)
    }
}

/// One job array per cycle on a Slurm cluster.
#[derive(Clone, Debug)]
pub struct Slurm(pub SlurmExecution);

impl Executor for Slurm {
    fn execute(
        &self,
        plan: &StudyPlan,
        opts: &StudyOptions,
        _obs: &mut dyn Observer,
    ) -> Result<Execution, StudyError> {
        submit(plan, opts, &self.0).map(Execution::Submitted)
    }
}
