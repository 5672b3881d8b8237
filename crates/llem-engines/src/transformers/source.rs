//! Where the worker loads from (a local directory, a GGUF file, a hub id) and whether the
//! configured Python can run it at all; both checked before anything starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use llem_config::ExperimentConfig;

use crate::assets;

/// What `from_pretrained` gets.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSource {
    /// Hub id or local directory.
    pub model: String,
    /// GGUF file inside `model`.
    pub gguf_file: Option<String>,
    /// Size of the GGUF file, when local.
    pub file_size_bytes: Option<u64>,
    /// The local file or directory, when there is one.
    pub local: Option<PathBuf>,
}

fn looks_like_path(model: &str) -> bool {
    model.starts_with('/')
        || model.starts_with("./")
        || model.starts_with("../")
        || model.starts_with('~')
        || model.ends_with(".gguf")
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Resolves `cfg.model` for the worker: a directory is loaded as is; a `.gguf` file (a path
/// or a name in the asset cache) becomes its directory plus `gguf_file`; anything else is a
/// hub id, which transformers finds in its own cache.
pub fn resolve_source(cfg: &ExperimentConfig, assets_dir: &Path) -> Result<ModelSource, String> {
    let gguf = cfg
        .transformers
        .as_deref()
        .and_then(|t| t.gguf_file.clone());
    let model = cfg.model.trim();
    let p = Path::new(model);
    if p.is_dir() {
        let dir = absolute(p);
        let size = match &gguf {
            Some(g) => {
                let f = dir.join(g);
                let meta = std::fs::metadata(&f).map_err(|e| {
                    format!(
                        "transformers.gguf_file `{g}` is not in {}: {e}",
                        dir.display()
                    )
                })?;
                Some(meta.len())
            }
            None => None,
        };
        return Ok(ModelSource {
            model: dir.display().to_string(),
            gguf_file: gguf,
            file_size_bytes: size,
            local: Some(dir),
        });
    }
    if let Some(file) = assets::resolve_model(model, assets_dir) {
        let file = absolute(&file);
        let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
            return Err(format!("model `{model}`: cannot split {}", file.display()));
        };
        let name = name.to_string_lossy().to_string();
        if let Some(g) = gguf.as_ref().filter(|g| **g != name) {
            return Err(format!(
                "model `{model}` is the file {name} but transformers.gguf_file names `{g}`; \
                 give the directory as `model`, or drop gguf_file"
            ));
        }
        if !name.ends_with(".gguf") {
            return Err(format!(
                "model `{model}` is a file; the transformers engine loads a model directory, \
                 a hub id, or a .gguf file"
            ));
        }
        return Ok(ModelSource {
            model: dir.display().to_string(),
            gguf_file: Some(name),
            file_size_bytes: std::fs::metadata(&file).ok().map(|m| m.len()),
            local: Some(file),
        });
    }
    if looks_like_path(model) {
        return Err(format!(
            "model `{model}` not found: not a directory or file, and not in the asset cache {}",
            assets_dir.display()
        ));
    }
    Ok(ModelSource {
        model: model.to_string(),
        gguf_file: gguf,
        file_size_bytes: None,
        local: None,
    })
}

/// The pip command that gives `python` what the worker imports, plus `extra` packages (`gguf`
/// for GGUF models), or where else to point llem.
pub(super) fn install_advice(python: &str, extra: Option<&str>) -> String {
    let extra = extra.map(|p| format!(" {p}")).unwrap_or_default();
    format!(
        "`{python} -m pip install torch transformers accelerate{extra}`, or point `python:` in \
         the user config or LLEM_PYTHON at a Python that has them"
    )
}

/// Results of import probes, per interpreter and module list: a study checks every
/// configuration, and importing torch takes seconds.
static PROBES: Mutex<BTreeMap<String, Result<(), String>>> = Mutex::new(BTreeMap::new());

/// Checks that `python` starts and imports torch and transformers (and gguf when `gguf`),
/// with the pip command to run when it does not.
pub fn check_python(python: &str, gguf: bool) -> Result<(), String> {
    let modules: &[&str] = if gguf {
        &["torch", "transformers", "gguf"]
    } else {
        &["torch", "transformers"]
    };
    let key = format!("{python}\u{0}{}", modules.join(","));
    if let Some(r) = PROBES.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return r;
    }
    let script = format!(
        "import importlib, sys\nmissing = []\nfor m in {modules:?}:\n    try:\n        \
         importlib.import_module(m)\n    except Exception as e:\n        \
         missing.append('%s (%s: %s)' % (m, type(e).__name__, e))\nprint('; '.join(missing))\n"
    );
    let out = Command::new(python)
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output();
    let result = match out {
        Err(e) => Err(format!(
            "the transformers engine needs Python: cannot run `{python}`: {e}. Set `python:` in \
             the user config or LLEM_PYTHON to a Python 3 with torch and transformers"
        )),
        Ok(o) if !o.status.success() => Err(format!(
            "`{python}` failed to start: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(o) => {
            let missing = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "the transformers engine's Python `{python}` cannot import {missing}. \
                     Install them: {}",
                    install_advice(python, gguf.then_some("gguf"))
                ))
            }
        }
    };
    if let Ok(mut m) = PROBES.lock() {
        m.insert(key, result.clone());
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn cfg(model: &str, gguf: Option<&str>) -> ExperimentConfig {
        let mut v = serde_json::json!({"model": model, "engine": "transformers"});
        if let Some(g) = gguf {
            v["transformers"] = serde_json::json!({"gguf_file": g});
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn directories_gguf_files_and_hub_ids() {
        let d = tempfile::tempdir().unwrap();
        let assets = d.path().join("assets");
        std::fs::create_dir_all(assets.join("smol")).unwrap();
        std::fs::write(assets.join("smol/m.gguf"), b"GGUF1234").unwrap();
        // A bare name from the asset cache: its directory plus gguf_file.
        let s = resolve_source(&cfg("m.gguf", None), &assets).unwrap();
        assert_eq!(s.gguf_file.as_deref(), Some("m.gguf"));
        assert!(s.model.ends_with("smol"));
        assert_eq!(s.file_size_bytes, Some(8));
        // A directory with gguf_file.
        let dir = assets.join("smol");
        let s = resolve_source(&cfg(dir.to_str().unwrap(), Some("m.gguf")), &assets).unwrap();
        assert_eq!(s.gguf_file.as_deref(), Some("m.gguf"));
        let e = resolve_source(&cfg(dir.to_str().unwrap(), Some("x.gguf")), &assets).unwrap_err();
        assert!(e.contains("`x.gguf` is not in"), "{e}");
        // A hub id passes through; a missing path does not.
        let s = resolve_source(&cfg("HuggingFaceTB/SmolLM2-135M-Instruct", None), &assets).unwrap();
        assert_eq!(s.model, "HuggingFaceTB/SmolLM2-135M-Instruct");
        assert!(s.local.is_none());
        let e = resolve_source(&cfg("./nowhere/model", None), &assets).unwrap_err();
        assert!(e.contains("not found"), "{e}");
    }

    #[test]
    fn a_python_without_torch_gets_the_pip_command() {
        let e = check_python("/nonexistent/python3", false).unwrap_err();
        assert!(e.contains("cannot run `/nonexistent/python3`"), "{e}");
        // The system Python of a fresh machine has no torch; a venv made here has none either.
        let d = tempfile::tempdir().unwrap();
        let fake = d.path().join("python");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'torch (ModuleNotFoundError: No module named torch)'\n",
        )
        .unwrap();
        let mut perm = std::fs::metadata(&fake).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&fake, perm).unwrap();
        let e = check_python(fake.to_str().unwrap(), true).unwrap_err();
        assert!(e.contains("cannot import torch"), "{e}");
        assert!(
            e.contains("-m pip install torch transformers accelerate gguf"),
            "{e}"
        );
    }
}
