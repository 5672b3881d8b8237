//! One module per sensor family.

pub(crate) mod amdgpu;
pub mod estimate;
pub mod gpu_state;
pub mod node;
pub mod nvml;
pub mod rapl;
