//! Where a cell's inference runs: the devices it locks, and the scope of its headline energy.
//!
//! A plan knows the configuration only; the engine knows better once loaded (the
//! transformers worker reports the GPUs its weights landed on). [`planned`] answers from the
//! configuration and the number of GPUs visible to the process; an engine's
//! [`crate::EngineInfo::placement`] answers from what it loaded, and wins when given.

use llem_config::ExperimentConfig;

use crate::registry::{self, Runtime};

/// The devices an engine computes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The host CPU.
    Cpu,
    /// These GPUs, by CUDA index (position among the GPUs `CUDA_VISIBLE_DEVICES` leaves
    /// visible), ascending.
    Gpus(Vec<u32>),
}

impl Placement {
    /// The first `n` visible GPUs, or the CPU when none is visible (a GPU engine then runs
    /// its CPU build, as vLLM's does, or fails to start, which fails the cell anyway).
    pub(crate) fn first_gpus(n: u32, visible: u32) -> Placement {
        if visible == 0 {
            Placement::Cpu
        } else {
            Placement::Gpus((0..n.clamp(1, visible)).collect())
        }
    }

    /// Every visible GPU (the CPU when none is).
    pub(crate) fn all(visible: u32) -> Placement {
        Placement::first_gpus(visible, visible)
    }

    /// GPUs of the placement (empty on the CPU).
    pub fn gpus(&self) -> &[u32] {
        match self {
            Placement::Cpu => &[],
            Placement::Gpus(g) => g,
        }
    }
}

/// Where `cfg` will run with `visible_gpus` GPUs visible, from its configuration alone: the
/// engine's own rule (its parallelism settings, its device map, its offload).
pub fn planned(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    match registry::runtime(cfg) {
        Runtime::Embedded => crate::llamacpp::placement(cfg, visible_gpus),
        Runtime::Worker => crate::transformers::placement(cfg, visible_gpus),
        Runtime::Server => match registry::server(cfg.engine) {
            Some(spec) => (spec.placement)(cfg, visible_gpus),
            // A server llem did not start and has no spec of (an OpenAI URL): it is assumed
            // to be this host's, on every GPU it sees (the result warns that llem cannot know).
            None => Placement::all(visible_gpus),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cfg(v: Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn gpu_engines_use_their_parallel_sizes_of_the_visible_gpus() {
        let c = cfg(
            json!({"model": "m", "engine": "vllm", "vllm": {"engine": {"tensor_parallel_size": 2}}}),
        );
        assert_eq!(planned(&c, 4), Placement::Gpus(vec![0, 1]));
        assert_eq!(planned(&c, 1), Placement::Gpus(vec![0]));
        // No GPU: vLLM's CPU build.
        assert_eq!(planned(&c, 0), Placement::Cpu);
        let c = cfg(json!({"model": "m", "engine": "tgi"}));
        assert_eq!(planned(&c, 3), Placement::Gpus(vec![0, 1, 2]));
    }

    #[test]
    fn llamacpp_is_on_the_cpu_unless_layers_are_offloaded() {
        let c = cfg(json!({"model": "m.gguf", "engine": "llamacpp"}));
        assert_eq!(planned(&c, 2), Placement::Cpu);
        let c =
            cfg(json!({"model": "m.gguf", "engine": "llamacpp", "llamacpp": {"n_gpu_layers": -1}}));
        assert_eq!(planned(&c, 2), Placement::Gpus(vec![0, 1]));
        assert_eq!(planned(&c, 0), Placement::Cpu);
    }

    #[test]
    fn transformers_follows_device_map_and_tp() {
        let c = cfg(json!({"model": "m", "engine": "transformers"}));
        assert_eq!(planned(&c, 2), Placement::Gpus(vec![0]));
        assert_eq!(planned(&c, 0), Placement::Cpu);
        let c = cfg(
            json!({"model": "m", "engine": "transformers", "transformers": {"device_map": "auto"}}),
        );
        assert_eq!(planned(&c, 2), Placement::Gpus(vec![0, 1]));
        let c = cfg(
            json!({"model": "m", "engine": "transformers", "transformers": {"device_map": "cpu"}}),
        );
        assert_eq!(planned(&c, 2), Placement::Cpu);
        let c = cfg(
            json!({"model": "m", "engine": "transformers", "transformers": {"device_map": "cuda:1"}}),
        );
        assert_eq!(planned(&c, 2), Placement::Gpus(vec![1]));
    }
}
