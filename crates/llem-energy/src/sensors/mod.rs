//! One module per sensor family.

pub(crate) mod amdgpu;
pub mod estimate;
pub mod nvml;
pub mod rapl;
