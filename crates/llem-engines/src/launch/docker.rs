//! The `docker run` rules every containerised engine shares: naming and labels, GPUs, host
//! IPC, the Hugging Face cache and the hub token.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use llem_config::Engine as EngineName;

/// `docker run --gpus` value: the devices `CUDA_VISIBLE_DEVICES` names, else all.
pub fn docker_gpus() -> String {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) if !v.trim().is_empty() => format!("\"device={}\"", v.trim()),
        _ => "all".into(),
    }
}

/// The start of every `docker run` llem makes: removed on exit, `-i` when llem talks to it on
/// stdin, named, labelled (`docker ps --filter label=llem` finds them all), `--gpus` when
/// given, host IPC (NCCL and torch's shared-memory tensors need it), the Hugging Face cache,
/// and the hub token passed by name.
pub fn docker_run(
    docker: &str,
    name: &str,
    engine: EngineName,
    attach_stdin: bool,
    gpus: Option<String>,
    hf_cache: Option<&std::path::Path>,
) -> Vec<String> {
    let mut argv: Vec<String> = vec![docker.into(), "run".into(), "--rm".into()];
    if attach_stdin {
        argv.push("-i".into());
    }
    argv.extend(["--name".into(), name.into()]);
    argv.extend(["--label".into(), "llem=1".into()]);
    argv.extend(["--label".into(), format!("llem.engine={engine}")]);
    argv.extend([
        "--label".into(),
        format!("llem.runner_pid={}", std::process::id()),
    ]);
    if let Some(g) = gpus {
        argv.extend(["--gpus".into(), g]);
    }
    argv.extend(["--ipc".into(), "host".into()]);
    if let Some(c) = hf_cache {
        argv.extend([
            "-v".into(),
            format!("{}:/root/.cache/huggingface", c.display()),
        ]);
    }
    for k in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
        if std::env::var_os(k).is_some() {
            // Passed by name: the value never appears on a command line or in a log.
            argv.extend(["-e".into(), k.into()]);
        }
    }
    argv
}

/// Hugging Face cache mounted into containers: the option, `HF_HOME`, else
/// `~/.cache/huggingface`.
pub fn hf_cache(option: Option<&PathBuf>) -> Option<PathBuf> {
    option.cloned().or_else(|| {
        std::env::var_os("HF_HOME").map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface"))
        })
    })
}

/// `docker rm -f name`, quietly: a container that is already gone is fine.
pub fn remove_container(docker: &str, name: &str) {
    let _ = Command::new(docker)
        .args(["rm", "-f", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
