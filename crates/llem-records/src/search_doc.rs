//! A search study's `search.json`, read for display (`llem results show`, the report): its
//! goal, why it stopped and its answers, in the words both use. Read as JSON as written, so an
//! old study shows what its search said then.

use std::path::Path;

use serde_json::Value;

use crate::RecordsError;
use crate::table::short_number;

/// The file a search study writes in its directory (the study runner's `SEARCH_FILE`).
pub const SEARCH_FILE: &str = "search.json";

/// The `search.json` of study directory `dir`: `None` when it has none (it is no search, or a
/// directory of many studies); an error when it is there but unreadable or not JSON.
pub fn read(dir: &Path) -> Result<Option<Value>, RecordsError> {
    let path = dir.join(SEARCH_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let invalid = |message: String| RecordsError::Invalid {
        path: path.clone(),
        message,
    };
    let bytes = llem_config::files::read_record(&path).map_err(|e| invalid(e.to_string()))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| invalid(e.to_string()))
}

/// `v[key]`, null when absent.
pub fn at<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&Value::Null)
}

/// `v` as a slice, empty when it is not an array.
pub fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// The goal: "minimise mj_per_tok_total subject to itl_p90_ms <= 50".
pub fn goal_words(doc: &Value) -> String {
    let spec = at(doc, "spec");
    let mut s = format!(
        "{} {}",
        if at(spec, "direction").as_str() == Some("maximize") {
            "maximise"
        } else {
            "minimise"
        },
        at(spec, "objective").as_str().unwrap_or("?")
    );
    let constraints: Vec<String> = list(at(spec, "constraints"))
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                at(c, "field").as_str().unwrap_or("?"),
                at(c, "bound").as_str().unwrap_or("?"),
                at(c, "threshold")
                    .as_f64()
                    .map_or_else(String::new, short_number)
            )
        })
        .collect();
    if !constraints.is_empty() {
        s.push_str(&format!(" subject to {}", constraints.join(", ")));
    }
    s
}

/// Why the search stopped, or that it has not.
pub fn stop_words(doc: &Value) -> String {
    match at(doc, "stop_reason").as_str() {
        Some("identified") => "the best configuration is identified".into(),
        Some("budget_spent") => "the budget is spent; the answer is the best found".into(),
        Some("unresolved") => {
            "the configurations left differ from the answer by less than the runs resolve".into()
        }
        Some("nothing_feasible") => "no configuration meets the constraints".into(),
        _ => format!(
            "still running ({})",
            at(doc, "phase").as_str().unwrap_or("?")
        ),
    }
}

/// An answer (`answer`, `runner_up`) in one line: "label (hash): 161.3 mJ/tok [148.7, 173.9]
/// over 3 runs; meets the constraints with chance 1.00"; `None` without a measured mean.
pub fn answer_words(a: &Value, unit: &str) -> Option<String> {
    let mean = at(a, "objective_mean").as_f64()?;
    let interval = match (
        at(a, "objective_low").as_f64(),
        at(a, "objective_high").as_f64(),
    ) {
        (Some(lo), Some(hi)) => format!(" [{}, {}]", short_number(lo), short_number(hi)),
        _ => String::new(),
    };
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    Some(format!(
        "{} ({}): {}{unit}{interval} over {} runs; meets the constraints with chance {}",
        at(a, "label").as_str().unwrap_or("?"),
        at(a, "config_hash").as_str().unwrap_or("?"),
        short_number(mean),
        at(a, "runs"),
        at(a, "p_feasible")
            .as_f64()
            .map_or_else(|| "unknown".into(), |p| format!("{p:.2}"))
    ))
}

/// The objective's unit, from llem's search fields ("" when unknown).
pub fn objective_unit(doc: &Value) -> &'static str {
    let objective = at(at(doc, "spec"), "objective").as_str().unwrap_or("");
    llem_config::search::search_field(objective).map_or("", |f| f.unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goal_stop_and_answer_in_words() {
        let doc = serde_json::json!({
            "spec": {"objective": "mj_per_tok_total", "direction": "minimize",
                     "constraints": [{"field": "itl_p90_ms", "bound": "<=", "threshold": 50.0}]},
            "stop_reason": "budget_spent"
        });
        assert_eq!(
            goal_words(&doc),
            "minimise mj_per_tok_total subject to itl_p90_ms <= 50.00"
        );
        assert_eq!(
            stop_words(&doc),
            "the budget is spent; the answer is the best found"
        );
        let a = serde_json::json!({"label": "b=8", "config_hash": "ab", "runs": 3,
            "objective_mean": 2.0, "objective_low": 1.5, "objective_high": 2.5, "p_feasible": 1.0});
        assert_eq!(
            answer_words(&a, "mJ/tok").as_deref(),
            Some(
                "b=8 (ab): 2.000 mJ/tok [1.500, 2.500] over 3 runs; meets the constraints with chance 1.00"
            )
        );
        assert_eq!(answer_words(&Value::Null, ""), None);
    }
}
