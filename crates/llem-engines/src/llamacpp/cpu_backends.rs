//! The portable build's CPU kernels (feature `portable-cpu`): llama.cpp's CPU backend is a
//! set of shared modules, one per x86-64 instruction-set level, and the best one this CPU
//! runs is loaded when the engine starts. Found, in order, in `LLEM_GGML_BACKENDS` (the
//! Python package sets it to the wheel's `_libs`), beside the executable's `../_libs` (the
//! wheel's `_bin/llem`), or where the build put them.

use std::path::{Path, PathBuf};

use crate::engine::EngineError;

/// The environment variable naming the directory of the CPU backend modules.
pub const BACKENDS_ENV: &str = "LLEM_GGML_BACKENDS";

/// The directory given for the CPU backend modules (the environment, or the wheel's layout
/// beside the executable), and how it was found.
fn given_dir() -> Option<(PathBuf, &'static str)> {
    if let Some(d) = std::env::var_os(BACKENDS_ENV).filter(|d| !d.is_empty()) {
        return Some((PathBuf::from(d), BACKENDS_ENV));
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.join("_libs")))
        .filter(|d| d.is_dir())
        .map(|d| (d, "the executable's ../_libs"))
}

/// Loads the CPU backend modules; an error when none could be loaded (llama.cpp would
/// otherwise fail later with no device to run on).
pub fn load() -> Result<(), EngineError> {
    let dir = match given_dir() {
        Some((dir, from)) => {
            let Some(text) = dir.to_str() else {
                return Err(missing(Some(&dir), "its path is not UTF-8"));
            };
            if !dir.is_dir() {
                return Err(missing(
                    Some(&dir),
                    &format!("it does not exist (from {from})"),
                ));
            }
            llama_cpp_2::llama_backend::load_backends_from_path(Path::new(text));
            Some(dir)
        }
        None => {
            // A build run in place: the modules are where the build script put them.
            llama_cpp_2::llama_backend::load_backends();
            None
        }
    };
    let cpu = llama_cpp_2::list_llama_ggml_backend_devices()
        .into_iter()
        .find(|d| matches!(d.device_type, llama_cpp_2::LlamaBackendDeviceType::Cpu));
    match cpu {
        Some(d) => {
            tracing::info!("llama.cpp CPU backend {} ({})", d.name, d.description);
            Ok(())
        }
        None => Err(missing(
            dir.as_deref(),
            "no module there runs on this CPU (libggml-cpu-*.so, SSE4.2 at least)",
        )),
    }
}

fn missing(dir: Option<&Path>, why: &str) -> EngineError {
    EngineError::Load {
        model: String::new(),
        reason: format!(
            "llama.cpp's CPU kernels could not be loaded{}: {why}; set {BACKENDS_ENV} to the \
             directory holding libggml-cpu-*.so",
            dir.map(|d| format!(" from {}", d.display()))
                .unwrap_or_default()
        ),
    }
}
