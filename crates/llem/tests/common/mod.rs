//! What the integration tests share: the asset cache and sensor trees they write.
#![allow(dead_code, clippy::unwrap_used)]

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
