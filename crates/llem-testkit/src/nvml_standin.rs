//! Builds the NVML stand-in (`nvml_standin.c`) as `libnvidia-ml.so.1` and runs a test body in
//! a child process that loads it the way llem loads the real driver library: by name, through
//! `LD_LIBRARY_PATH`. A child is needed because the dynamic loader reads that variable once, at
//! process start.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the child: the test body runs there.
const CHILD: &str = "LLEM_NVML_STANDIN_CHILD";

/// The C source, next to this file.
fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/nvml_standin.c")
}

/// Compiles the stand-in into `dir` as `libnvidia-ml.so.1`.
pub fn build(dir: &Path) -> PathBuf {
    let lib = dir.join("libnvidia-ml.so.1");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&lib)
        .arg(source())
        .arg("-lm")
        .output()
        .expect("cc must be installed to build the NVML stand-in");
    assert!(
        out.status.success(),
        "building the NVML stand-in failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// A directory holding the stand-in library and `script`; the environment a process needs to
/// load it instead of a driver.
pub struct StandIn {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
}

impl StandIn {
    /// Builds the library and writes the script; without one the library loads but answers
    /// as a machine whose NVIDIA kernel driver is not loaded.
    pub fn new(script: Option<&str>) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        if let Some(script) = script {
            std::fs::write(dir.path().join("script"), script).unwrap();
        }
        StandIn { dir }
    }

    /// `(variable, value)` pairs that make a process load this stand-in as NVML.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "LD_LIBRARY_PATH".into(),
                self.dir.path().display().to_string(),
            ),
            (
                "NVML_STANDIN_SCRIPT".into(),
                self.dir.path().join("script").display().to_string(),
            ),
        ]
    }
}

/// In the parent: runs test `name` (its full path in the binary, `module::test`) of this test binary in a child that loads a stand-in
/// scripted by `script`, fails if the child fails, and returns `true` (the caller returns).
/// In that child: returns `false`, and the caller runs the test body.
pub fn in_child(name: &str, script: &str) -> bool {
    in_child_with(name, Some(script))
}

/// [`in_child`] with the script optional.
pub fn in_child_with(name: &str, script: Option<&str>) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    let standin = StandIn::new(script);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .envs(standin.env())
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child test {name} failed:\n{text}");
    // A filter that matched nothing would pass without running the body.
    assert!(
        text.contains("1 passed"),
        "child test {name} did not run:\n{text}"
    );
    true
}
