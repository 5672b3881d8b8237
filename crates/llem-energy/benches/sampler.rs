//! CPU cost of the sampler thread (issue 3 goal: < 0.5 % of one core at 100 Hz).
//!
//! `cargo bench -p llem-energy --bench sampler [-- SECONDS]` samples no sensor (the wake-up
//! floor), a RAPL tree of two zones as regular files (reopened per read, as in tests) and as
//! sysfs files (kept open, one `pread`, as on real machines), and the CPU/DRAM estimate,
//! at 100 Hz and 10 Hz, for SECONDS (default 20) each, while the main thread sleeps; the
//! process's CPU time (getrusage) over the run is the sampler's. Then the sampler thread's
//! own CPU time with and without a live board (what `--metrics-listen` adds), the board read
//! four times a second as a scraping exporter does.

use std::time::{Duration, Instant};

use llem_energy::sensors::{estimate, rapl};
use llem_energy::{LiveBoard, Meter, MeterConfig, Sensor};
use nix::sys::resource::{UsageWho, getrusage};

fn cpu_seconds() -> f64 {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => f64::NAN,
    }
}

/// A numeric sysfs attribute standing in for `energy_uj`, so the kept-open `pread` path
/// that real RAPL zones take is measured too (this machine has no powercap tree).
const SYSFS_NUMBER: &str = "/sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan";

fn rapl_tree(root: &std::path::Path, sysfs: bool) {
    for (dir, name) in [
        ("intel-rapl:0", "package-0"),
        ("intel-rapl:0/intel-rapl:0:0", "dram"),
    ] {
        let d = root.join(dir);
        let _ = std::fs::create_dir_all(&d);
        let _ = std::fs::write(d.join("name"), format!("{name}\n"));
        let _ = std::fs::write(d.join("max_energy_range_uj"), "262143328850\n");
        if sysfs {
            let _ = std::os::unix::fs::symlink(SYSFS_NUMBER, d.join("energy_uj"));
        } else {
            let _ = std::fs::write(d.join("energy_uj"), "123456789\n");
        }
    }
}

fn sensors(kind: &str, root: &std::path::Path) -> Vec<Box<dyn Sensor>> {
    match kind {
        "none" => Vec::new(),
        "rapl-file" | "rapl-sysfs" => rapl::discover(&root.join(kind))
            .map(|v| {
                v.into_iter()
                    .map(|s| Box::new(s) as Box<dyn Sensor>)
                    .collect()
            })
            .unwrap_or_default(),
        _ => {
            let proc = std::path::Path::new("/proc");
            let tdp = estimate::tdp(None, &estimate::cpu_model(proc), estimate::logical_cpus());
            match (
                estimate::CpuEstimate::open(proc, &tdp),
                estimate::DramEstimate::open(proc),
            ) {
                (Ok(c), Ok(d)) => vec![Box::new(c), Box::new(d)],
                _ => Vec::new(),
            }
        }
    }
}

fn main() {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(20.0);
    let root = std::env::temp_dir().join(format!("llem-sampler-bench-{}", std::process::id()));
    rapl_tree(&root.join("rapl-file"), false);
    rapl_tree(&root.join("rapl-sysfs"), true);
    println!("sampler CPU time over {seconds} s per case (share of one core)");
    for kind in ["none", "rapl-file", "rapl-sysfs", "estimate"] {
        for hz in [100u64, 10] {
            let s = sensors(kind, &root);
            let n = s.len();
            let cfg = MeterConfig {
                interval: Duration::from_millis(1000 / hz),
                detail_interval: Duration::from_millis(100),
                ..MeterConfig::default()
            };
            let epoch = Instant::now();
            let cpu0 = cpu_seconds();
            let Ok(m) = Meter::start(s, cfg, epoch) else {
                println!("{kind:>10} {hz:>4} Hz: cannot start");
                continue;
            };
            std::thread::sleep(Duration::from_secs_f64(seconds));
            let Ok(t) = m.stop() else {
                continue;
            };
            let wall = epoch.elapsed().as_secs_f64();
            let cpu = cpu_seconds() - cpu0;
            println!(
                "{kind:>10} {hz:>4} Hz, {n} sensors: {:.3} % of a core ({:.1} ms CPU, {} ticks, {:.1} µs/tick, {} late)",
                cpu / wall * 100.0,
                cpu * 1000.0,
                t.stats.ticks,
                cpu / t.stats.ticks.max(1) as f64 * 1e6,
                t.stats.late_ticks
            );
        }
    }
    println!("\nsampler thread CPU per tick, without and with a live board read at 4 Hz");
    for kind in ["rapl-sysfs", "estimate"] {
        let mut per_tick = Vec::new();
        for live in [false, true] {
            let cfg = MeterConfig {
                interval: Duration::from_millis(10),
                ..MeterConfig::default()
            };
            let board = live.then(LiveBoard::new);
            let Ok(m) = Meter::start_live(sensors(kind, &root), cfg, Instant::now(), board.clone())
            else {
                println!("{kind:>10}: cannot start");
                break;
            };
            let end = Instant::now() + Duration::from_secs_f64(seconds);
            let mut reads = 0u64;
            while Instant::now() < end {
                std::thread::sleep(Duration::from_millis(250));
                if board.as_ref().and_then(LiveBoard::snapshot).is_some() {
                    reads += 1;
                }
            }
            let Ok(t) = m.stop() else {
                break;
            };
            let us = t.stats.thread_cpu_s.unwrap_or(f64::NAN) / t.stats.ticks.max(1) as f64 * 1e6;
            println!(
                "{kind:>10} live {}: {us:.2} µs/tick over {} ticks ({reads} board reads)",
                if live { "on " } else { "off" },
                t.stats.ticks
            );
            per_tick.push(us);
        }
        if let [off, on] = per_tick[..] {
            println!("{kind:>10} live on / off: {:.3}", on / off);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
