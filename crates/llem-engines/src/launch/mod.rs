//! Launching engine processes outside llem: local processes in their own process group and
//! Docker containers. Shared by the serving engines and the transformers worker; knows no
//! engine in particular.

pub(crate) mod docker;
pub(crate) mod process;

pub use docker::{docker_gpus, docker_run, hf_cache, remove_container};
pub use process::{ServerProcess, free_port, log_tail, open_log, wait_exit, which};
