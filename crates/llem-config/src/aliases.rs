//! Other spellings of keys, accepted in YAML and rewritten to the canonical key before typing.
//!
//! The seed writes `pytorch:` for the transformers section and `tensorrt.quant_config` for
//! `tensorrt.quant`; vLLM and Python-llem users write `speculative:` / `backend:`. Rewriting
//! the tree (instead of serde aliases) keeps one spelling in resolved configs, hashes and
//! error paths.

use crate::error::{Diagnostic, ErrorKind};
use crate::model::Engine;
use crate::source::SourceMap;
use crate::yaml::Node;

/// One accepted alias.
pub struct KeyAlias {
    /// Path of the mapping the key lives in (canonical keys).
    pub parent: &'static [&'static str],
    /// Name of that mapping's type in the JSON Schema (`None` = the experiment itself).
    pub schema_def: Option<&'static str>,
    /// The other spelling.
    pub alias: &'static str,
    /// The canonical key.
    pub canonical: &'static str,
}

/// Every accepted alias.
pub const KEY_ALIASES: &[KeyAlias] = &[
    KeyAlias {
        parent: &[],
        schema_def: None,
        alias: "pytorch",
        canonical: "transformers",
    },
    KeyAlias {
        parent: &["tensorrt"],
        schema_def: Some("TensorRtConfig"),
        alias: "quant_config",
        canonical: "quant",
    },
    KeyAlias {
        parent: &["tensorrt"],
        schema_def: Some("TensorRtConfig"),
        alias: "backend",
        canonical: "engine",
    },
    KeyAlias {
        parent: &["vllm", "engine"],
        schema_def: Some("VllmEngineConfig"),
        alias: "speculative",
        canonical: "speculative_config",
    },
    KeyAlias {
        parent: &["vllm", "engine", "attention"],
        schema_def: Some("VllmAttentionConfig"),
        alias: "backend",
        canonical: "engine",
    },
    KeyAlias {
        parent: &["measurement"],
        schema_def: Some("MeasurementConfig"),
        alias: "measurement_methodology",
        canonical: "methodology",
    },
    KeyAlias {
        parent: &["measurement"],
        schema_def: Some("MeasurementConfig"),
        alias: "measurement_window",
        canonical: "window",
    },
];

/// Top-level keys accepted only as another spelling: seed 001's `output:` block of an
/// experiment (`save_timeseries`, `results_dir`).
pub const ROOT_ALIAS_KEYS: &[&str] = &["output"];

/// The seed's `output:` block, rewritten onto llem's own keys: `output.save_timeseries` is
/// `gpu_telemetry`, `output.results_dir` is `output_dir`.
const OUTPUT_KEYS: [(&str, &str); 2] = [
    ("save_timeseries", "gpu_telemetry"),
    ("results_dir", "output_dir"),
];

fn normalize_output_block(tree: &mut Node, sources: &SourceMap) -> Result<(), Diagnostic> {
    let Some(root) = tree.as_map() else {
        return Ok(());
    };
    let Some(block) = root.entry("output") else {
        return Ok(());
    };
    let mut moved = Vec::new();
    if !block.value.is_null() {
        let Some(map) = block.value.as_map() else {
            return Err(Diagnostic::new(
                ErrorKind::Type,
                format!(
                    "`output` must be a mapping (save_timeseries, results_dir), found {}",
                    block.value.describe()
                ),
            )
            .at(sources.location(block.value.span)));
        };
        for e in &map.entries {
            let Some((_, canonical)) = OUTPUT_KEYS.iter().find(|(k, _)| *k == &*e.key) else {
                let mut d = Diagnostic::new(
                    ErrorKind::UnknownKey,
                    format!(
                        "unknown key `output.{}`: an experiment's `output:` takes save_timeseries and results_dir",
                        e.key
                    ),
                )
                .at(sources.location(e.key_span));
                if let Some(c) =
                    crate::error::did_you_mean(&e.key, OUTPUT_KEYS.iter().map(|(k, _)| *k))
                {
                    d = d.with_help(format!("did you mean `{c}`?"));
                }
                return Err(d);
            };
            if root.contains(canonical) {
                return Err(Diagnostic::new(
                    ErrorKind::Type,
                    format!(
                        "`output.{}` and `{canonical}` are the same setting; give only one",
                        e.key
                    ),
                )
                .at(sources.location(e.key_span)));
            }
            moved.push((*canonical, e.key_span, e.value.clone()));
        }
    }
    if let Some(m) = tree.as_map_mut() {
        m.remove("output");
        for (key, span, value) in moved {
            m.insert(key, span, value);
        }
    }
    Ok(())
}

/// Rewrites alias keys of an experiment tree to their canonical spelling, in place (seed
/// 001's `output:` block included). Both spellings in one mapping is an error.
pub fn normalize_keys(tree: &mut Node, sources: &SourceMap) -> Result<(), Diagnostic> {
    normalize_output_block(tree, sources)?;
    normalize_aliases(tree, sources)
}

/// The key aliases of [`normalize_keys`] without the `output:` block, whose keys in the user
/// config file (`output.results_dir`) are that file's own.
pub fn normalize_aliases(tree: &mut Node, sources: &SourceMap) -> Result<(), Diagnostic> {
    for a in KEY_ALIASES {
        // Look first, write only when needed: trees share structure across grid points.
        let needs = tree
            .get_path(a.parent)
            .and_then(Node::as_map)
            .is_some_and(|m| m.contains(a.alias));
        if !needs {
            continue;
        }
        let Some(map) = tree.get_path_mut(a.parent).and_then(Node::as_map_mut) else {
            continue;
        };
        if let Some(existing) = map.entry(a.canonical) {
            let span = map.entry(a.alias).map_or(existing.key_span, |e| e.key_span);
            return Err(Diagnostic::new(
                ErrorKind::Type,
                format!(
                    "`{}` and `{}` are the same key; give only one",
                    a.alias, a.canonical
                ),
            )
            .at(sources.location(span)));
        }
        if let Some(mut entry) = map.remove(a.alias) {
            entry.key = a.canonical.into();
            map.entries.push(entry);
        }
    }
    for parent in ["runners", "images"] {
        normalize_engine_keys(tree, parent, sources)?;
    }
    Ok(())
}

/// Rewrites engine aliases used as keys (`runners: {pytorch: docker}`) to engine names, so
/// a value from the user config can never shadow the one written under the alias.
fn normalize_engine_keys(
    tree: &mut Node,
    parent: &str,
    sources: &SourceMap,
) -> Result<(), Diagnostic> {
    let renames: Vec<(String, &'static str)> = match tree.get_path(&[parent]).and_then(Node::as_map)
    {
        Some(m) => m
            .entries
            .iter()
            .filter_map(|e| {
                let engine = Engine::from_name(&e.key)?;
                (engine.as_str() != &*e.key).then(|| (e.key.to_string(), engine.as_str()))
            })
            .collect(),
        None => return Ok(()),
    };
    if renames.is_empty() {
        return Ok(());
    }
    let Some(map) = tree.get_path_mut(&[parent]).and_then(Node::as_map_mut) else {
        return Ok(());
    };
    for (alias, canonical) in renames {
        if map.contains(canonical) {
            let span = map.entry(&alias).map_or(
                map.entries
                    .first()
                    .map(|e| e.key_span)
                    .unwrap_or(crate::source::Span::whole(crate::source::SourceId(0))),
                |e| e.key_span,
            );
            return Err(Diagnostic::new(
                ErrorKind::Type,
                format!("`{parent}.{alias}` and `{parent}.{canonical}` name the same engine; give only one"),
            )
            .at(sources.location(span)));
        }
        if let Some(mut entry) = map.remove(&alias) {
            entry.key = canonical.into();
            map.entries.push(entry);
        }
    }
    Ok(())
}

/// The canonical form of a dotted path written in a sweep (`pytorch.batch_size` ->
/// `transformers.batch_size`).
pub fn canonical_path(segments: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(segments.len());
    for seg in segments {
        let parent: Vec<&str> = out.iter().map(String::as_str).collect();
        let canonical = KEY_ALIASES
            .iter()
            .find(|a| a.alias == *seg && a.parent == parent.as_slice())
            .map_or(*seg, |a| a.canonical);
        out.push(canonical.to_string());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::source::SourceId;
    use crate::yaml::parse;

    #[test]
    fn rewrites_aliases() {
        let mut t = parse(
            "pytorch: {batch_size: 2}\ntensorrt: {quant_config: {quant_algo: INT8}}\n",
            SourceId(0),
        )
        .unwrap();
        normalize_keys(&mut t, &SourceMap::new()).unwrap();
        assert!(t.get_path(&["transformers", "batch_size"]).is_some());
        assert!(t.get_path(&["tensorrt", "quant", "quant_algo"]).is_some());
        assert!(t.get_path(&["pytorch"]).is_none());
    }

    #[test]
    fn both_spellings_is_an_error() {
        let mut t = parse("pytorch: {}\ntransformers: {}\n", SourceId(0)).unwrap();
        assert!(normalize_keys(&mut t, &SourceMap::new()).is_err());
    }

    #[test]
    fn canonical_paths() {
        assert_eq!(
            canonical_path(&["pytorch", "batch_size"]),
            ["transformers", "batch_size"]
        );
        assert_eq!(
            canonical_path(&["tensorrt", "quant_config", "quant_algo"]),
            ["tensorrt", "quant", "quant_algo"]
        );
        assert_eq!(
            canonical_path(&["vllm", "engine", "attention", "backend"]),
            ["vllm", "engine", "attention", "engine"]
        );
        assert_eq!(
            canonical_path(&["dataset", "n_prompts"]),
            ["dataset", "n_prompts"]
        );
    }
}
