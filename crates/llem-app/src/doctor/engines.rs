//! Engines found on this host, and Docker (daemon, GPU support, llem's default images).

use std::time::Duration;

use llem_config::Engine;
use llem_engines::registry::LocalProgram;
use llem_engines::registry::default_image;
use llem_engines::registry::local_program;

use super::{Line, probe};
use crate::ProbeError;

/// `vllm --version` imports torch: seconds on a cold cache.
const VERSION_LIMIT: Duration = Duration::from_secs(60);

/// The Python module's top-level package, for `import x; x.__version__`.
fn package(module: &str) -> &str {
    module.split('.').next().unwrap_or(module)
}

/// The version a program or Python package reports, or why none.
fn version(program: &str, args: &[&str]) -> Result<String, ProbeError> {
    let p = probe::run(program, args, VERSION_LIMIT)?;
    let out = format!("{}\n{}", p.stdout, p.stderr);
    if p.success {
        Ok(probe::first_line(&out).to_string())
    } else {
        // A Python traceback ends with the error itself.
        Err(ProbeError::Said(probe::last_line(&p.stderr).to_string()))
    }
}

/// The version of `engine`'s locally installed server, `None` when it has none or it is not
/// installed (with why).
pub fn server_version(engine: Engine, python: &str) -> Option<Result<String, ProbeError>> {
    Some(match local_program(engine)? {
        LocalProgram::Cli(argv) => {
            let program = argv.first()?;
            match llem_engines::which(program) {
                Some(path) => version(&path.display().to_string(), &["--version"])
                    .map(|v| format!("{v} ({})", path.display())),
                None => Err(ProbeError::NotOnPath(program.to_string())),
            }
        }
        LocalProgram::PythonModule(m) => {
            let top = package(m);
            version(
                python,
                &["-c", &format!("import {top}; print({top}.__version__)")],
            )
            .map(|v| format!("{top} {v} ({python})"))
            .map_err(|e| ProbeError::CannotImport {
                python: python.to_string(),
                package: top.to_string(),
                source: Box::new(e),
            })
        }
        LocalProgram::LlamaServer => {
            let explicit = std::env::var_os("LLEM_LLAMA_SERVER").map(std::path::PathBuf::from);
            match llem_engines::serving::find_llama_server(explicit.as_ref()) {
                Some(path) => version(&path.display().to_string(), &["--version"])
                    .map(|v| format!("{v} ({})", path.display())),
                None => Err(ProbeError::NoLlamaServer),
            }
        }
    })
}

/// One line per engine: built in, installed (with its version), or how to get it.
pub fn engines(python: Option<&str>) -> Vec<Line> {
    let py = python
        .map(str::to_string)
        .or_else(|| std::env::var("LLEM_PYTHON").ok())
        .unwrap_or_else(|| "python3".into());
    let mut lines = vec![Line::ok(
        "llamacpp: built in (llama.cpp through llama-cpp-2)",
    )];
    match version(
        &py,
        &[
            "-c",
            "import torch, transformers; print('torch %s, transformers %s, CUDA %s' % \
             (torch.__version__, transformers.__version__, torch.cuda.is_available()))",
        ],
    ) {
        Ok(v) => lines.push(Line::ok(format!("transformers: {v} ({py})"))),
        Err(e) => lines.push(
            Line::info(format!(
                "transformers: `{py}` cannot import torch and transformers: {e}"
            ))
            .fix(format!(
                "{py} -m pip install torch transformers accelerate, or set `python:` in the \
                     user config (LLEM_PYTHON) to a Python that has them"
            )),
        ),
    }
    // Every engine the registry can launch as a server; the others have no program to ask.
    for &e in Engine::ALL {
        let name = match local_program(e) {
            Some(LocalProgram::LlamaServer) => "llama-server",
            _ => e.as_str(),
        };
        match server_version(e, &py) {
            Some(Ok(v)) => lines.push(Line::ok(format!("{name}: {v}"))),
            Some(Err(why)) => lines.push(Line::info(format!("{name}: not installed ({why})")).fix(
                format!(
                    "install it, use `runners: {{{}: docker}}`, or reach a running server with \
                     `runners: {{{}: \"external:http://host:port\"}}`",
                    e.as_str(),
                    e.as_str()
                ),
            )),
            None => {}
        }
    }
    lines
}

/// What Docker says, probed once.
pub struct Docker {
    /// The CLI's path.
    pub cli: Option<std::path::PathBuf>,
    /// The daemon's runtimes (`nvidia` when the NVIDIA container toolkit is set up), or why
    /// the daemon did not answer.
    pub daemon: Result<Vec<String>, String>,
    /// Images already asked about: the host's default images and a study's configurations
    /// name the same few, and each ask is a `docker` process.
    seen: std::cell::RefCell<std::collections::HashMap<String, Option<bool>>>,
}

impl Docker {
    /// Asks the CLI and the daemon.
    pub fn probe() -> Docker {
        let Some(cli) = llem_engines::which("docker") else {
            return Docker {
                cli: None,
                daemon: Err("the docker CLI is not on PATH".into()),
                seen: Default::default(),
            };
        };
        let daemon = probe::run(
            &cli.display().to_string(),
            &["info", "--format", "{{json .Runtimes}}"],
            Duration::from_secs(15),
        )
        .and_then(|p| {
            if p.success {
                let v: serde_json::Value =
                    serde_json::from_str(p.stdout.trim()).unwrap_or_default();
                Ok(v.as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default())
            } else {
                Err(ProbeError::Said(probe::first_line(&p.stderr).to_string()))
            }
        })
        .map_err(|e| e.to_string());
        Docker {
            cli: Some(cli),
            daemon,
            seen: Default::default(),
        }
    }

    /// Whether the daemon answered.
    pub fn up(&self) -> bool {
        self.daemon.is_ok()
    }

    /// Whether `image` is present locally; `None` when the daemon cannot be asked.
    pub fn has_image(&self, image: &str) -> Option<bool> {
        let cli = self.cli.as_ref()?;
        if !self.up() {
            return None;
        }
        if let Some(known) = self.seen.borrow().get(image) {
            return *known;
        }
        let found = probe::run(
            &cli.display().to_string(),
            &["image", "inspect", "--format", "{{.Id}}", image],
            Duration::from_secs(15),
        )
        .ok()
        .map(|p| p.success);
        self.seen.borrow_mut().insert(image.to_string(), found);
        found
    }
}

/// The daemon, GPU support, and llem's default images.
pub fn docker(d: &Docker) -> Vec<Line> {
    if d.cli.is_none() {
        return vec![Line::info(
            "docker: not installed (only `runners: {<engine>: docker}` needs it)",
        )];
    }
    let runtimes = match &d.daemon {
        Err(why) => {
            return vec![
                Line::warn(format!("docker: the daemon did not answer: {why}")).fix(
                    "start it (sudo systemctl start docker) and let this user reach it \
                     (sudo usermod -aG docker $USER, then log in again)",
                ),
            ];
        }
        Ok(r) => r,
    };
    let mut lines = vec![Line::ok("docker: the daemon answers")];
    if runtimes.iter().any(|r| r == "nvidia") {
        lines.push(Line::ok(
            "docker: the nvidia runtime is registered (`--gpus` works)",
        ));
    } else {
        lines.push(
            Line::info(format!(
                "docker: no nvidia runtime (runtimes: {}): containers get no GPU",
                runtimes.join(", ")
            ))
            .fix("install the NVIDIA Container Toolkit and run `sudo nvidia-ctk runtime configure --runtime=docker`"),
        );
    }
    for e in Engine::ALL {
        let Some(image) = default_image(*e) else {
            continue;
        };
        match d.has_image(image) {
            Some(true) => lines.push(Line::ok(format!("{}: image {image} present", e.as_str()))),
            Some(false) => lines.push(
                Line::info(format!(
                    "{}: image {image} not pulled (the first docker run pulls it, outside the \
                     measurement but slowly)",
                    e.as_str()
                ))
                .fix(format!("docker pull {image}")),
            ),
            None => {}
        }
    }
    lines
}
