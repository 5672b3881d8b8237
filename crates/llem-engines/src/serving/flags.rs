//! How a config section becomes a server's command line. Each engine's file under
//! [`super::engines`] holds its own table of fields and flags; a field its table does not know
//! is an error naming it (never silently dropped, or two configurations that differ only in
//! that field would measure the same server).

use serde_json::Value;

use llem_config::ExperimentConfig;

use super::engines::{Listen, LocalProgram, ServerSpec};
use crate::LaunchError;

/// How one config field is written on the command line.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flag {
    /// `--flag VALUE`.
    Val(&'static str),
    /// `--flag` when true, nothing when false.
    Switch(&'static str),
    /// `--flag` when true, `--no-flag` when false.
    Pair(&'static str, &'static str),
    /// `--flag '{"json": ...}'`.
    Json(&'static str),
    /// `--flag a,b,c`.
    List(&'static str),
    /// A request parameter, not a server flag (sampling sections).
    Request,
    /// Goes into the engine's extra options file under this key (TensorRT-LLM's
    /// `--extra_llm_api_options`).
    Extra(&'static str),
}

/// Every command-line flag a table can emit (`--no-x` of a pair included).
/// Every flag a server may be given, for checking against its own parser: those of the
/// command line `args` builds for `config` (set every option the engine maps outside its
/// table there), the table's, and `extra` (flags `config` cannot reach, such as LoRA's).
/// A configuration that does not build is a bug its test shows as no command-line flags.
pub(crate) fn cli_flags(
    args: fn(&ExperimentConfig, &Listen<'_>) -> Result<super::engines::ServerArgs, LaunchError>,
    config: Value,
    table: &[(&str, Flag)],
    extra: &[&str],
) -> Vec<String> {
    let listen = Listen {
        model: "m",
        host: "127.0.0.1",
        port: 8080,
    };
    let mut out: Vec<String> = serde_json::from_value::<ExperimentConfig>(config)
        .map_err(LaunchError::from)
        .and_then(|cfg| args(&cfg, &listen))
        .map(|a| {
            a.args
                .into_iter()
                .filter(|w| w.starts_with('-') && w.parse::<f64>().is_err())
                .collect()
        })
        .unwrap_or_default();
    for f in names(table).into_iter().chain(extra.iter().copied()) {
        if !out.iter().any(|o| o == f) {
            out.push(f.to_string());
        }
    }
    out
}

pub(crate) fn names(table: &[(&str, Flag)]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (_, f) in table {
        match *f {
            Flag::Val(n) | Flag::Switch(n) | Flag::Json(n) | Flag::List(n) => out.push(n),
            Flag::Pair(on, off) => out.extend([on, off]),
            Flag::Request | Flag::Extra(_) => {}
        }
    }
    out
}

/// The launch of one engine: the program and its arguments (model and port included).
#[derive(Clone, Debug, PartialEq)]
pub struct CommandLine {
    /// Program and leading arguments for a local run (`["vllm", "serve"]`).
    pub program: Vec<String>,
    /// What to put after the image in `docker run` when the image's entrypoint is not the
    /// server itself.
    pub container_entry: Vec<String>,
    /// Everything after the program.
    pub args: Vec<String>,
    /// Contents of an extra options file, passed by path (TensorRT-LLM).
    pub extra_options: Option<(String, Value)>,
    /// The health endpoint.
    pub health_path: &'static str,
}

/// Where a served model comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelArg {
    /// A hub id or a directory, passed as written.
    Name(String),
    /// A local GGUF file (llama-server).
    File(std::path::PathBuf),
}

/// The command that starts `spec`'s server for `cfg` on `host:port` with `model`; `python`
/// runs engines launched as Python modules.
pub fn command_line(
    spec: &ServerSpec,
    cfg: &ExperimentConfig,
    model: &ModelArg,
    host: &str,
    port: u16,
    python: &str,
) -> Result<CommandLine, LaunchError> {
    let model_s = match model {
        ModelArg::Name(n) => n.clone(),
        ModelArg::File(p) => p.display().to_string(),
    };
    let listen = Listen {
        model: &model_s,
        host,
        port,
    };
    let built = (spec.args)(cfg, &listen)?;
    let program = match spec.local {
        LocalProgram::Cli(argv) => argv.iter().map(|a| a.to_string()).collect(),
        LocalProgram::PythonModule(m) => vec![python.into(), "-m".into(), m.into()],
        LocalProgram::LlamaServer => vec!["llama-server".into()],
    };
    let mut cl = CommandLine {
        program,
        container_entry: spec.container_entry.iter().map(|a| a.to_string()).collect(),
        args: built.args,
        extra_options: built.extra_options,
        health_path: spec.health_path,
    };
    if let Some(extra) = cfg.passthrough_kwargs.as_ref() {
        for (k, v) in extra {
            let flag = format!("--{}", k.replace('_', "-"));
            match v {
                Value::Bool(true) => cl.args.push(flag),
                Value::Bool(false) | Value::Null => {}
                Value::String(x) => cl.args.extend([flag, x.clone()]),
                other => cl.args.extend([flag, other.to_string()]),
            }
        }
    }
    Ok(cl)
}

pub(crate) fn to_value<T: serde::Serialize>(section: Option<&T>) -> Result<Value, LaunchError> {
    match section {
        None => Ok(Value::Null),
        Some(s) => Ok(serde_json::to_value(s)?),
    }
}

/// Appends the flags of `section` (fields left null are the engine's default: no flag).
pub(crate) fn append(
    args: &mut Vec<String>,
    path: &str,
    section: Value,
    table: &[(&str, Flag)],
    extra: &mut Option<Value>,
) -> Result<(), LaunchError> {
    let Value::Object(fields) = section else {
        return Ok(());
    };
    for (key, value) in fields {
        if value.is_null() {
            continue;
        }
        let Some((_, flag)) = table.iter().find(|(k, _)| *k == key) else {
            return Err(LaunchError::NoFlag {
                path: path.to_string(),
                key,
            });
        };
        let scalar = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match *flag {
            Flag::Val(f) => args.extend([f.to_string(), scalar(&value)]),
            Flag::Switch(f) => {
                if value == Value::Bool(true) {
                    args.push(f.into());
                }
            }
            Flag::Pair(on, off) => {
                args.push(if value == Value::Bool(true) { on } else { off }.into())
            }
            Flag::Json(f) => args.extend([f.to_string(), without_nulls(value).to_string()]),
            Flag::List(f) => {
                let items: Vec<String> = match &value {
                    Value::Array(a) => a.iter().map(scalar).collect(),
                    other => vec![scalar(other)],
                };
                args.extend([f.to_string(), items.join(",")]);
            }
            Flag::Request => {}
            Flag::Extra(k) => {
                let map = extra.get_or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(m) = map {
                    m.insert(k.to_string(), without_nulls(value));
                }
            }
        }
    }
    Ok(())
}

/// `value` with null fields removed (null means "the engine's default").
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn cfg(v: Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn vllm_fields_become_flags() {
        let c = cfg(
            serde_json::json!({"model": "m", "engine": "vllm", "vllm": {"engine": {"max_num_seqs": 128, "gpu_memory_utilization": 0.9, "enforce_eager": true, "enable_prefix_caching": false, "compilation_config": {"level": 3}}}}),
        );
        let cl = command_line(
            &crate::serving::engines::vllm::SPEC,
            &c,
            &ModelArg::Name("m".into()),
            "127.0.0.1",
            9000,
            "python3",
        )
        .unwrap();
        assert_eq!(cl.program, vec!["vllm", "serve"]);
        let a = cl.args.join(" ");
        for want in [
            "m --host 127.0.0.1 --port 9000",
            "--max-num-seqs 128",
            "--gpu-memory-utilization 0.9",
            "--enforce-eager",
            "--no-enable-prefix-caching",
            "--compilation-config {\"level\":3}",
        ] {
            assert!(a.contains(want), "{want} not in {a}");
        }
    }

    #[test]
    fn llama_server_and_tensorrt_extra_options() {
        let c = cfg(
            serde_json::json!({"model": "x.gguf", "engine": "llamacpp", "runners": {"llamacpp": "local"}, "llamacpp": {"batch_size": 4, "n_ctx": 512, "n_threads": 2}}),
        );
        let cl = command_line(
            &crate::serving::engines::llama_server::SPEC,
            &c,
            &ModelArg::File("/m/x.gguf".into()),
            "127.0.0.1",
            8123,
            "python3",
        )
        .unwrap();
        let a = cl.args.join(" ");
        assert!(
            a.contains("-m /m/x.gguf")
                && a.contains("-np 4")
                && a.contains("-c 512")
                && a.contains("--metrics")
                && a.contains("-t 2"),
            "{a}"
        );
        let t = cfg(
            serde_json::json!({"model": "m", "engine": "tensorrt", "tensorrt": {"max_batch_size": 8, "kv_cache": {"free_gpu_memory_fraction": 0.8}}}),
        );
        let cl = command_line(
            &crate::serving::engines::tensorrt::SPEC,
            &t,
            &ModelArg::Name("m".into()),
            "0.0.0.0",
            8000,
            "python3",
        )
        .unwrap();
        assert!(cl.args.join(" ").contains("--max_batch_size 8"));
        let (flag, v) = cl.extra_options.unwrap();
        assert_eq!(flag, "--extra_llm_api_options");
        assert_eq!(v["kv_cache_config"]["free_gpu_memory_fraction"], 0.8);
    }
}

#[cfg(test)]
mod cli_flag_tests {
    /// The flags each engine's command line carries outside its table come from that command
    /// line (a configuration that failed to build would leave only the table's).
    #[test]
    fn each_engines_command_line_flags_are_in_its_list() {
        use llem_config::Engine;
        let has = |e: Engine, f: &str| crate::registry::cli_flags(e).iter().any(|x| x == f);
        assert!(has(Engine::Vllm, "--enable-prompt-tokens-details") && has(Engine::Vllm, "--port"));
        assert!(has(Engine::Sglang, "--cuda-graph-backend-prefill"));
        assert!(has(Engine::Sglang, "--enable-metrics"));
        assert!(has(Engine::Tgi, "--hostname") && has(Engine::Tgi, "--dtype"));
        assert!(has(Engine::LlamaCpp, "--slot-save-path") && has(Engine::LlamaCpp, "--load-mode"));
    }
}
