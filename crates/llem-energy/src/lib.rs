//! llem's energy meter.
//!
//! Sensors ([`sensor::Sensor`]: NVML, amdgpu, RAPL, estimate) are read by one sampler thread
//! ([`meter::Meter`]) into compact columns ([`telemetry::Telemetry`]), from which the energy
//! of any time window is computed (counter differences interpolated at the edges, else
//! trapezoid-integrated power, both where both exist). Baseline, throttle detection, quality
//! warnings and carbon complete a [`summary::EnergyReport`]. Nothing here knows about LLMs.

pub mod baseline;
pub mod binding;
pub mod curve;
mod error;
pub mod host_load;
pub mod live;
mod meter;
mod quality;
pub mod scope;
pub mod select;
mod sensor;
pub mod sensors;
pub mod settings;
mod summary;
pub mod telemetry;
pub mod throttle;
pub mod uncertainty;
pub mod update_period;
mod value_file;

pub use curve::EnergyCurve;
pub use error::{
    Absent, BaselineError, GpuError, MeterError, NodeUnavailable, SensorError, Unavailable,
};
pub use live::{LiveBoard, LiveDomain, LiveSnapshot};
pub use meter::{Meter, MeterConfig, TickSummary};
pub use scope::{EnergyScope, ScopedEnergy, node_scoped, scoped};
pub use select::{SensorEnv, select};
pub use sensor::{Domain, DomainKind, EnergySource, Reading, Sensor, SensorKind};
pub use summary::{
    CarbonFactors, EnergyReport, WORLD_AVERAGE_GCO2_KWH, WindowSummary, co2_g, summarise, window,
};
pub use telemetry::{Telemetry, WindowEnergy};
