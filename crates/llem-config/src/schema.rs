//! JSON Schemas of the configuration files, and the numeric rules read back from them.
//!
//! Field ranges are written once, as schemars attributes on the config types. The published
//! schema (`llem config schema`, for editor completion) carries them, and
//! [`NumericRule`]s extracted from the same schema are what validation checks, so an
//! editor and llem can never disagree about what is valid.

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
    if let (Some(d), Some(e)) = (defs.as_object_mut(), exec.get("$defs")) {
        if let Some(extra) = e.as_object() {
            for (k, v) in extra {
                d.insert(k.clone(), v.clone());
            }
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
#[derive(Clone, Debug, PartialEq)]
pub struct NumericRule {
    /// Key path of the field.
    pub path: Vec<String>,
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

/// A value outside its rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Key path of the offending field.
    pub path: Vec<String>,
    /// Full sentence, path included.
    pub message: String,
}

/// Extracts the numeric rules of every field reachable from a schema's root.
pub fn numeric_rules(schema: &Value) -> Vec<NumericRule> {
    let defs = schema.get("$defs").and_then(Value::as_object);
    let mut out = Vec::new();
    collect(schema, defs, &mut Vec::new(), &mut out, 0);
    out
}

fn collect(
    s: &Value,
    defs: Option<&Map<String, Value>>,
    path: &mut Vec<String>,
    out: &mut Vec<NumericRule>,
    depth: usize,
) {
    if depth > 32 {
        return;
    }
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    let allowed = s.get("enum").and_then(Value::as_array).and_then(|vals| {
        let nums: Vec<f64> = vals.iter().filter_map(Value::as_f64).collect();
        (!nums.is_empty()).then_some(nums)
    });
    let rule = NumericRule {
        path: path.clone(),
        minimum: num("minimum"),
        maximum: num("maximum"),
        exclusive_minimum: num("exclusiveMinimum"),
        exclusive_maximum: num("exclusiveMaximum"),
        allowed,
    };
    if rule.minimum.is_some()
        || rule.maximum.is_some()
        || rule.exclusive_minimum.is_some()
        || rule.exclusive_maximum.is_some()
        || rule.allowed.is_some()
    {
        out.push(rule);
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if let Some(target) = r
            .strip_prefix("#/$defs/")
            .and_then(|name| defs.and_then(|d| d.get(name)))
        {
            collect(target, defs, path, out, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            for b in branches {
                collect(b, defs, path, out, depth + 1);
            }
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            // Aliases share the canonical field's rules; trees are normalised before checks.
            if is_alias(path, name) {
                continue;
            }
            path.push(name.clone());
            collect(sub, defs, path, out, depth + 1);
            path.pop();
        }
    }
}

fn is_alias(parent: &[String], name: &str) -> bool {
    KEY_ALIASES.iter().any(|a| {
        a.alias == name
            && a.parent.len() == parent.len()
            && a.parent.iter().zip(parent).all(|(x, y)| x == y)
    })
}

/// Formats a bound without trailing `.0` noise.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Checks a typed value (as JSON) against rules; appends violations.
pub fn check_numeric(rules: &[NumericRule], value: &Value, out: &mut Vec<Violation>) {
    for rule in rules {
        let mut v = value;
        let mut found = true;
        for key in &rule.path {
            match v.get(key) {
                Some(next) => v = next,
                None => {
                    found = false;
                    break;
                }
            }
        }
        let Some(x) = v.as_f64().filter(|_| found) else {
            continue;
        };
        let dotted = rule.path.join(".");
        let shown = fmt_num(x);
        let fail = |msg: String| Violation {
            path: rule.path.clone(),
            message: format!("`{dotted}` {msg} (got {shown})"),
        };
        if let Some(allowed) = &rule.allowed {
            if !allowed.contains(&x) {
                let list: Vec<String> = allowed.iter().map(|a| fmt_num(*a)).collect();
                out.push(fail(format!("must be one of {}", list.join(", "))));
                continue;
            }
        }
        if let Some(m) = rule.minimum.filter(|m| x < *m) {
            out.push(fail(format!("must be at least {}", fmt_num(m))));
        } else if let Some(m) = rule.exclusive_minimum.filter(|m| x <= *m) {
            out.push(fail(format!("must be greater than {}", fmt_num(m))));
        } else if let Some(m) = rule.maximum.filter(|m| x > *m) {
            out.push(fail(format!("must be at most {}", fmt_num(m))));
        } else if let Some(m) = rule.exclusive_maximum.filter(|m| x >= *m) {
            out.push(fail(format!("must be less than {}", fmt_num(m))));
        }
    }
}

/// Rules of [`ExperimentConfig`].
pub fn experiment_rules() -> &'static [NumericRule] {
    static R: OnceLock<Vec<NumericRule>> = OnceLock::new();
    R.get_or_init(|| numeric_rules(experiment_schema()))
}

/// Rules of [`StudyExecutionConfig`].
pub fn study_execution_rules() -> &'static [NumericRule] {
    static R: OnceLock<Vec<NumericRule>> = OnceLock::new();
    R.get_or_init(|| numeric_rules(study_execution_schema()))
}

/// Rules of the user config.
pub fn user_config_rules() -> &'static [NumericRule] {
    static R: OnceLock<Vec<NumericRule>> = OnceLock::new();
    R.get_or_init(|| numeric_rules(user_config_schema()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule<'a>(rules: &'a [NumericRule], path: &str) -> &'a NumericRule {
        rules
            .iter()
            .find(|r| r.path.join(".") == path)
            .unwrap_or_else(|| panic!("no rule for {path}"))
    }

    #[test]
    fn rules_come_from_the_type_attributes() {
        let rules = experiment_rules();
        let r = rule(rules, "warmup.cv_threshold");
        assert_eq!((r.minimum, r.maximum), (Some(0.01), Some(0.5)));
        let r = rule(rules, "vllm.engine.gpu_memory_utilization");
        assert_eq!((r.exclusive_minimum, r.maximum), (Some(0.0), Some(1.0)));
        let r = rule(rules, "vllm.engine.block_size");
        assert_eq!(r.allowed.as_deref(), Some(&[8.0, 16.0, 32.0][..]));
        let r = rule(rules, "max_input_tokens");
        assert_eq!(r.minimum, Some(1.0));
        assert!(rules.iter().all(|r| r.path.first().map(String::as_str) != Some("pytorch")));
    }

    #[test]
    fn checks_report_path_bound_and_value() {
        let rules = experiment_rules();
        let v = json!({"warmup": {"cv_threshold": 0.9}, "vllm": {"engine": {"block_size": 12}}});
        let mut out = Vec::new();
        check_numeric(rules, &v, &mut out);
        let msgs: Vec<&str> = out.iter().map(|v| v.message.as_str()).collect();
        assert!(msgs.contains(&"`warmup.cv_threshold` must be at most 0.5 (got 0.9)"), "{msgs:?}");
        assert!(msgs.contains(&"`vllm.engine.block_size` must be one of 8, 16, 32 (got 12)"), "{msgs:?}");
    }

    #[test]
    fn file_schema_accepts_aliases_and_study_keys() {
        let s = file_schema();
        let props = s["properties"].as_object().unwrap();
        for k in ["sweep", "experiments", "base", "study_execution", "_extends", "pytorch", "model"] {
            assert!(props.contains_key(k), "{k}");
        }
        assert!(s["$defs"]["TensorRtConfig"]["properties"]["quant_config"].is_object());
        assert!(s["$defs"]["StudyExecutionConfig"]["properties"]["n_cycles"].is_object());
    }
}
