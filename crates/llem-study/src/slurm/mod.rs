//! The Slurm executor: a study as job arrays on an existing cluster, no scheduler of llem's
//! own. The login node plans and submits ([`submit`]); each array task runs one cell on a
//! compute node ([`task`]); the manifest and the study result are compiled from the tasks'
//! own files and Slurm's records ([`compile`]). docs/cluster.md says what a site needs.

mod breaker;
pub mod commands;
pub mod compile;
pub mod record;
pub mod search;
pub mod submit;
pub mod task;

pub use compile::{Compiled, compile, compile_and_write};
pub use record::{GpuIdentity, NodeIdentity, SlurmOptions};
pub use search::{SearchStep, step as search_step};
pub use submit::{SlurmExecution, Submission, submit};
pub use task::{TaskArgs, run_task};
