//! The YAML of the Python llem 0.7 (`llenergymeasure` 0.7.0), read as llem's own: detected
//! by shape (`task:`, `serving_mode:`, `study_name:`, per-engine `engine_params:` /
//! `sampling_params:` / `llem_execution:`, `offline:` / `server:`), and every field either
//! moved to llem's spelling — keeping where it was written, so errors point into the user's
//! file — or refused by name with the reason. The field-by-field table is in
//! `docs/configuration.md`.

use std::sync::Arc;

use crate::error::{ConfigError, Diagnostic, ErrorKind, did_you_mean};
use crate::source::{SourceMap, Span};
use crate::yaml::{Map, Node, NodeKind};

/// The dialect a file is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// llem's own (seed 003's grammar).
    Llem,
    /// The Python llem 0.7's.
    Llem07,
    /// Seed 004's framework's (`config_name`, `model_name`, `backend`, ...).
    Seed004,
}

impl Dialect {
    /// In words, for the plan.
    pub fn describe(self) -> &'static str {
        match self {
            Dialect::Llem => "llem (seed) YAML",
            Dialect::Llem07 => {
                "llem 0.7 (llenergymeasure) YAML: task/serving_mode/engine_params, read as llem's own"
            }
            Dialect::Seed004 => {
                "seed 004 YAML: config_name/model_name/backend/fp_precision, read as llem's own"
            }
        }
    }
}

const ENGINES07: [&str; 3] = ["transformers", "vllm", "tensorrt"];
const SECTION_KEYS07: [&str; 3] = ["engine_params", "sampling_params", "llem_execution"];

/// Keys of a 0.7 experiment.
const EXPERIMENT_KEYS07: &[&str] = &[
    "task",
    "engine",
    "serving_mode",
    "measurement",
    "sampling_preset",
    "transformers",
    "vllm",
    "tensorrt",
    "server",
    "offline",
    "passthrough_kwargs",
];

/// Keys of a 0.7 study file beyond an experiment's.
const STUDY_KEYS07: &[&str] = &[
    "study_name",
    "name",
    "output",
    // `output:` as the loader already rewrote it (seed 001's spelling).
    "gpu_telemetry",
    "output_dir",
    "study_execution",
    "runners",
    "images",
    "sweep",
    "experiments",
    "schedule",
];

/// `name` as one of llem 0.7's engines.
fn engine07(name: &str) -> Option<&'static str> {
    ENGINES07.iter().copied().find(|e| *e == name)
}

fn is_engine_section07(n: &Node) -> bool {
    n.as_map()
        .is_some_and(|m| m.entries.iter().any(|e| SECTION_KEYS07.contains(&&*e.key)))
}

fn looks_07(m: &Map) -> bool {
    ["task", "serving_mode", "study_name", "offline", "server"]
        .iter()
        .any(|k| m.contains(k))
        || ENGINES07
            .iter()
            .any(|e| m.get(e).is_some_and(is_engine_section07))
        || m.get("sweep").and_then(Node::as_map).is_some_and(|s| {
            s.entries.iter().any(|e| {
                e.key.starts_with("task.")
                    || SECTION_KEYS07
                        .iter()
                        .any(|k| e.key.contains(&format!(".{k}.")))
            })
        })
        || m.get("experiments")
            .and_then(Node::as_seq)
            .is_some_and(|xs| {
                xs.iter()
                    .any(|x| x.as_map().is_some_and(|m| m.contains("task")))
            })
}

/// Which dialect `root` is written in.
pub fn detect(root: &Node) -> Dialect {
    match root.as_map() {
        Some(m) if looks_07(m) => Dialect::Llem07,
        _ if crate::dialect004::detect(root) => Dialect::Seed004,
        _ => Dialect::Llem,
    }
}

struct Tx<'a> {
    sources: &'a SourceMap,
}

/// An entry being built: key, where the key was written, value.
pub(crate) type Out = Vec<(String, Span, Node)>;

impl Tx<'_> {
    fn err(&self, kind: ErrorKind, span: Span, msg: impl Into<String>) -> ConfigError {
        Diagnostic::new(kind, msg)
            .at(self.sources.location(span))
            .into()
    }

    fn refuse(&self, span: Span, what: &str, why: &str) -> ConfigError {
        self.err(
            ErrorKind::Rule,
            span,
            format!("llem 0.7 field `{what}` has no llem counterpart: {why}"),
        )
    }

    fn map<'n>(&self, n: &'n Node, what: &str) -> Result<&'n Map, ConfigError> {
        n.as_map().ok_or_else(|| {
            self.err(
                ErrorKind::Type,
                n.span,
                format!("`{what}` must be a mapping, found {}", n.describe()),
            )
        })
    }

    fn unknown(&self, key: &str, span: Span, within: &str, known: &[&str]) -> ConfigError {
        let mut d = Diagnostic::new(
            ErrorKind::UnknownKey,
            format!("unknown key `{within}{key}` in a llem 0.7 file"),
        )
        .at(self.sources.location(span));
        if let Some(c) = did_you_mean(key, known.iter().copied()) {
            d = d.with_help(format!("did you mean `{within}{c}`?"));
        }
        d.into()
    }

    /// One 0.7 experiment mapping (the study's shared fields or an `experiments:` entry) as
    /// llem's experiment fields.
    fn experiment(&self, m: &Map, study_level: bool) -> Result<Out, ConfigError> {
        let mut out: Out = Vec::new();
        let mode = m.get("serving_mode").and_then(Node::as_str);
        for e in &m.entries {
            let k = &*e.key;
            let v = &e.value;
            match k {
                "task" => self.task(v, &mut out)?,
                "engine" | "passthrough_kwargs" => out.push((k.into(), e.key_span, v.clone())),
                "serving_mode" => match v.as_str() {
                    Some("offline" | "server") => {}
                    _ => {
                        return Err(self.err(
                            ErrorKind::Type,
                            v.span,
                            format!(
                                "`serving_mode` must be offline or server, found {}",
                                v.describe()
                            ),
                        ));
                    }
                },
                "measurement" => self.measurement(v, &mut out)?,
                "sampling_preset" => push_path(&mut out, &["decoder", "preset"], e.key_span, v),
                "transformers" | "vllm" | "tensorrt" => self.engine(k, v, &mut out)?,
                "offline" => {
                    if mode == Some("server") {
                        return Err(self.err(
                            ErrorKind::Rule,
                            e.key_span,
                            "`offline:` is for serving_mode offline; this file says server",
                        ));
                    }
                    self.offline(v, &mut out)?;
                }
                "server" => {
                    if mode == Some("offline") {
                        return Err(self.err(
                            ErrorKind::Rule,
                            e.key_span,
                            "`server:` is for serving_mode server; this file says offline",
                        ));
                    }
                    self.server(v, &mut out)?;
                }
                _ if study_level && STUDY_KEYS07.contains(&k) => {}
                _ => {
                    let known: Vec<&str> = EXPERIMENT_KEYS07
                        .iter()
                        .chain(if study_level { STUDY_KEYS07 } else { &[] })
                        .copied()
                        .collect();
                    return Err(self.unknown(k, e.key_span, "", &known));
                }
            }
        }
        Ok(out)
    }

    fn task(&self, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        const KEYS: [&str; 5] = [
            "model",
            "dataset",
            "max_input_tokens",
            "max_output_tokens",
            "random_seed",
        ];
        for e in &self.map(v, "task")?.entries {
            if !KEYS.contains(&&*e.key) {
                return Err(self.unknown(&e.key, e.key_span, "task.", &KEYS));
            }
            out.push((e.key.to_string(), e.key_span, e.value.clone()));
        }
        Ok(())
    }

    fn measurement(&self, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        const KEYS: [&str; 8] = [
            "baseline",
            "energy_sampler",
            "latency_profiling",
            "measurement_methodology",
            "measurement_window",
            "warmup_discard_fraction",
            "warmup_discard_seconds",
            "steady_state_auto_detect",
        ];
        let m = self.map(v, "measurement")?;
        // 0.7's discard knobs shape its steady-state window only; under another methodology
        // they change nothing, as in llem.
        let steady = m
            .get("measurement_methodology")
            .or_else(|| m.get("methodology"))
            .and_then(Node::as_str)
            == Some("steady_state");
        for e in &m.entries {
            let x = &e.value;
            match &*e.key {
                "baseline" => out.push(("baseline".into(), e.key_span, x.clone())),
                "energy_sampler" => out.push(("energy_sampler".into(), e.key_span, x.clone())),
                "latency_profiling" => {
                    push_path(out, &["measurement", "latency_profiling"], e.key_span, x);
                }
                // The loader already accepts these 0.7 spellings as llem's aliases.
                "measurement_methodology" | "methodology" => {
                    push_path(out, &["measurement", "methodology"], e.key_span, x);
                }
                "measurement_window" | "window" => {
                    push_path(out, &["measurement", "window"], e.key_span, x);
                }
                // Defaults llem's methodology matches; anything else is a method llem lacks.
                "warmup_discard_fraction" | "warmup_discard_seconds" if !steady => {}
                "warmup_discard_fraction" if is_num(x, 0.1) => {}
                "warmup_discard_seconds" if x.is_null() => {}
                "steady_state_auto_detect" if is_false(x) => {}
                k @ ("warmup_discard_fraction"
                | "warmup_discard_seconds"
                | "steady_state_auto_detect") => {
                    return Err(self.refuse(
                        e.key_span,
                        &format!("measurement.{k}"),
                        "llem's steady state is the span the batch is full (measurement: \
                         {methodology: steady_state}), or a fixed measurement.window; it \
                         does not discard a fraction of the run",
                    ));
                }
                k => return Err(self.unknown(k, e.key_span, "measurement.", &KEYS)),
            }
        }
        Ok(())
    }

    fn offline(&self, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        for e in &self.map(v, "offline")?.entries {
            if &*e.key != "warmup" {
                return Err(self.unknown(&e.key, e.key_span, "offline.", &["warmup"]));
            }
            out.push(("warmup".into(), e.key_span, self.warmup(&e.value)?));
        }
        Ok(())
    }

    /// `offline.warmup` with `n_prompts` spelled `n_warmup`.
    fn warmup(&self, v: &Node) -> Result<Node, ConfigError> {
        let m = self.map(v, "offline.warmup")?;
        let mut w = Map::default();
        for e in &m.entries {
            let key = if &*e.key == "n_prompts" {
                "n_warmup"
            } else {
                &e.key
            };
            w.insert(key, e.key_span, e.value.clone());
        }
        Ok(map_node(w, v.span))
    }

    fn server(&self, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        let m = self.map(v, "server")?;
        // 0.7's server mode measures consecutive windows after a ramp, each on its own:
        // llem's `windows` methodology, whose defaults (3 x 240 s after 30 s) are 0.7's.
        push_path(
            out,
            &["measurement", "methodology"],
            v.span,
            &Node::plain("windows", v.span),
        );
        push_path(
            out,
            &["measurement", "windows"],
            v.span,
            &Node::empty_map(v.span),
        );
        // 0.7's default server warmup is the composite gate.
        let mut gate_mode = "composite";
        let mut gate_timeout: Option<Node> = None;
        for e in &m.entries {
            match &*e.key {
                "traffic" => self.traffic(&e.value, out)?,
                "warmup" => {
                    for w in &self.map(&e.value, "server.warmup")?.entries {
                        match (&*w.key, w.value.as_str()) {
                            ("mode", Some("composite")) => gate_mode = "composite",
                            ("mode", _) => {
                                return Err(self.refuse(
                                    w.value.span,
                                    "server.warmup.mode: fixed",
                                    "llem warms a server with warmup prompts (warmup.n_warmup) or \
                                     the thermal-equilibrium gate (warmup.gate), not for a fixed time",
                                ));
                            }
                            ("timeout_seconds", _) => gate_timeout = Some(w.value.clone()),
                            ("duration_seconds", _) => {}
                            (k, _) => {
                                return Err(self.unknown(
                                    k,
                                    w.key_span,
                                    "server.warmup.",
                                    &["mode", "timeout_seconds", "duration_seconds"],
                                ));
                            }
                        }
                    }
                }
                "cooldown_seconds" if is_num(&e.value, 0.0) => {}
                "cooldown_seconds" => {
                    return Err(self.refuse(
                        e.key_span,
                        "server.cooldown_seconds",
                        "llem pauses between cells (study_execution.experiment_gap_seconds), \
                         not between the rate levels of one server",
                    ));
                }
                k => {
                    return Err(self.unknown(
                        k,
                        e.key_span,
                        "server.",
                        &["traffic", "warmup", "cooldown_seconds"],
                    ));
                }
            }
        }
        if gate_mode == "composite" {
            let mut g = Map::default();
            if let Some(t) = gate_timeout {
                g.insert("timeout_seconds", t.span, t);
            }
            push_path(out, &["warmup", "gate"], v.span, &map_node(g, v.span));
        }
        Ok(())
    }

    fn traffic(&self, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        const KEYS: [&str; 9] = [
            "rate",
            "arrival",
            "burstiness",
            "window_seconds",
            "window_requests",
            "ramp_exclusion_seconds",
            "concurrency_cap",
            "slo",
            "seed",
        ];
        for e in &self.map(v, "server.traffic")?.entries {
            let x = &e.value;
            let s = e.key_span;
            match &*e.key {
                "rate" => push_path(out, &["traffic", "rate_qps"], s, x),
                "arrival" | "burstiness" | "seed" => push_path(out, &["traffic", &e.key], s, x),
                "concurrency_cap" => push_path(out, &["traffic", "max_concurrency"], s, x),
                "window_seconds" => {
                    push_path(out, &["measurement", "windows", "window_seconds"], s, x)
                }
                "ramp_exclusion_seconds" => {
                    push_path(
                        out,
                        &["measurement", "windows", "ramp_exclusion_seconds"],
                        s,
                        x,
                    );
                }
                "window_requests" if x.is_null() => {}
                "window_requests" => {
                    return Err(self.refuse(
                        s,
                        "server.traffic.window_requests",
                        "llem 0.7 itself rejects it; windows are timed (window_seconds)",
                    ));
                }
                "slo" => self.slo(x, out)?,
                k => return Err(self.unknown(k, s, "server.traffic.", &KEYS)),
            }
        }
        Ok(())
    }

    fn slo(&self, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        if v.is_null() {
            return Ok(());
        }
        for e in &self.map(v, "server.traffic.slo")?.entries {
            match &*e.key {
                "ttft_ms" | "tpot_ms" => {
                    push_path(out, &["traffic", "slo", &e.key], e.key_span, &e.value)
                }
                "percentile" => {
                    return Err(self.refuse(
                        e.key_span,
                        "server.traffic.slo.percentile",
                        "llem judges the SLO per request (goodput: the requests that met both \
                         bounds), not at a tail percentile of the window",
                    ));
                }
                k => {
                    return Err(self.unknown(
                        k,
                        e.key_span,
                        "server.traffic.slo.",
                        &["ttft_ms", "tpot_ms", "percentile"],
                    ));
                }
            }
        }
        Ok(())
    }

    fn engine(&self, engine: &str, v: &Node, out: &mut Out) -> Result<(), ConfigError> {
        if v.is_null() {
            return Ok(());
        }
        let m = self.map(v, engine)?;
        for e in &m.entries {
            let known: &[&str] = if engine == "transformers" {
                &SECTION_KEYS07
            } else {
                &["engine_params", "sampling_params"]
            };
            match &*e.key {
                "engine_params" => {
                    for p in &self
                        .map(&e.value, &format!("{engine}.engine_params"))?
                        .entries
                    {
                        let (target, scoped) = engine_param(engine, &p.key);
                        if scoped && is_auto(&p.value) {
                            continue;
                        }
                        let value = normalise_dtype(&target, &p.value);
                        let path: Vec<&str> = target.iter().map(String::as_str).collect();
                        push_path(out, &path, p.key_span, &value);
                    }
                }
                "sampling_params" => {
                    for p in &self
                        .map(&e.value, &format!("{engine}.sampling_params"))?
                        .entries
                    {
                        let target = sampling_param(engine, &p.key);
                        let path: Vec<&str> = target.iter().map(String::as_str).collect();
                        push_path(out, &path, p.key_span, &p.value);
                    }
                }
                "llem_execution" if engine == "transformers" => {
                    for p in &self.map(&e.value, "transformers.llem_execution")?.entries {
                        push_path(out, &["transformers", &p.key], p.key_span, &p.value);
                    }
                }
                k => return Err(self.unknown(k, e.key_span, &format!("{engine}."), known)),
            }
        }
        Ok(())
    }
}

/// Whether llem's schema type `def` (`TransformersConfig`, ...) has field `key`.
fn schema_has(def: &str, key: &str) -> bool {
    crate::schema::experiment_schema()
        .pointer(&format!("/$defs/{def}/properties/{key}"))
        .is_some()
}

/// Where a 0.7 `engine_params` key goes in llem's config, and whether it is a top-level field
/// (the precision) rather than one of the engine section. A key llem's engine section does
/// not have is one 0.7 passed through to the engine as written (its sections allow extra
/// keys): it goes to `passthrough_kwargs`, which llem passes through the same way.
fn engine_param(engine: &str, key: &str) -> (Vec<String>, bool) {
    let s = |p: &[&str]| p.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
    let (path, def, field) = match (engine, key) {
        (_, "dtype") => return (s(&["dtype"]), true),
        ("vllm", "beam_search") => return (s(&["vllm", "beam_search"]), false),
        ("vllm", k) => (s(&["vllm", "engine", k]), "VllmEngineConfig", k),
        ("tensorrt", "kv_cache_config") => {
            (s(&["tensorrt", "kv_cache"]), "TensorRtConfig", "kv_cache")
        }
        ("tensorrt", "scheduler_config") => {
            (s(&["tensorrt", "scheduler"]), "TensorRtConfig", "scheduler")
        }
        ("tensorrt", "quant_config") => (s(&["tensorrt", "quant"]), "TensorRtConfig", "quant"),
        ("tensorrt", "backend") => (s(&["tensorrt", "engine"]), "TensorRtConfig", "engine"),
        ("tensorrt", k) => (s(&["tensorrt", k]), "TensorRtConfig", k),
        (e, k) => (s(&[e, k]), "TransformersConfig", k),
    };
    if schema_has(def, field) {
        (path, false)
    } else {
        (s(&["passthrough_kwargs", key]), false)
    }
}

/// Where a 0.7 `sampling_params` key goes: the shared decoder for the sampling every engine
/// has, the engine's own sampling section for the rest.
fn sampling_param(engine: &str, key: &str) -> Vec<String> {
    let shared = [
        "temperature",
        "do_sample",
        "top_k",
        "top_p",
        "repetition_penalty",
        "min_p",
        "min_new_tokens",
    ];
    if shared.contains(&key) {
        return vec!["decoder".into(), key.into()];
    }
    match engine {
        "transformers" => vec!["transformers".into(), key.into()],
        e => vec![e.into(), "sampling".into(), key.into()],
    }
}

/// 0.7's precision words as llem's (`half` is float16, `float` float32).
fn normalise_dtype(target: &[String], v: &Node) -> Node {
    if target.len() == 1 && target.first().is_some_and(|t| t == "dtype") {
        let word = match v.as_str() {
            Some("half") => "float16",
            Some("float") => "float32",
            _ => return v.clone(),
        };
        return Node::plain(word, v.span);
    }
    v.clone()
}

fn is_auto(v: &Node) -> bool {
    v.as_str() == Some("auto") || v.is_null()
}

fn is_num(v: &Node, want: f64) -> bool {
    v.is_null()
        || v.as_str()
            .and_then(crate::yaml::parse_float)
            .is_some_and(|x| (x - want).abs() < 1e-12)
}

fn is_false(v: &Node) -> bool {
    v.is_null() || matches!(v.as_str(), Some("false" | "False"))
}

fn seq_node(items: Vec<Node>, span: Span) -> Node {
    Node {
        span,
        kind: NodeKind::Seq(Arc::new(items)),
    }
}

fn map_node(m: Map, span: Span) -> Node {
    Node {
        span,
        kind: NodeKind::Map(Arc::new(m)),
    }
}

/// Appends `path = value` to `out` as nested mappings under the first key (merged with what
/// is there when the out-list is folded).
pub(crate) fn push_path(out: &mut Out, path: &[&str], span: Span, value: &Node) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let mut node = value.clone();
    for k in rest.iter().rev() {
        let mut m = Map::default();
        m.insert(k, span, node);
        node = map_node(m, span);
    }
    out.push(((*first).to_string(), span, node));
}

/// Folds the out-list into one mapping, deep-merging repeated keys (`measurement` from two
/// 0.7 places).
pub(crate) fn fold(out: Out, span: Span) -> Node {
    let mut root = Node::empty_map(span);
    for (k, s, v) in out {
        let mut single = Map::default();
        single.insert(&k, s, v);
        let overlay = map_node(single, s);
        let merged = crate::yaml::deep_merge(&root, &overlay);
        root = Node { span, ..merged };
    }
    root
}

/// A 0.7 sweep key as llem's: the path (as llem writes it) and, for a field outside the
/// engine section that the key scopes to one engine, that engine.
fn sweep_path(key: &str) -> (String, Option<&'static str>) {
    let parts: Vec<&str> = key.split('.').collect();
    let join = |v: Vec<String>| v.join(".");
    match parts.as_slice() {
        ["task", rest @ ..] => (rest.join("."), None),
        ["sampling_preset"] => ("decoder.preset".into(), None),
        ["measurement", "baseline", rest @ ..] => (format!("baseline.{}", rest.join(".")), None),
        ["measurement", "energy_sampler"] => ("energy_sampler".into(), None),
        ["measurement", "measurement_methodology"] => ("measurement.methodology".into(), None),
        ["measurement", "measurement_window"] => ("measurement.window".into(), None),
        ["offline", "warmup", "n_prompts"] => ("warmup.n_warmup".into(), None),
        ["offline", "warmup", rest @ ..] => (format!("warmup.{}", rest.join(".")), None),
        ["server", "traffic", "rate"] => ("traffic.rate_qps".into(), None),
        ["server", "traffic", "concurrency_cap"] => ("traffic.max_concurrency".into(), None),
        ["server", "traffic", "window_seconds"] => {
            ("measurement.windows.window_seconds".into(), None)
        }
        ["server", "traffic", "ramp_exclusion_seconds"] => {
            ("measurement.windows.ramp_exclusion_seconds".into(), None)
        }
        ["server", "traffic", rest @ ..] => (format!("traffic.{}", rest.join(".")), None),
        [e, "engine_params", k, rest @ ..] if engine07(e).is_some() => {
            let (mut target, top) = engine_param(e, k);
            target.extend(rest.iter().map(|x| (*x).to_string()));
            (join(target), engine07(e).filter(|_| top))
        }
        [e, "sampling_params", k] if engine07(e).is_some() => {
            let target = sampling_param(e, k);
            let scoped = target.first().is_some_and(|f| f == "decoder");
            (join(target), engine07(e).filter(|_| scoped))
        }
        ["transformers", "llem_execution", rest @ ..] => {
            (format!("transformers.{}", rest.join(".")), None)
        }
        _ => (key.to_string(), None),
    }
}

impl Tx<'_> {
    /// The values of a sweep axis: a list, or one of 0.7's range shorthands expanded.
    fn axis_values(&self, v: &Node) -> Result<Node, ConfigError> {
        let Some(m) = v.as_map() else {
            return Ok(v.clone());
        };
        let num = |m: &Map, k: &str| -> Result<f64, ConfigError> {
            m.get(k)
                .and_then(Node::as_str)
                .and_then(crate::yaml::parse_float)
                .ok_or_else(|| {
                    self.err(
                        ErrorKind::Sweep,
                        v.span,
                        format!("range shorthand needs a number `{k}`"),
                    )
                })
        };
        let ints = |m: &Map| {
            ["min", "max"].iter().all(|k| {
                m.get(k)
                    .and_then(Node::as_str)
                    .is_some_and(|s| crate::yaml::parse_int(s).is_some())
            })
        };
        let values: Vec<f64>;
        let integral: bool;
        if let Some(inner) = m.get("log").and_then(Node::as_map) {
            let (a, b, n) = (num(inner, "min")?, num(inner, "max")?, num(inner, "num")?);
            if a <= 0.0 || b < a || !(1.0..=10_000.0).contains(&n) {
                return Err(self.err(
                    ErrorKind::Sweep,
                    v.span,
                    "log range needs 0 < min <= max and 1 <= num <= 10000",
                ));
            }
            let n = n as usize;
            values = (0..n)
                .map(|i| {
                    let f = if n == 1 {
                        0.0
                    } else {
                        i as f64 / (n - 1) as f64
                    };
                    (a.ln() + f * (b.ln() - a.ln())).exp()
                })
                .collect();
            integral = ints(inner);
        } else if let Some(inner) = m.get("pow2").and_then(Node::as_map) {
            let (a, b) = (num(inner, "min")?, num(inner, "max")?);
            if a <= 0.0 || b < a || b > 1e18 {
                return Err(self.err(ErrorKind::Sweep, v.span, "pow2 range needs 0 < min <= max"));
            }
            let mut p = 1.0f64;
            let mut vs = Vec::new();
            while p <= b {
                if p >= a {
                    vs.push(p);
                }
                p *= 2.0;
            }
            values = vs;
            integral = true;
        } else if m.contains("min") && m.contains("max") && m.contains("num") {
            let (a, b, n) = (num(m, "min")?, num(m, "max")?, num(m, "num")?);
            if b < a || !(1.0..=10_000.0).contains(&n) {
                return Err(self.err(
                    ErrorKind::Sweep,
                    v.span,
                    "range needs min <= max and 1 <= num <= 10000",
                ));
            }
            let n = n as usize;
            values = (0..n)
                .map(|i| {
                    if n == 1 {
                        a
                    } else {
                        a + (b - a) * i as f64 / (n - 1) as f64
                    }
                })
                .collect();
            integral = ints(m);
        } else {
            return Err(self.err(
                ErrorKind::Sweep,
                v.span,
                "a sweep axis mapping must be a range shorthand: {min, max, num}, \
                 {log: {min, max, num}} or {pow2: {min, max}}",
            ));
        }
        // Integers stay integers when every value is one; floats lose binary noise.
        let all_int = integral && values.iter().all(|x| (x - x.round()).abs() < 1e-9);
        let items: Vec<Node> = values
            .iter()
            .map(|x| {
                let text = if all_int {
                    format!("{}", x.round() as i64)
                } else {
                    format!("{}", (x * 1e12).round() / 1e12)
                };
                Node::plain(&text, v.span)
            })
            .collect();
        Ok(seq_node(items, v.span))
    }

    /// One group variant (a mapping of 0.7 paths) with llem's paths.
    fn variant(&self, v: &Node) -> Result<Node, ConfigError> {
        let Some(m) = v.as_map() else {
            return Ok(v.clone());
        };
        let mut out = Map::default();
        for e in &m.entries {
            let (path, _) = sweep_path(&e.key);
            out.insert(&path, e.key_span, e.value.clone());
        }
        Ok(map_node(out, v.span))
    }

    fn sweep(&self, v: &Node) -> Result<Node, ConfigError> {
        let m = self.map(v, "sweep")?;
        let mut out = Map::default();
        for e in &m.entries {
            let (path, scope) = sweep_path(&e.key);
            let is_group = e
                .value
                .as_seq()
                .is_some_and(|xs| xs.iter().any(|x| x.as_map().is_some()));
            if is_group {
                let variants: Vec<Node> = e
                    .value
                    .as_seq()
                    .unwrap_or_default()
                    .iter()
                    .map(|x| self.variant(x))
                    .collect::<Result<_, _>>()?;
                out.insert(&e.key, e.key_span, seq_node(variants, e.value.span));
                continue;
            }
            let values = self.axis_values(&e.value)?;
            match scope {
                // A field outside the engine section that the key scopes to one engine: a
                // group named `<engine>.<field>` (its first segment scopes it), one variant
                // per value.
                Some(engine) => {
                    let variants: Vec<Node> = values
                        .as_seq()
                        .unwrap_or_default()
                        .iter()
                        .map(|x| {
                            let mut vm = Map::default();
                            vm.insert(&path, e.key_span, x.clone());
                            map_node(vm, x.span)
                        })
                        .collect();
                    out.insert(
                        &format!("{engine}.{}", path.replace('.', "_")),
                        e.key_span,
                        seq_node(variants, e.value.span),
                    );
                }
                None => out.insert(&path, e.key_span, values),
            }
        }
        Ok(map_node(out, v.span))
    }

    fn runners(&self, v: &Node) -> Result<Node, ConfigError> {
        let m = self.map(v, "runners")?;
        let mut out = Map::default();
        for e in &m.entries {
            let word = match e.value.as_str() {
                Some("container") => "docker".to_string(),
                Some("process") => "local".to_string(),
                Some("auto") | None => continue,
                Some(other) => match other.strip_prefix("container:") {
                    Some(image) => format!("docker:{image}"),
                    None => other.to_string(),
                },
            };
            out.insert(&e.key, e.key_span, Node::plain(&word, e.value.span));
        }
        Ok(map_node(out, v.span))
    }

    fn study_execution(&self, v: &Node) -> Result<Node, ConfigError> {
        let m = self.map(v, "study_execution")?;
        let mut out = Map::default();
        for e in &m.entries {
            match &*e.key {
                "gpu_indices" if e.value.is_null() => {}
                "gpu_indices" => {
                    return Err(self.refuse(
                        e.key_span,
                        "study_execution.gpu_indices",
                        "llem measures the GPUs CUDA_VISIBLE_DEVICES makes visible; set it in \
                         the environment instead",
                    ));
                }
                "skip_preflight" if is_false(&e.value) => {}
                "skip_preflight" => {
                    return Err(self.refuse(
                        e.key_span,
                        "study_execution.skip_preflight",
                        "llem checks every configuration before the first cell and does not \
                         skip it (`llem doctor study.yaml` shows what it checks)",
                    ));
                }
                "stdout_silence_timeout_seconds" => {}
                _ => out.insert(&e.key, e.key_span, e.value.clone()),
            }
        }
        Ok(map_node(out, v.span))
    }
}

/// `root` in llem's dialect: unchanged when it already is, translated from llem 0.7's
/// otherwise.
pub fn to_llem(root: &Node, sources: &SourceMap) -> Result<(Node, Dialect), ConfigError> {
    match detect(root) {
        Dialect::Llem => return Ok((root.clone(), Dialect::Llem)),
        Dialect::Seed004 => {
            return Ok((crate::dialect004::to_llem(root, sources)?, Dialect::Seed004));
        }
        Dialect::Llem07 => {}
    }
    let tx = Tx { sources };
    let m = tx.map(root, "the file")?;
    let mode = m.get("serving_mode");
    if mode.is_none() {
        return Err(tx.err(
            ErrorKind::Missing,
            m.entries.first().map_or(root.span, |e| e.key_span),
            "a llem 0.7 file needs `serving_mode:` (offline or server; it has no default)",
        ));
    }
    if let Some(e) = m.entry("serving_mode")
        && e.value.as_str() == Some("server")
        && !m.contains("server")
    {
        return Err(tx.err(
            ErrorKind::Missing,
            e.key_span,
            "serving_mode server needs a `server:` section (its traffic)",
        ));
    }
    let mut out = tx.experiment(m, true)?;
    for e in &m.entries {
        let v = &e.value;
        let s = e.key_span;
        match &*e.key {
            "study_name" | "name" => out.push(("name".into(), s, v.clone())),
            "output" | "images" | "schedule" | "gpu_telemetry" | "output_dir" => {
                out.push((e.key.to_string(), s, v.clone()));
            }
            "study_execution" => out.push(("study_execution".into(), s, tx.study_execution(v)?)),
            "runners" => out.push(("runners".into(), s, tx.runners(v)?)),
            "sweep" => out.push(("sweep".into(), s, tx.sweep(v)?)),
            "experiments" => {
                let items = v.as_seq().ok_or_else(|| {
                    tx.err(
                        ErrorKind::Type,
                        v.span,
                        format!("`experiments` must be a list, found {}", v.describe()),
                    )
                })?;
                let entries: Vec<Node> = items
                    .iter()
                    .map(|x| {
                        let em = tx.map(x, "an experiments entry")?;
                        Ok(fold(tx.experiment(em, false)?, x.span))
                    })
                    .collect::<Result<_, ConfigError>>()?;
                out.push(("experiments".into(), s, seq_node(entries, v.span)));
            }
            _ => {}
        }
    }
    Ok((fold(out, root.span), Dialect::Llem07))
}

/// llem 0.7's `llem_execution` knobs of the transformers engine (the rest of llem's
/// transformers section is `engine_params`).
const LLEM_EXECUTION07: [&str; 7] = [
    "batch_size",
    "torch_compile",
    "torch_compile_mode",
    "torch_compile_backend",
    "allow_tf32",
    "autocast_enabled",
    "autocast_dtype",
];

/// llem 0.7's transformers `engine_params`.
const TRANSFORMERS_PARAMS07: [&str; 18] = [
    "attn_implementation",
    "load_in_4bit",
    "load_in_8bit",
    "bnb_4bit_compute_dtype",
    "bnb_4bit_quant_type",
    "bnb_4bit_use_double_quant",
    "use_cache",
    "cache_implementation",
    "num_beams",
    "early_stopping",
    "length_penalty",
    "no_repeat_ngram_size",
    "prompt_lookup_num_tokens",
    "device_map",
    "max_memory",
    "low_cpu_mem_usage",
    "tp_plan",
    "tp_size",
];

/// Writes llem's YAML as llem 0.7's.
struct Back<'a> {
    tx: Tx<'a>,
    /// The engine the file runs on (0.7 keeps sampling and precision per engine).
    engine: Option<String>,
}

impl Back<'_> {
    fn no(&self, span: Span, what: &str, why: &str) -> ConfigError {
        self.tx.err(
            ErrorKind::Rule,
            span,
            format!("`{what}` cannot be written for llem 0.7: {why}"),
        )
    }

    /// The one engine whose sections take precision and sampling.
    fn engine_for(&self, span: Span, what: &str) -> Result<String, ConfigError> {
        self.engine.clone().ok_or_else(|| {
            self.no(
                span,
                what,
                "llem 0.7 keeps it per engine, and this file names no single engine",
            )
        })
    }

    /// `runners` or `images` as llem 0.7 has them, one per engine for the whole study: the
    /// file's own with those its `experiments:` entries set lifted beside them (llem lets an
    /// entry set its engine's runner); two different values for one engine are refused.
    fn study_wide(&self, root: &Node, key: &str) -> Result<Option<(Span, Map)>, ConfigError> {
        let entries = root
            .get_path(&["experiments"])
            .and_then(Node::as_seq)
            .unwrap_or_default();
        let sources = std::iter::once(root).chain(entries.iter());
        let mut out = Map::default();
        let mut span = None;
        for n in sources {
            let Some(block) = n.get_path(&[key]) else {
                continue;
            };
            span.get_or_insert(block.span);
            for x in &self.tx.map(block, key)?.entries {
                let text = x.value.as_str().unwrap_or_default();
                let word = if key == "images" {
                    text.to_string()
                } else {
                    match text {
                        "docker" => "container".to_string(),
                        "local" => "process".to_string(),
                        t if t.starts_with("docker:") => format!("container:{}", &t[7..]),
                        t => {
                            return Err(self.no(
                                x.value.span,
                                &format!("runners.{}: {t}", x.key),
                                "llem 0.7 runs engines as a process or in a container only",
                            ));
                        }
                    }
                };
                if let Some(before) = out.get(&x.key)
                    && before.as_str() != Some(word.as_str())
                {
                    return Err(self.no(
                        x.value.span,
                        &format!("{key}.{}: {text}", x.key),
                        "llem 0.7 has one per engine for the whole study, and another entry \
                         sets a different one",
                    ));
                }
                out.insert(&x.key, x.key_span, Node::plain(&word, x.value.span));
            }
        }
        Ok(span.map(|s| (s, out)))
    }

    /// One llem path (`dataset.n_prompts`, `vllm.engine.max_num_seqs`) as 0.7's.
    fn path(&self, path: &str, span: Span) -> Result<String, ConfigError> {
        let parts: Vec<&str> = path.split('.').collect();
        Ok(match parts.as_slice() {
            ["name"] => "study_name".into(),
            [
                k
                @ ("model" | "dataset" | "max_input_tokens" | "max_output_tokens" | "random_seed"),
                rest @ ..,
            ] => {
                let mut v = vec!["task", k];
                v.extend(rest);
                v.join(".")
            }
            ["baseline", rest @ ..] => format!("measurement.baseline.{}", rest.join(".")),
            ["energy_sampler"] => "measurement.energy_sampler".into(),
            ["measurement", "latency_profiling"] => "measurement.latency_profiling".into(),
            ["measurement", "methodology"] => "measurement.measurement_methodology".into(),
            ["measurement", "window"] => "measurement.measurement_window".into(),
            [
                "measurement",
                "windows",
                k @ ("window_seconds" | "ramp_exclusion_seconds"),
            ] => {
                format!("server.traffic.{k}")
            }
            ["decoder", "preset"] => "sampling_preset".into(),
            ["decoder", k] => {
                let e = self.engine_for(span, path)?;
                format!("{e}.sampling_params.{k}")
            }
            ["dtype"] => {
                let e = self.engine_for(span, path)?;
                format!("{e}.engine_params.dtype")
            }
            ["warmup", "n_warmup"] => "offline.warmup.n_prompts".into(),
            ["warmup", "gate", "timeout_seconds"] => "server.warmup.timeout_seconds".into(),
            ["warmup", "gate", ..] => {
                return Err(self.no(
                    span,
                    path,
                    "llem 0.7's warmup gate has only a timeout (its thresholds are fixed)",
                ));
            }
            ["warmup", rest @ ..] => format!("offline.warmup.{}", rest.join(".")),
            ["traffic", "rate_qps"] => "server.traffic.rate".into(),
            ["traffic", "max_concurrency"] => "server.traffic.concurrency_cap".into(),
            ["traffic", k @ ("arrival" | "burstiness" | "seed")] => format!("server.traffic.{k}"),
            ["traffic", "slo", k @ ("ttft_ms" | "tpot_ms")] => format!("server.traffic.slo.{k}"),
            ["transformers", k, rest @ ..] if LLEM_EXECUTION07.contains(k) => {
                format!("transformers.llem_execution.{k}{}", suffix(rest))
            }
            ["transformers", k, rest @ ..] if TRANSFORMERS_PARAMS07.contains(k) => {
                format!("transformers.engine_params.{k}{}", suffix(rest))
            }
            ["vllm", "engine", k, rest @ ..] => format!("vllm.engine_params.{k}{}", suffix(rest)),
            ["vllm", "beam_search", rest @ ..] => {
                format!("vllm.engine_params.beam_search{}", suffix(rest))
            }
            ["vllm", "sampling", k] => format!("vllm.sampling_params.{k}"),
            ["tensorrt", "sampling", k] => format!("tensorrt.sampling_params.{k}"),
            ["tensorrt", k, rest @ ..] if *k != "sampling" => {
                let k07 = match *k {
                    "kv_cache" => "kv_cache_config",
                    "scheduler" => "scheduler_config",
                    "quant" => "quant_config",
                    "engine" => "backend",
                    other => other,
                };
                format!("tensorrt.engine_params.{k07}{}", suffix(rest))
            }
            ["passthrough_kwargs", rest @ ..] => format!("passthrough_kwargs.{}", rest.join(".")),
            ["engine"] => "engine".into(),
            _ => {
                return Err(self.no(
                    span,
                    path,
                    "llem 0.7 has no such field (it knows the transformers, vllm and tensorrt \
                     engines; no LoRA, traffic counts or durations, or llem's own windows \
                     thresholds)",
                ));
            }
        })
    }

    /// Every leaf of an experiment mapping as (0.7 path, span, value); lists and empty
    /// mappings are leaves.
    fn leaves(
        &self,
        n: &Node,
        prefix: &str,
        out: &mut Vec<(String, Span, Node)>,
    ) -> Result<(), ConfigError> {
        let Some(m) = n.as_map() else {
            return Ok(());
        };
        for e in &m.entries {
            let path = if prefix.is_empty() {
                e.key.to_string()
            } else {
                format!("{prefix}.{}", e.key)
            };
            match (&e.value.kind, path.as_str()) {
                (NodeKind::Map(inner), p)
                    if !inner.entries.is_empty()
                        && !matches!(
                            p,
                            "passthrough_kwargs" | "vllm.engine.compilation_config"
                        ) =>
                {
                    self.leaves(&e.value, &path, out)?;
                }
                _ => out.push((path, e.key_span, e.value.clone())),
            }
        }
        Ok(())
    }

    fn experiment(&self, n: &Node, study_level: bool) -> Result<Out, ConfigError> {
        let mut leaves = Vec::new();
        self.leaves(n, "", &mut leaves)?;
        let mut out: Out = Vec::new();
        for (path, span, value) in leaves {
            let first = path.split('.').next().unwrap_or_default();
            match first {
                // The study's own keys: `from_llem` writes them.
                "sweep" | "experiments" | "study_execution" | "runners" | "images" | "schedule"
                | "output_dir" | "gpu_telemetry" | "name"
                    if study_level => {}
                // Lifted to the study by `study_wide`.
                "runners" | "images" => {}
                "output_dir" | "gpu_telemetry" | "name" => {
                    return Err(self.no(
                        span,
                        &path,
                        "llem 0.7 sets it for the whole study, not per experiment",
                    ));
                }
                "base" | "_extends" => {
                    return Err(self.no(span, &path, "inline the base file first"));
                }
                "engine" => {
                    let e = value.as_str().unwrap_or_default();
                    if !ENGINES07.contains(&e) {
                        return Err(self.no(
                            span,
                            &format!("engine: {e}"),
                            "llem 0.7 runs transformers, vllm and tensorrt only",
                        ));
                    }
                    out.push(("engine".into(), span, value));
                }
                "llamacpp" | "sglang" | "tgi" | "lora" => {
                    return Err(self.no(span, &path, "llem 0.7 has no such engine or feature"));
                }
                _ => {
                    let p07 = self.path(&path, span)?;
                    let parts: Vec<&str> = p07.split('.').collect();
                    push_path(&mut out, &parts, span, &value);
                }
            }
        }
        Ok(out)
    }
}

fn suffix(rest: &[&str]) -> String {
    rest.iter().map(|r| format!(".{r}")).collect()
}

/// `root` (llem's dialect) as llem 0.7's: every field at 0.7's place, or an error naming what
/// 0.7 cannot express.
pub fn from_llem(root: &Node, sources: &SourceMap) -> Result<Node, ConfigError> {
    let tx = Tx { sources };
    let m = tx.map(root, "the file")?;
    let named = m.get("engine").and_then(Node::as_str).map(String::from);
    let swept_engines = m
        .get("sweep")
        .and_then(Node::as_map)
        .is_some_and(|s| s.contains("engine"));
    let model = m.get("model").and_then(Node::as_str).unwrap_or_default();
    // Without `engine:`, llem infers it from the model; 0.7 defaults to transformers.
    let engine = match (&named, swept_engines) {
        (Some(e), _) => Some(e.clone()),
        (None, true) => None,
        (None, false) => Some(crate::infer::from_model(model).engine.as_str().to_string()),
    };
    let back = Back { tx, engine };
    let mut out = back.experiment(root, true)?;
    if named.is_none()
        && let Some(e) = &back.engine
    {
        if !ENGINES07.contains(&e.as_str()) {
            return Err(back.no(
                root.span,
                &format!("engine: {e} (inferred from the model)"),
                "llem 0.7 runs transformers, vllm and tensorrt only",
            ));
        }
        out.push(("engine".into(), root.span, Node::plain(e, root.span)));
    }
    let served = m.contains("traffic");
    out.insert(
        0,
        (
            "serving_mode".into(),
            root.span,
            Node::plain(if served { "server" } else { "offline" }, root.span),
        ),
    );
    for e in &m.entries {
        let v = &e.value;
        let s = e.key_span;
        match &*e.key {
            "name" => out.insert(0, ("study_name".into(), s, v.clone())),
            "study_execution" | "images" | "schedule" => {
                out.push((e.key.to_string(), s, v.clone()))
            }
            "output_dir" => push_path(&mut out, &["output", "results_dir"], s, v),
            "gpu_telemetry" => push_path(&mut out, &["output", "save_timeseries"], s, v),
            "sweep" => {
                let mut sw = Map::default();
                for x in &back.tx.map(v, "sweep")?.entries {
                    let groups = x
                        .value
                        .as_seq()
                        .is_some_and(|xs| xs.iter().any(|i| i.as_map().is_some()));
                    if groups {
                        let variants: Vec<Node> = x
                            .value
                            .as_seq()
                            .unwrap_or_default()
                            .iter()
                            .map(|var| {
                                let mut vm = Map::default();
                                for ve in &back.tx.map(var, "a sweep group entry")?.entries {
                                    let p = crate::aliases::canonical_path(
                                        &ve.key.split('.').collect::<Vec<_>>(),
                                    )
                                    .join(".");
                                    vm.insert(
                                        &back.path(&p, ve.key_span)?,
                                        ve.key_span,
                                        ve.value.clone(),
                                    );
                                }
                                Ok(map_node(vm, var.span))
                            })
                            .collect::<Result<_, ConfigError>>()?;
                        sw.insert(&x.key, x.key_span, seq_node(variants, x.value.span));
                    } else {
                        let p =
                            crate::aliases::canonical_path(&x.key.split('.').collect::<Vec<_>>())
                                .join(".");
                        sw.insert(&back.path(&p, x.key_span)?, x.key_span, x.value.clone());
                    }
                }
                out.push(("sweep".into(), s, map_node(sw, v.span)));
            }
            "experiments" => {
                let items: Vec<Node> = v
                    .as_seq()
                    .unwrap_or_default()
                    .iter()
                    .map(|x| {
                        let entry_engine = x
                            .as_map()
                            .and_then(|em| em.get("engine"))
                            .and_then(Node::as_str)
                            .map(String::from)
                            .or_else(|| back.engine.clone());
                        let b = Back {
                            tx: Tx { sources },
                            engine: entry_engine,
                        };
                        Ok(fold(b.experiment(x, false)?, x.span))
                    })
                    .collect::<Result<_, ConfigError>>()?;
                out.push(("experiments".into(), s, seq_node(items, v.span)));
            }
            _ => {}
        }
    }
    for key in ["runners", "images"] {
        if let Some((span, m)) = back.study_wide(root, key)? {
            out.push((key.into(), span, map_node(m, span)));
        }
    }
    Ok(fold(out, root.span))
}

/// `llem config convert`: the file at `path` written in dialect `to`, as YAML text (comments
/// are not carried). A file already in `to` is an error saying so.
pub fn convert(path: &std::path::Path, to: Dialect) -> Result<String, ConfigError> {
    let mut sources = SourceMap::new();
    let root = crate::load::Loader::new(&mut sources).load(path, None, &mut Vec::new())?;
    let from = detect(&root);
    if from == to {
        return Err(Diagnostic::new(
            ErrorKind::Rule,
            format!("{} is already {}", path.display(), to.describe()),
        )
        .into());
    }
    let tree = match to {
        Dialect::Llem => to_llem(&root, &sources)?.0,
        Dialect::Llem07 => from_llem(&to_llem(&root, &sources)?.0, &sources)?,
        Dialect::Seed004 => {
            return Err(Diagnostic::new(
                ErrorKind::Rule,
                "llem reads seed 004's dialect but does not write it: convert to llem's (seed) \
                 YAML or llem 0.7's",
            )
            .into());
        }
    };
    let what = match to {
        Dialect::Llem => "llem's (seed) YAML",
        Dialect::Llem07 => "llem 0.7 (llenergymeasure) YAML",
        Dialect::Seed004 => "seed 004 YAML",
    };
    Ok(format!(
        "# {} as {what}, written by `llem config convert` (comments are not carried).\n{}",
        path.display(),
        crate::emit::to_yaml(&tree)
    ))
}
