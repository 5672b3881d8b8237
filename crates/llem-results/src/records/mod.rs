//! The records API (seed 002): derivation rules shared by every loader — inter-token latency
//! smoothing and the stability verdict with its cascade — written to match the reference
//! reader `mlenergy-data` 0.4.0 (`../shared/reference/mlenergy-raw-format.md` §8, §9).

pub mod itl;
pub mod pyfloat;
pub mod stability;
