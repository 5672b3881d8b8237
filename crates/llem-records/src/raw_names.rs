//! What the ML.ENERGY raw tree encodes in names and small files: the run directory name
//! (`num_gpus+1+max_num_seqs+64+seed+48105`, reference §3) and `model_info.json` (§4.1).

use serde_json::Value;

/// Python's `int(text)`: surrounding whitespace, an optional sign, decimal digits with
/// single `_` separators between them (`"08"` is 8); anything else is `None`.
pub fn python_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, t.get(1..)?),
        Some(b'+') => (false, t.get(1..)?),
        _ => (false, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    let v: i64 = clean.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// The parameters a run directory name carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunConfigName {
    /// `num_gpus` (required by the reference reader when `max_num_seqs` is present).
    pub num_gpus: Option<i64>,
    /// `max_num_seqs` (a run without it is dropped).
    pub max_num_seqs: Option<i64>,
    /// `seed`.
    pub seed: Option<i64>,
    /// `num_request_repeats`.
    pub num_request_repeats: Option<i64>,
}

/// Reads `k1+v1+k2+v2+...` (pairs from the left; an unpaired last token is ignored; a value
/// that is not an integer counts as absent; a repeated key keeps its last value).
pub fn parse_run_config(name: &str) -> RunConfigName {
    let tokens: Vec<&str> = name.split('+').collect();
    let mut out = RunConfigName::default();
    for pair in tokens.chunks_exact(2) {
        let [k, v] = pair else { continue };
        let slot = match *k {
            "num_gpus" => &mut out.num_gpus,
            "max_num_seqs" => &mut out.max_num_seqs,
            "seed" => &mut out.seed,
            "num_request_repeats" => &mut out.num_request_repeats,
            _ => continue,
        };
        *slot = python_int(v);
    }
    out
}

/// A model as `model_info.json` describes it, with the reference reader's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFacts {
    /// Display name.
    pub nickname: String,
    /// `Dense`, `MoE`, or what the file says.
    pub architecture: String,
    /// Total parameters, billions.
    pub total_params_billions: f64,
    /// Parameters active per token, billions.
    pub activated_params_billions: f64,
    /// `bfloat16`, `fp8`, or what the file says.
    pub weight_precision: String,
}

/// Derives the model fields from `model_info.json` for `org/model` (`model_dir` is the
/// model path component, the default nickname). Errors name what is wrong.
pub fn model_facts(
    info: &Value,
    model_id: &str,
    model_dir: &str,
) -> Result<ModelFacts, crate::RunError> {
    let obj = info.as_object().ok_or(crate::RunError::Unusable(
        "model_info.json is not a JSON object",
    ))?;
    let number = |k: &str| obj.get(k).and_then(crate::raw_number);
    let total = number("total_parameters_billion").ok_or(crate::RunError::Unusable(
        "model_info.json has no numeric total_parameters_billion",
    ))?;
    let active = number("active_parameters_billion").unwrap_or(total);
    let text = |k: &str| {
        obj.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let architecture = text("architecture")
        .unwrap_or_else(|| if total != active { "MoE" } else { "Dense" }.to_string());
    let weight_precision = match obj.get("weight_precision").and_then(Value::as_str) {
        Some(s) => s.to_string(),
        None if model_id.contains("FP8")
            || model_id.contains("DeepSeek-R1")
            || model_id.contains("DeepSeek-V3") =>
        {
            "fp8".into()
        }
        None => "bfloat16".into(),
    };
    Ok(ModelFacts {
        nickname: text("nickname").unwrap_or_else(|| model_dir.to_string()),
        architecture,
        total_params_billions: total,
        activated_params_billions: active,
        weight_precision,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_int_rules() {
        for (t, v) in [
            ("08", Some(8)),
            (" 64 ", Some(64)),
            ("-3", Some(-3)),
            ("+7", Some(7)),
            ("1_024", Some(1024)),
            ("1.0", None),
            ("abc", None),
            ("", None),
            ("_1", None),
            ("1__0", None),
            ("-", None),
        ] {
            assert_eq!(python_int(t), v, "{t:?}");
        }
    }

    #[test]
    fn run_directory_names() {
        let n = parse_run_config(
            "num_gpus+1+max_num_seqs+64+num_request_repeats+1+dataset_split+train+num_requests+1024+seed+48105",
        );
        assert_eq!(
            n,
            RunConfigName {
                num_gpus: Some(1),
                max_num_seqs: Some(64),
                seed: Some(48105),
                num_request_repeats: Some(1),
            }
        );
        // Unpaired trailing token ignored; a non-integer value is absent.
        let odd = parse_run_config("max_num_seqs+08+num_gpus+1.0+seed");
        assert_eq!(
            (odd.max_num_seqs, odd.num_gpus, odd.seed),
            (Some(8), None, None)
        );
    }

    #[test]
    fn model_info_defaults() {
        let m = model_facts(
            &json!({"total_parameters_billion": 30.5, "active_parameters_billion": 3.3}),
            "Qwen/Qwen3-30B-A3B-FP8",
            "Qwen3-30B-A3B-FP8",
        )
        .unwrap();
        assert_eq!(m.architecture, "MoE");
        assert_eq!(m.weight_precision, "fp8");
        assert_eq!(m.nickname, "Qwen3-30B-A3B-FP8");
        let d = model_facts(
            &json!({"total_parameters_billion": "8", "nickname": "Qwen 3 8B", "architecture": "", "weight_precision": 16}),
            "Qwen/Qwen3-8B",
            "Qwen3-8B",
        )
        .unwrap();
        assert_eq!(
            (d.architecture.as_str(), d.activated_params_billions),
            ("Dense", 8.0)
        );
        assert_eq!(
            (d.nickname.as_str(), d.weight_precision.as_str()),
            ("Qwen 3 8B", "bfloat16")
        );
        assert!(model_facts(&json!([1]), "a/b", "b").is_err());
        assert!(
            model_facts(&json!({"nickname": "x"}), "a/b", "b")
                .unwrap_err()
                .to_string()
                .contains("total_parameters_billion")
        );
    }
}
