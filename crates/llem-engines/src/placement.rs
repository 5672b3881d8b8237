//! Where a cell's inference runs: the devices it locks, and the scope of its headline energy.
//!
//! A plan knows the configuration only; the engine knows better once loaded (the
//! transformers worker reports the GPUs its weights landed on). [`planned`] answers from the
//! configuration and the number of GPUs visible to the process; an engine's
//! [`crate::EngineInfo::placement`] answers from what it loaded, and wins when given.

use llem_config::{Engine as EngineName, ExperimentConfig};

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
    fn first_gpus(n: u32, visible: u32) -> Placement {
        if visible == 0 {
            Placement::Cpu
        } else {
            Placement::Gpus((0..n.clamp(1, visible)).collect())
        }
    }

    /// GPUs of the placement (empty on the CPU).
    pub fn gpus(&self) -> &[u32] {
        match self {
            Placement::Cpu => &[],
            Placement::Gpus(g) => g,
        }
    }
}

/// Where `cfg` will run with `visible_gpus` GPUs visible, from its configuration alone.
pub fn planned(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    let all = || Placement::first_gpus(visible_gpus, visible_gpus);
    let first = |n: Option<u32>| Placement::first_gpus(n.unwrap_or(1), visible_gpus);
    match cfg.engine {
        // llama.cpp offloads to every GPU its backend sees (split by layer) unless told to
        // keep the layers on the CPU.
        EngineName::LlamaCpp => {
            let layers = cfg.llamacpp.as_deref().map_or(0, |l| l.n_gpu_layers);
            if layers == 0 { Placement::Cpu } else { all() }
        }
        EngineName::Transformers => {
            let t = cfg.transformers.as_deref();
            match t {
                Some(t) if t.tp_plan.is_some() => match t.tp_size {
                    Some(n) => first(Some(n)),
                    None => all(),
                },
                Some(t) => match t.device_map.as_deref() {
                    Some("cpu") => Placement::Cpu,
                    // `auto`, `balanced`, `sequential` spread the weights over every GPU.
                    Some(m) if !m.starts_with("cuda") && m.parse::<u32>().is_err() => all(),
                    Some(m) => {
                        let idx = m
                            .trim_start_matches("cuda")
                            .trim_start_matches(':')
                            .parse::<u32>()
                            .unwrap_or(0);
                        if idx < visible_gpus {
                            Placement::Gpus(vec![idx])
                        } else {
                            Placement::Cpu
                        }
                    }
                    None => first(Some(1)),
                },
                None => first(Some(1)),
            }
        }
        EngineName::Vllm => {
            let v = cfg.vllm.as_deref();
            let e = v.and_then(|v| v.engine.as_ref());
            let tp = e.and_then(|e| e.tensor_parallel_size).unwrap_or(1u32);
            let pp = e.and_then(|e| e.pipeline_parallel_size).unwrap_or(1);
            first(Some(tp.saturating_mul(pp)))
        }
        EngineName::Sglang => {
            let s = cfg.sglang.as_deref();
            let tp = s.and_then(|s| s.tp_size).unwrap_or(1);
            let dp = s.and_then(|s| s.dp_size).unwrap_or(1);
            first(Some(tp.saturating_mul(dp)))
        }
        EngineName::TensorRt => {
            let t = cfg.tensorrt.as_deref();
            let tp = t.and_then(|t| t.tensor_parallel_size).unwrap_or(1);
            let pp = t.and_then(|t| t.pipeline_parallel_size).unwrap_or(1);
            first(Some(tp.saturating_mul(pp)))
        }
        // TGI shards over every visible GPU unless num_shard says otherwise.
        EngineName::Tgi => match cfg.tgi.as_deref().and_then(|t| t.num_shard) {
            Some(n) => first(Some(n)),
            None => all(),
        },
        // A server llem did not start: it is assumed to be this host's, on every GPU it sees
        // (the result warns that llem cannot know).
        EngineName::OpenAi => all(),
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
