//! Typed, skipping readers for the ML.ENERGY JSON files: only the keys the records need are
//! decoded (a `results.json` can be tens of MB of prompt text), with the reference reader's
//! "convert to float, else missing" rule (§5.1) applied while parsing.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A number as the reference reader converts it: `Some` for numbers, numeric strings and
/// booleans; `None` for null, other strings, arrays and objects.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lenient(pub Option<f64>);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Lenient, E> {
                Ok(Lenient(Some(if v { 1.0 } else { 0.0 })))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v as f64)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Lenient, E> {
                Ok(Lenient(super::raw_number(&serde_json::Value::String(
                    v.to_string(),
                ))))
            }
            fn visit_unit<E>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_none<E>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Lenient, D::Error> {
                d.deserialize_any(V)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Lenient, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Lenient, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Any JSON value, remembering only whether it was an array of convertible numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum NumberList {
    /// The key was absent or null.
    #[default]
    Missing,
    /// An array whose every entry converts.
    Values(Vec<f64>),
    /// An array with an entry that does not convert, or not an array.
    Invalid,
}

impl<'de> Deserialize<'de> for NumberList {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NumberList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NumberList, A::Error> {
                let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0));
                let mut ok = true;
                while let Some(Lenient(x)) = a.next_element::<Lenient>()? {
                    match x {
                        Some(v) => out.push(v),
                        None => ok = false,
                    }
                }
                Ok(if ok {
                    NumberList::Values(out)
                } else {
                    NumberList::Invalid
                })
            }
            fn visit_unit<E>(self) -> Result<NumberList, E> {
                Ok(NumberList::Missing)
            }
            fn visit_none<E>(self) -> Result<NumberList, E> {
                Ok(NumberList::Missing)
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<NumberList, D::Error> {
                d.deserialize_any(V)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NumberList, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(NumberList::Invalid)
            }
            fn visit_bool<E>(self, _: bool) -> Result<NumberList, E> {
                Ok(NumberList::Invalid)
            }
            fn visit_i64<E>(self, _: i64) -> Result<NumberList, E> {
                Ok(NumberList::Invalid)
            }
            fn visit_u64<E>(self, _: u64) -> Result<NumberList, E> {
                Ok(NumberList::Invalid)
            }
            fn visit_f64<E>(self, _: f64) -> Result<NumberList, E> {
                Ok(NumberList::Invalid)
            }
            fn visit_str<E>(self, _: &str) -> Result<NumberList, E> {
                Ok(NumberList::Invalid)
            }
        }
        d.deserialize_any(V)
    }
}

/// One entry of `results[]` (§5.3).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawRequest {
    /// `success` (absent counts as failed).
    #[serde(default)]
    pub success: Lenient,
    /// Inter-token latencies, s.
    #[serde(default)]
    pub itl: NumberList,
    /// Output tokens.
    #[serde(default)]
    pub output_len: Lenient,
}

impl RawRequest {
    /// Whether the request counts as successful.
    pub fn ok(&self) -> bool {
        self.success.0.is_some_and(|v| v != 0.0)
    }
}

/// The keys of `results.json` the run record needs (§5).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawResults {
    /// `D`, s.
    #[serde(default)]
    pub steady_state_duration: Lenient,
    /// `E`, J.
    #[serde(default)]
    pub steady_state_energy: Lenient,
    /// `e`, J/token.
    #[serde(default)]
    pub steady_state_energy_per_token: Lenient,
    /// Legacy `e`.
    #[serde(default)]
    pub energy_per_token_joules: Lenient,
    /// `C`.
    #[serde(default)]
    pub completed: Lenient,
    /// `T`.
    #[serde(default)]
    pub total_output_tokens: Lenient,
    /// Whole-benchmark tokens/s (fallback when `e <= 0`).
    #[serde(default)]
    pub output_throughput: Lenient,
    /// Per-request entries; `None` when the key is absent or not an array of objects.
    #[serde(default)]
    pub results: Option<Vec<RawRequest>>,
}

impl RawResults {
    /// `e`: the steady-state key, else the legacy one.
    pub fn energy_per_token(&self) -> Option<f64> {
        self.steady_state_energy_per_token
            .0
            .or(self.energy_per_token_joules.0)
    }
}

/// `prometheus.json`: only the steady-state running-batch mean is read (§7).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawPrometheus {
    /// The writer's steady-state averages.
    #[serde(default)]
    pub steady_state_stats: Option<SteadyStats>,
}

/// `steady_state_stats` of `prometheus.json`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SteadyStats {
    /// Mean `vllm:num_requests_running` over the window.
    #[serde(default, rename = "vllm:num_requests_running")]
    pub num_requests_running: Lenient,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_what_it_needs_leniently() {
        let text = r#"{"steady_state_duration": "45.5", "steady_state_energy": 1000,
            "energy_per_token_joules": true, "completed": null, "prompt": {"x": [1, 2]},
            "results": [{"success": true, "itl": [0.01, "0.02", 0], "output_len": 3},
                        {"itl": [0.01, null]}, {"success": false, "itl": "x"}]}"#;
        let r: RawResults = serde_json::from_str(text).unwrap();
        assert_eq!(r.steady_state_duration.0, Some(45.5));
        assert_eq!(r.energy_per_token(), Some(1.0));
        assert_eq!(r.completed.0, None);
        let rs = r.results.unwrap();
        assert!(rs[0].ok());
        assert_eq!(rs[0].itl, NumberList::Values(vec![0.01, 0.02, 0.0]));
        assert!(!rs[1].ok());
        assert_eq!(rs[1].itl, NumberList::Invalid);
        assert_eq!(rs[2].itl, NumberList::Invalid);
    }
}
