//! Planning: a file (or overrides alone) into a [`StudyPlan`], and what a front end shows of
//! it before anything runs.

use llem_config::{Env, PlanRequest, StudyPlan};

use crate::{AppError, PlanOptions};

/// Plans what `opts` name, with the user config and `LLEM_*` variables of `env`. A
/// configuration file that is not there is [`AppError::ConfigNotFound`].
pub fn plan(opts: &PlanOptions, env: &Env) -> Result<StudyPlan, AppError> {
    llem_config::plan(&PlanRequest {
        config: opts.config.as_deref(),
        config_dir: opts.config_dir.as_deref(),
        overrides: opts.overrides.clone(),
        dedup: opts.dedup,
        env,
    })
    .map_err(|e| match &opts.config {
        Some(file) if !file.exists() => AppError::ConfigNotFound {
            path: file.clone(),
            error: e,
        },
        _ => AppError::Config(e),
    })
}

/// Whether the plan is one experiment, measured in the calling process ([`crate::run_one`]);
/// anything else is a study of cells in child processes.
pub fn is_single(plan: &StudyPlan) -> bool {
    plan.runs.len() == 1
}

/// The plan as `llem run --dry-run --json` prints it, with device memory estimates.
pub fn to_json(plan: &StudyPlan, per_run_config: bool) -> Result<String, AppError> {
    let mut plan = plan.clone();
    crate::memory::fill(&mut plan);
    let view = llem_config::plan::PlanJson {
        plan: &plan,
        per_run_config,
    };
    serde_json::to_string(&view).map_err(|e| AppError::Io {
        what: "cannot serialise the plan of",
        path: plan.source.clone().unwrap_or_default(),
        source: e.into(),
    })
}

/// The plan's warnings, each once: with the configurations it applies to, or "every
/// configuration" when it applies to all.
pub fn warnings(plan: &StudyPlan) -> Vec<String> {
    collapse_warnings(
        plan.configs
            .iter()
            .map(|pc| (pc.label.as_str(), pc.warnings.as_slice())),
    )
}

/// `(label, warnings)` of each configuration → each warning once, saying where it applies.
fn collapse_warnings<'a>(configs: impl Iterator<Item = (&'a str, &'a [String])>) -> Vec<String> {
    let mut by_text: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut n = 0usize;
    for (label, warnings) in configs {
        n += 1;
        for w in warnings {
            match by_text.iter_mut().find(|(t, _)| *t == w.as_str()) {
                Some((_, labels)) => labels.push(label),
                None => by_text.push((w.as_str(), vec![label])),
            }
        }
    }
    by_text
        .into_iter()
        .map(|(w, labels)| {
            if n > 1 && labels.len() == n {
                format!("{w} (every configuration)")
            } else if labels.len() > 3 {
                format!("{w} ({} configurations)", labels.len())
            } else {
                let named: Vec<&str> = labels.into_iter().filter(|l| !l.is_empty()).collect();
                if named.is_empty() {
                    w.to_string()
                } else {
                    format!("{}: {w}", named.join("; "))
                }
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_of_every_configuration_is_said_once() {
        let floor = vec!["thermal floor below 30 s".to_string()];
        let both = vec![
            "thermal floor below 30 s".to_string(),
            "dtype has no effect".to_string(),
        ];
        let configs = [("batch=1", floor.as_slice()), ("batch=4", both.as_slice())];
        assert_eq!(
            collapse_warnings(configs.into_iter()),
            [
                "thermal floor below 30 s (every configuration)",
                "batch=4: dtype has no effect"
            ]
        );
    }

    #[test]
    fn a_missing_file_is_not_found_and_a_bad_one_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::from_pairs([("HOME".to_string(), dir.path().display().to_string())]);
        let missing = PlanOptions {
            config: Some(dir.path().join("nothere.yaml")),
            dedup: true,
            ..PlanOptions::default()
        };
        let e = plan(&missing, &env).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("nothere.yaml"), "{e}");
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "model: m\nengine: llamacpp\ndatset: {}\n").unwrap();
        let e = plan(
            &PlanOptions {
                config: Some(bad),
                dedup: true,
                ..PlanOptions::default()
            },
            &env,
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Config);
        let d = e.diagnostics().first().unwrap();
        assert_eq!(
            d.location.as_ref().map(|l| (l.line, l.column)),
            Some((3, 1))
        );
        assert!(d.help.as_deref().unwrap_or("").contains("dataset"), "{d:?}");
    }
}
