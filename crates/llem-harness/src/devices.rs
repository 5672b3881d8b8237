//! The devices a study's cells use, by the names device locks take: `gpu<nvml index>` for
//! each GPU a cell runs on, `cpu` for a cell that runs on the CPU (its energy is the
//! package's, which a second study would disturb just the same). GPUs no cell uses stay
//! free for other studies. A cell with device settings also locks every device they change.

use llem_config::ExperimentConfig;
use llem_engines::placement::{Placement, planned};

/// Devices `configs` use on this machine (NVML's view of `CUDA_VISIBLE_DEVICES`).
pub fn lock_resources<'a>(configs: impl Iterator<Item = &'a ExperimentConfig>) -> Vec<String> {
    let cvd = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let visible = llem_energy::sensors::nvml::visible_indices(cvd.as_deref());
    lock_resources_for(configs, &visible)
}

/// Devices `configs` use, given the NVML indices of the visible GPUs in CUDA order.
pub fn lock_resources_for<'a>(
    configs: impl Iterator<Item = &'a ExperimentConfig>,
    visible: &[u32],
) -> Vec<String> {
    let n = u32::try_from(visible.len()).unwrap_or(u32::MAX);
    let mut out: Vec<String> = Vec::new();
    for cfg in configs {
        let mut names: Vec<String> = match planned(cfg, n) {
            Placement::Cpu => vec!["cpu".to_string()],
            Placement::Gpus(ids) => ids
                .iter()
                .filter_map(|i| visible.get(*i as usize))
                .map(|p| format!("gpu{p}"))
                .collect(),
        };
        // Device settings change every device of their kind the cell measures: another
        // study on them would run under this cell's settings.
        if let Some(d) = cfg.device.as_deref() {
            if d.touches_gpus() {
                names.extend(visible.iter().map(|p| format!("gpu{p}")));
            }
            if d.touches_cpus() {
                names.push("cpu".to_string());
            }
        }
        for name in names {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: serde_json::Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_cell_locks_the_gpus_it_runs_on_not_every_visible_one() {
        // CUDA_VISIBLE_DEVICES=5,2,7: CUDA 0 is NVML's GPU 5.
        let visible = [5, 2, 7];
        let tp2 = cfg(
            json!({"model": "m", "engine": "vllm", "vllm": {"engine": {"tensor_parallel_size": 2}}}),
        );
        assert_eq!(
            lock_resources_for([&tp2].into_iter(), &visible),
            ["gpu2", "gpu5"]
        );
        let one = cfg(json!({"model": "m", "engine": "transformers"}));
        assert_eq!(lock_resources_for([&one].into_iter(), &visible), ["gpu5"]);
        // The embedded default runs on the CPU, GPUs or not.
        let cpu = cfg(json!({"model": "m.gguf", "engine": "llamacpp"}));
        assert_eq!(lock_resources_for([&cpu].into_iter(), &visible), ["cpu"]);
        // A study locks the union of its cells'.
        assert_eq!(
            lock_resources_for([&cpu, &tp2, &one].into_iter(), &visible),
            ["cpu", "gpu2", "gpu5"]
        );
        // No GPU: everything is the CPU's.
        assert_eq!(lock_resources_for([&tp2].into_iter(), &[]), ["cpu"]);
    }
}
