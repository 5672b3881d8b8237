//! `llem run` end to end on the real SmolLM2 model (scripts/fetch-assets.sh): the quickstart
//! experiment, its artefacts, and their agreement with each other.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use llem_results::{ExperimentResult, RequestRecord, read_requests, read_timeseries};

use crate::common;
use common::assets;

use llem_testkit::lora;

/// `llem` with a sandboxed HOME, no user config, the asset cache and sensor roots under
/// `home`.
fn llem_command(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_llem"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LLEM_CONFIG_PATH", home.join("no-user-config.yaml"))
        .env("LLEM_ASSETS", assets())
        .env("LLEM_POWERCAP_ROOT", home.join("powercap"))
        .env("LLEM_SYSFS_ROOT", home.join("sys"));
    c
}

fn llem(home: &Path, args: &[&str]) -> std::process::Output {
    llem_command(home)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(args)
        .output()
        .unwrap()
}

fn cell_dir(out: &Path) -> PathBuf {
    let study: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(study.len(), 1, "{study:?}");
    let name = study[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("quickstart_20"), "{name}");
    let cells: Vec<_> = std::fs::read_dir(&study[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cells.len(), 1, "{cells:?}");
    cells[0].clone()
}

/// Piecewise-linear power integrated over [a, b] (independent of llem-energy's code).
fn integrate(t: &[f64], p: &[f64], a: f64, b: f64) -> f64 {
    let at = |x: f64| -> f64 {
        let i = t.partition_point(|v| *v <= x);
        if i == 0 {
            return p[0];
        }
        if i >= t.len() {
            return p[t.len() - 1];
        }
        p[i - 1] + (p[i] - p[i - 1]) * (x - t[i - 1]) / (t[i] - t[i - 1])
    };
    let mut knots = vec![a];
    knots.extend(t.iter().copied().filter(|x| *x > a && *x < b));
    knots.push(b);
    knots
        .windows(2)
        .map(|w| (w[1] - w[0]) * (at(w[0]) + at(w[1])) / 2.0)
        .sum()
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let r = q / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (r - lo as f64)
}

/// A HOME with empty sensor trees: no hardware energy sensor, the estimate only.
/// A sandbox whose one package zone a thread advances at 20 W (stop it, then join it).
fn home_at_20_watts() -> (
    tempfile::TempDir,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<f64>,
) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("sys")).unwrap();
    let (stop, writer) = common::rapl_zone(&home.path().join("powercap"), 20.0);
    (home, stop, writer)
}

fn sandbox() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    for d in ["powercap", "sys"] {
        std::fs::create_dir_all(home.path().join(d)).unwrap();
    }
    home
}

/// Runs `yaml` (written as `<name>.yaml` in `home`) quietly into `home/<name>`; it must
/// succeed. Its stderr and its one result.
fn run_ok(home: &Path, name: &str, yaml: &str) -> (String, serde_json::Value) {
    let file = home.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let out = home.join(name);
    let o = llem(
        home,
        &[
            "run",
            file.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    (err, only_result(&out))
}

/// The one `result.json` under `out`, parsed.
fn only_result(out: &Path) -> serde_json::Value {
    let found: Vec<PathBuf> = common::walk(out)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    serde_json::from_str(&std::fs::read_to_string(&found[0]).unwrap()).unwrap()
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
        "{what}: {a} vs {b}"
    );
}

#[test]
fn quickstart_result_agrees_with_its_sidecars() {
    let _machine = common::shared();
    let home = sandbox();
    let out = home.path().join("results");
    let o = llem(
        home.path(),
        &[
            "run",
            "examples/quickstart.yaml",
            "-o",
            out.to_str().unwrap(),
            "--quiet",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let cell = cell_dir(&out);
    let name = cell.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("001_c0_SmolLM2-135M-Instruct.Q4_1-llamacpp_"),
        "{name}"
    );
    for f in [
        "result.json",
        "effective_config.json",
        "timeseries.parquet",
        "requests.parquet",
    ] {
        assert!(cell.join(f).is_file(), "{f} missing");
    }

    let r: ExperimentResult =
        serde_json::from_slice(&std::fs::read(cell.join("result.json")).unwrap()).unwrap();
    assert_eq!(r.schema_version, "4.0");
    assert_eq!(r.engine, "llamacpp");
    assert!(name.ends_with(&r.measurement_config_hash));
    let cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cell.join("effective_config.json")).unwrap())
            .unwrap();
    assert_eq!(cfg["llamacpp"]["batch_size"], 4);
    assert_eq!(cfg["dataset"]["n_prompts"], 20);

    // Tokens: the result's totals are the sums over requests.parquet.
    let reqs: Vec<RequestRecord> = read_requests(&cell.join("requests.parquet")).unwrap();
    assert_eq!(reqs.len(), 20);
    assert!(reqs.iter().all(|q| q.success));
    let out_tokens: u64 = reqs.iter().map(|q| u64::from(q.output_tokens)).sum();
    let in_tokens: u64 = reqs.iter().map(|q| u64::from(q.input_tokens)).sum();
    assert_eq!(r.total_tokens, out_tokens);
    assert_eq!(r.total_output_tokens, out_tokens);
    assert_eq!(r.total_input_tokens, in_tokens);
    assert!(out_tokens > 100);
    assert!(
        reqs.iter()
            .all(|q| q.token_times_s.len() == q.output_tokens as usize)
    );
    assert!(
        reqs.iter()
            .all(|q| q.input_tokens <= 256 && q.output_tokens <= 64)
    );
    assert_eq!(r.extended_metrics.batch.num_batches, Some(5));
    // The window in time bins: they add up to the window's energy, the tokens to the
    // window's, and the idle share is what the bins say.
    let tl = r.timeline.as_ref().expect("a timeline");
    assert_eq!(tl.file, "timeline.parquet");
    assert_eq!(tl.bin_seconds, 10.0);
    let bins = llem_results::read_timeline(&cell.join("timeline.parquet")).unwrap();
    assert_eq!(bins.len(), tl.bins);
    let [t0, t1] = r.measurement_window_s.unwrap();
    assert!((bins.last().unwrap().end_s - (t1 - t0)).abs() < 1e-9);
    let binned_j: f64 = bins.iter().map(|b| b.energy_j).sum();
    assert!(
        (binned_j - r.total_energy_j).abs() <= 0.005 * r.total_energy_j,
        "bins {binned_j} J, window {} J",
        r.total_energy_j
    );
    let in_window: u64 = reqs
        .iter()
        .flat_map(|q| &q.token_times_s)
        .filter(|t| **t >= t0 && **t < t1)
        .count() as u64;
    assert_eq!(bins.iter().map(|b| b.output_tokens).sum::<u64>(), in_window);
    let idle_j: f64 = bins.iter().map(|b| b.idle_energy_j).sum();
    assert!((tl.idle_energy_j - idle_j).abs() < 1e-9);
    assert!((tl.idle_energy_share.unwrap() - idle_j / binned_j).abs() < 1e-9);

    // Energy: the result's window energy recomputes from timeseries.parquet.
    let [t0, t1] = r.measurement_window_s.unwrap();
    close(r.total_inference_time_sec, t1 - t0, "window length");
    let ts = read_timeseries(&cell.join("timeseries.parquet")).unwrap();
    let breakdown = r.energy_breakdown.as_ref().unwrap();
    assert!(!breakdown.domains.is_empty());
    let mut total = 0.0;
    for d in &breakdown.domains {
        let rows: Vec<usize> = (0..ts.len()).filter(|&i| ts.domain[i] == d.name).collect();
        let t: Vec<f64> = rows.iter().map(|&i| ts.t_s[i]).collect();
        assert!(
            t[0] <= t0 && *t.last().unwrap() >= t1,
            "{}: samples cover the window",
            d.name
        );
        let p: Vec<f64> = rows.iter().map(|&i| ts.power_w[i].unwrap()).collect();
        let e = integrate(&t, &p, t0, t1);
        close(d.energy_j, e, &d.name);
        total += e;
    }
    close(r.total_energy_j, total, "total energy");
    let adjusted = (total - r.baseline_power_w.unwrap() * (t1 - t0)).max(0.0);
    close(r.energy_adjusted_j.unwrap(), adjusted, "adjusted energy");
    close(
        r.mj_per_tok_total.unwrap(),
        total / out_tokens as f64 * 1000.0,
        "mJ/token",
    );

    // Latency: the percentiles recompute from the per-token timestamps.
    let l = r.latency_stats.as_ref().unwrap();
    assert_eq!(l.measurement_mode, "true_streaming");
    let ttft: Vec<f64> = reqs
        .iter()
        .map(|q| (q.first_token_s.unwrap() - q.submit_s) * 1e3)
        .collect();
    assert_eq!(l.ttft_samples, 20);
    close(
        l.ttft_median_ms.unwrap(),
        percentile(&ttft, 50.0),
        "ttft p50",
    );
    close(l.ttft_p99_ms.unwrap(), percentile(&ttft, 99.0), "ttft p99");
    let mut itl = Vec::new();
    for q in &reqs {
        let d: Vec<f64> = q
            .token_times_s
            .windows(2)
            .map(|w| (w[1] - w[0]) * 1e3)
            .collect();
        if d.len() >= 3 {
            itl.extend_from_slice(&d[1..d.len() - 1]);
        }
    }
    assert_eq!(l.itl_samples, itl.len());
    close(
        l.itl_mean_ms.unwrap(),
        itl.iter().sum::<f64>() / itl.len() as f64,
        "itl mean",
    );
    close(l.itl_p95_ms.unwrap(), percentile(&itl, 95.0), "itl p95");
    let e2e: Vec<f64> = reqs.iter().map(|q| (q.end_s - q.submit_s) * 1e3).collect();
    close(l.e2e_p90_ms.unwrap(), percentile(&e2e, 90.0), "e2e p90");

    // The rest of the record is filled with measured values.
    let fl = r.flops.as_ref().unwrap();
    assert!(r.total_flops.unwrap() > 0.0);
    // Per token: decode FLOPs per output token, prefill FLOPs per input token (seed 000).
    close(
        r.flops_per_output_token.unwrap(),
        fl.decode_flops / r.total_output_tokens as f64,
        "decode flops per token",
    );
    close(
        r.flops_per_input_token.unwrap(),
        fl.prefill_flops / r.total_input_tokens as f64,
        "prefill flops per token",
    );
    assert_eq!(r.flops.as_ref().unwrap().method, "architecture");
    // n_warmup counts prompts (seed 003): 4, one latency each.
    let w = r.warmup_result.as_ref().unwrap();
    assert_eq!(w.iterations_completed, 4);
    assert_eq!(w.latencies_ms.len(), 4);
    // One batch of 4 is one observation: no CV, and nothing claimed converged.
    assert_eq!((w.final_cv, w.converged), (None, false), "{w:?}");
    assert!(r.reproducibility_notes.contains("estimate"));
    assert_eq!(
        r.environment.model.as_ref().unwrap().dtype.as_deref(),
        Some("Q4_1")
    );
    assert!(
        r.measurement_warnings
            .iter()
            .any(|w| w.contains("estimate"))
    );
}

#[test]
fn a_missing_model_is_a_clear_error_and_leaves_nothing_behind() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("results");
    let o = llem(
        home.path(),
        &[
            "run",
            "-m",
            "no-such-model.gguf",
            "-o",
            out.to_str().unwrap(),
            "--quiet",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("model `no-such-model.gguf` not found"),
        "{err}"
    );
    assert!(err.contains("fetch-assets.sh"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.count())
        .into_iter()
        .collect();
    assert!(left.is_empty() || left == [0], "{left:?}");
}

/// Runs `yaml` (with a RAPL zone when `rapl`), sends SIGINT once the line of `phase` is
/// printed, and returns how long the run took to stop after it, with what it printed then.
fn interrupt_during(
    phase: &str,
    yaml_text: &str,
    rapl: bool,
) -> (std::time::Duration, Vec<String>) {
    use std::io::{BufRead, BufReader};
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("sys")).unwrap();
    let zone = if rapl {
        Some(common::rapl_zone(&home.path().join("powercap"), 20.0))
    } else {
        std::fs::create_dir_all(home.path().join("powercap")).unwrap();
        None
    };
    let yaml = home.path().join("long.yaml");
    std::fs::write(&yaml, yaml_text).unwrap();
    let out = home.path().join("results");
    let mut child = Command::new(env!("CARGO_BIN_EXE_llem"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("LLEM_CONFIG_PATH", home.path().join("none.yaml"))
        .env("LLEM_ASSETS", assets())
        .env("LLEM_POWERCAP_ROOT", home.path().join("powercap"))
        .env("LLEM_SYSFS_ROOT", home.path().join("sys"))
        .args(["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // stderr is not a terminal, so each phase is a plain line; interrupt once in `phase`.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let there = line.starts_with(&format!("llem: {phase}"));
        seen.push(line);
        if there {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|l| l.starts_with(&format!("llem: {phase}"))),
        "{seen:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let took = sent.elapsed();
    if let Some((stop, writer)) = zone {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = writer.join();
    }
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("cancelled")), "{rest:?}");
    // Nothing half-written: no result, and the empty directories are gone.
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    (took, rest)
}

#[test]
fn ctrl_c_during_the_window_stops_cleanly_with_130_and_no_result() {
    let _machine = common::shared();
    interrupt_during(
        "measure",
        "name: long\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\n\
         dataset: {source: synthetic, n_prompts: 50, synthetic: {input_tokens: 32, output_tokens: 200}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n",
        false,
    );
}

/// A 60 s baseline is not waited out: Ctrl-C reaches it within a second.
#[test]
fn ctrl_c_during_the_baseline_stops_within_a_second() {
    let _machine = common::shared();
    let (took, rest) = interrupt_during(
        "baseline",
        "name: idle\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 8}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: true, duration_seconds: 60}\n",
        true,
    );
    assert!(
        took < std::time::Duration::from_millis(1000),
        "stopped {took:?} after SIGINT: {rest:?}"
    );
}

#[test]
fn counter_energy_of_the_window_matches_timeseries_and_the_written_rate() {
    let _machine = common::shared();
    let (home, stop, writer) = home_at_20_watts();
    let yaml = home.path().join("counter.yaml");
    std::fs::write(
        &yaml,
        "name: counter\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 8, synthetic: {input_tokens: 32, output_tokens: 48}}\n\
         llamacpp: {batch_size: 4}\nwarmup: {n_warmup: 1, thermal_floor_seconds: 0}\n\
         baseline: {enabled: false}\n",
    )
    .unwrap();
    let out = home.path().join("results");
    let o = llem(
        home.path(),
        &[
            "run",
            yaml.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--quiet",
            "--interval",
            "20ms",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // The writer moves the counter every ~0.2 ms, unless the machine starves its thread;
    // its longest stall, measured, is how long the counter stood still.
    let stall_s = writer.join().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let study = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let cell = std::fs::read_dir(&study)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let r: ExperimentResult =
        serde_json::from_slice(&std::fs::read(cell.join("result.json")).unwrap()).unwrap();
    assert_eq!(r.energy_source.as_deref(), Some("counter"));
    assert_eq!(r.total_output_tokens, 8 * 48);
    let [t0, t1] = r.measurement_window_s.unwrap();
    // The counter, cumulative in timeseries.parquet, interpolated at the window edges
    // between its updates: a read that repeats the one before saw no update (dropped), and
    // each update happened, on average, half the counter's measured period before the read
    // that saw it (or half the time since the read before, if that is shorter).
    let ts = read_timeseries(&cell.join("timeseries.parquet")).unwrap();
    let rows: Vec<usize> = (0..ts.len())
        .filter(|&i| ts.domain[i] == "package-0")
        .collect();
    let period = r.energy_uncertainty.as_ref().unwrap().domains[0]
        .update_period_s
        .unwrap();
    let (mut t, mut e): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for (k, &i) in rows.iter().enumerate() {
        let v = ts.energy_j[i].unwrap();
        match k.checked_sub(1).map(|p| rows[p]) {
            None => {
                t.push(ts.t_s[i]);
                e.push(v);
            }
            Some(p) if ts.energy_j[p].unwrap() != v => {
                t.push(ts.t_s[i] - period.min(ts.t_s[i] - ts.t_s[p]) / 2.0);
                e.push(v);
            }
            Some(_) => {}
        }
    }
    // Between updates, the straight line; before the first and after the last, the counter
    // held: a writer starved at the end of the window leaves reads that repeat, and the
    // counter did not advance there (extrapolating the last update would invent energy).
    let at = |x: f64| {
        if x <= t[0] {
            return e[0];
        }
        if x >= t[t.len() - 1] {
            return e[e.len() - 1];
        }
        let i = t.partition_point(|v| *v <= x).clamp(1, t.len() - 1);
        e[i - 1] + (e[i] - e[i - 1]) * (x - t[i - 1]) / (t[i] - t[i - 1])
    };
    close(r.total_energy_j, at(t1) - at(t0), "counter window energy");
    // And the counter advanced at 20 W (the writer's clock differs from llem's by the
    // sampling interval at most).
    let watts = r.total_energy_j / (t1 - t0);
    assert!((watts - 20.0).abs() < 1.0, "{watts} W");
    // Its bound: the counter's period (the writer moves it every ~0.2 ms), measured before
    // sampling, times 20 W at each edge; the readings cover the window; RAPL documents no
    // accuracy, which the bound says it leaves out.
    let u = r.energy_uncertainty.as_ref().unwrap();
    let d = &u.domains[0];
    assert_eq!((d.name.as_str(), d.sensor.as_str()), ("package-0", "rapl"));
    let period = d.update_period_s.unwrap();
    assert!(
        period > 0.0 && period < 0.005_f64.max(stall_s),
        "{period} s (writer stalled up to {stall_s} s)"
    );
    // The edge term is the period times the counter's power at each edge (the slope of its
    // updates around it): about 20 W, more where a starved writer caught up in one jump.
    let slope = |x: f64| {
        let k = t.partition_point(|v| *v < x).clamp(1, t.len() - 1);
        (e[k] - e[k - 1]) / (t[k] - t[k - 1])
    };
    close(
        d.edge_bound_j,
        period * (slope(t0) + slope(t1)),
        "edge bound",
    );
    assert!(d.coverage > 0.99, "{}", d.coverage);
    assert_eq!(d.accuracy, None);
    assert!(
        u.notes
            .iter()
            .any(|n| n.contains("RAPL documents no accuracy"))
    );
    // The bound is its parts: edges, uncovered time at the peak power, no accuracy term. On
    // a busy machine the sampler may miss a beat (coverage just under 1), so the tight
    // figure is asserted on the edges alone; the sum is checked exactly.
    assert!((d.bound_j.unwrap() - (d.edge_bound_j + d.gap_bound_j)).abs() < 1e-12);
    assert!((u.bound_j.unwrap() - d.bound_j.unwrap()).abs() < 1e-12);
    assert!((u.relative.unwrap() - u.bound_j.unwrap() / r.total_energy_j).abs() < 1e-9);
    assert!(d.edge_bound_j / r.total_energy_j < 0.01);
    assert!(d.coverage < 1.0 || d.gap_bound_j == 0.0, "{d:?}");
    let per_tok = u.mj_per_tok.unwrap();
    assert!((per_tok - u.bound_j.unwrap() / (8.0 * 48.0) * 1000.0).abs() < 1e-9);
}

/// Every phase's energy, on a package drawing a known 20 W throughout: baseline (its idle
/// power times its length), load, warmup, thermal floor, measurement and teardown each at
/// 20 W over its own span, and the lifecycle the sum of them.
/// Phases follow one another without overlap (a joule counted in two phases would count
/// twice in `lifecycle_energy_j`).
fn assert_phases_do_not_overlap(phases: &[serde_json::Value]) {
    for pair in phases.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (a_start, a_end) = (a["start_s"].as_f64().unwrap(), a["end_s"].as_f64().unwrap());
        let b_start = b["start_s"].as_f64().unwrap();
        assert!(a_start <= a_end, "{a}");
        assert!(a_end <= b_start + 1e-9, "{a} overlaps {b}");
    }
}

#[test]
fn each_phase_has_its_energy_and_the_lifecycle_sums_them() {
    let _machine = common::shared();
    let (home, stop, writer) = home_at_20_watts();
    let (_, r) = run_ok(
        home.path(),
        "phases",
        "name: phases\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\nllamacpp: {batch_size: 4}\n\
         dataset: {source: synthetic, n_prompts: 4, synthetic: {input_tokens: 16, output_tokens: 16}}\n\
         warmup: {n_warmup: 1, thermal_floor_seconds: 1}\n\
         baseline: {enabled: true, strategy: fresh, duration_seconds: 5}\n",
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stall_s = writer.join().unwrap();
    let phases = r["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "baseline",
            "load",
            "warmup",
            "thermal_floor",
            "measure",
            "teardown"
        ],
        "{r}"
    );
    assert_phases_do_not_overlap(phases);
    // The plan's warning about a short thermal floor is kept with the numbers it concerns.
    let warnings = r["measurement_warnings"].to_string();
    assert!(
        warnings.contains("warmup.thermal_floor_seconds is 1 s, below the 30 s"),
        "{warnings}"
    );
    let mut sum = 0.0;
    for p in phases {
        let d = p["end_s"].as_f64().unwrap() - p["start_s"].as_f64().unwrap();
        let e = p["energy_j"].as_f64().unwrap_or_else(|| panic!("{p}"));
        // 20 W within a sampling interval's worth at each edge, and the counter's measured
        // stall at each edge (a starved writer lags the truth).
        assert!(
            (e - 20.0 * d).abs() < 20.0 * (0.25 + 2.0 * stall_s) + 0.05 * e,
            "{p}: {e} J over {d} s"
        );
        sum += e;
    }
    let lifecycle = r["lifecycle_energy_j"].as_f64().unwrap();
    assert!((lifecycle - sum).abs() < 1e-9, "{lifecycle} vs {sum}");
    assert!(lifecycle > r["total_energy_j"].as_f64().unwrap());
}

/// The window split by the embedded engine's own passes: the parts add up to the headline,
/// the requests' energies to the window, and the split moves with the workload: more prompt
/// tokens (`max_input_tokens`) spend a larger share in prefill, more reply tokens
/// (`max_output_tokens`) a larger share in decode. One engine thread: with several, a loaded
/// box stretches each pass by its thread barriers, and a decode pass (little work, as many
/// barriers) far more than a prefill pass, which moved the shares on CI.
#[test]
fn prefill_and_decode_energy_follow_the_prompt_and_reply_lengths() {
    let _machine = common::shared();
    let (home, stop, writer) = home_at_20_watts();
    let run = |name: &str, max_in: u32, max_out: u32| {
        let (_, r) = run_ok(
            home.path(),
            name,
            &format!(
                "name: {name}\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
                 llamacpp: {{batch_size: 2, n_threads: 1}}\nmax_input_tokens: {max_in}\nmax_output_tokens: {max_out}\n\
                 dataset: {{source: synthetic, n_prompts: 4, synthetic: {{input_tokens: 240, output_tokens: 96}}}}\n\
                 warmup: {{n_warmup: 1, thermal_floor_seconds: 0}}\nbaseline: {{enabled: false}}\n"
            ),
        );
        let cell = common::walk(&home.path().join(name))
            .into_iter()
            .find(|p| p.ends_with("result.json"))
            .unwrap();
        let reqs = read_requests(&cell.with_file_name("requests.parquet")).unwrap();
        (r, reqs)
    };
    let short = run("short", 24, 8);
    let long_prompts = run("long-prompts", 224, 8);
    let long_replies = run("long-replies", 24, 96);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writer_gap_s = writer.join().unwrap();

    let prefill_share = |(r, reqs): &(serde_json::Value, Vec<RequestRecord>)| {
        let b = &r["energy_breakdown"];
        assert_eq!(b["attribution"], "engine_steps", "{b}");
        let raw = b["raw_j"].as_f64().unwrap();
        let (p, d, i) = (
            b["prefill_j"].as_f64().unwrap(),
            b["decode_j"].as_f64().unwrap(),
            b["idle_j"].as_f64().unwrap(),
        );
        assert!(p > 0.0 && d > 0.0 && i >= 0.0, "{b}");
        // The parts are cut from the timeseries curve, the headline from the edge reads; they
        // agree to 0.5 % on a counter that updates steadily (RAPL: about every millisecond).
        // The stand-in counter is a thread that a loaded machine can starve: each of the
        // window's two edges may then be stale by its longest pause at 20 W.
        let tolerance = 0.005 + 2.0 * 20.0 * writer_gap_s / raw;
        assert!(
            ((p + d + i) / raw - 1.0).abs() < tolerance,
            "{p} + {d} + {i} vs {raw} (writer paused up to {writer_gap_s:.3} s)"
        );
        assert_eq!(reqs.len(), 4);
        let mut sum = 0.0;
        for q in reqs {
            let e = q
                .energy
                .unwrap_or_else(|| panic!("request {} has no energy", q.request_id));
            assert!(e.prefill_energy_j > 0.0 && e.decode_energy_j > 0.0, "{e:?}");
            assert!(e.energy_j >= e.prefill_energy_j + e.decode_energy_j - 1e-12);
            sum += e.energy_j;
        }
        // The requests share out exactly the parts.
        assert!(
            (sum / (p + d + i) - 1.0).abs() < 1e-9,
            "requests {sum} J vs parts {} J",
            p + d + i
        );
        assert_eq!(r["energy_per_request_j"]["n"], 4, "{r}");
        let mean = r["energy_per_request_j"]["mean"].as_f64().unwrap();
        assert!((mean * 4.0 / sum - 1.0).abs() < 1e-9);
        p / (p + d)
    };
    let (a, b, c) = (
        prefill_share(&short),
        prefill_share(&long_prompts),
        prefill_share(&long_replies),
    );
    assert!(b > a, "longer prompts: prefill share {b:.3} vs {a:.3}");
    assert!(c < a, "longer replies: prefill share {c:.3} vs {a:.3}");
}

/// `phase_split: both`: the attributed split and optimum-benchmark's difference method side
/// by side. The one-token rerun is a phase of its own (its energy in the lifecycle), its
/// energy is the difference prefill, and the two prefill figures agree in kind: the one-token
/// run also pays for each prompt's first token and its own overhead, so it is at least the
/// attributed prefill's order and never more than the window.
#[test]
fn the_difference_method_runs_beside_the_attributed_split() {
    let _machine = common::shared();
    let (home, stop, writer) = home_at_20_watts();
    let (err, r) = run_ok(
        home.path(),
        "difference",
        "name: difference\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         llamacpp: {batch_size: 2, n_threads: 1}\nmeasurement: {phase_split: both}\n\
         dataset: {source: synthetic, n_prompts: 4, synthetic: {input_tokens: 128, output_tokens: 64}}\n\
         warmup: {n_warmup: 1, thermal_floor_seconds: 0}\nbaseline: {enabled: false}\n",
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stall_s = writer.join().unwrap();
    let b = &r["energy_breakdown"];
    let raw = b["raw_j"].as_f64().unwrap();
    let attributed = b["prefill_j"].as_f64().unwrap();
    let d = &b["difference"];
    let (prefill, decode) = (
        d["prefill_j"].as_f64().unwrap(),
        d["decode_j"].as_f64().unwrap(),
    );
    assert!(((prefill + decode) / raw - 1.0).abs() < 1e-9, "{d}");
    assert!(
        prefill > 0.5 * attributed && prefill < raw,
        "{d} vs attributed {attributed}"
    );
    assert_eq!(d["prefill_run_requests"], 4);
    assert_eq!(d["prefill_run_output_tokens"], 4, "one token each");
    // Its run is a phase at 20 W, counted in the lifecycle.
    let phases = r["phases"].as_array().unwrap();
    let p = phases
        .iter()
        .find(|p| p["phase"] == "prefill_only")
        .unwrap();
    let span = p["end_s"].as_f64().unwrap() - p["start_s"].as_f64().unwrap();
    assert!(
        (prefill - 20.0 * span).abs() < 0.1 * prefill + 0.5 + 2.0 * 20.0 * stall_s,
        "{p}, the counter stalled up to {stall_s} s"
    );
    assert!((p["energy_j"].as_f64().unwrap() - prefill).abs() < 1e-6 * prefill.max(1.0) + 1e-6);
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["load", "warmup", "measure", "prefill_only", "teardown"]
    );
    // The one-token rerun is not part of teardown too: each joule in one phase only.
    assert_phases_do_not_overlap(phases);
    let sum: f64 = phases.iter().map(|p| p["energy_j"].as_f64().unwrap()).sum();
    let lifecycle = r["lifecycle_energy_j"].as_f64().unwrap();
    assert!((lifecycle - sum).abs() < 1e-9, "{lifecycle} vs {sum}");
    assert!(err.is_empty() || !err.contains("panicked"), "{err}");
}

/// Two single runs of one name into one directory, started together (in the same second,
/// as a script's loop starts them): each gets its own directory and keeps its result.
#[test]
fn two_runs_started_together_keep_both_results() {
    let _machine = common::shared();
    let home = sandbox();
    let yaml = home.path().join("tiny.yaml");
    std::fs::write(
        &yaml,
        "name: tiny\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\n\
         dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4, distribution: fixed}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n",
    )
    .unwrap();
    let out = home.path().join("results");
    let spawn = || {
        llem_command(home.path())
            // Two runs on one device at once are refused by the device locks; this test is
            // about their directories, as when a scheduler owns the devices.
            .args([
                "run",
                yaml.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "-q",
                "--no-lock",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let mut ids = Vec::new();
    for dir in std::fs::read_dir(&out).unwrap() {
        let dir = dir.unwrap().path();
        let cells: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("result.json").is_file())
            .collect();
        assert_eq!(cells.len(), 1, "{}: {cells:?}", dir.display());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(cells[0].join("result.json")).unwrap())
                .unwrap();
        ids.push(r["experiment_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1]);
}

/// Output that cannot be written (a full disk under the log, here `/dev/full`, which
/// answers every write with ENOSPC) does not abort the run: the measurement is still
/// made and saved, and a study's cells still complete.
#[test]
fn unwritable_output_does_not_abort_the_run() {
    let _machine = common::shared();
    let home = sandbox();
    let yaml = home.path().join("s.yaml");
    std::fs::write(
        &yaml,
        "name: full\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\n\
         dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n\
         sweep: {llamacpp.batch_size: [1, 2]}\n\
         study_execution: {n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
    )
    .unwrap();
    let out = home.path().join("results");
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let status = llem_command(home.path())
        .args(["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .stdout(full())
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let results: Vec<PathBuf> = common::walk(&out)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
}

/// `max_output_tokens` is a hard cap: synthetic replies asked to be 24 tokens long under a
/// cap of 4 are 4 tokens, and the plan and the result say so.
#[test]
fn max_output_tokens_caps_synthetic_replies() {
    let _machine = common::shared();
    let home = sandbox();
    let (err, r) = run_ok(
        home.path(),
        "cap",
        "name: cap\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nmax_output_tokens: 4\n\
         dataset: {source: synthetic, n_prompts: 3, synthetic: {input_tokens: 8, output_tokens: 24}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n",
    );
    assert!(
        err.contains("dataset.synthetic.output_tokens (24) exceeds max_output_tokens (4)"),
        "{err}"
    );
    assert_eq!(r["total_output_tokens"], 12, "{r}");
    let warnings = r["measurement_warnings"].to_string();
    assert!(
        warnings.contains("3 of 3 prompts asked for more than max_output_tokens = 4"),
        "{warnings}"
    );
}

/// The default dataset is compiled in: with an empty asset cache and the model given by its
/// path, an experiment that names no dataset runs the AIEnergyScore prompts.
#[test]
fn the_default_prompts_need_no_asset_cache() {
    let _machine = common::shared();
    let home = sandbox();
    let model = assets().join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    let yaml = home.path().join("bare.yaml");
    std::fs::write(
        &yaml,
        format!(
            "name: bare\nmodel: {}\nmax_output_tokens: 2\nwarmup: {{enabled: false}}\n\
             baseline: {{enabled: false}}\n",
            model.display()
        ),
    )
    .unwrap();
    let empty = home.path().join("no-assets");
    std::fs::create_dir_all(&empty).unwrap();
    let out = home.path().join("bare");
    let o = llem_command(home.path())
        .env("LLEM_ASSETS", &empty)
        .args([
            "run",
            yaml.to_str().unwrap(),
            "-n",
            "3",
            "-o",
            out.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r = only_result(&out);
    assert_eq!(
        r["effective_config"]["dataset"]["source"], "aienergyscore",
        "{r}"
    );
    assert_eq!(r["effective_config"]["dataset"]["n_prompts"], 3, "{r}");
    let tokens = r["total_output_tokens"].as_u64().unwrap();
    assert!((3..=6).contains(&tokens), "{r}");
    assert!(std::fs::read_dir(&empty).unwrap().next().is_none());
}

/// Seed 001's `output.save_timeseries: false` is `gpu_telemetry: false`: no sidecar, and the
/// result's `timeseries` is null.
#[test]
fn output_save_timeseries_false_writes_no_sidecar() {
    let _machine = common::shared();
    let home = sandbox();
    let (_, r) = run_ok(
        home.path(),
        "nots",
        "name: nots\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput: {save_timeseries: false}\n\
         dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 2}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n",
    );
    assert!(r["timeseries"].is_null(), "{r}");
    assert_eq!(r["effective_config"]["gpu_telemetry"], false);
    let files: Vec<PathBuf> = common::walk(&home.path().join("nots"));
    assert!(
        files.iter().all(|f| !f.ends_with("timeseries.parquet")),
        "{files:?}"
    );
}

/// Convergence-mode warmup counts prompts too, in batches of the measured size: judged
/// after each batch of 2, it stops once `min_prompts` are run and the CV is met, and never
/// runs more than `max_prompts` (7 prompts: batches of 2, 2, 2, 1).
#[test]
fn convergence_warmup_counts_prompts_between_min_and_max() {
    let _machine = common::shared();
    let home = sandbox();
    for min in [3, 7] {
        let (_, r) = run_ok(
            home.path(),
            &format!("cv-{min}"),
            &format!(
                "name: cv\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nllamacpp: {{batch_size: 2}}\n\
                 dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 8, output_tokens: 3}}}}\n\
                 warmup: {{convergence_detection: true, cv_threshold: 0.5, min_prompts: {min}, \
                 max_prompts: 7, window_size: 3, thermal_floor_seconds: 0}}\nbaseline: {{enabled: false}}\n"
            ),
        );
        let w = &r["warmup_result"];
        let n = w["iterations_completed"].as_u64().unwrap();
        assert_eq!(w["latencies_ms"].as_array().unwrap().len() as u64, n, "{w}");
        assert_eq!(w["mode"], "cv_convergence");
        if min == 7 {
            assert_eq!(n, 7, "{w}");
        } else {
            // Converged after the 2nd or 3rd batch, or ran to the cap without converging.
            let converged = w["converged"].as_bool().unwrap();
            assert!(
                (converged && (n == 4 || n == 6)) || (!converged && n == 7),
                "{w}"
            );
        }
    }
}

/// Steady state on the embedded engine: 8 prompts in batches of 2 have a window (opened at
/// the 2nd first token, closed at the 5th end); 2 prompts do not, and the result says by
/// how much.
#[test]
fn the_embedded_engine_measures_a_steady_state() {
    let _machine = common::shared();
    let home = sandbox();
    for (n, want) in [(8, "steady_state"), (2, "total")] {
        let (_, r) = run_ok(
            home.path(),
            &format!("ss-{n}"),
            &format!(
                "name: ss\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nllamacpp: {{batch_size: 2}}\n\
                 measurement: {{methodology: steady_state}}\n\
                 dataset: {{source: synthetic, n_prompts: {n}, synthetic: {{input_tokens: 8, output_tokens: 6}}}}\n\
                 warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n"
            ),
        );
        assert_eq!(
            r["measurement_methodology"], want,
            "{}",
            r["measurement_warnings"]
        );
        if n == 2 {
            let w = r["measurement_warnings"].to_string();
            assert!(
                w.contains("need at least B + 2 = 4 requests, 2 more than this run"),
                "{w}"
            );
        } else {
            let [a, b] = [&r["measurement_window_s"][0], &r["measurement_window_s"][1]]
                .map(|v| v.as_f64().unwrap());
            assert!(b > a, "{a} {b}");
        }
    }
}

/// The embedded engine runs on the CPU: on a host with a GPU (an amdgpu card drawing 150 W,
/// its sysfs tree standing in for the driver) its headline is the CPU package, never the
/// idle GPU's joules, and asking for GPU layers from a CPU-only llama.cpp build changes
/// nothing: the engine says where it ran.
#[test]
fn the_embedded_engine_on_a_gpu_host_reports_cpu_energy_as_its_headline() {
    let _machine = common::shared();
    let home = sandbox();
    common::amdgpu_card(&home.path().join("sys"), 150.0);
    let (stop, writer) = common::rapl_zone(&home.path().join("powercap"), 20.0);
    for (name, layers) in [("cpu-scope", 0), ("cpu-build-offload", -1)] {
        let (_, r) = run_ok(
            home.path(),
            name,
            &format!(
                "name: {name}\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nmax_output_tokens: 8\n\
                 llamacpp: {{n_gpu_layers: {layers}}}\n\
                 dataset: {{source: synthetic, n_prompts: 4, synthetic: {{input_tokens: 8, output_tokens: 8}}}}\n\
                 warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n"
            ),
        );
        assert_eq!(r["energy_scope"], "cpu", "{name}: {r}");
        let b = &r["energy_breakdown"];
        assert_eq!(
            b["scope_domains"],
            serde_json::json!(["package-0"]),
            "{name}"
        );
        let total = r["total_energy_j"].as_f64().unwrap();
        let gpu = b["gpu"]["energy_j"].as_f64().unwrap();
        let window = r["total_inference_time_sec"].as_f64().unwrap();
        assert!(
            (gpu - 150.0 * window).abs() / (150.0 * window) < 0.05,
            "{name}: gpu {gpu} J over {window} s"
        );
        close(total, b["cpu_package"]["energy_j"].as_f64().unwrap(), name);
        close(r["system_energy_j"].as_f64().unwrap(), total + gpu, name);
        assert!(
            r["energy_per_device_j"].is_null(),
            "{name}: no GPU was used"
        );
        assert!(r["emissions"]["system_co2_g"].as_f64().unwrap() > 0.0);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}

/// `lora:` through `llem run`: the plan accepts a GGUF adapter for the embedded engine, the
/// engine applies it (the result names it), and a missing adapter stops the plan at its line.
#[test]
fn a_lora_adapter_is_applied_by_llem_run_or_refused_at_plan_time() {
    let _machine = common::shared();
    let home = sandbox();
    let (_, adapter) = lora::make(
        &assets().join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        home.path(),
    );
    let yaml = |path: &str| {
        format!(
            "name: lora\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nmax_output_tokens: 4\n\
             lora: {{adapter_path: {path}, scale: 0.75}}\n\
             dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 8, output_tokens: 4}}}}\n\
             warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n"
        )
    };
    let (_, r) = run_ok(home.path(), "lora", &yaml(&adapter.display().to_string()));
    let info = r["environment"]["engine_system_info"]
        .as_str()
        .unwrap_or_default();
    assert!(
        info.contains(&format!("LoRA adapter {} at scale 0.75", adapter.display())),
        "{info}"
    );

    let file = home.path().join("missing.yaml");
    std::fs::write(&file, yaml("/nonexistent/adapter.gguf")).unwrap();
    let o = llem(home.path(), &["run", file.to_str().unwrap(), "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("adapter `/nonexistent/adapter.gguf` not found")
            && err.contains("missing.yaml:4:"),
        "{err}"
    );
}
