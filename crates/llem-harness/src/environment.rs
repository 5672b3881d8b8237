//! The machine a result came from: host, OS, CPU, memory, and process resource use.

/// Host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `PRETTY_NAME` of os-release plus the kernel release.
pub fn os() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .ok();
    match (pretty, kernel) {
        (Some(p), Some(k)) => format!("{p} (Linux {k})"),
        (Some(p), None) => p,
        (None, Some(k)) => format!("Linux {k}"),
        (None, None) => std::env::consts::OS.to_string(),
    }
}

/// `model name` of /proc/cpuinfo.
pub fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The number after `key` in a `key: value kB` procfs file.
fn kib_field(file: &str, key: &str) -> Option<f64> {
    let s = std::fs::read_to_string(file).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Physical memory, MiB.
pub fn memory_total_mib() -> Option<f64> {
    kib_field("/proc/meminfo", "MemTotal:").map(|k| k / 1024.0)
}

/// Peak resident memory of this process, MiB.
pub fn peak_rss_mib() -> Option<f64> {
    kib_field("/proc/self/status", "VmHWM:").map(|k| k / 1024.0)
}

/// CPU time (user + system) this process has used, s.
pub fn process_cpu_s() -> Option<f64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
    Some(t(u.user_time()) + t(u.system_time()))
}

/// CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// This machine now, for a study session's `environment.json`: `devices` are what cells are
/// scheduled on; the version and commit are llem's build.
pub fn snapshot(
    devices: &[String],
    llem_version: &str,
    git_commit: Option<&str>,
) -> llem_results::EnvironmentSnapshot {
    llem_results::EnvironmentSnapshot {
        captured_at: llem_results::time::iso8601_utc(llem_results::time::unix_now_s()),
        host: hostname(),
        os: os(),
        cpu_model: cpu_model(),
        cpu_count: cpu_count(),
        memory_total_mib: memory_total_mib(),
        devices: devices.to_vec(),
        cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
        llem_version: llem_version.to_string(),
        git_commit: git_commit.map(String::from),
    }
}
