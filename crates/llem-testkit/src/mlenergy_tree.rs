//! Writes an ML.ENERGY raw benchmark tree (reference format §2–§7, §11) deterministically:
//! the parity tree (several models, tasks, GPU SKUs and batch sizes, one run short, one
//! under-utilised so the cascade fires, and the awkward corners of the format) and, for the
//! benchmark, a large regular tree. Shared by the tests and `examples/mlenergy_tree.rs`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A small deterministic generator (xorshift64*), so the tree is byte-identical every time.
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next value in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// The next integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        (self.next_f64() * n as f64) as u64 % n.max(1)
    }
}

/// One run to write.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The benchmark family directory (`h100`, `b200`).
    pub family: &'static str,
    /// The snapshot directory.
    pub snapshot: &'static str,
    /// The task (`lm-arena-chat`, ...).
    pub task: String,
    /// The model's organisation on the Hub.
    pub org: String,
    /// The model's name under its organisation.
    pub model: String,
    /// The GPU model.
    pub sku: &'static str,
    /// GPUs the run used.
    pub num_gpus: u32,
    /// The batch size (vLLM's `max_num_seqs`).
    pub max_num_seqs: u32,
    /// The seed of the run's generated values.
    pub seed: u64,
    /// Steady-state duration, s.
    pub duration_s: f64,
    /// Mean running batch / max_num_seqs; `None` writes no prometheus.json.
    pub utilisation: Option<f64>,
    /// Requests, and ITL values per request.
    pub requests: usize,
    /// Output tokens per request.
    pub tokens: usize,
    /// Write the energy per token under the legacy key.
    pub legacy_energy_key: bool,
    /// Energy per token to write instead of the derived one (e.g. 0 for an invalid run).
    pub energy_per_token_override: Option<f64>,
    /// Power timeline with this many samples per GPU (0: none).
    pub timeline_samples: usize,
}

impl RunSpec {
    /// A regular run of `model_id` on `gpus` × `sku` at batch size `b`.
    pub fn new(task: &str, model_id: &str, sku: &'static str, gpus: u32, b: u32) -> Self {
        let (org, model) = model_id.split_once('/').unwrap_or(("org", model_id));
        Self {
            family: if sku == "B200" { "b200" } else { "h100" },
            snapshot: "current",
            task: task.into(),
            org: org.into(),
            model: model.into(),
            sku,
            num_gpus: gpus,
            max_num_seqs: b,
            seed: 48105,
            duration_s: 60.0 + f64::from(b) / 4.0,
            utilisation: Some(0.95),
            requests: 24,
            tokens: 16,
            legacy_energy_key: false,
            energy_per_token_override: None,
            timeline_samples: 12,
        }
    }

    /// The run's directory under `root`.
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join("llm")
            .join(self.family)
            .join(self.snapshot)
            .join("run")
            .join("llm")
            .join(&self.task)
            .join("results")
            .join(&self.org)
            .join(&self.model)
            .join(self.sku)
            .join(format!(
                "num_gpus+{}+max_num_seqs+{}+num_request_repeats+1+dataset_split+train+num_requests+{}+seed+{}",
                self.num_gpus, self.max_num_seqs, self.requests, self.seed
            ))
    }
}

fn num(x: f64) -> String {
    // Rust's shortest round-trip digits, as JSON.
    let s = format!("{x:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

/// Writes one run's `results.json` and `prometheus.json`.
pub fn write_run(root: &Path, spec: &RunSpec) {
    let dir = spec.dir(root);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(
        spec.seed
            ^ (u64::from(spec.max_num_seqs) * 7919)
            ^ ((spec.model.len() as u64) << 20)
            ^ ((spec.task.len() as u64) << 30)
            ^ (u64::from(spec.num_gpus) << 40),
    );
    let (results, total_tokens, completed) = requests_json(spec, &mut rng);
    let d = spec.duration_s;
    let power_per_gpu = 250.0 + 200.0 * rng.next_f64();
    let energy = power_per_gpu * f64::from(spec.num_gpus) * d;
    let tokens_in_window = (f64::from(spec.max_num_seqs) * d * 30.0).round();
    let e = spec
        .energy_per_token_override
        .unwrap_or(energy / tokens_in_window);
    let e_key = if spec.legacy_energy_key {
        "energy_per_token_joules"
    } else {
        "steady_state_energy_per_token"
    };
    let start = 1_760_000_000.0 + f64::from(spec.max_num_seqs);
    let (ss, se) = (start + 10.0, start + 10.0 + d);
    let timeline = timeline_json(spec, &mut rng, power_per_gpu, (start, ss, se));
    let text = format!(
        "{{\"model_id\": \"{}/{}\", \"gpu_model\": \"{}\", \"num_gpus\": {}, \"max_num_seqs\": {},\n\"duration\": {}, \"completed\": {completed}, \"total_input_tokens\": 1234, \"total_output_tokens\": {total_tokens},\n\"output_throughput\": {}, \"steady_state_duration\": {}, \"steady_state_energy\": {}, \"{e_key}\": {},\n\"results\": {results}{timeline}}}\n",
        spec.org,
        spec.model,
        spec.sku,
        spec.num_gpus,
        spec.max_num_seqs,
        num(d + 20.0),
        num(total_tokens as f64 / (d + 20.0)),
        num(d),
        num(energy),
        num(e),
    );
    std::fs::write(dir.join("results.json"), text).unwrap();
    if let Some(u) = spec.utilisation {
        let running = u * f64::from(spec.max_num_seqs);
        let prom = format!(
            "{{\"collection_interval\": 1.0, \"steady_state_start_time\": {}, \"steady_state_end_time\": {}, \"timeline\": [{{\"timestamp\": {}, \"metrics\": \"vllm:num_requests_running{{engine=\\\"0\\\"}} 3.0\\n\"}}], \"steady_state_stats\": {{\"vllm:num_requests_running\": {}, \"vllm:kv_cache_usage_perc\": 0.5}}}}\n",
            num(ss),
            num(se),
            num(ss),
            num(running)
        );
        std::fs::write(dir.join("prometheus.json"), prom).unwrap();
    }
}

/// The `results` array of a run's `results.json`: `(json, output tokens, completed)`.
fn requests_json(spec: &RunSpec, rng: &mut Rng) -> (String, usize, usize) {
    let mut results = String::from("[");
    let mut total_tokens = 0usize;
    let mut completed = 0usize;
    for i in 0..spec.requests {
        // Every 11th request fails; its ITLs must not count.
        let success = i % 11 != 5;
        let out_len = spec.tokens + rng.below(spec.tokens as u64) as usize;
        let mut itl = String::from("[");
        for k in 0..out_len.saturating_sub(1) {
            if k > 0 {
                itl.push_str(", ");
            }
            // Chunked prefill: some tokens arrive with the previous one (0), a few leading.
            let v = if (i + k) % 9 == 4 || (i % 7 == 3 && k < 2) {
                0.0
            } else {
                0.008 + 0.03 * rng.next_f64()
            };
            itl.push_str(&num(v));
        }
        itl.push(']');
        if success {
            total_tokens += out_len;
            completed += 1;
        }
        if i > 0 {
            results.push_str(",\n  ");
        }
        let success_field = if i % 13 == 12 {
            // An entry without `success` counts as failed.
            String::new()
        } else {
            format!("\"success\": {success}, ")
        };
        write!(
            results,
            "{{{success_field}\"prompt\": \"question {i} with, some \\\"text\\\"\", \"input_len\": {}, \"output_len\": {out_len}, \"ttft\": {}, \"itl\": {itl}, \"output_text\": \"...\"}}",
            20 + i,
            num(0.1 + rng.next_f64())
        )
        .unwrap();
    }
    results.push(']');
    (results, total_tokens, completed)
}

/// The `timeline` member of a run's `results.json` (empty without samples); `times`: the
/// benchmark's start and the steady state's start and end, s.
fn timeline_json(
    spec: &RunSpec,
    rng: &mut Rng,
    power_per_gpu: f64,
    (start, ss, se): (f64, f64, f64),
) -> String {
    let d = spec.duration_s;
    if spec.timeline_samples == 0 {
        return String::new();
    }
    let mut inst = String::new();
    let mut avg = String::new();
    let mut temp = String::new();
    for g in 0..spec.num_gpus {
        let key = g + 2; // physical indices need not start at 0
        let mut a = String::new();
        let mut b = String::new();
        let mut c = String::new();
        for k in 0..spec.timeline_samples {
            // GPU 0 of the run misses its 4th sample; the others sample 1 s apart.
            if g > 0 && k == 3 {
                continue;
            }
            let t = start + (d + 20.0) * k as f64 / spec.timeline_samples as f64;
            let sep = if a.is_empty() { "" } else { ", " };
            let p = power_per_gpu + 10.0 * rng.next_f64();
            write!(a, "{sep}[{}, {}]", num(t), num(p)).unwrap();
            write!(b, "{sep}[{}, {}]", num(t), num(p - 5.0)).unwrap();
            write!(
                c,
                "{sep}[{}, {}]",
                num(t),
                num(55.0 + 10.0 * rng.next_f64())
            )
            .unwrap();
        }
        let sep = if inst.is_empty() { "" } else { ", " };
        write!(inst, "{sep}\"{key}\": [{a}]").unwrap();
        write!(avg, "{sep}\"{key}\": [{b}]").unwrap();
        write!(temp, "{sep}\"{key}\": [{c}]").unwrap();
    }
    format!(
        ",\n\"timeline\": {{\"benchmark_start_time\": {}, \"benchmark_end_time\": {}, \"steady_state_start_time\": {}, \"steady_state_end_time\": {}, \"power\": {{\"device_instant\": {{{inst}}}, \"device_average\": {{{avg}}}}}, \"temperature\": {{{temp}}}}}",
        num(start),
        num(start + d + 20.0),
        num(ss),
        num(se)
    )
}

/// Writes `model_info.json` and `monolithic.config.yaml` for every (task, model, SKU).
pub fn write_configs(root: &Path, specs: &[RunSpec]) {
    for s in specs {
        let m = root
            .join("configs/vllm")
            .join(&s.task)
            .join(&s.org)
            .join(&s.model);
        std::fs::create_dir_all(m.join(s.sku)).unwrap();
        let info = if s.model.contains("A3B") {
            "{\"total_parameters_billion\": 30.5, \"active_parameters_billion\": 3.3, \"nickname\": \"Qwen3 30B A3B\"}"
        } else if s.model.contains("FP8") {
            "{\"total_parameters_billion\": 8, \"architecture\": \"\"}"
        } else {
            "{\"total_parameters_billion\": 8.2, \"weight_precision\": \"bfloat16\", \"architecture\": \"Dense\"}"
        };
        std::fs::write(m.join("model_info.json"), info).unwrap();
        let yaml = if s.model.contains("A3B") {
            "# served with EP\nasync-scheduling: true\nenable-expert-parallel: true\nmax-model-len: 32768\n"
        } else if s.sku == "B200" {
            "tensor-parallel-size: 1\ndata-parallel-size: 0\ngeneration-config: {temperature: 0.6}\n"
        } else {
            "max-model-len: 32768\n"
        };
        std::fs::write(m.join(s.sku).join("monolithic.config.yaml"), yaml).unwrap();
    }
}

/// `n` runs in a sparse tree, the other shape a published benchmark takes: two GPU
/// families, most models with a single run, so nearly every run has directories of its own
/// (task, organisation, model, SKU, run); and llem's bench shape (many runs per model) is
/// [`bench_specs`].
pub fn sparse_specs(n: usize) -> Vec<RunSpec> {
    let tasks = ["gpqa", "lm-arena-chat", "sourcegraph-fim"];
    (0..n)
        .map(|i| {
            let sku = if i % 3 == 0 { "B200" } else { "H100" };
            let model = format!("org{}/Sparse-{}B", i % 211, i / 2);
            let task = tasks.get(i % tasks.len()).copied().unwrap_or("gpqa");
            let mut s = RunSpec::new(task, &model, sku, 1 << (i % 3), 8 << (i % 4));
            s.seed = i as u64;
            s.requests = 16;
            s.tokens = 12;
            s.timeline_samples = 4;
            s
        })
        .collect()
}

/// The parity tree: what the stability rules, the cascade and every derivation see.
pub fn parity_specs() -> Vec<RunSpec> {
    let mut v = Vec::new();
    // A dense model on one GPU, four batch sizes, all stable; two seeds at 64.
    for b in [8, 16, 32, 64] {
        v.push(RunSpec::new("gpqa", "Qwen/Qwen3-8B", "H100", 1, b));
    }
    let mut seed2 = RunSpec::new("gpqa", "Qwen/Qwen3-8B", "H100", 1, 64);
    seed2.seed = 7;
    v.push(seed2);
    // MoE on two GPUs: batch 32 under-utilised -> 64 and 128 cascade; 16 and 8 stay stable.
    for b in [8, 16, 32, 64, 128] {
        let mut s = RunSpec::new("gpqa", "Qwen/Qwen3-30B-A3B", "H100", 2, b);
        if b == 32 {
            s.utilisation = Some(0.7125);
        }
        if b == 16 {
            s.utilisation = Some(0.85); // exactly the limit: passes
        }
        v.push(s);
    }
    // Same model, other task: its own group, untouched by the cascade above.
    for b in [32, 64] {
        v.push(RunSpec::new(
            "lm-arena-chat",
            "Qwen/Qwen3-30B-A3B",
            "H100",
            2,
            b,
        ));
    }
    // FP8 model: the smallest batch has a short steady state -> every batch cascades.
    for b in [16, 32, 64] {
        let mut s = RunSpec::new("lm-arena-chat", "meta-llama/Llama-3.1-8B-FP8", "H100", 1, b);
        if b == 16 {
            s.duration_s = 17.0;
        }
        if b == 64 {
            s.legacy_energy_key = true;
            s.utilisation = None; // no prometheus.json: rule 3 skipped
        }
        v.push(s);
    }
    // B200: a steady state of exactly 20 s passes; a non-positive energy per token fails
    // (the throughput falls back to the file's whole-run figure).
    let mut b200 = RunSpec::new("gpqa", "Qwen/Qwen3-8B", "B200", 1, 32);
    b200.duration_s = 20.0;
    v.push(b200);
    let mut bad = RunSpec::new("gpqa", "Qwen/Qwen3-8B", "B200", 1, 64);
    bad.energy_per_token_override = Some(-0.25);
    v.push(bad);
    let mut big = RunSpec::new("gpqa", "Qwen/Qwen3-8B", "B200", 1, 128);
    big.requests = 40;
    v.push(big);
    // A snapshot that is not `current`: never read.
    let mut old = RunSpec::new("gpqa", "Qwen/Qwen3-8B", "H100", 1, 256);
    old.snapshot = "2025-01-01";
    v.push(old);
    v
}

/// Writes the parity tree under `root`, with configs, plus the runs that are found but do
/// not build (no model config; unreadable JSON) and still take part in stability.
pub fn write_parity_tree(root: &Path) {
    let specs = parity_specs();
    for s in &specs {
        write_run(root, s);
    }
    write_configs(root, &specs);
    // Unreadable results.json in the FP8 lm-arena group at batch 8: sets the cascade
    // threshold of its group to 8 although the run itself is left out.
    let broken = RunSpec::new("lm-arena-chat", "meta-llama/Llama-3.1-8B-FP8", "H100", 1, 8);
    std::fs::create_dir_all(broken.dir(root)).unwrap();
    std::fs::write(
        broken.dir(root).join("results.json"),
        "{\"steady_state_duration\": 4",
    )
    .unwrap();
    // A model without a config directory: found, judged, left out.
    write_run(
        root,
        &RunSpec::new("gpqa", "acme/NoConfig-1B", "H100", 1, 8),
    );
}

/// A regular tree of `n` runs for the benchmark (models × tasks × batches × seeds).
pub fn bench_specs(n: usize) -> Vec<RunSpec> {
    let tasks = [
        "gpqa",
        "lm-arena-chat",
        "sourcegraph-fim",
        "image-chat",
        "video-chat",
    ];
    let batches = [8, 16, 32, 64, 128, 256, 512, 1024];
    let mut v = Vec::with_capacity(n);
    let mut m = 0;
    while v.len() < n {
        for t in tasks {
            for b in batches {
                for seed in 0..5u64 {
                    if v.len() == n {
                        return v;
                    }
                    let mut s = RunSpec::new(
                        t,
                        &format!("org{m}/Model-{m}B"),
                        "H100",
                        1 + (m % 4) as u32,
                        b,
                    );
                    s.seed = seed;
                    s.requests = 16;
                    s.tokens = 12;
                    s.timeline_samples = 4;
                    if (m + b as usize + seed as usize).is_multiple_of(17) {
                        s.utilisation = Some(0.6);
                    }
                    v.push(s);
                }
            }
        }
        m += 1;
    }
    v
}
