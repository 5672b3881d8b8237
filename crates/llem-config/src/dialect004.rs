//! The configuration dialect of seed 004's framework (`config_name`, `model_name`,
//! `backend`, `fp_precision`, `quantization`, `gpus`, `num_processes`, `batching`,
//! `traffic_simulation`, `sharding`, backend sections with flat keys), read as llem's own.
//!
//! The file is recognised as a whole (any of its distinctive keys), and every field is either
//! moved to llem's spelling — keeping where it was written, so later errors point into the
//! user's file — or refused. All refusals come at once, each with its replacement, so one
//! edit fixes the file. The field-by-field table is in `docs/configuration.md`.

use crate::dialect07::{Out, fold, push_path};
use crate::error::{ConfigError, Diagnostic, ErrorKind, did_you_mean};
use crate::source::{SourceMap, Span};
use crate::yaml::{Map, Node};

/// Keys only seed 004's dialect has at the top level.
const DISTINCTIVE: [&str; 10] = [
    "config_name",
    "model_name",
    "backend",
    "fp_precision",
    "quantization",
    "gpus",
    "num_processes",
    "batching",
    "traffic_simulation",
    "sharding",
];

/// Whether `root` is written in seed 004's dialect.
pub fn detect(root: &Node) -> bool {
    root.as_map()
        .is_some_and(|m| m.entries.iter().any(|e| DISTINCTIVE.contains(&&*e.key)))
}

/// llem's engine for a seed-004 backend.
fn engine_of(backend: &str) -> Option<&'static str> {
    match backend {
        "pytorch" | "transformers" => Some("transformers"),
        "vllm" => Some("vllm"),
        "tensorrt" => Some("tensorrt"),
        _ => None,
    }
}

/// Collects the translation and every refusal.
struct Tx<'a> {
    sources: &'a SourceMap,
    errors: Vec<Diagnostic>,
    out: Out,
    /// llem's engine, from `backend:` (`transformers` when the file names none, the
    /// framework's default).
    engine: &'static str,
}

impl Tx<'_> {
    fn refuse(&mut self, span: Span, field: &str, instead: impl Into<String>) {
        self.errors.push(
            Diagnostic::new(
                ErrorKind::Rule,
                format!("seed-004 field `{field}` has no llem counterpart as written"),
            )
            .at(self.sources.location(span))
            .with_help(instead),
        );
    }

    fn wrong(&mut self, span: Span, msg: String) {
        self.errors
            .push(Diagnostic::new(ErrorKind::Type, msg).at(self.sources.location(span)));
    }

    fn set(&mut self, path: &[&str], span: Span, value: &Node) {
        push_path(&mut self.out, path, span, value);
    }

    fn map<'n>(&mut self, n: &'n Node, what: &str) -> Option<&'n Map> {
        let m = n.as_map();
        if m.is_none() {
            self.wrong(
                n.span,
                format!("`{what}` must be a mapping, found {}", n.describe()),
            );
        }
        m
    }

    fn unknown(&mut self, key: &str, span: Span, within: &str, known: &[&str]) {
        let mut d = Diagnostic::new(
            ErrorKind::UnknownKey,
            format!("unknown key `{within}.{key}` in a seed-004 file"),
        )
        .at(self.sources.location(span));
        if let Some(c) = did_you_mean(key, known.iter().copied()) {
            d = d.with_help(format!("did you mean `{within}.{c}`?"));
        }
        self.errors.push(d);
    }

    fn is_true(n: &Node) -> bool {
        n.as_str() == Some("true")
    }

    fn quantization(&mut self, v: &Node) {
        let Some(m) = self.map(v, "quantization") else {
            return;
        };
        for e in &m.entries {
            let k = &*e.key;
            match (k, self.engine) {
                ("load_in_4bit" | "load_in_8bit", "transformers") => {
                    self.set(&["transformers", k], e.key_span, &e.value);
                }
                ("load_in_4bit" | "load_in_8bit", _) if !Self::is_true(&e.value) => {}
                ("load_in_4bit" | "load_in_8bit", "vllm") => self.refuse(
                    e.key_span,
                    &format!("quantization.{k}"),
                    "BitsAndBytes loading is PyTorch's; for vLLM serve a pre-quantised \
                     checkpoint and set `vllm.engine.quantization` (awq, gptq, fp8, ...)",
                ),
                ("load_in_4bit" | "load_in_8bit", _) => self.refuse(
                    e.key_span,
                    &format!("quantization.{k}"),
                    "BitsAndBytes loading is PyTorch's; for TensorRT-LLM set \
                     `tensorrt.quant.quant_algo` (W4A16_AWQ, W8A16, FP8, ...)",
                ),
                _ => self.unknown(
                    k,
                    e.key_span,
                    "quantization",
                    &["load_in_4bit", "load_in_8bit"],
                ),
            }
        }
    }

    fn batching(&mut self, v: &Node) {
        let Some(m) = self.map(v, "batching") else {
            return;
        };
        for e in &m.entries {
            let k = &*e.key;
            let (s, val) = (e.key_span, &e.value);
            match (k, self.engine) {
                ("strategy", "transformers") => {
                    self.set(&["transformers", "batching_strategy"], s, val)
                }
                ("batch_size", "transformers") => self.set(&["transformers", "batch_size"], s, val),
                ("max_tokens_per_batch", "transformers") => {
                    self.set(&["transformers", "max_tokens_per_batch"], s, val);
                }
                ("batch_size", "vllm") => self.set(&["vllm", "engine", "max_num_seqs"], s, val),
                ("max_tokens_per_batch", "vllm") => {
                    self.set(&["vllm", "engine", "max_num_batched_tokens"], s, val);
                }
                ("batch_size", _) => self.set(&["tensorrt", "max_batch_size"], s, val),
                ("max_tokens_per_batch", _) => self.set(&["tensorrt", "max_num_tokens"], s, val),
                ("strategy", engine) => self.refuse(
                    s,
                    "batching.strategy",
                    format!(
                        "{engine} batches continuously in its scheduler; its limits are `{}` \
                         (from batching.batch_size) and the token budget (from \
                         batching.max_tokens_per_batch)",
                        if engine == "vllm" {
                            "vllm.engine.max_num_seqs"
                        } else {
                            "tensorrt.max_batch_size"
                        }
                    ),
                ),
                _ => self.unknown(
                    k,
                    s,
                    "batching",
                    &["strategy", "batch_size", "max_tokens_per_batch"],
                ),
            }
        }
    }

    fn traffic(&mut self, key_span: Span, v: &Node) {
        let Some(m) = self.map(v, "traffic_simulation") else {
            return;
        };
        if m.get("enabled").is_some_and(|e| !Self::is_true(e)) {
            return;
        }
        if self.engine == "transformers" {
            self.refuse(
                key_span,
                "traffic_simulation",
                "the transformers engine runs offline batches; traffic (`traffic: {arrival, \
                 rate_qps}`) needs a served engine: backend vllm or tensorrt, or \
                 `engine: llamacpp` with `runners: {llamacpp: local}`",
            );
            return;
        }
        for e in &m.entries {
            let (s, val) = (e.key_span, &e.value);
            match &*e.key {
                "enabled" => {}
                "mode" => match val.as_str() {
                    Some("constant" | "poisson") => self.set(&["traffic", "arrival"], s, val),
                    _ => self.wrong(
                        val.span,
                        format!(
                            "`traffic_simulation.mode` is constant or poisson, found {}",
                            val.describe()
                        ),
                    ),
                },
                "target_qps" => self.set(&["traffic", "rate_qps"], s, val),
                k => self.unknown(
                    k,
                    s,
                    "traffic_simulation",
                    &["enabled", "mode", "target_qps"],
                ),
            }
        }
    }

    fn sharding(&mut self, v: &Node) {
        let Some(m) = self.map(v, "sharding") else {
            return;
        };
        let strategy = m.get("strategy").and_then(Node::as_str).unwrap_or("none");
        let shards = m.entry("num_shards");
        for e in &m.entries {
            if !matches!(&*e.key, "strategy" | "num_shards") {
                self.unknown(&e.key, e.key_span, "sharding", &["strategy", "num_shards"]);
            }
        }
        let Some(n) = shards else {
            if strategy != "none"
                && let Some(e) = m.entry("strategy")
            {
                self.wrong(
                    e.key_span,
                    format!("`sharding.strategy: {strategy}` needs `sharding.num_shards`"),
                );
            }
            return;
        };
        let path: &[&str] = match (strategy, self.engine) {
            ("none", _) => return,
            ("tensor_parallel", "transformers") => &["transformers", "tp_size"],
            ("tensor_parallel", "vllm") => &["vllm", "engine", "tensor_parallel_size"],
            ("tensor_parallel", _) => &["tensorrt", "tensor_parallel_size"],
            ("pipeline_parallel", "vllm") => &["vllm", "engine", "pipeline_parallel_size"],
            ("pipeline_parallel", "tensorrt") => &["tensorrt", "pipeline_parallel_size"],
            ("pipeline_parallel", _) => {
                self.refuse(
                    n.key_span,
                    "sharding.strategy: pipeline_parallel",
                    "the transformers engine shards by tensor parallelism (`transformers.tp_size` \
                     under torchrun); for pipeline parallelism use backend vllm or tensorrt",
                );
                return;
            }
            (other, _) => {
                let span = m.entry("strategy").map_or(n.key_span, |e| e.value.span);
                self.wrong(
                    span,
                    format!(
                        "`sharding.strategy` is none, tensor_parallel or pipeline_parallel, \
                         found `{other}`"
                    ),
                );
                return;
            }
        };
        self.set(path, n.key_span, &n.value);
        if path.first() == Some(&"transformers") {
            // Tensor parallelism in transformers is its `tp_plan` over torchrun's ranks.
            self.set(
                &["transformers", "tp_plan"],
                n.key_span,
                &Node::plain("auto", n.value.span),
            );
        }
    }

    /// A backend section: flat keys of vLLM's engine move under `vllm.engine`; the rest is
    /// llem's section as written.
    fn section(&mut self, key: &str, key_span: Span, v: &Node) {
        let engine = if key == "pytorch" {
            "transformers"
        } else {
            key
        };
        if engine != self.engine {
            self.refuse(
                key_span,
                key,
                format!(
                    "a `{key}:` section for backend `{}`: move its fields to the section of \
                     the backend the file runs, or set `backend: {key}`",
                    self.engine
                ),
            );
            return;
        }
        let Some(m) = self.map(v, key) else {
            return;
        };
        for e in &m.entries {
            let k = &*e.key;
            if engine == "vllm" && !matches!(k, "engine" | "sampling" | "beam_search") {
                self.set(&["vllm", "engine", k], e.key_span, &e.value);
            } else {
                self.set(&[engine, k], e.key_span, &e.value);
            }
        }
    }

    fn decoder(&mut self, key_span: Span, v: &Node) {
        let Some(m) = self.map(v, "decoder") else {
            return;
        };
        for e in &m.entries {
            if &*e.key == "max_new_tokens" {
                self.set(&["max_output_tokens"], e.key_span, &e.value);
            } else {
                self.set(&["decoder", &e.key], e.key_span, &e.value);
            }
        }
        if m.entries.is_empty() {
            self.set(&["decoder"], key_span, v);
        }
    }
}

/// `root` (seed 004's dialect) in llem's: every field translated, or every refusal at once.
pub fn to_llem(root: &Node, sources: &SourceMap) -> Result<Node, ConfigError> {
    let Some(m) = root.as_map() else {
        return Ok(root.clone());
    };
    let backend = m.entry("backend");
    let mut tx = Tx {
        sources,
        errors: Vec::new(),
        out: Vec::new(),
        engine: "transformers",
    };
    if let Some(b) = backend {
        match b.value.as_str().and_then(engine_of) {
            Some(e) => {
                tx.engine = e;
                tx.set(&["engine"], b.key_span, &Node::plain(e, b.value.span));
            }
            None => tx.wrong(
                b.value.span,
                format!(
                    "`backend` is pytorch, vllm or tensorrt, found {}",
                    b.value.describe()
                ),
            ),
        }
    } else {
        tx.set(
            &["engine"],
            root.span,
            &Node::plain("transformers", root.span),
        );
    }
    let num_processes = m.entry("num_processes");
    let tp_shards = m
        .get("sharding")
        .and_then(Node::as_map)
        .filter(|s| s.get("strategy").and_then(Node::as_str) == Some("tensor_parallel"))
        .and_then(|s| s.get("num_shards"))
        .and_then(Node::as_str)
        .map(str::to_string);
    for e in &m.entries {
        let (k, s, v) = (&*e.key, e.key_span, &e.value);
        match k {
            "config_name" => tx.set(&["name"], s, v),
            "model_name" => {
                if m.contains("model") {
                    tx.wrong(s, "both `model_name` and `model`: keep one".into());
                } else {
                    tx.set(&["model"], s, v);
                }
            }
            "backend" => {}
            "fp_precision" => tx.set(&["dtype"], s, v),
            "quantization" => tx.quantization(v),
            "gpus" => tx.refuse(
                s,
                "gpus",
                format!(
                    "llem measures the GPUs the process sees: run it with \
                     CUDA_VISIBLE_DEVICES={}",
                    v.as_seq()
                        .map(|g| g
                            .iter()
                            .filter_map(Node::as_str)
                            .collect::<Vec<_>>()
                            .join(","))
                        .unwrap_or_else(|| "<ids>".into())
                ),
            ),
            "num_processes" => {}
            "batching" => tx.batching(v),
            "traffic_simulation" => tx.traffic(s, v),
            "sharding" => tx.sharding(v),
            "decoder" => tx.decoder(s, v),
            "pytorch" | "vllm" | "tensorrt" | "transformers" => tx.section(k, s, v),
            _ => tx.out.push((k.to_string(), s, v.clone())),
        }
    }
    // One process per tensor-parallel rank is what llem runs; anything else is data
    // parallelism, which it does not.
    if let Some(np) = num_processes {
        let n = np.value.as_str().unwrap_or_default();
        if n != "1" && tp_shards.as_deref() != Some(n) {
            tx.refuse(
                np.key_span,
                "num_processes",
                "llem runs one process per tensor-parallel rank (`sharding: {strategy: \
                 tensor_parallel, num_shards: N}` with num_processes N) and no data-parallel \
                 replicas; drop it, or set it equal to num_shards",
            );
        }
    }
    if !tx.errors.is_empty() {
        let n = tx.errors.len();
        let mut first = Diagnostic::new(
            ErrorKind::Rule,
            format!(
                "this file is written in seed 004's configuration dialect; {n} of its fields \
                 cannot be read as llem's (each below with its replacement)"
            ),
        );
        first.help = Some(
            "`llem config convert FILE --to seed` writes the rest as llem's YAML once these are \
             fixed"
                .into(),
        );
        let mut all = vec![first];
        all.extend(tx.errors);
        return Err(ConfigError { diagnostics: all });
    }
    Ok(fold(tx.out, root.span))
}
