//! Datasets: the built-in aliases (`aienergyscore`, `sharegpt`, `synthetic`) and any JSONL
//! file, loaded into prompts in the configured order.

use std::path::{Path, PathBuf};

use llem_config::rng::SplitMix64;
use llem_config::{DatasetConfig, DatasetOrder, LengthDistribution, SyntheticConfig};

use super::sharegpt;
use super::{Prompt, PromptInput};

/// Keys tried, in order, for the prompt of a JSONL record (the Python llem's rule).
pub const PROMPT_KEYS: [&str; 5] = ["prompt", "text", "instruction", "input", "question"];

/// The AIEnergyScore text-generation prompts (Apache-2.0, see `data/NOTICE`), compiled in so
/// that the default dataset needs no asset fetch: `llem run -m model.gguf` works with the
/// binary alone.
const AIENERGYSCORE_JSONL: &str = include_str!("../../data/aienergyscore.jsonl");

/// File name of the ShareGPT dump inside the asset cache (too large to compile in).
const SHAREGPT: (&str, &str) = ("sharegpt", "ShareGPT_V3_unfiltered_cleaned_split.json");

/// A dataset cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A built-in dataset is not in the asset cache.
    #[error(
        "dataset `{alias}` is not in the asset cache ({path}); run scripts/fetch-assets.sh \
         (or set LLEM_ASSETS to where it put the assets)"
    )]
    MissingAsset {
        /// The alias.
        alias: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The source is neither an alias nor an existing file.
    #[error(
        "unknown dataset source `{source_name}`: use a built-in alias (aienergyscore, sharegpt, \
         synthetic) or the path of an existing .jsonl file"
    )]
    Unknown {
        /// The source as configured.
        source_name: String,
    },
    /// A file could not be read.
    #[error("cannot read dataset {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A record is malformed.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Fewer prompts than requested.
    #[error(
        "dataset `{name}` has only {have} usable prompts but {want} were requested (dataset.n_prompts)"
    )]
    TooFew {
        /// The dataset.
        name: String,
        /// Usable prompts.
        have: usize,
        /// Requested.
        want: usize,
    },
}

/// Prompts ready for a workload.
#[derive(Clone, Debug)]
pub struct LoadedDataset {
    /// Dataset name (alias or path).
    pub name: String,
    /// The file read, if any.
    pub path: Option<PathBuf>,
    /// The prompts, ordered.
    pub prompts: Vec<Prompt>,
    /// Facts worth recording (a cut file, skipped records).
    pub notes: Vec<String>,
}

/// Loads `n` prompts of `cfg.source`, ordered by `cfg.order` (`seed` for shuffles and
/// synthetic lengths); built-in datasets come from `assets`.
pub fn load(
    cfg: &DatasetConfig,
    n: usize,
    seed: i64,
    assets: &Path,
) -> Result<LoadedDataset, DatasetError> {
    let seed = seed as u64;
    match cfg.source.as_str() {
        "synthetic" => Ok(synthetic(
            &cfg.synthetic.clone().unwrap_or_default(),
            n,
            seed,
        )),
        "sharegpt" => {
            let path = builtin(assets, SHAREGPT)?;
            load_sharegpt("sharegpt", &path, n, cfg.order, seed)
        }
        "aienergyscore" => {
            let origin = Path::new("<built-in aienergyscore.jsonl>");
            let prompts = parse_jsonl(AIENERGYSCORE_JSONL, origin)?;
            Ok(LoadedDataset {
                name: "aienergyscore".into(),
                path: None,
                prompts: order_and_take(prompts, "aienergyscore", n, cfg.order, seed)?,
                notes: Vec::new(),
            })
        }
        other => {
            let path = PathBuf::from(other);
            let ext = path.extension().and_then(|e| e.to_str());
            match ext {
                Some("jsonl") if path.is_file() => load_jsonl(other, &path, n, cfg.order, seed),
                Some("json") if path.is_file() => load_sharegpt(other, &path, n, cfg.order, seed),
                _ => Err(DatasetError::Unknown {
                    source_name: other.to_string(),
                }),
            }
        }
    }
}

/// The file of a built-in dataset, which must have been fetched into the asset cache.
fn builtin(assets: &Path, (alias, file): (&str, &str)) -> Result<PathBuf, DatasetError> {
    let path = assets.join(alias).join(file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(DatasetError::MissingAsset {
            alias: alias.to_string(),
            path,
        })
    }
}

/// The largest dataset file llem reads whole (ShareGPT's full dump is ~650 MiB).
const DATASET_MAX_BYTES: u64 = 4 << 30;

fn read(path: &Path) -> Result<Vec<u8>, DatasetError> {
    llem_config::files::read_regular(path, DATASET_MAX_BYTES).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Applies `order` and keeps the first `n` (a shuffle draws from all records).
fn order_and_take(
    mut prompts: Vec<Prompt>,
    name: &str,
    n: usize,
    order: DatasetOrder,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    if prompts.len() < n {
        return Err(DatasetError::TooFew {
            name: name.to_string(),
            have: prompts.len(),
            want: n,
        });
    }
    match order {
        DatasetOrder::Interleaved => {}
        // Stable: the file order survives inside each group.
        DatasetOrder::Grouped => prompts.sort_by(|a, b| a.group.cmp(&b.group)),
        DatasetOrder::Shuffled => SplitMix64::new(seed).shuffle(&mut prompts),
    }
    prompts.truncate(n);
    Ok(prompts)
}

fn text_prompt(i: usize, text: String, group: Option<String>, reply: Option<String>) -> Prompt {
    Prompt {
        dataset_index: u32::try_from(i).unwrap_or(u32::MAX),
        input: PromptInput::Text { text, chat: true },
        group,
        reference_output: reply,
        output_tokens: None,
        ignore_eos: false,
        follow_ups: Vec::new(),
    }
}

fn load_sharegpt(
    name: &str,
    path: &Path,
    n: usize,
    order: DatasetOrder,
    seed: u64,
) -> Result<LoadedDataset, DatasetError> {
    let bytes = read(path)?;
    // File order needs only the first n conversations; a shuffle draws from all of them.
    let limit = (order != DatasetOrder::Shuffled).then_some(n);
    let parsed = sharegpt::parse(&bytes, limit).map_err(|e| DatasetError::Invalid {
        path: path.to_path_buf(),
        line: 1,
        message: e.to_string(),
    })?;
    let mut notes = Vec::new();
    if parsed.truncated {
        notes.push(format!(
            "{}: the file ends inside a record; the {} complete conversations before the cut \
             were used",
            path.display(),
            parsed.conversations.len()
        ));
    }
    let prompts = parsed
        .conversations
        .into_iter()
        .enumerate()
        .map(|(i, c)| Prompt {
            follow_ups: c.follow_ups,
            ..text_prompt(i, c.prompt, None, Some(c.reply))
        })
        .collect();
    Ok(LoadedDataset {
        name: name.to_string(),
        path: Some(path.to_path_buf()),
        prompts: order_and_take(prompts, name, n, order, seed)?,
        notes,
    })
}

fn load_jsonl(
    name: &str,
    path: &Path,
    n: usize,
    order: DatasetOrder,
    seed: u64,
) -> Result<LoadedDataset, DatasetError> {
    let bytes = read(path)?;
    let text = String::from_utf8(bytes).map_err(|e| DatasetError::Invalid {
        path: path.to_path_buf(),
        line: 1,
        message: format!("not UTF-8: {e}"),
    })?;
    let prompts = parse_jsonl(&text, path)?;
    Ok(LoadedDataset {
        name: name.to_string(),
        path: Some(path.to_path_buf()),
        prompts: order_and_take(prompts, name, n, order, seed)?,
        notes: Vec::new(),
    })
}

/// The prompts of a JSONL text; `origin` names it in errors.
fn parse_jsonl(text: &str, origin: &Path) -> Result<Vec<Prompt>, DatasetError> {
    let mut prompts = Vec::new();
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let invalid = |message: String| DatasetError::Invalid {
            path: origin.to_path_buf(),
            line: lineno + 1,
            message,
        };
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| invalid(format!("invalid JSON: {e}")))?;
        let Some(obj) = v.as_object() else {
            return Err(invalid("expected a JSON object per line".into()));
        };
        // Provenance header lines (keys starting with `_`) describe the file.
        if obj.keys().any(|k| k.starts_with('_')) {
            continue;
        }
        let Some(prompt) = PROMPT_KEYS
            .iter()
            .find_map(|k| obj.get(*k).and_then(|v| v.as_str()))
        else {
            return Err(invalid(format!(
                "no prompt: expected one of the keys {} with a string value",
                PROMPT_KEYS.join(", ")
            )));
        };
        let group = obj.get("source").and_then(|v| v.as_str()).map(String::from);
        let reply = ["response", "output", "answer", "completion"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(|v| v.as_str()))
            .map(String::from);
        prompts.push(text_prompt(prompts.len(), prompt.to_string(), group, reply));
    }
    Ok(prompts)
}

/// A uniform draw in (0, 1].
fn unit(r: &mut SplitMix64) -> f64 {
    ((r.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// A standard normal draw (Box-Muller).
fn normal(r: &mut SplitMix64) -> f64 {
    let (u1, u2) = (unit(r), unit(r));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// One length drawn around `mean`, at least 1.
pub fn draw_length(mean: u32, dist: LengthDistribution, spread: f64, r: &mut SplitMix64) -> u32 {
    let m = f64::from(mean);
    let x = match dist {
        LengthDistribution::Fixed => m,
        LengthDistribution::Uniform => m * (1.0 + spread * (2.0 * unit(r) - 1.0)),
        LengthDistribution::Normal => m * (1.0 + spread * normal(r)),
        LengthDistribution::Lognormal => {
            let s2 = (1.0 + spread * spread).ln();
            (m.ln() - s2 / 2.0 + s2.sqrt() * normal(r)).exp()
        }
    };
    x.round().clamp(1.0, f64::from(u32::MAX)) as u32
}

fn synthetic(cfg: &SyntheticConfig, n: usize, seed: u64) -> LoadedDataset {
    let mut r = SplitMix64::new(seed);
    let prompts = (0..n)
        .map(|i| {
            let input = draw_length(cfg.input_tokens, cfg.distribution, cfg.spread, &mut r);
            let output = draw_length(cfg.output_tokens, cfg.distribution, cfg.spread, &mut r);
            Prompt {
                dataset_index: u32::try_from(i).unwrap_or(u32::MAX),
                input: PromptInput::Tokens {
                    n_tokens: input,
                    seed: seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                },
                group: None,
                reference_output: None,
                output_tokens: Some(output),
                ignore_eos: true,
                follow_ups: Vec::new(),
            }
        })
        .collect();
    LoadedDataset {
        name: "synthetic".into(),
        path: None,
        prompts,
        notes: Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn cfg(source: &str, order: DatasetOrder) -> DatasetConfig {
        DatasetConfig {
            source: source.into(),
            n_prompts: 3,
            order,
            synthetic: None,
        }
    }

    fn texts(d: &LoadedDataset) -> Vec<String> {
        d.prompts
            .iter()
            .map(|p| match &p.input {
                PromptInput::Text { text, .. } => text.clone(),
                PromptInput::Tokens { .. } | PromptInput::TokenIds(_) => String::new(),
            })
            .collect()
    }

    #[test]
    fn jsonl_key_rules_header_lines_and_orders() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.jsonl");
        std::fs::write(
            &p,
            "{\"_provenance\": \"test\"}\n\
             {\"prompt\": \"a\", \"source\": \"y\"}\n\
             \n\
             {\"text\": \"b\", \"source\": \"x\"}\n\
             {\"question\": \"c\", \"source\": \"y\"}\n\
             {\"instruction\": \"d\", \"input\": \"ignored\", \"source\": \"x\"}\n",
        )
        .unwrap();
        let src = p.to_str().unwrap();
        let got = load(&cfg(src, DatasetOrder::Interleaved), 3, 1, d.path()).unwrap();
        assert_eq!(texts(&got), ["a", "b", "c"]);
        let got = load(&cfg(src, DatasetOrder::Grouped), 4, 1, d.path()).unwrap();
        assert_eq!(texts(&got), ["b", "d", "a", "c"]);
        let s1 = load(&cfg(src, DatasetOrder::Shuffled), 4, 7, d.path()).unwrap();
        let s2 = load(&cfg(src, DatasetOrder::Shuffled), 4, 7, d.path()).unwrap();
        assert_eq!(texts(&s1), texts(&s2));
        let mut sorted = texts(&s1);
        sorted.sort();
        assert_eq!(sorted, ["a", "b", "c", "d"]);
        let e = load(&cfg(src, DatasetOrder::Interleaved), 5, 1, d.path()).unwrap_err();
        assert!(e.to_string().contains("only 4 usable prompts but 5"), "{e}");
    }

    #[test]
    fn jsonl_errors_name_the_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.jsonl");
        std::fs::write(&p, "{\"prompt\": \"a\"}\n{\"answer\": \"b\"}\n").unwrap();
        let e = load(
            &cfg(p.to_str().unwrap(), DatasetOrder::Interleaved),
            2,
            1,
            d.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("p.jsonl:2:") && e.contains("prompt, text"),
            "{e}"
        );
        std::fs::write(&p, "{\"prompt\": \"a\"}\nnot json\n").unwrap();
        let e = load(
            &cfg(p.to_str().unwrap(), DatasetOrder::Interleaved),
            2,
            1,
            d.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("p.jsonl:2: invalid JSON"), "{e}");
    }

    #[test]
    fn unknown_and_missing_sources() {
        let d = tempfile::tempdir().unwrap();
        let e = load(&cfg("nope", DatasetOrder::Interleaved), 1, 1, d.path()).unwrap_err();
        assert!(e.to_string().contains("unknown dataset source `nope`"));
        let e = load(&cfg("sharegpt", DatasetOrder::Interleaved), 1, 1, d.path()).unwrap_err();
        assert!(e.to_string().contains("fetch-assets.sh"));
    }

    #[test]
    fn the_default_prompts_are_compiled_in() {
        // An empty asset directory: the default dataset must not need the cache.
        let d = tempfile::tempdir().unwrap();
        let got = load(
            &cfg("aienergyscore", DatasetOrder::Interleaved),
            1000,
            1,
            d.path(),
        )
        .unwrap();
        assert_eq!(got.prompts.len(), 1000);
        assert!(got.path.is_none());
        assert!(
            texts(&got)[0].starts_with("Du Fu 's work is notable"),
            "{:?}",
            texts(&got)[0]
        );
        let e = load(
            &cfg("aienergyscore", DatasetOrder::Interleaved),
            1001,
            1,
            d.path(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("only 1000 usable prompts"), "{e}");
        // The compiled-in file is the one data/NOTICE names, unchanged.
        use sha2::Digest;
        let digest = sha2::Sha256::digest(AIENERGYSCORE_JSONL.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "99410f8dd50a176a7dfba137a4ff51a4dc555648f76eb377e43e9ba79129d835"
        );
    }

    #[test]
    fn synthetic_lengths_are_seeded_and_near_their_mean() {
        let mut c = cfg("synthetic", DatasetOrder::Interleaved);
        c.synthetic = Some(SyntheticConfig {
            input_tokens: 100,
            output_tokens: 50,
            distribution: LengthDistribution::Lognormal,
            spread: 0.5,
        });
        let d = tempfile::tempdir().unwrap();
        let a = load(&c, 2000, 3, d.path()).unwrap();
        let b = load(&c, 2000, 3, d.path()).unwrap();
        assert_eq!(a.prompts, b.prompts);
        let lens: Vec<f64> = a
            .prompts
            .iter()
            .map(|p| match p.input {
                PromptInput::Tokens { n_tokens, .. } => f64::from(n_tokens),
                PromptInput::Text { .. } | PromptInput::TokenIds(_) => 0.0,
            })
            .collect();
        let mean = lens.iter().sum::<f64>() / lens.len() as f64;
        let sd = (lens.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / lens.len() as f64).sqrt();
        assert!((mean - 100.0).abs() < 4.0, "mean {mean}");
        assert!((sd / mean - 0.5).abs() < 0.08, "cv {}", sd / mean);
        assert!(
            a.prompts
                .iter()
                .all(|p| p.ignore_eos && p.output_tokens.is_some())
        );
        c.synthetic.as_mut().unwrap().distribution = LengthDistribution::Fixed;
        let f = load(&c, 3, 3, d.path()).unwrap();
        assert!(f.prompts.iter().all(|p| p.output_tokens == Some(50)));
    }
}
