//! Device memory per configuration for `--dry-run` (seed 003's dry run promises a VRAM
//! estimate): each model's metadata read once, then weights plus KV cache per configuration.

use std::collections::HashMap;
use std::sync::Arc;

use llem_config::StudyPlan;
use llem_config::plan::MemoryView;
use llem_engines::llamacpp::describe_gguf;
use llem_engines::memory::DescribedModel;
use llem_engines::memory::describe_model;
use llem_engines::memory::estimate;

const GIB: f64 = (1u64 << 30) as f64;

/// Fills `memory` of every configuration of `plan`, model metadata read from the asset
/// cache or the user config's Hugging Face cache.
pub fn fill(plan: &mut StudyPlan) {
    let assets = crate::host::assets_dir();
    let hf_cache = crate::host::model_cache_dir(&plan.user);
    let hf_cache = hf_cache.as_deref();
    // A sweep of 100 000 configurations has a handful of models.
    let mut models: HashMap<String, Result<DescribedModel, String>> = HashMap::new();
    // ...and a handful of distinct estimates: each is held once, so the plan of a
    // 100 000-cell dry run stays small.
    let mut seen: HashMap<ViewKey, Arc<MemoryView>> = HashMap::new();
    for c in &mut plan.configs {
        let model = models
            .entry(c.config.model.clone())
            .or_insert_with(|| describe_model(&c.config.model, &assets, hf_cache, &describe_gguf));
        let view = match model
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|m| estimate(&c.config, m))
        {
            Ok(e) => MemoryView {
                total_gib: Some(e.total_bytes() as f64 / GIB),
                weights_gib: Some(e.weights_bytes as f64 / GIB),
                kv_cache_gib: Some(e.kv_cache_bytes as f64 / GIB),
                kv_tokens: Some(e.kv_tokens),
                basis: e.basis,
            },
            Err(why) => MemoryView {
                total_gib: None,
                weights_gib: None,
                kv_cache_gib: None,
                kv_tokens: None,
                basis: why,
            },
        };
        let shared = seen
            .entry(ViewKey::of(&view))
            .or_insert_with(|| Arc::new(view));
        c.memory = Some(Arc::clone(shared));
    }
}

/// A [`MemoryView`] by value: its figures' bits and its basis.
#[derive(PartialEq, Eq, Hash)]
struct ViewKey([Option<u64>; 4], String);

impl ViewKey {
    fn of(v: &MemoryView) -> Self {
        let bits = |x: Option<f64>| x.map(f64::to_bits);
        ViewKey(
            [
                bits(v.total_gib),
                bits(v.weights_gib),
                bits(v.kv_cache_gib),
                v.kv_tokens,
            ],
            v.basis.clone(),
        )
    }
}
