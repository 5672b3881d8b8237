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

use sha2::{Digest, Sha256};

use crate::model::ExperimentConfig;

/// A full SHA-256 digest of a configuration or a study design.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigDigest(pub [u8; 32]);

impl ConfigDigest {
    /// All 64 hex digits.
    pub fn hex(&self) -> String {
        self.hex_bytes().iter().map(|&b| char::from(b)).collect()
    }

    /// All 64 hex digits as ASCII bytes, without allocating.
    pub fn hex_bytes(&self) -> [u8; 64] {
        let digit = |n: u8| if n < 10 { b'0' + n } else { b'a' + n - 10 };
        let mut out = [0u8; 64];
        for (pair, b) in out.chunks_exact_mut(2).zip(self.0) {
            pair.copy_from_slice(&[digit(b >> 4), digit(b & 0xf)]);
        }
        out
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

/// Fields left out of the hash: the environment keys of the experiment and the decoder
/// preset (hashed through the values it expanded into).
fn is_excluded(type_name: &str, field: &str) -> bool {
    match type_name {
        "ExperimentConfig" => ExperimentConfig::ENVIRONMENT_KEYS.contains(&field),
        "DecoderConfig" => field == "preset",
        _ => false,
    }
}

#[derive(Clone, Copy)]
enum Key {
    Static(&'static str),
    /// Byte range of the key text in the buffer.
    Buf(usize, usize),
}

#[derive(Clone, Copy)]
struct Member {
    key: Key,
    start: usize,
    end: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum FrameKind {
    Object(&'static str),
    Seq { count: usize },
}

#[derive(Clone, Copy)]
struct Frame {
    kind: FrameKind,
    start: usize,
    mark: usize,
    in_seq: bool,
    key: Option<Key>,
    key_start: usize,
    value_start: usize,
}

/// Writes canonical JSON of any `Serialize` value (see the module docs), reusing its
/// buffers from one value to the next.
#[derive(Default)]
pub struct CanonicalWriter {
    buf: Vec<u8>,
    tmp: Vec<u8>,
    members: Vec<Member>,
    frames: Vec<Frame>,
    wrote: bool,
}

impl CanonicalWriter {
    /// A writer with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The canonical JSON of `value`.
    pub fn write<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> &[u8] {
        self.buf.clear();
        self.members.clear();
        self.frames.clear();
        self.wrote = false;
        // Only unsupported shapes (bytes, data-carrying variants) fail; config types have none.
        if crate::walk::walk(value, self).is_err() {
            self.buf.clear();
        }
        &self.buf
    }

    /// SHA-256 of the canonical JSON of `value`.
    pub fn digest<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> ConfigDigest {
        ConfigDigest(Sha256::digest(self.write(value)).into())
    }

    fn in_seq(&self) -> bool {
        matches!(self.frames.last(), Some(f) if matches!(f.kind, FrameKind::Seq { .. }))
    }

    fn scalar(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.wrote = true;
    }

    fn close_object(&mut self) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        let keep_empty_root = self.frames.is_empty();
        let CanonicalWriter {
            buf, tmp, members, ..
        } = self;
        let own = members.get_mut(frame.mark..).unwrap_or_default();
        own.sort_unstable_by(|a, b| key_bytes(buf, a.key).cmp(key_bytes(buf, b.key)));
        // An empty mapping is left out of its parent object, but kept in a list and at the
        // top level, where leaving it out would change the structure.
        let keep_empty = frame.in_seq || keep_empty_root;
        if own.is_empty() {
            buf.truncate(frame.start);
            if keep_empty {
                buf.extend_from_slice(b"{}");
            }
            self.wrote = keep_empty;
        } else {
            tmp.clear();
            tmp.push(b'{');
            for (i, m) in own.iter().enumerate() {
                if i > 0 {
                    tmp.push(b',');
                }
                write_key(key_bytes(buf, m.key), tmp);
                tmp.push(b':');
                tmp.extend_from_slice(buf.get(m.start..m.end).unwrap_or_default());
            }
            tmp.push(b'}');
            buf.truncate(frame.start);
            buf.extend_from_slice(tmp);
            self.wrote = true;
        }
        members.truncate(frame.mark);
    }

    fn open_object(&mut self, name: &'static str) {
        let in_seq = self.in_seq();
        self.frames.push(Frame {
            kind: FrameKind::Object(name),
            start: self.buf.len(),
            mark: self.members.len(),
            in_seq,
            key: None,
            key_start: self.buf.len(),
            value_start: self.buf.len(),
        });
    }

    fn finish_member(&mut self) {
        let wrote = self.wrote;
        let end = self.buf.len();
        let Some(f) = self.frames.last_mut() else {
            return;
        };
        match f.key.take() {
            Some(key) if wrote => self.members.push(Member {
                key,
                start: f.value_start,
                end,
            }),
            _ => self.buf.truncate(f.key_start),
        }
    }
}

fn key_bytes(buf: &[u8], key: Key) -> &[u8] {
    match key {
        Key::Static(s) => s.as_bytes(),
        Key::Buf(a, b) => buf.get(a..b).unwrap_or_default(),
    }
}

impl crate::walk::Sink for CanonicalWriter {
    fn null(&mut self) {
        if self.in_seq() || self.frames.is_empty() {
            self.scalar(b"null");
        } else {
            self.wrote = false;
        }
    }
    fn bool(&mut self, v: bool) {
        self.scalar(if v { b"true" } else { b"false" });
    }
    fn i64(&mut self, v: i64) {
        use std::io::Write;
        let _ = write!(self.buf, "{v}");
        self.wrote = true;
    }
    fn u64(&mut self, v: u64) {
        use std::io::Write;
        let _ = write!(self.buf, "{v}");
        self.wrote = true;
    }
    fn f64(&mut self, v: f64) {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            self.i64(v as i64);
        } else {
            // serde_json's shortest round-trip form (what Python's json.dumps writes too).
            let _ = serde_json::to_writer(&mut self.buf, &v);
            self.wrote = true;
        }
    }
    fn str(&mut self, v: &str) {
        write_string(v, &mut self.buf);
        self.wrote = true;
    }
    fn begin_seq(&mut self) {
        self.frames.push(Frame {
            kind: FrameKind::Seq { count: 0 },
            start: self.buf.len(),
            mark: self.members.len(),
            in_seq: false,
            key: None,
            key_start: 0,
            value_start: 0,
        });
        self.buf.push(b'[');
    }
    fn seq_element(&mut self) {
        if let Some(Frame {
            kind: FrameKind::Seq { count },
            ..
        }) = self.frames.last_mut()
        {
            if *count > 0 {
                self.buf.push(b',');
            }
            *count += 1;
        }
    }
    fn end_seq(&mut self) {
        self.frames.pop();
        self.scalar(b"]");
    }
    fn begin_struct(&mut self, name: &'static str) {
        self.open_object(name);
    }
    fn field(&mut self, key: &'static str) -> bool {
        let len = self.buf.len();
        let Some(f) = self.frames.last_mut() else {
            return false;
        };
        // Positions first: end_field truncates to key_start even for a skipped field.
        f.key_start = len;
        f.value_start = len;
        self.wrote = false;
        if let FrameKind::Object(name) = f.kind
            && is_excluded(name, key)
        {
            f.key = None;
            return false;
        }
        f.key = Some(Key::Static(key));
        true
    }
    fn end_field(&mut self) {
        self.finish_member();
    }
    fn end_struct(&mut self) {
        self.close_object();
    }
    fn begin_map(&mut self) {
        self.open_object("");
    }
    fn map_key(&mut self, key: &str) {
        let start = self.buf.len();
        self.buf.extend_from_slice(key.as_bytes());
        let end = self.buf.len();
        if let Some(f) = self.frames.last_mut() {
            f.key = Some(Key::Buf(start, end));
            f.key_start = start;
            f.value_start = end;
        }
        self.wrote = false;
    }
    fn end_map_value(&mut self) {
        self.finish_member();
    }
    fn end_map(&mut self) {
        self.close_object();
    }
}

fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    if s.bytes().any(needs_escape) {
        // serde_json's string escaping is stable and minimal; writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// Writes a key held as bytes (always valid UTF-8: it came from a `&str`).
fn write_key(bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.iter().copied().any(needs_escape) {
        write_string(std::str::from_utf8(bytes).unwrap_or_default(), out);
    } else {
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    }
}

/// The digest of a resolved configuration (a configuration read back from a file is checked
/// against the hash it was saved with).
pub fn digest_of(config: &ExperimentConfig) -> ConfigDigest {
    config_digest(&mut CanonicalWriter::new(), config)
}

/// Key under which a configuration's runner enters its canonical form.
pub const RUNNER_KEY: &str = "runner";

/// The digest of a configuration: its canonical JSON, with a top-level `runner` key when its
/// engine runs on anything but the engine's default runner ([`RunnerSpec::identity`]). Two
/// endpoints, or a local server and a container, are two configurations; one that names no
/// runner hashes as it always did.
///
/// [`RunnerSpec::identity`]: crate::model::RunnerSpec::identity
pub fn config_digest(writer: &mut CanonicalWriter, config: &ExperimentConfig) -> ConfigDigest {
    let identity = config.runner().and_then(|r| {
        r.identity(
            config.engine,
            config.images.get(&config.engine).map(String::as_str),
        )
    });
    let Some(identity) = identity else {
        return writer.digest(config);
    };
    // Rare (a non-default runner): splice the key in through a JSON round trip of the
    // canonical form, which the writer then sorts and writes canonically again.
    let mut tree: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(writer.write(config)).unwrap_or_default();
    tree.insert(RUNNER_KEY.into(), serde_json::Value::String(identity));
    writer.digest(&tree)
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
        h.update(d.hex_bytes());
        h.update(b"\"");
    }
    h.update(b"]");
    ConfigDigest(h.finalize().into())
}

/// The design digest of a search: the grid's digest and the `search:` block (objective,
/// constraints, budget, seed …), so that resuming with another goal or seed is drift.
pub fn search_design_digest(grid: &ConfigDigest, search: &serde_json::Value) -> ConfigDigest {
    let mut h = Sha256::new();
    h.update(b"search:");
    h.update(grid.hex_bytes());
    h.update(CanonicalWriter::new().write(search));
    ConfigDigest(h.finalize().into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn canon(v: Value) -> String {
        String::from_utf8(CanonicalWriter::new().write(&v).to_vec()).unwrap()
    }

    #[test]
    fn canonical_form() {
        assert_eq!(
            canon(
                json!({"b": 1.0, "a": [0.5, "x\n", null, {}], "c": null, "d": {"e": null}, "é": true})
            ),
            r#"{"a":[0.5,"x\n",null,{}],"b":1,"é":true}"#
        );
        assert_eq!(canon(json!(1e300)), "1e+300");
        assert_eq!(canon(json!(-0.0)), "0");
        assert_eq!(
            canon(json!({"z": {"y": {"x": null}}, "a": 1})),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn writer_is_reusable() {
        let mut w = CanonicalWriter::new();
        let a = w.write(&json!({"k": [1, 2]})).to_vec();
        let b = w.write(&json!({"k": [1, 2]})).to_vec();
        assert_eq!(a, b);
        assert_eq!(String::from_utf8(a).unwrap(), r#"{"k":[1,2]}"#);
    }

    #[test]
    fn environment_fields_and_preset_are_not_hashed() {
        let text = "model: m\nengine: vllm\n";
        let tree = crate::yaml::parse(text, crate::source::SourceId(0)).unwrap();
        let mut a: ExperimentConfig = crate::de::from_node(&tree).unwrap();
        let plain = digest_of(&a);
        a.name = Some("x".into());
        a.output_dir = Some("/o".into());
        a.gpu_telemetry = false;
        a.decoder.preset = Some(crate::model::Preset::Creative);
        a.runners
            .insert(crate::model::Engine::Vllm, crate::model::RunnerSpec::Local);
        assert_eq!(digest_of(&a), plain);
        a.random_seed = 1;
        assert_ne!(digest_of(&a), plain);
    }

    /// Two endpoints, a container and a local server are different deployments: a runner
    /// other than the engine's default enters the hash (credentials do not), the default
    /// runner leaves it as it was, and runners of other engines never count.
    #[test]
    fn a_non_default_runner_enters_the_hash() {
        use crate::model::{Engine, RunnerSpec};
        let text = "model: m\nengine: vllm\n";
        let tree = crate::yaml::parse(text, crate::source::SourceId(0)).unwrap();
        let mut a: ExperimentConfig = crate::de::from_node(&tree).unwrap();
        let plain = digest_of(&a);
        assert_eq!(
            plain,
            CanonicalWriter::new().digest(&a),
            "no runner: as before"
        );
        let with = |a: &ExperimentConfig, r: &str| {
            let mut b = a.clone();
            b.runners
                .insert(Engine::Vllm, r.parse::<RunnerSpec>().unwrap());
            digest_of(&b)
        };
        assert_eq!(with(&a, "local"), plain, "the default runner");
        let one = with(&a, "external:http://10.0.0.1:8000");
        let two = with(&a, "external:http://10.0.0.2:8000");
        assert_ne!(one, plain);
        assert_ne!(one, two);
        assert_eq!(with(&a, "external:http://user:key@10.0.0.1:8000"), one);
        let docker = with(&a, "docker");
        assert_ne!(docker, plain);
        assert_ne!(with(&a, "docker:vllm/vllm-openai:v0.11.0"), docker);
        a.images
            .insert(Engine::Vllm, "vllm/vllm-openai:v0.11.0".into());
        assert_eq!(
            with(&a, "docker"),
            with(&a, "docker:vllm/vllm-openai:v0.11.0"),
            "the image pulled, wherever it was named"
        );
        a.images.clear();
        a.runners
            .insert(Engine::Sglang, RunnerSpec::Docker { image: None });
        assert_eq!(digest_of(&a), plain, "another engine's runner");
        // The hash is the canonical form with the key in its sorted place.
        let mut b = a.clone();
        b.runners.insert(Engine::Vllm, "docker".parse().unwrap());
        let mut v = serde_json::to_value(&b).unwrap();
        let obj = v.as_object_mut().unwrap();
        for k in ExperimentConfig::ENVIRONMENT_KEYS {
            obj.remove(*k);
        }
        obj.insert("runner".into(), json!("docker"));
        assert_eq!(digest_of(&b), CanonicalWriter::new().digest(&v));
    }

    /// Straightforward reference of the canonical form, for the property test below.
    fn reference(v: &Value, keep_empty: bool) -> Option<String> {
        match v {
            Value::Null => keep_empty.then(|| "null".to_string()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(match n.as_f64() {
                Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    (f as i64).to_string()
                }
                _ => n.to_string(),
            }),
            Value::String(s) => Some(serde_json::to_string(s).unwrap()),
            Value::Array(items) => Some(format!(
                "[{}]",
                items
                    .iter()
                    .map(|i| reference(i, true).unwrap())
                    .collect::<Vec<_>>()
                    .join(",")
            )),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
                let parts: Vec<String> = keys
                    .iter()
                    .filter_map(|k| {
                        reference(&map[*k], false)
                            .map(|v| format!("{}:{v}", serde_json::to_string(k).unwrap()))
                    })
                    .collect();
                if parts.is_empty() {
                    keep_empty.then(|| "{}".to_string())
                } else {
                    Some(format!("{{{}}}", parts.join(",")))
                }
            }
        }
    }

    fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|i| json!(i)),
            (-1.0e6f64..1.0e6).prop_map(|f| json!(f)),
            (-100i32..100).prop_map(|i| json!(f64::from(i))),
            "[a-zé\"\\ ]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-dZé]{1,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn writer_matches_the_reference(v in arb_value()) {
            let mut w = CanonicalWriter::new();
            // Write something first so buffer reuse is exercised too.
            let _ = w.write(&json!({"warm": [1, {"x": null}]}));
            let got = String::from_utf8(w.write(&v).to_vec()).unwrap();
            proptest::prop_assert_eq!(got, reference(&v, true).unwrap());
        }
    }

    #[test]
    fn digest_formats() {
        let d = CanonicalWriter::new().digest(&json!({}));
        // SHA-256 of "{}"
        assert_eq!(
            d.hex(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(d.short(), "44136fa355b3678a");
        assert_eq!(d.seed(), 0x4413_6fa3_55b3_678a);
    }
}
