//! One module per subcommand.

pub mod cell;
pub mod config;
pub mod docs;
pub mod execute;
pub mod live;
pub mod measure;
pub mod report;
pub mod restore;
pub mod results;
pub mod results_diffusion;
pub mod run;
pub mod schedule;
pub mod slurm;
pub mod study;
pub mod study_status;
