//! What assembling `study_result.json` needs from the plan: the configurations' hashes and
//! labels in plan order, the cycles, the grid points skipped. Saved beside a Slurm study so
//! that whoever compiles its result (a task on a compute node, `llem study status`) needs
//! neither the study file nor the command line it was planned with.

use llem_config::StudyPlan;
use serde::{Deserialize, Serialize};

use crate::artefacts;
use crate::runner::label_of;

/// One configuration of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DesignConfig {
    /// Its `measurement_config_hash` (short).
    pub config_hash: String,
    /// Its label in tables.
    pub label: String,
}

/// The parts of a plan the study result is assembled from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyDesign {
    /// Configurations in plan order.
    pub configs: Vec<DesignConfig>,
    /// `n_cycles`.
    pub n_cycles: u32,
    /// `skipped_experiments` of the study result.
    pub skipped_experiments: Vec<serde_json::Value>,
}

impl StudyDesign {
    /// The design of `plan`.
    pub fn of(plan: &StudyPlan) -> StudyDesign {
        StudyDesign {
            configs: plan
                .configs
                .iter()
                .map(|pc| DesignConfig {
                    config_hash: pc.digest.short(),
                    label: label_of(pc),
                })
                .collect(),
            n_cycles: plan.execution.n_cycles,
            skipped_experiments: artefacts::skipped_experiments(plan),
        }
    }
}
