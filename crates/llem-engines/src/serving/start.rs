//! The command that starts a server: checked before anything runs, then built for a local
//! process or a container from the engine's [`ServerSpec`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use llem_config::{ExperimentConfig, RunnerSpec};

use super::ServeOptions;
use super::engines::{LocalProgram, ServerSpec};
use super::flags::{self, ModelArg};
use crate::LaunchError;
use crate::engine::EngineError;
use crate::launch::{self, ServerProcess};

/// Where `llama-server` is: the option, `PATH`, or the tool cache of
/// `scripts/build-llama-server.sh`.
pub fn find_llama_server(explicit: Option<&PathBuf>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.clone());
    }
    launch::which("llama-server").or_else(|| {
        let tools = std::env::var_os("LLEM_TOOLS")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::assets::cache_dir().join("tools"));
        let p = tools.join("bin/llama-server");
        p.is_file().then_some(p)
    })
}

/// Checks, without starting anything, that `cfg`'s server can be started here: its CLI (or
/// `docker`) is installed. `Ok` for external URLs. `spec`: the engine's, from the registry.
pub fn check_launchable(
    cfg: &ExperimentConfig,
    spec: Option<&ServerSpec>,
    opts: &ServeOptions,
) -> Result<(), LaunchError> {
    match (cfg.runner(), spec) {
        (Some(RunnerSpec::External { .. }), _) => Ok(()),
        (None, _) => Err(LaunchError::NeedsUrl(cfg.engine)),
        (Some(RunnerSpec::Embedded), _) => Err(LaunchError::NotAServer(cfg.engine)),
        (Some(_), None) => Err(LaunchError::NoLocalServer(cfg.engine)),
        (Some(RunnerSpec::Docker { .. }), Some(_)) => launch::which("docker")
            .map(|_| ())
            .ok_or(LaunchError::NoDocker),
        (Some(RunnerSpec::Local), Some(spec)) => local_program_exists(cfg, spec, opts),
    }
}

fn local_program_exists(
    cfg: &ExperimentConfig,
    spec: &ServerSpec,
    opts: &ServeOptions,
) -> Result<(), LaunchError> {
    let program = match spec.local {
        LocalProgram::Cli(argv) => argv.first().copied().unwrap_or_default().to_string(),
        LocalProgram::PythonModule(_) => opts.python.clone(),
        LocalProgram::LlamaServer => {
            return find_llama_server(opts.llama_server.as_ref())
                .map(|_| ())
                .ok_or(LaunchError::NoLlamaServer {
                    engine: cfg.engine,
                    hint: spec.install_hint,
                });
        }
    };
    launch::which(&program)
        .map(|_| ())
        .ok_or(LaunchError::NotInstalled {
            engine: cfg.engine,
            program,
            hint: spec.install_hint,
        })
}

/// A server process that was started, not yet healthy.
pub(super) struct Launched {
    /// Where it listens.
    pub base_url: String,
    /// The process (a local server, or `docker run` attached to the container).
    pub process: ServerProcess,
    /// The container's name, for a supervisor that must remove it.
    pub container: Option<String>,
}

/// Starts `spec`'s server for `cfg` as `runner` says (local or docker), logging to `log`.
/// `model_file` is the GGUF an engine serving files (llama-server) is given.
pub(super) fn launch(
    spec: &ServerSpec,
    cfg: &ExperimentConfig,
    model_file: Option<PathBuf>,
    runner: &RunnerSpec,
    opts: &ServeOptions,
    log: &Path,
) -> Result<Launched, EngineError> {
    let model = match (model_file, spec.local) {
        (Some(f), LocalProgram::LlamaServer) => ModelArg::File(f),
        _ => ModelArg::Name(cfg.model.clone()),
    };
    let port = launch::free_port()?;
    let base_url = format!("http://127.0.0.1:{port}");
    match runner {
        RunnerSpec::Docker { image } => {
            let image = image
                .clone()
                .or_else(|| cfg.images.get(&cfg.engine).cloned())
                .unwrap_or_else(|| spec.default_image.to_string());
            let (argv, name) = docker_argv(spec, cfg, &model, &image, port, opts)?;
            tracing::info!(command = %argv.join(" "), "starting container");
            let process = ServerProcess::spawn_container(&argv, &name, log)?;
            Ok(Launched {
                base_url,
                process,
                container: Some(name),
            })
        }
        RunnerSpec::Local => {
            let argv = local_argv(spec, cfg, &model, port, opts)?;
            tracing::info!(command = %argv.join(" "), "starting server");
            let env: Vec<(String, String)> = reset_env(spec);
            let process = ServerProcess::spawn_local(&argv, &env, log)?;
            Ok(Launched {
                base_url,
                process,
                container: None,
            })
        }
        RunnerSpec::Embedded | RunnerSpec::External { .. } => Err(EngineError::Config(format!(
            "engine `{}` with runner `{runner}` is not a server llem starts",
            cfg.engine
        ))),
    }
}

/// What the server's process needs in its environment (its prefix-cache reset route).
fn reset_env(spec: &ServerSpec) -> Vec<(String, String)> {
    spec.prefix_cache_reset
        .map(|r| r.env())
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// The argv of a local server on `127.0.0.1:port`, writing its extra options file into the
/// work directory when the engine takes one.
fn local_argv(
    spec: &ServerSpec,
    cfg: &ExperimentConfig,
    model: &ModelArg,
    port: u16,
    opts: &ServeOptions,
) -> Result<Vec<String>, EngineError> {
    let cl = flags::command_line(spec, cfg, model, "127.0.0.1", port, &opts.python)
        .map_err(|e| EngineError::Config(e.to_string()))?;
    let mut argv = cl.program.clone();
    if matches!(spec.local, LocalProgram::LlamaServer)
        && let Some(p) = find_llama_server(opts.llama_server.as_ref())
    {
        argv = vec![p.display().to_string()];
    }
    argv.extend(cl.args.iter().cloned());
    if let Some((flag, value)) = &cl.extra_options {
        let path = opts.work_dir.join("engine_extra_options.yaml");
        write_extra(&path, value)?;
        argv.extend([flag.clone(), path.display().to_string()]);
    }
    Ok(argv)
}

fn write_extra(path: &Path, value: &Value) -> Result<(), EngineError> {
    // JSON is YAML, and TensorRT-LLM reads this file as YAML.
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    llem_results::write_atomic(path, text.as_bytes())
        .map_err(|e| EngineError::Config(format!("cannot write {}: {e}", path.display())))
}

/// `docker run` for `cfg`: named and labelled, GPUs as CUDA_VISIBLE_DEVICES says, host IPC,
/// the port published on loopback, the model cache mounted, removed on exit.
fn docker_argv(
    spec: &ServerSpec,
    cfg: &ExperimentConfig,
    model: &ModelArg,
    image: &str,
    port: u16,
    opts: &ServeOptions,
) -> Result<(Vec<String>, String), EngineError> {
    let mut model = model.clone();
    let mut mounts: Vec<String> = Vec::new();
    if let ModelArg::File(f) = &model {
        let dir = f
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        mounts.extend(["-v".into(), format!("{dir}:/models:ro")]);
        model = ModelArg::File(PathBuf::from("/models").join(name));
    }
    let inner = spec.container_port;
    let cl = flags::command_line(spec, cfg, &model, "0.0.0.0", inner, "python3")
        .map_err(|e| EngineError::Config(e.to_string()))?;
    let name = format!("llem-{}-{}-{}", cfg.engine, std::process::id(), port);
    let cache = launch::hf_cache(opts.model_cache_dir.as_ref());
    let mut argv = launch::docker_run(
        "docker",
        &name,
        cfg.engine,
        false,
        (spec.wants_gpus)(cfg).then(launch::docker_gpus),
        cache.as_deref(),
    );
    argv.extend(["-p".into(), format!("127.0.0.1:{port}:{inner}")]);
    for (k, v) in reset_env(spec) {
        argv.extend(["-e".into(), format!("{k}={v}")]);
    }
    argv.extend(mounts);
    if let Some((flag, value)) = &cl.extra_options {
        let host_path = opts.work_dir.join("engine_extra_options.yaml");
        write_extra(&host_path, value)?;
        argv.extend([
            "-v".into(),
            format!("{}:/llem/extra_options.yaml:ro", host_path.display()),
        ]);
        argv.push(image.into());
        argv.extend(cl.container_entry.iter().cloned());
        argv.extend(cl.args.iter().cloned());
        argv.extend([flag.clone(), "/llem/extra_options.yaml".into()]);
    } else {
        argv.push(image.into());
        argv.extend(cl.container_entry.iter().cloned());
        argv.extend(cl.args.iter().cloned());
    }
    Ok((argv, name))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::serving::engines::{llama_server, vllm};
    use serde_json::json;

    fn cfg(v: Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn docker_runs_are_named_labelled_published_on_loopback_and_mounted() {
        let c = cfg(
            json!({"model": "meta-llama/Llama-3.1-8B-Instruct", "engine": "vllm",
            "runners": {"vllm": "docker"}, "vllm": {"engine": {"max_num_seqs": 64}}}),
        );
        let mut opts = ServeOptions::new(std::env::temp_dir());
        opts.model_cache_dir = Some(PathBuf::from("/data/hf"));
        let (argv, name) = docker_argv(
            &vllm::SPEC,
            &c,
            &ModelArg::Name(c.model.clone()),
            "vllm/vllm-openai:v0.11.0",
            40123,
            &opts,
        )
        .unwrap();
        let a = argv.join(" ");
        assert!(a.starts_with("docker run --rm --name llem-vllm-"), "{a}");
        assert!(name.starts_with("llem-vllm-"));
        for want in [
            "--label llem=1",
            "--ipc host",
            "-p 127.0.0.1:40123:8000",
            "-v /data/hf:/root/.cache/huggingface",
            "vllm/vllm-openai:v0.11.0 meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 8000",
            "--max-num-seqs 64",
            // vLLM serves its prefix-cache reset route in dev mode only.
            "-e VLLM_SERVER_DEV_MODE=1",
        ] {
            assert!(a.contains(want), "{want} not in {a}");
        }
        assert!(a.contains("--gpus"));
        // A GGUF is mounted read-only and named inside the container; a CPU llama.cpp run
        // asks for no GPU.
        let l = cfg(
            json!({"model": "x.gguf", "engine": "llamacpp", "runners": {"llamacpp": "docker"}}),
        );
        let (argv, _) = docker_argv(
            &llama_server::SPEC,
            &l,
            &ModelArg::File(PathBuf::from("/models/dir/x.gguf")),
            "ghcr.io/ggml-org/llama.cpp:server",
            40124,
            &opts,
        )
        .unwrap();
        let a = argv.join(" ");
        assert!(
            a.contains("-v /models/dir:/models:ro") && a.contains("-m /models/x.gguf"),
            "{a}"
        );
        assert!(!a.contains("--gpus"), "{a}");
        assert!(a.contains("-p 127.0.0.1:40124:8080"));
    }

    #[test]
    fn launchability_names_what_is_missing() {
        let opts = ServeOptions::new(std::env::temp_dir());
        let v = cfg(json!({"model": "m", "engine": "vllm", "runners": {"vllm": "local"}}));
        if launch::which("vllm").is_none() {
            let e = check_launchable(&v, crate::registry::server(v.engine), &opts)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("`vllm` is not on PATH") && e.contains("pip install vllm"),
                "{e}"
            );
        }
        let ext = cfg(
            json!({"model": "m", "engine": "openai", "runners": {"openai": "external:http://127.0.0.1:9"}}),
        );
        assert!(check_launchable(&ext, crate::registry::server(ext.engine), &opts).is_ok());
    }
}
