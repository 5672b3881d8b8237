//! Deterministic mutations for the fuzz tests of configuration and result files.
//!
//! Byte-level (flip, insert a dictionary token, delete, duplicate, splice from another
//! seed, truncate) and JSON-structural (replace a value anywhere with an edge value, drop a
//! key, wrap a value). Seeded, so a failing case is reproduced by its number.

use serde_json::Value;

/// A small seeded generator (SplitMix64): reproducible across platforms and runs.
pub struct Rng(u64);

impl Rng {
    /// A generator for case `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

/// Applies one to four byte-level mutations to `seed`, drawing tokens from `dict` and
/// spans from `others`.
pub fn bytes(rng: &mut Rng, seed: &[u8], dict: &[&[u8]], others: &[Vec<u8>]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 => {
                if let Some(b) = out.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            1 | 2 => {
                let tok = rng.pick(dict).copied().unwrap_or(b"");
                out.splice(at..at, tok.iter().copied());
            }
            3 => {
                let len = rng.below(32).min(out.len() - at.min(out.len()));
                out.drain(at..at + len);
            }
            4 => {
                let len = rng.below(64).min(out.len() - at.min(out.len()));
                let span: Vec<u8> = out.get(at..at + len).unwrap_or_default().to_vec();
                out.splice(at..at, span);
            }
            5 => {
                if let Some(o) = rng.pick(others) {
                    let from = rng.below(o.len());
                    let len = rng.below(80).min(o.len() - from);
                    let span: Vec<u8> = o.get(from..from + len).unwrap_or_default().to_vec();
                    out.splice(at..at, span);
                }
            }
            _ => out.truncate(at),
        }
    }
    out
}

/// Replaces one to three scalar values of a YAML or JSON text (what follows `: `, `[`, `, `
/// or `- `, up to the next delimiter) with one of `values`: the structure stays valid, so
/// the mutant reaches typing, validation and expansion instead of the parser.
pub fn scalars(rng: &mut Rng, seed: &[u8], values: &[&[u8]]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..=rng.below(3) {
        let starts: Vec<usize> = out
            .windows(2)
            .enumerate()
            .filter_map(|(i, w)| match w {
                [b':' | b',' | b'-', b' '] => Some(i + 2),
                [b'[', _] => Some(i + 1),
                _ => None,
            })
            .collect();
        let Some(&at) = rng.pick(&starts) else {
            break;
        };
        let end = out
            .get(at..)
            .unwrap_or_default()
            .iter()
            .position(|b| matches!(b, b',' | b']' | b'}' | b'\n' | b'#'))
            .map_or(out.len(), |n| at + n);
        let value = rng.pick(values).copied().unwrap_or(b"");
        out.splice(at..end, value.iter().copied());
    }
    out
}

/// Values that break assumptions: wrong types, extremes, non-finite spellings.
fn edge_value(rng: &mut Rng) -> Value {
    let options = [
        Value::Null,
        Value::Bool(true),
        serde_json::json!(-1),
        serde_json::json!(0),
        serde_json::json!(1e308),
        serde_json::json!(-1e308),
        serde_json::json!(u64::MAX),
        serde_json::json!(i64::MIN),
        serde_json::json!(4.9e-324),
        serde_json::json!("NaN"),
        serde_json::json!("inf"),
        serde_json::json!(""),
        serde_json::json!("x".repeat(10_000)),
        serde_json::json!("../../etc/passwd"),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!([1, "two", null]),
        serde_json::json!({"nested": {"deeper": [1, 2, 3]}}),
    ];
    options
        .get(rng.below(options.len()))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Applies one to three structural mutations to a JSON document.
pub fn json(rng: &mut Rng, doc: &Value) -> Value {
    let mut out = doc.clone();
    for _ in 0..=rng.below(3) {
        mutate_somewhere(rng, &mut out, 0);
    }
    out
}

fn mutate_somewhere(rng: &mut Rng, v: &mut Value, depth: usize) {
    // Descend with probability 3/4 while there is something to descend into.
    let descend = depth < 12 && rng.below(4) != 0;
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let key = m
                .keys()
                .nth(rng.below(m.len()))
                .cloned()
                .unwrap_or_default();
            if rng.below(8) == 0 {
                m.remove(&key);
            } else if let Some(child) = m.get_mut(&key) {
                mutate_somewhere(rng, child, depth + 1);
            }
        }
        Value::Array(a) if descend && !a.is_empty() => {
            let i = rng.below(a.len());
            if rng.below(8) == 0 {
                a.remove(i);
            } else if let Some(child) = a.get_mut(i) {
                mutate_somewhere(rng, child, depth + 1);
            }
        }
        _ => {
            *v = match rng.below(5) {
                0 => Value::Array(vec![v.clone(), v.clone()]),
                _ => edge_value(rng),
            };
        }
    }
}

/// Mutants per campaign: `LLEM_FUZZ_CASES`, else `default`.
pub fn cases(default: u64) -> u64 {
    std::env::var("LLEM_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Where failing inputs are kept: `target/fuzz-failures/`.
pub fn failure_dir() -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-failures");
    let _ = std::fs::create_dir_all(&d);
    d
}

/// How long one input may take: 10 s optimised (`make fuzz`); an unoptimised test build is
/// about ten times slower on the largest legal inputs, so it is given 100 s.
pub fn hang_limit() -> std::time::Duration {
    std::time::Duration::from_secs(if cfg!(debug_assertions) { 100 } else { 10 })
}

/// Aborts the process when one case runs past [`hang_limit`], keeping a copy of `input`
/// (the file the case reads) in [`failure_dir`].
pub struct Watchdog {
    case: std::sync::Arc<std::sync::atomic::AtomicU64>,
    started_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    epoch: std::time::Instant,
}

impl Watchdog {
    /// Starts watching; `name` prefixes the kept file.
    pub fn start(name: &'static str, input: std::path::PathBuf) -> Watchdog {
        use std::sync::atomic::{AtomicU64, Ordering};
        let case = std::sync::Arc::new(AtomicU64::new(0));
        let started_ms = std::sync::Arc::new(AtomicU64::new(u64::MAX));
        let epoch = std::time::Instant::now();
        let (c, s) = (case.clone(), started_ms.clone());
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_millis(250));
                let start = s.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_millis() as u64;
                if start != u64::MAX && now.saturating_sub(start) > hang_limit().as_millis() as u64
                {
                    let n = c.load(Ordering::Relaxed);
                    let keep = failure_dir().join(format!("{name}-case-{n}-hang"));
                    let _ = std::fs::copy(&input, &keep);
                    eprintln!(
                        "fuzz case {n} ran past {:?}: {}",
                        hang_limit(),
                        keep.display()
                    );
                    std::process::abort();
                }
            }
        });
        Watchdog {
            case,
            started_ms,
            epoch,
        }
    }

    /// Case `n` begins.
    pub fn begin(&self, n: u64) {
        use std::sync::atomic::Ordering;
        self.case.store(n, Ordering::Relaxed);
        self.started_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// The case ended.
    pub fn end(&self) {
        self.started_ms
            .store(u64::MAX, std::sync::atomic::Ordering::Relaxed);
    }
}
