//! Expanding and hashing a 100 000-cell sweep (issue goal: < 1 s on the 2-core dev box).
//!
//! `cargo bench -p llem-config --bench expand [-- CELLS REPEATS]` prints the wall time of
//! each repeat and the median, for the whole `llem run --dry-run` planning path: YAML
//! parse, sweep expansion, per-cell typing, validation, hashing, dedup and ordering.
//! `bench/expand.sh` runs it next to the Python llenergymeasure expansion of the same sweep.

use std::time::Instant;

use llem_config::{Env, Overrides, PlanRequest};

fn sweep_yaml(cells: usize) -> String {
    // 100 x 100 x 10 = 100 000 at the default size; the axes touch top-level, nested and
    // engine-scoped fields so every code path of expansion is exercised.
    let a = cells.clamp(1, 100);
    let b = (cells / a).clamp(1, 100);
    let c = (cells / (a * b)).max(1);
    let list = |n: usize, start: usize| {
        (start..start + n)
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "name: bench-{cells}\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nengine: llamacpp\n\
         dataset: {{source: sharegpt}}\ndecoder: {{preset: deterministic}}\n\
         sweep:\n  random_seed: [{}]\n  dataset.n_prompts: [{}]\n  llamacpp.batch_size: [{}]\n\
         study_execution: {{n_cycles: 3, experiment_order: shuffle}}\n",
        list(a, 0),
        list(b, 1),
        list(c, 1)
    )
}

fn cpu_seconds() -> Option<f64> {
    // utime + stime of this process from /proc (Linux); None elsewhere.
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let cells: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let repeats: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("llem-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("sweep.yaml");
    if let Err(e) = std::fs::write(&path, sweep_yaml(cells)) {
        eprintln!("cannot write {}: {e}", path.display());
        std::process::exit(1);
    }
    let env = Env::from_pairs([("LLEM_CONFIG_PATH", "/nonexistent/llem-bench.yaml")]);
    let mut times = Vec::new();
    for i in 0..repeats {
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        let plan = llem_config::plan(&PlanRequest {
            config: Some(&path),
            config_dir: None,
            overrides: Overrides::default(),
            dedup: true,
            env: &env,
        });
        let wall = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds().zip(cpu0).map(|(a, b)| a - b);
        match plan {
            Ok(p) => println!(
                "run {}: {} configurations, {} runs, design {} in {:.3} s (cpu {})",
                i + 1,
                p.configs.len(),
                p.runs.len(),
                p.study_design_hash(),
                wall,
                cpu.map_or_else(|| "n/a".into(), |c| format!("{c:.2} s"))
            ),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        times.push(wall);
    }
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    println!("median of {repeats}: {median:.3} s for {cells} cells");
    // Peak resident memory of the whole process (the plan is the only large allocation).
    if let Some(kb) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
    {
        println!("peak resident memory: {:.0} MB", kb / 1024.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
