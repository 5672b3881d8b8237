//! One module per sensor family.

pub mod amdgpu;
pub mod estimate;
pub mod nvml;
pub mod rapl;
