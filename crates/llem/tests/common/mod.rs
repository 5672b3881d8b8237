//! Sensor trees the integration tests write.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Replaces `path` by rename, so a concurrent reader sees the old or the new value.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A package zone (`intel-rapl:0`) whose counter a thread advances at `watts`.
pub fn rapl_zone(root: &Path, watts: f64) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let z = root.join("intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("name"), "package-0\n").unwrap();
    std::fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
    write_atomically(&z.join("energy_uj"), "1000\n");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let epoch = Instant::now();
    let writer = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            let uj = 1000 + (watts * epoch.elapsed().as_secs_f64() * 1e6) as u64;
            write_atomically(&z.join("energy_uj"), &format!("{uj}\n"));
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    (stop, writer)
}
