//! A LoRA adapter made by the test: PEFT with random weights on SmolLM2
//! (`support/make_lora.py`, under the transformers venv of `scripts/engines-env.sh`),
//! converted to a GGUF adapter by llama.cpp's own `convert_lora_to_gguf.py` (kept beside
//! the llama-server that `scripts/build-llama-server.sh` builds).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The transformers venv's Python (`LLEM_PYTHON` overrides).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("LLEM_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv-engines/bin/python");
    assert!(
        venv.exists(),
        "no Python with torch, transformers and peft: run scripts/engines-env.sh"
    );
    venv
}

/// llama.cpp's conversion scripts, beside `LLEM_LLAMA_SERVER` (else the default build).
fn converter() -> PathBuf {
    let server = std::env::var_os("LLEM_LLAMA_SERVER")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(PathBuf::from(home).join(".cache/llem/tools/bin/llama-server"))
        })
        .expect("LLEM_LLAMA_SERVER or HOME");
    let server = std::fs::canonicalize(&server).unwrap_or(server);
    let dir = server.parent().unwrap().join("convert");
    assert!(
        dir.join("convert_lora_to_gguf.py").is_file(),
        "llama.cpp's converter is not at {}: run scripts/build-llama-server.sh",
        dir.display()
    );
    dir
}

fn run(cmd: &mut Command, what: &str) {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A LoRA adapter for the GGUF `model` in `out`: `(peft directory, GGUF adapter file)`.
pub fn make(model: &Path, out: &Path) -> (PathBuf, PathBuf) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/make_lora.py");
    run(
        Command::new(python())
            .arg(&script)
            .arg(model.parent().unwrap())
            .arg(model.file_name().unwrap())
            .arg(out)
            .env("HF_HUB_OFFLINE", "1"),
        "make_lora.py",
    );
    let conv = converter();
    let gguf = out.join("adapter.gguf");
    run(
        Command::new(python())
            .arg(conv.join("convert_lora_to_gguf.py"))
            .arg("--base")
            .arg(out.join("base"))
            .args(["--outtype", "f32", "--outfile"])
            .arg(&gguf)
            .arg(out.join("peft"))
            .env("PYTHONPATH", conv.join("gguf-py"))
            .env("HF_HUB_OFFLINE", "1"),
        "convert_lora_to_gguf.py",
    );
    (out.join("peft"), gguf)
}
