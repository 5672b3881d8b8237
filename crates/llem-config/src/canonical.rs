//! `measurement_config_hash` and `study_design_hash`.
//!
//! A configuration's hash is SHA-256 over its canonical JSON:
//! - the fully resolved configuration (defaults filled), as typed, so YAML spelling
//!   (`0.9`, `9e-1`, `0.90`; key order; anchors) cannot change it;
//! - without the environment fields [`ExperimentConfig::ENVIRONMENT_KEYS`] and without
//!   `decoder.preset` (already expanded into concrete values);
//! - nulls and empty mappings omitted (so a field added later with a null default does not
//!   change existing hashes);
//! - object keys sorted by their UTF-8 bytes, no whitespace;
//! - integral numbers written as integers (`1.0` -> `1`), other numbers in their shortest
//!   round-trip form, strings JSON-escaped.
//!
//! `measurement_config_hash` is the first 16 hex digits. `study_design_hash` is the first 16
//! hex digits of SHA-256 over the canonical JSON array of the configurations' full 64-hex
//! digests, in plan order (execution settings excluded).

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::ExperimentConfig;

/// A full SHA-256 digest of a configuration or a study design.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigDigest(pub [u8; 32]);

impl ConfigDigest {
    /// All 64 hex digits.
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(HEX[(b >> 4) as usize]);
            s.push(HEX[(b & 0xf) as usize]);
        }
        s
    }

    /// The 16-hex-digit form used in results and directory names.
    pub fn short(&self) -> String {
        let mut h = self.hex();
        h.truncate(16);
        h
    }

    /// The first 8 bytes as an integer (seed for the shuffle order).
    pub fn seed(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(b)
    }
}

const HEX: [char; 16] = [
    '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f',
];

impl fmt::Debug for ConfigDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

impl fmt::Display for ConfigDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

/// Writes `v` as canonical JSON, leaving out nulls and empty mappings inside objects.
pub fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .iter()
                .filter(|(_, v)| !is_empty(v))
                .map(|(k, _)| k)
                .collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                if let Some(v) = map.get(*k) {
                    write_canonical(v, out);
                }
            }
            out.push(b'}');
        }
    }
}

/// Null, or a mapping whose every value is empty.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().all(is_empty),
        _ => false,
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    if n.is_i64() || n.is_u64() {
        out.extend_from_slice(n.to_string().as_bytes());
        return;
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        out.extend_from_slice((f as i64).to_string().as_bytes());
    } else {
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // serde_json's string escaping is stable and minimal; writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The hashed view of a resolved configuration (as JSON): environment keys and
/// `decoder.preset` removed.
pub fn hashed_view(config_json: &Value) -> Value {
    let mut v = config_json.clone();
    if let Some(map) = v.as_object_mut() {
        for k in ExperimentConfig::ENVIRONMENT_KEYS {
            map.remove(*k);
        }
        if let Some(d) = map.get_mut("decoder").and_then(Value::as_object_mut) {
            d.remove("preset");
        }
    }
    v
}

/// The digest of a resolved configuration given as JSON.
pub fn config_digest(config_json: &Value) -> ConfigDigest {
    let mut buf = Vec::with_capacity(1024);
    write_canonical(&hashed_view(config_json), &mut buf);
    ConfigDigest(Sha256::digest(&buf).into())
}

/// The digest of a resolved configuration.
pub fn digest_of(config: &ExperimentConfig) -> ConfigDigest {
    config_digest(&serde_json::to_value(config).unwrap_or(Value::Null))
}

/// The study design digest over configuration digests in plan order.
pub fn design_digest(configs: &[ConfigDigest]) -> ConfigDigest {
    let mut h = Sha256::new();
    h.update(b"[");
    for (i, d) in configs.iter().enumerate() {
        if i > 0 {
            h.update(b",");
        }
        h.update(b"\"");
        h.update(d.hex().as_bytes());
        h.update(b"\"");
    }
    h.update(b"]");
    ConfigDigest(h.finalize().into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(v: Value) -> String {
        let mut b = Vec::new();
        write_canonical(&v, &mut b);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn canonical_form() {
        assert_eq!(
            canon(json!({"b": 1.0, "a": [0.5, "x\n"], "c": null, "d": {"e": null}, "é": true})),
            r#"{"a":[0.5,"x\n"],"b":1,"é":true}"#
        );
        assert_eq!(canon(json!(1e300)), "1e+300");
        assert_eq!(canon(json!(-0.0)), "0");
    }

    #[test]
    fn environment_fields_do_not_change_the_hash() {
        let a = json!({"model": "m", "runners": {"vllm": "docker"}, "output_dir": "x", "decoder": {"preset": "creative", "temperature": 0.8}});
        let b = json!({"model": "m", "runners": {"vllm": "local"}, "decoder": {"temperature": 0.8}});
        assert_eq!(config_digest(&a), config_digest(&b));
        let c = json!({"model": "m", "decoder": {"temperature": 0.7}});
        assert_ne!(config_digest(&a), config_digest(&c));
    }

    #[test]
    fn digest_formats() {
        let d = config_digest(&json!({}));
        // SHA-256 of "{}"
        assert_eq!(
            d.hex(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(d.short(), "44136fa355b3678a");
        assert_eq!(d.seed(), 0x4413_6fa3_55b3_678a);
    }
}
