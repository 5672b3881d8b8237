//! The records API (seed 002): derivation rules shared by every loader — inter-token latency
//! smoothing and the stability verdict with its cascade — written to match the reference
//! reader `mlenergy-data` 0.4.0 (`../shared/reference/mlenergy-raw-format.md` §8, §9).

pub mod itl;
pub mod pyfloat;
pub mod raw_names;
pub mod stability;

use serde_json::Value;

/// The reference reader's number conversion (§5.1): JSON numbers, strings holding a
/// decimal number, and booleans (1.0 / 0.0) convert; null, objects, arrays and other
/// strings are missing.
pub fn raw_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            // Python's float(): surrounding whitespace, and `_` between digits, allowed.
            let t = s.trim();
            t.parse::<f64>().ok().or_else(|| {
                let ok = t.contains('_')
                    && !t.contains("__")
                    && !t.starts_with('_')
                    && !t.ends_with('_');
                ok.then(|| t.replace('_', "").parse().ok()).flatten()
            })
        }
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::raw_number;
    use serde_json::json;

    #[test]
    fn number_conversion_as_the_reference_reader() {
        assert_eq!(raw_number(&json!(3)), Some(3.0));
        assert_eq!(raw_number(&json!(45.5)), Some(45.5));
        assert_eq!(raw_number(&json!(" 45.5 ")), Some(45.5));
        assert_eq!(raw_number(&json!("1_000.5")), Some(1000.5));
        assert_eq!(raw_number(&json!("1e-3")), Some(0.001));
        assert_eq!(raw_number(&json!(true)), Some(1.0));
        assert_eq!(raw_number(&json!(false)), Some(0.0));
        for missing in [
            json!(null),
            json!("abc"),
            json!([1]),
            json!({"a": 1}),
            json!("1__0"),
        ] {
            assert_eq!(raw_number(&missing), None, "{missing}");
        }
    }
}
