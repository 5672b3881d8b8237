//! The configuration reference (`docs/config-reference.md`), generated from the JSON Schema
//! so that names, types, defaults and ranges in the documentation are the ones llem checks.

use std::fmt::Write;

use serde_json::Value;

use crate::model::Preset;
use crate::schema::{experiment_schema, fmt_num, study_execution_schema, user_config_schema};

/// Sections of the experiment file, in reading order: (heading key, schema type).
const EXPERIMENT_SECTIONS: &[(&str, &str)] = &[
    ("dataset", "DatasetConfig"),
    ("decoder", "DecoderConfig"),
    ("warmup", "WarmupConfig"),
    ("warmup.gate", "WarmupGate"),
    ("baseline", "BaselineConfig"),
    ("measurement", "MeasurementConfig"),
    ("measurement.windows", "WindowsConfig"),
    ("traffic", "TrafficConfig"),
    ("traffic.slo", "SloConfig"),
    ("traffic.trace", "TraceConfig"),
    ("traffic.conversations", "ConversationsConfig"),
    ("traffic.trace.columns", "TraceColumns"),
    ("device", "DeviceConfig"),
    ("lora", "LoraConfig"),
    ("llamacpp", "LlamaCppConfig"),
    ("transformers (also `pytorch`)", "TransformersConfig"),
    ("vllm", "VllmConfig"),
    ("vllm.engine", "VllmEngineConfig"),
    ("vllm.engine.attention", "VllmAttentionConfig"),
    ("vllm.engine.speculative_config", "VllmSpeculativeConfig"),
    ("vllm.sampling", "VllmSamplingConfig"),
    ("vllm.beam_search", "VllmBeamSearchConfig"),
    ("tensorrt", "TensorRtConfig"),
    ("tensorrt.quant (also `quant_config`)", "TrtQuantConfig"),
    ("tensorrt.kv_cache", "TrtKvCacheConfig"),
    ("tensorrt.scheduler", "TrtSchedulerConfig"),
    ("tensorrt.sampling", "TrtSamplingConfig"),
    ("sglang", "SglangConfig"),
    ("tgi", "TgiConfig"),
];

const USER_SECTIONS: &[(&str, &str)] = &[
    ("output", "UserOutput"),
    ("measurement", "UserMeasurement"),
    ("execution", "UserExecution"),
    ("ui", "UserUi"),
    ("measurement.node_power", "NodePowerConfig"),
    ("measurement.node_power.ipmi", "IpmiConfig"),
    ("measurement.node_power.redfish", "RedfishConfig"),
];

fn cell(s: &str) -> String {
    s.replace('\n', " ").replace('|', "\\|")
}

fn def<'a>(schema: &'a Value, name: &str) -> Option<&'a Value> {
    schema.get("$defs")?.get(name)
}

fn render_type(p: &Value, schema: &Value) -> String {
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return match def(schema, name) {
            Some(d) if d.get("enum").is_some() => enum_values(d),
            Some(d) if d.get("properties").is_some() => "section".into(),
            Some(d) => d
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("value")
                .to_string(),
            None => name.to_string(),
        };
    }
    if let Some(branches) = p.get("anyOf").and_then(Value::as_array) {
        let mut parts: Vec<String> = Vec::new();
        let mut nullable = false;
        for b in branches {
            if b.get("type").and_then(Value::as_str) == Some("null") {
                nullable = true;
            } else {
                parts.push(render_type(b, schema));
            }
        }
        let mut s = parts.join(" or ");
        if nullable {
            s.push_str(" or null");
        }
        return s;
    }
    if let Some(e) = p.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = e.iter().filter(|v| !v.is_null()).map(render_json).collect();
        let mut s = vals.join(" | ");
        if e.iter().any(Value::is_null) {
            s.push_str(" or null");
        }
        return s;
    }
    let types: Vec<&str> = match p.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec!["any"],
    };
    let item = p
        .get("items")
        .map(|i| render_type(i, schema))
        .unwrap_or_default();
    let mut out: Vec<String> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| match *t {
            "array" if !item.is_empty() => format!("list of {item}"),
            "object" => "mapping".to_string(),
            other => other.to_string(),
        })
        .collect();
    if types.contains(&"null") {
        out.push("null".into());
    }
    out.join(" or ")
}

fn enum_values(d: &Value) -> String {
    d.get("enum")
        .and_then(Value::as_array)
        .map(|e| {
            e.iter()
                .map(|v| format!("`{}`", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

fn render_json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render_default(p: &Value) -> String {
    match p.get("default") {
        None => "required".into(),
        Some(Value::Object(m)) if !m.is_empty() => "(section)".into(),
        Some(Value::Null) => "null".into(),
        Some(v) => format!("`{}`", render_json(v)),
    }
}

fn render_range(p: &Value) -> String {
    let n = |k: &str| p.get(k).and_then(Value::as_f64);
    let lo = n("minimum")
        .map(|m| (m, "≥"))
        .or(n("exclusiveMinimum").map(|m| (m, ">")));
    let hi = n("maximum")
        .map(|m| (m, "≤"))
        .or(n("exclusiveMaximum").map(|m| (m, "<")));
    // Unsigned integers carry a schema minimum of 0 that says nothing a reader needs.
    let unsigned = p
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| f.starts_with("uint"));
    let lo = lo.filter(|(m, op)| !(unsigned && *m == 0.0 && *op == "≥"));
    match (lo, hi) {
        (Some((a, "≥")), Some((b, "≤"))) => format!("{} – {}", fmt_num(a), fmt_num(b)),
        (Some((a, o1)), Some((b, o2))) => format!("{o1} {}, {o2} {}", fmt_num(a), fmt_num(b)),
        (Some((a, o)), None) | (None, Some((a, o))) => format!("{o} {}", fmt_num(a)),
        (None, None) => String::new(),
    }
}

fn table(out: &mut String, props: &serde_json::Map<String, Value>, schema: &Value) {
    let _ = writeln!(out, "| Field | Type | Default | Range | Description |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (name, p) in props {
        let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
        if desc.starts_with("Alias of") {
            continue;
        }
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {} | {} |",
            cell(&render_type(p, schema)),
            cell(&render_default(p)),
            render_range(p),
            cell(desc)
        );
    }
}

fn section(out: &mut String, heading: &str, schema: &Value, type_name: Option<&str>) {
    let node = match type_name {
        Some(t) => def(schema, t),
        None => Some(schema),
    };
    let Some(props) = node
        .and_then(|n| n.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    let _ = writeln!(out, "\n### `{heading}`\n");
    if let Some(d) = node
        .and_then(|n| n.get("description"))
        .and_then(Value::as_str)
    {
        let _ = writeln!(out, "{}\n", d.replace('\n', " "));
    }
    table(out, props, schema);
}

/// The whole reference as Markdown.
pub fn markdown() -> String {
    let exp = experiment_schema();
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated from the schema llem validates against (`llem config schema`); do not edit by \
         hand — `UPDATE_DOCS=1 cargo test -p llem-config --test integration docs::` regenerates it. Null means \
         \"not set\": for engine sections, the engine's own default applies.\n\n\
         ## Experiment\n",
    );
    section(&mut out, "top level", exp, None);
    for (heading, t) in EXPERIMENT_SECTIONS {
        section(&mut out, heading, exp, Some(t));
    }
    let _ = writeln!(
        out,
        "\n### Decoder presets\n\nA preset fills the decoder fields you did not write:\n"
    );
    let _ = writeln!(out, "| Preset | Values |\n|---|---|");
    for p in Preset::ALL {
        let vals: Vec<String> = p
            .values()
            .iter()
            .map(|(k, v)| format!("`{k}: {v}`"))
            .collect();
        let _ = writeln!(out, "| `{}` | {} |", p.as_str(), vals.join(", "));
    }
    let _ = writeln!(out, "\n## Study\n");
    let _ = writeln!(
        out,
        "A study file adds `sweep:`, `experiments:`, `base:`, `name:` (the study name) and \
         `study_execution:` to the experiment fields; see docs/configuration.md for the grammar.\n"
    );
    let exec = study_execution_schema();
    section(&mut out, "study_execution", exec, None);
    let user = user_config_schema();
    let _ = writeln!(
        out,
        "\n## User config (`~/.config/llenergymeasure/config.yaml`)\n"
    );
    section(&mut out, "top level", user, None);
    for (heading, t) in USER_SECTIONS {
        section(&mut out, heading, user, Some(t));
    }
    out
}
