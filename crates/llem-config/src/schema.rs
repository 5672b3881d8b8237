//! JSON Schemas of the configuration files, and the numeric rules read back from them.
//!
//! Field ranges are written once, as schemars attributes on the config types. The published
//! schema (`llem config schema`, for editor completion) carries them, and
//! [`NumericRule`]s extracted from the same schema are what validation checks, so an
//! editor and llem can never disagree about what is valid.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::aliases::KEY_ALIASES;
use crate::model::{ExperimentConfig, StudyExecutionConfig};

fn generate<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// JSON Schema of one experiment (alias keys included).
pub fn experiment_schema() -> &'static Value {
    static S: OnceLock<Value> = OnceLock::new();
    S.get_or_init(|| {
        let mut s = generate::<ExperimentConfig>();
        add_aliases(&mut s);
        s
    })
}

/// The schema node `node` stands for: through `$ref` and the `anyOf`/`oneOf`/`allOf` that
/// optional and aliased fields are written as, to the first alternative with properties or
/// open keys.
fn schema_target<'a>(root: &'a Value, node: &'a Value, depth: usize) -> &'a Value {
    if depth > 16 {
        return node;
    }
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        if let Some(def) = root.get("$defs").and_then(|d| d.get(name)) {
            return schema_target(root, def, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for alt in node
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let t = schema_target(root, alt, depth + 1);
            if t.get("properties").is_some() || t.get("additionalProperties").is_some() {
                return t;
            }
        }
    }
    node
}

/// Why dotted `path` (`decoder.preset`) is not a path of the experiment configuration, with
/// the nearest key at the first segment that is unknown; `None` when it is one. A mapping
/// with open keys (`runners.<engine>`, `passthrough_kwargs.*`) takes any key below it.
pub fn experiment_path_error(path: &str) -> Option<String> {
    let root = experiment_schema();
    let mut node = root;
    let mut walked: Vec<&str> = Vec::new();
    for seg in path.split('.') {
        let here = schema_target(root, node, 0);
        let props = here.get("properties").and_then(Value::as_object);
        if let Some(next) = props.and_then(|p| p.get(seg)) {
            node = next;
            walked.push(seg);
            continue;
        }
        if here
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
        {
            return None;
        }
        let Some(props) = props else {
            return Some(format!("`{}` holds no keys", walked.join(".")));
        };
        let at = if walked.is_empty() {
            String::new()
        } else {
            format!(" under `{}`", walked.join("."))
        };
        return Some(
            match crate::error::did_you_mean(seg, props.keys().map(String::as_str)) {
                Some(k) => {
                    let mut full = walked.clone();
                    full.push(k);
                    format!("no key `{seg}`{at} (did you mean `{}`?)", full.join("."))
                }
                None => format!("no key `{seg}`{at}"),
            },
        );
    }
    None
}

/// JSON Schema of the `study_execution:` block.
pub fn study_execution_schema() -> &'static Value {
    static S: OnceLock<Value> = OnceLock::new();
    S.get_or_init(generate::<StudyExecutionConfig>)
}

/// JSON Schema of the user config file.
pub fn user_config_schema() -> &'static Value {
    static S: OnceLock<Value> = OnceLock::new();
    S.get_or_init(generate::<crate::user_config::UserConfig>)
}

fn add_aliases(schema: &mut Value) {
    for a in KEY_ALIASES {
        let target = match a.schema_def {
            None => Some(&mut *schema),
            Some(def) => schema.pointer_mut(&format!("/$defs/{def}")),
        };
        let Some(props) = target
            .and_then(|t| t.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if let Some(canonical) = props.get(a.canonical).cloned() {
            let mut alias = canonical;
            if let Some(o) = alias.as_object_mut() {
                o.insert(
                    "description".into(),
                    Value::String(format!("Alias of `{}`.", a.canonical)),
                );
                o.remove("default");
            }
            props.insert(a.alias.into(), alias);
        }
    }
}

/// The schema of a whole configuration file: an experiment, or a study (`sweep:`,
/// `experiments:`, `base:`, `study_execution:`), both with `_extends`.
pub fn file_schema() -> Value {
    let exp = experiment_schema();
    let exec = study_execution_schema();
    let mut defs = exp.get("$defs").cloned().unwrap_or_else(|| json!({}));
    if let (Some(d), Some(e)) = (defs.as_object_mut(), exec.get("$defs"))
        && let Some(extra) = e.as_object()
    {
        for (k, v) in extra {
            d.insert(k.clone(), v.clone());
        }
    }
    let mut exec_def = exec.clone();
    if let Some(o) = exec_def.as_object_mut() {
        o.remove("$schema");
        o.remove("$defs");
        o.remove("title");
    }
    if let Some(d) = defs.as_object_mut() {
        d.insert("StudyExecutionConfig".into(), exec_def);
    }
    let extends = json!({
        "description": "Experiment file(s) this file builds on, relative to this file; its keys override theirs.",
        "anyOf": [
            { "type": "string" },
            { "type": "array", "items": { "type": "string" } }
        ]
    });
    let mut experiment_props: Map<String, Value> = exp
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    experiment_props.insert("_extends".into(), extends.clone());
    let entry = json!({
        "type": "object",
        "description": "One experiment, merged onto the study's shared top-level fields.",
        "properties": Value::Object(experiment_props.clone()),
        "additionalProperties": false
    });
    let mut root_props = experiment_props;
    root_props.insert(
        "name".into(),
        json!({ "type": ["string", "null"], "description": "Study name (studies) or experiment label (single experiments); used in the results directory name." }),
    );
    root_props.insert(
        "sweep".into(),
        json!({
            "type": "object",
            "description": "Grid of configurations. `key: [values]` is an independent axis (Cartesian product); `name: [ {..}, {..} ]` is a dependent group of alternatives. Keys are dotted paths; paths starting with an engine name apply to that engine's experiments only.",
            "additionalProperties": {
                "anyOf": [
                    { "type": "array", "minItems": 1 },
                    { "type": ["string", "number", "boolean", "null"] }
                ]
            }
        }),
    );
    root_props.insert(
        "experiments".into(),
        json!({ "type": "array", "items": entry, "description": "Explicit experiments, appended after the sweep's." }),
    );
    root_props.insert(
        "base".into(),
        json!({ "type": "string", "description": "Experiment file whose fields are the starting point of every configuration (relative to this file)." }),
    );
    root_props.insert(
        "study_execution".into(),
        json!({ "$ref": "#/$defs/StudyExecutionConfig" }),
    );
    let fields: Vec<&str> = crate::search::SEARCH_FIELDS
        .iter()
        .map(|f| f.name)
        .collect();
    root_props.insert(
        "search".into(),
        json!({
            "type": "object",
            "description": "Search the sweep's configurations for the best one under constraints instead of measuring them all (docs/search.md).",
            "properties": {
                "objective": { "enum": fields, "description": "The result field to optimise." },
                "direction": { "enum": ["minimize", "maximize"], "description": "Default: the field's own (energy and latency down, throughput and goodput up)." },
                "constraints": { "type": "array", "items": { "type": "string", "pattern": "^\\s*[a-z0-9_]+\\s*(<=|>=|<|>)\\s*[-+0-9.eE]+\\s*%?\\s*$" }, "description": "Each `field <= value` or `field >= value`." },
                "budget": { "type": ["string", "integer", "number"], "description": "Runs (40) or a share of the full study's runs (30%); default 30%." },
                "confidence": { "type": "number", "minimum": 0.5, "maximum": 0.999, "default": 0.95 },
                "tolerance": { "type": ["number", "string"], "description": "Configurations closer than this share are equally good; default 2%." },
                "seed": { "type": "integer", "minimum": 0 },
                "batch": { "type": "integer", "minimum": 1, "maximum": 1024, "default": 1 }
            },
            "required": ["objective"],
            "additionalProperties": false
        }),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://llem.dev/schema/config.json",
        "title": "llem experiment or study configuration",
        "type": "object",
        "properties": Value::Object(root_props),
        "additionalProperties": false,
        "$defs": defs
    })
}

/// A numeric constraint on one field, read from a schema.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NumericRule {
    /// Inclusive lower bound.
    pub minimum: Option<f64>,
    /// Inclusive upper bound.
    pub maximum: Option<f64>,
    /// Exclusive lower bound.
    pub exclusive_minimum: Option<f64>,
    /// Exclusive upper bound.
    pub exclusive_maximum: Option<f64>,
    /// Allowed values, for integer enumerations such as vLLM's block_size.
    pub allowed: Option<Vec<f64>>,
}

impl NumericRule {
    fn from_schema(s: &Value) -> Option<NumericRule> {
        let num = |k: &str| s.get(k).and_then(Value::as_f64);
        let allowed = s.get("enum").and_then(Value::as_array).and_then(|vals| {
            let nums: Vec<f64> = vals.iter().filter_map(Value::as_f64).collect();
            (!nums.is_empty()).then_some(nums)
        });
        let rule = NumericRule {
            minimum: num("minimum"),
            maximum: num("maximum"),
            exclusive_minimum: num("exclusiveMinimum"),
            exclusive_maximum: num("exclusiveMaximum"),
            allowed,
        };
        (rule != NumericRule::default()).then_some(rule)
    }

    /// The failure message for `x`, if it breaks this rule.
    pub fn check(&self, x: f64) -> Option<String> {
        if let Some(allowed) = &self.allowed
            && !allowed.contains(&x)
        {
            let list: Vec<String> = allowed.iter().map(|a| fmt_num(*a)).collect();
            return Some(format!("must be one of {}", list.join(", ")));
        }
        if let Some(m) = self.minimum.filter(|m| x < *m) {
            Some(format!("must be at least {}", fmt_num(m)))
        } else if let Some(m) = self.exclusive_minimum.filter(|m| x <= *m) {
            Some(format!("must be greater than {}", fmt_num(m)))
        } else if let Some(m) = self.maximum.filter(|m| x > *m) {
            Some(format!("must be at most {}", fmt_num(m)))
        } else {
            self.exclusive_maximum
                .filter(|m| x >= *m)
                .map(|m| format!("must be less than {}", fmt_num(m)))
        }
    }
}

/// Numeric rules of a schema, by type name and field name (types are the Rust config
/// structs, so a rule holds wherever its type appears).
#[derive(Clone, Debug, Default)]
pub struct RuleIndex {
    by_type: HashMap<String, HashMap<String, NumericRule, Fnv>, Fnv>,
}

/// FNV-1a: the index is looked up for every number of every configuration of a sweep, with
/// short keys, where SipHash's cost dominated.
#[derive(Clone, Copy, Debug, Default)]
struct Fnv;

struct FnvHasher(u64);

impl std::hash::BuildHasher for Fnv {
    type Hasher = FnvHasher;
    fn build_hasher(&self) -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

impl RuleIndex {
    /// Reads every property with numeric keywords from a schema's root and `$defs`.
    pub fn from_schema(schema: &Value) -> RuleIndex {
        let mut by_type: HashMap<String, HashMap<String, NumericRule, Fnv>, Fnv> =
            HashMap::default();
        let mut add = |type_name: &str, def: &Value| {
            let Some(props) = def.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (field, sub) in props {
                if is_alias(type_name, field) {
                    continue;
                }
                if let Some(rule) = NumericRule::from_schema(sub) {
                    by_type
                        .entry(type_name.to_string())
                        .or_default()
                        .insert(field.clone(), rule);
                }
            }
        };
        if let Some(title) = schema.get("title").and_then(Value::as_str) {
            add(title, schema);
        }
        if let Some(defs) = schema.get("$defs").and_then(Value::as_object) {
            for (name, def) in defs {
                add(name, def);
            }
        }
        RuleIndex { by_type }
    }

    /// The rule of `field` in type `type_name`.
    pub fn get(&self, type_name: &str, field: &str) -> Option<&NumericRule> {
        self.by_type.get(type_name)?.get(field)
    }

    /// Checks every number of a typed value against the rules.
    pub fn check<T: serde::Serialize + ?Sized>(&self, value: &T) -> Vec<Violation> {
        let mut c = RangeCheck {
            rules: self,
            types: Vec::new(),
            path: Vec::new(),
            current: None,
            out: Vec::new(),
        };
        // Config types serialise without error; a failure leaves the checks done so far.
        let _ = crate::walk::walk(value, &mut c);
        c.out
    }
}

fn is_alias(type_name: &str, field: &str) -> bool {
    KEY_ALIASES
        .iter()
        .any(|a| a.alias == field && a.schema_def.unwrap_or("ExperimentConfig") == type_name)
}

/// A value outside its rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Key path of the offending field.
    pub path: Vec<String>,
    /// Full sentence, path included.
    pub message: String,
}

struct RangeCheck<'r> {
    rules: &'r RuleIndex,
    types: Vec<&'static str>,
    path: Vec<&'static str>,
    /// Type and field whose value is being walked; the rule is looked up only for numbers.
    current: Option<(&'static str, &'static str)>,
    out: Vec<Violation>,
}

impl RangeCheck<'_> {
    fn number(&mut self, x: f64) {
        let Some((t, f)) = self.current else {
            return;
        };
        if let Some(msg) = self.rules.get(t, f).and_then(|r| r.check(x)) {
            let dotted = self.path.join(".");
            self.out.push(Violation {
                path: self.path.iter().map(|s| (*s).to_string()).collect(),
                message: format!("`{dotted}` {msg} (got {})", fmt_num(x)),
            });
        }
    }
}

impl crate::walk::Sink for RangeCheck<'_> {
    fn null(&mut self) {}
    fn bool(&mut self, _: bool) {}
    fn i64(&mut self, v: i64) {
        self.number(v as f64);
    }
    fn u64(&mut self, v: u64) {
        self.number(v as f64);
    }
    fn f64(&mut self, v: f64) {
        self.number(v);
    }
    fn str(&mut self, _: &str) {}
    fn begin_seq(&mut self) {
        self.current = None;
    }
    fn seq_element(&mut self) {}
    fn end_seq(&mut self) {}
    fn begin_struct(&mut self, name: &'static str) {
        self.types.push(name);
        self.current = None;
    }
    fn field(&mut self, key: &'static str) -> bool {
        self.path.push(key);
        self.current = self.types.last().map(|t| (*t, key));
        true
    }
    fn end_field(&mut self) {
        self.path.pop();
        self.current = None;
    }
    fn end_struct(&mut self) {
        self.types.pop();
    }
    fn begin_map(&mut self) {
        self.types.push("");
        self.current = None;
    }
    fn map_key(&mut self, _: &str) {}
    fn end_map_value(&mut self) {}
    fn end_map(&mut self) {
        self.types.pop();
    }
}

/// Formats a bound without trailing `.0` noise.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v != 0.0 && (v.abs() >= 1e15 || v.abs() < 1e-4) {
        // Plain notation would print every digit of 1e300.
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Rules of [`ExperimentConfig`].
pub fn experiment_rules() -> &'static RuleIndex {
    static R: OnceLock<RuleIndex> = OnceLock::new();
    R.get_or_init(|| RuleIndex::from_schema(experiment_schema()))
}

/// Rules of [`StudyExecutionConfig`].
pub fn study_execution_rules() -> &'static RuleIndex {
    static R: OnceLock<RuleIndex> = OnceLock::new();
    R.get_or_init(|| RuleIndex::from_schema(study_execution_schema()))
}

/// Rules of the user config.
pub fn user_config_rules() -> &'static RuleIndex {
    static R: OnceLock<RuleIndex> = OnceLock::new();
    R.get_or_init(|| RuleIndex::from_schema(user_config_schema()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn rules_come_from_the_type_attributes() {
        let rules = experiment_rules();
        let r = rules.get("WarmupConfig", "cv_threshold").unwrap();
        assert_eq!((r.minimum, r.maximum), (Some(0.01), Some(0.5)));
        let r = rules
            .get("VllmEngineConfig", "gpu_memory_utilization")
            .unwrap();
        assert_eq!((r.exclusive_minimum, r.maximum), (Some(0.0), Some(1.0)));
        let r = rules.get("VllmEngineConfig", "block_size").unwrap();
        assert_eq!(r.allowed.as_deref(), Some(&[8.0, 16.0, 32.0][..]));
        let r = rules.get("ExperimentConfig", "max_input_tokens").unwrap();
        assert_eq!(r.minimum, Some(1.0));
        assert!(rules.get("ExperimentConfig", "pytorch").is_none());
        assert!(
            study_execution_rules()
                .get("StudyExecutionConfig", "n_cycles")
                .is_some()
        );
        assert!(
            user_config_rules()
                .get("UserMeasurement", "datacenter_pue")
                .is_some()
        );
    }

    #[test]
    fn checks_report_path_bound_and_value() {
        let mut cfg: ExperimentConfig = serde_json::from_value(json!({"model": "m"})).unwrap();
        cfg.warmup.cv_threshold = 0.9;
        let v = crate::model::engines::VllmConfig {
            engine: Some(crate::model::engines::vllm::VllmEngineConfig {
                block_size: Some(12),
                ..Default::default()
            }),
            ..Default::default()
        };
        cfg.vllm = Some(Box::new(v));
        let msgs: Vec<String> = experiment_rules()
            .check(&cfg)
            .into_iter()
            .map(|v| v.message)
            .collect();
        assert!(
            msgs.contains(&"`warmup.cv_threshold` must be at most 0.5 (got 0.9)".to_string()),
            "{msgs:?}"
        );
        assert!(
            msgs.contains(
                &"`vllm.engine.block_size` must be one of 8, 16, 32 (got 12)".to_string()
            ),
            "{msgs:?}"
        );
        assert_eq!(msgs.len(), 2);
    }

    #[test]
    fn file_schema_accepts_aliases_and_study_keys() {
        let s = file_schema();
        let props = s["properties"].as_object().unwrap();
        for k in [
            "sweep",
            "experiments",
            "base",
            "study_execution",
            "search",
            "_extends",
            "pytorch",
            "model",
        ] {
            assert!(props.contains_key(k), "{k}");
        }
        assert!(s["$defs"]["TensorRtConfig"]["properties"]["quant_config"].is_object());
        assert!(s["$defs"]["StudyExecutionConfig"]["properties"]["n_cycles"].is_object());
    }

    #[test]
    fn configuration_paths_are_checked_to_their_last_segment() {
        assert_eq!(experiment_path_error("decoder.preset"), None);
        assert_eq!(experiment_path_error("vllm.engine.max_num_seqs"), None);
        assert_eq!(experiment_path_error("passthrough_kwargs.anything"), None);
        assert_eq!(
            experiment_path_error("decoder.presett").as_deref(),
            Some("no key `presett` under `decoder` (did you mean `decoder.preset`?)")
        );
        assert!(experiment_path_error("model.x").is_some());
    }
}
