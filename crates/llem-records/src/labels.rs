//! Labels from what varies: within a study, a configuration is named by the configuration
//! paths whose values differ between the study's runs (`llamacpp.batch_size=4,
//! decoder.preset=creative`), the way the live study display names cells; a run alone, or a
//! study whose runs share one configuration, by its model and engine.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use super::run::LlmRun;
use llem_results::manifest::Manifest;

/// Every scalar of `v` by dotted path, in key order; lists as their JSON text.
fn leaves(v: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(x, &path, out);
            }
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The configuration paths whose values differ between `configs`, in path order.
pub fn varying_paths<'a>(configs: impl Iterator<Item = &'a Value>) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    let mut seen: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    let mut n = 0usize;
    for c in configs {
        n += 1;
        let mut l = Vec::new();
        leaves(c, "", &mut l);
        for (path, value) in l {
            let values = seen.entry(path.clone()).or_insert_with(|| {
                order.push(path.clone());
                BTreeMap::new()
            });
            *values.entry(value).or_default() += 1;
        }
    }
    // A path some configurations lack differs too (it counts as null there).
    order
        .into_iter()
        .filter(|p| {
            seen.get(p)
                .is_some_and(|values| values.len() > 1 || values.values().sum::<usize>() < n)
        })
        .collect()
}

/// `path=value, ...` of `config` over `paths`.
pub fn label_of(config: &Value, paths: &[String]) -> String {
    paths
        .iter()
        .map(|p| {
            let v = p.split('.').try_fold(config, |v, k| v.get(k));
            let shown = match v {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "null".into(),
            };
            format!("{p}={shown}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The labels the study's plan gave its cells (`config_summary` in `manifest.json`: the
/// swept fields as the user wrote them), by cell directory name.
fn planned_labels(result_json: &Path) -> HashMap<String, String> {
    let Some(study_dir) = result_json.parent().and_then(Path::parent) else {
        return HashMap::new();
    };
    let manifest: Option<Manifest> =
        llem_config::files::read_record(study_dir.join(llem_results::layout::MANIFEST))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
    manifest
        .map(|m| {
            m.experiments
                .into_iter()
                .filter(|e| !e.config_summary.is_empty())
                .filter_map(|e| {
                    let dir = Path::new(&e.cell_dir)
                        .file_name()?
                        .to_string_lossy()
                        .into_owned();
                    Some((dir, e.config_summary))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `label` on every llem run that has a configuration, study by study: the plan's label
/// from the study's manifest, else the configuration paths that vary between its runs.
pub fn assign(runs: &mut [LlmRun]) {
    let mut by_study: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        if r.extra.config.is_some() {
            by_study.entry(r.extra.study.clone()).or_default().push(i);
        }
    }
    for idx in by_study.values() {
        let paths = varying_paths(
            idx.iter()
                .filter_map(|i| runs.get(*i)?.extra.config.as_deref()),
        );
        // Only llem's manifest holds plan labels (llem 0.7's `config_summary` is a cut-off
        // `model / engine / fields...` string that two configurations can share).
        let planned = idx
            .first()
            .and_then(|i| runs.get(*i))
            .filter(|r| r.extra.source == Some(super::run::RunSource::Llem))
            .map(|r| planned_labels(Path::new(&r.results_path)))
            .unwrap_or_default();
        for i in idx {
            let Some(r) = runs.get_mut(*i) else { continue };
            let cell = Path::new(&r.results_path)
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let label = match (planned.get(&cell), &r.extra.config, paths.is_empty()) {
                (Some(l), _, _) => l.clone(),
                (None, Some(c), false) => label_of(c, &paths),
                _ => format!(
                    "{} / {}",
                    r.nickname,
                    r.extra.engine.as_deref().unwrap_or("?")
                ),
            };
            r.extra.label = Some(label);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_varies_names_each_configuration() {
        let a = json!({"model": "m", "llamacpp": {"batch_size": 1}, "decoder": {"preset": "deterministic", "top_k": 1}});
        let b = json!({"model": "m", "llamacpp": {"batch_size": 4}, "decoder": {"preset": "creative", "top_k": 50}});
        let c = json!({"model": "m", "llamacpp": {"batch_size": 4}, "decoder": {"preset": "deterministic", "top_k": 1}});
        let paths = varying_paths([&a, &b, &c].into_iter());
        assert_eq!(
            paths,
            ["decoder.preset", "decoder.top_k", "llamacpp.batch_size"]
        );
        assert_eq!(
            label_of(&b, &paths),
            "decoder.preset=creative, decoder.top_k=50, llamacpp.batch_size=4"
        );
        // A field only some have is a difference too.
        let d = json!({"model": "m", "traffic": {"rate_qps": 2.5}});
        let e = json!({"model": "m"});
        let p = varying_paths([&d, &e].into_iter());
        assert_eq!(p, ["traffic.rate_qps"]);
        assert_eq!(label_of(&e, &p), "traffic.rate_qps=null");
        assert!(varying_paths([&a, &a].into_iter()).is_empty());
    }
}
