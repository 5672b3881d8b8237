//! The typed configuration: experiment fields, engine sections, study execution.

pub(crate) mod device;
pub mod engines;
pub(crate) mod execution;
pub(crate) mod experiment;
pub(crate) mod names;
pub(crate) mod runner;
pub(crate) mod sections;

pub use device::{ClockSetting, DeviceConfig};
pub use execution::{
    DEFAULT_EXPERIMENT_TIMEOUT_S, ExecutorConfig, SERVER_READY_TIMEOUT_S, SlurmConfig,
    StudyExecution, StudyExecutionConfig, slurm_time_seconds,
};
pub use experiment::ExperimentConfig;
pub use names::{
    Arrival, BaselineStrategy, BatchingStrategy, DatasetOrder, Dtype, EnergySampler, Engine,
    ExperimentOrder, LengthDistribution, Methodology, PhaseSplit, Preset, TraceFormatName,
    TraceTimeUnit,
};
pub use runner::{RunnerKind, RunnerMap, RunnerSpec};
pub use sections::{
    BaselineConfig, ConversationsConfig, DatasetConfig, DecoderConfig, LoraConfig,
    MeasurementConfig, SloConfig, SyntheticConfig, TraceColumns, TraceConfig, TrafficConfig,
    WarmupConfig, WarmupGate, WindowsConfig,
};
