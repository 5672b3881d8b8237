//! What the integration tests share: the asset cache and sensor trees they write.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Every file under `dir` (none when it does not exist).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A loopback port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Replaces `path` by rename, so a concurrent reader sees the old or the new value.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A package zone (`intel-rapl:0`) whose counter a thread advances at `watts`; the thread
/// returns the longest time between two of its writes, s (a stalled writer lags the truth).
pub fn rapl_zone(root: &Path, watts: f64) -> (Arc<AtomicBool>, std::thread::JoinHandle<f64>) {
    let z = root.join("intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("name"), "package-0\n").unwrap();
    std::fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
    write_atomically(&z.join("energy_uj"), "1000\n");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let epoch = Instant::now();
    let writer = std::thread::spawn(move || {
        let (mut last, mut max_gap_s) = (0.0_f64, 0.0_f64);
        while !flag.load(Ordering::Relaxed) {
            let s = epoch.elapsed().as_secs_f64();
            max_gap_s = max_gap_s.max(s - last);
            last = s;
            let uj = 1000 + (watts * s * 1e6) as u64;
            write_atomically(&z.join("energy_uj"), &format!("{uj}\n"));
            std::thread::sleep(Duration::from_micros(200));
        }
        max_gap_s
    });
    (stop, writer)
}

/// How far a cut of the window along its energy curve (time bins, requests, sessions) may
/// sum from the result's headline energy: the attribution's own tolerance (0.5 %), plus what
/// the curve's and the headline's edge interpolations can differ by (the result's edge and
/// gap bounds: the counter intervals that hold the edges), plus what the counter's writer
/// lagged at each edge (`lag_s` at `watts`). A slow machine widens the last two, and the
/// test then expects what it measured.
pub fn cut_tolerance_j(r: &llem_results::ExperimentResult, watts: f64, lag_s: f64) -> f64 {
    let edges: f64 = r
        .energy_uncertainty
        .as_ref()
        .map(|u| {
            u.domains
                .iter()
                .map(|d| d.edge_bound_j + d.gap_bound_j)
                .sum()
        })
        .unwrap_or(0.0);
    0.005 * r.total_energy_j + edges + 2.0 * watts * lag_s
}

/// The Python with pandas, polars and jsonschema that `make test` installs
/// (scripts/python-env.sh); without it a check is skipped here, but `make test`
/// (LLEM_REQUIRE_PYTHON_CHECKS) makes its absence a failure.
pub fn checks_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("LLEM_REQUIRE_PYTHON_CHECKS").is_none(),
        "target/pyenv is missing: run scripts/python-env.sh"
    );
    eprintln!(
        "skipped: run `make test` (it installs pandas, polars and jsonschema into target/pyenv)"
    );
    None
}

/// The asset cache holding SmolLM2 and ShareGPT (scripts/fetch-assets.sh); fails the test
/// with the command to run when they are missing.
pub fn assets() -> PathBuf {
    let dir = llem_app::host::assets_dir();
    assert!(
        dir.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
            .is_file()
            && dir.join("sharegpt").is_dir(),
        "the asset cache {} lacks SmolLM2 or ShareGPT: run scripts/fetch-assets.sh",
        dir.display()
    );
    dir
}

/// An amdgpu card under the sysfs root `sys` drawing a constant `watts` (its hwmon
/// `power1_average`): a GPU sensor where no GPU driver can run, standing in for the driver.
pub fn amdgpu_card(sys: &Path, watts: f64) {
    let dev = sys.join("class/drm/card0/device");
    let hw = dev.join("hwmon/hwmon0");
    std::fs::create_dir_all(&hw).unwrap();
    std::fs::write(hw.join("name"), "amdgpu\n").unwrap();
    std::fs::write(
        hw.join("power1_average"),
        format!("{}\n", (watts * 1e6) as u64),
    )
    .unwrap();
    std::fs::write(dev.join("product_name"), "Test GPU\n").unwrap();
}

pub use llem_testkit::machine::{exclusive, shared};

/// The `llama-server` the tests drive (scripts/build-llama-server.sh).
pub fn llama_server() -> PathBuf {
    let env = std::env::var_os("LLEM_LLAMA_SERVER").map(PathBuf::from);
    llem_engines::serving::find_llama_server(env.as_ref()).unwrap_or_else(|| {
        panic!("llama-server is not installed: run scripts/build-llama-server.sh (make test does)")
    })
}

/// `llem` in `home` (its HOME, working directory, sensor roots `powercap` and `sys` under
/// it) with the asset cache and `llama-server`.
pub fn llem_in(home: &Path) -> std::process::Command {
    llem_with_server(home, &llama_server())
}

/// [`llem_in`] with `server` as its `llama-server` (a path that is not one, to show a run
/// needs none).
pub fn llem_with_server(home: &Path, server: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_llem"));
    c.current_dir(home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LLEM_CONFIG_PATH", home.join("no-user-config.yaml"))
        .env("LLEM_ASSETS", assets())
        .env("LLEM_LLAMA_SERVER", server)
        .env("LLEM_POWERCAP_ROOT", home.join("powercap"))
        .env("LLEM_SYSFS_ROOT", home.join("sys"));
    c
}

/// `llem report DIR` written in `home`; the page.
pub fn report_page(home: &Path, dir: &Path) -> String {
    let html = home.join("report.html");
    let o = llem_in(home)
        .arg("report")
        .arg(dir)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(&html).unwrap()
}

/// The first `result.json` under `dir` (a single run's).
pub fn result_file(dir: &Path) -> PathBuf {
    walk(dir)
        .into_iter()
        .find(|p| p.ends_with("result.json"))
        .unwrap()
}
