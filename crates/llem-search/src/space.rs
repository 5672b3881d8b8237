//! The candidates of a search as points of a mixed space: each swept field is an axis, numeric
//! (scaled to 0-1, on a log scale when its values span a factor of four or more, as batch sizes
//! and rates do) or categorical (engine, precision, a flag, or a field some candidates lack).

use serde::Serialize;
use serde_json::Value;

/// How an axis is compared.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AxisKind {
    /// Numbers, scaled to 0-1 (`log`: on a log scale).
    Numeric {
        /// Scaled on a log scale.
        log: bool,
    },
    /// Levels that are equal or not.
    Categorical,
}

/// One swept field.
#[derive(Clone, Debug, Serialize)]
pub struct Axis {
    /// The field's dotted path, e.g. `llamacpp.n_batch`.
    pub name: String,
    /// How it is compared.
    pub kind: AxisKind,
    /// Its values as written (categorical levels in first-seen order; numbers ascending).
    pub levels: Vec<Value>,
}

/// The candidates: a point per configuration, one coordinate per axis (a scaled number or a
/// level's index).
#[derive(Clone, Debug)]
pub struct Space {
    /// The axes.
    pub axes: Vec<Axis>,
    /// One point per candidate.
    pub points: Vec<Vec<f64>>,
}

/// Ratio of largest to smallest positive value from which a numeric axis is scaled by its
/// logarithm: 1, 2, 4, 8 … apart, not 1, 2, 3.
const LOG_SCALE_RATIO: f64 = 4.0;

impl Space {
    /// The space of `candidates`, each a list of `(field, value)` pairs; a field that only some
    /// candidates have, or whose values are not all numbers, is categorical (absent is a level).
    /// Fields with one value across all candidates are not axes.
    pub fn new(candidates: &[Vec<(String, Value)>]) -> Space {
        let mut names: Vec<String> = Vec::new();
        for c in candidates {
            for (k, _) in c {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
        let value_of = |c: &Vec<(String, Value)>, name: &str| -> Value {
            c.iter()
                .find(|(k, _)| k == name)
                .map_or(Value::Null, |(_, v)| v.clone())
        };
        let mut axes = Vec::new();
        let mut columns: Vec<Vec<f64>> = Vec::new();
        for name in names {
            let values: Vec<Value> = candidates.iter().map(|c| value_of(c, &name)).collect();
            let mut distinct: Vec<Value> = Vec::new();
            for v in &values {
                if !distinct.contains(v) {
                    distinct.push(v.clone());
                }
            }
            if distinct.len() < 2 {
                continue;
            }
            let numbers: Option<Vec<f64>> = values.iter().map(Value::as_f64).collect();
            match numbers {
                Some(nums) => {
                    let lo = nums.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = nums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let log = lo > 0.0 && hi / lo >= LOG_SCALE_RATIO;
                    let t = |v: f64| if log { v.ln() } else { v };
                    let (tlo, thi) = (t(lo), t(hi));
                    let span = (thi - tlo).max(f64::MIN_POSITIVE);
                    columns.push(nums.iter().map(|&v| (t(v) - tlo) / span).collect());
                    distinct.sort_by(|a, b| {
                        a.as_f64()
                            .unwrap_or(0.0)
                            .total_cmp(&b.as_f64().unwrap_or(0.0))
                    });
                    axes.push(Axis {
                        name,
                        kind: AxisKind::Numeric { log },
                        levels: distinct,
                    });
                }
                None => {
                    columns.push(
                        values
                            .iter()
                            .map(|v| distinct.iter().position(|d| d == v).unwrap_or(0) as f64)
                            .collect(),
                    );
                    axes.push(Axis {
                        name,
                        kind: AxisKind::Categorical,
                        levels: distinct,
                    });
                }
            }
        }
        let points = (0..candidates.len())
            .map(|i| columns.iter().filter_map(|c| c.get(i).copied()).collect())
            .collect();
        Space { axes, points }
    }

    /// A space from coordinates already scaled (numeric 0-1, categorical level indices).
    pub fn from_points(axes: Vec<Axis>, points: Vec<Vec<f64>>) -> Space {
        Space { axes, points }
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True with no candidates.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// How far apart two candidates are, for spreading the first measurements: numeric axes
    /// by their scaled difference, categorical ones 1 when the levels differ.
    pub fn distance(&self, a: usize, b: usize) -> f64 {
        let (Some(pa), Some(pb)) = (self.points.get(a), self.points.get(b)) else {
            return 0.0;
        };
        self.axes
            .iter()
            .zip(pa.iter().zip(pb))
            .map(|(axis, (x, y))| match axis.kind {
                AxisKind::Numeric { .. } => (x - y).powi(2),
                AxisKind::Categorical => f64::from(u8::from(x != y)),
            })
            .sum::<f64>()
            .sqrt()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cand(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn numbers_that_double_are_log_scaled_and_words_are_levels() {
        let cands = vec![
            cand(&[
                ("batch", json!(1)),
                ("dtype", json!("f16")),
                ("model", json!("m")),
            ]),
            cand(&[
                ("batch", json!(4)),
                ("dtype", json!("q4")),
                ("model", json!("m")),
            ]),
            cand(&[
                ("batch", json!(16)),
                ("dtype", json!("f16")),
                ("model", json!("m")),
            ]),
            cand(&[
                ("batch", json!(16)),
                ("dtype", json!("q4")),
                ("flash", json!(true)),
                ("model", json!("m")),
            ]),
        ];
        let s = Space::new(&cands);
        // `model` never changes: not an axis; `flash` is present in one: categorical.
        let names: Vec<&str> = s.axes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["batch", "dtype", "flash"]);
        assert_eq!(s.axes[0].kind, AxisKind::Numeric { log: true });
        assert!(
            (s.points[1][0] - 0.5).abs() < 1e-12,
            "4 is halfway from 1 to 16 on a log scale"
        );
        assert_eq!(s.axes[1].kind, AxisKind::Categorical);
        assert_eq!(s.points[3][1], 1.0);
        assert_eq!(s.points[3][2], 1.0);
        assert_eq!(s.points[0][2], 0.0);
        assert!((s.distance(0, 2) - 1.0).abs() < 1e-12);
        assert!((s.distance(2, 3) - 2f64.sqrt()).abs() < 1e-12);
        let lin = Space::new(&[
            cand(&[("t", json!(2))]),
            cand(&[("t", json!(3))]),
            cand(&[("t", json!(4))]),
        ]);
        assert_eq!(lin.axes[0].kind, AxisKind::Numeric { log: false });
        assert!((lin.points[1][0] - 0.5).abs() < 1e-12);
    }
}
