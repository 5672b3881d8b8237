//! `llem run` without `--dry-run`: measure the planned experiment and print its headline.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use llem_app::ResumeFrom;
use llem_config::StudyPlan;
use llem_results::ExperimentResult;

use crate::cli::RunArgs;
use crate::exit;

fn opt(v: Option<f64>, unit: &str, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$} {unit}"))
}

/// The headline of a result, for the terminal.
fn headline(r: &ExperimentResult, dir: &Path) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n {} on {} ({})",
        r.model_name, r.engine, r.measurement_config_hash
    );
    let _ = writeln!(
        s,
        "   tokens      {} in + {} out in {:.2} s",
        r.total_input_tokens, r.total_output_tokens, r.total_inference_time_sec
    );
    let _ = writeln!(
        s,
        "   throughput  {:.1} tok/s out, {:.1} tok/s total",
        r.avg_tokens_per_second, r.avg_total_tokens_per_second
    );
    energy_lines(&mut s, r);
    if let Some(e) = &r.emissions {
        let _ = writeln!(
            s,
            "   CO2         {} (system {}) at {} gCO2/kWh{}, PUE {}",
            opt(e.co2_g, "g", 3),
            opt(e.system_co2_g, "g", 3),
            e.carbon_intensity_gco2_kwh,
            if e.intensity_source == "configured" {
                ""
            } else {
                " (world average)"
            },
            e.datacenter_pue
        );
    }
    if let Some(l) = &r.latency_stats {
        let _ = writeln!(
            s,
            "   latency     TTFT {} median, {} p99; ITL {} mean (trimmed); TPOT {} mean",
            opt(l.ttft_median_ms, "ms", 1),
            opt(l.ttft_p99_ms, "ms", 1),
            opt(l.itl_mean_ms, "ms", 2),
            opt(l.tpot_mean_ms, "ms", 2)
        );
    }
    if let Some(g) = &r.goodput {
        let bounds: Vec<String> = [
            ("TTFT", g.slo_ttft_ms),
            ("TPOT", g.slo_tpot_ms),
            ("end-to-end", g.slo_e2e_ms),
        ]
        .iter()
        .filter_map(|(name, bound)| bound.map(|b| format!("{name} ≤ {b} ms")))
        .collect();
        let _ = writeln!(
            s,
            "   goodput     {} of {} requests within the SLO ({}): {:.0} %, {}, {} per good request",
            g.requests_meeting_slo,
            g.requests,
            bounds.join(", "),
            g.goodput_fraction * 100.0,
            opt(g.goodput_req_per_s, "req/s", 2),
            opt(g.energy_per_good_request_j, "J", 2)
        );
    }
    if let Some(f) = &r.flops {
        let _ = writeln!(
            s,
            "   FLOPs       {:.3e} ({} estimate, {} confidence)",
            f.value, f.method, f.confidence
        );
    }
    traffic_lines(&mut s, r);
    for w in &r.measurement_warnings {
        let _ = writeln!(s, "   warning: {w}");
    }
    let _ = writeln!(s, "\n   {}", dir.display());
    s
}

/// The headline's replay and time-bin lines: what a trace replay sent and how late, and how
/// much of the window's energy was spent with no request in flight.
fn traffic_lines(s: &mut String, r: &ExperimentResult) {
    use std::fmt::Write;
    if let Some(t) = &r.traffic
        && let Some(tr) = &t.trace
    {
        let cached = tr.cached_prompt_tokens.map_or_else(String::new, |c| {
            format!("; {c} prompt tokens from the cache")
        });
        let _ = writeln!(
            s,
            "   replay      {} ({}): {} requests over {:.1} s (gaps x{}), sent {} late at p50, {} at p99{}{cached}",
            tr.path,
            tr.format,
            tr.requests,
            tr.span_s,
            tr.time_scale,
            opt(t.dispatch_lag_p50_ms, "ms", 1),
            opt(t.dispatch_lag_p99_ms, "ms", 1),
            if tr.kept_up {
                ""
            } else {
                " (fell behind the trace)"
            }
        );
    }
    if let Some(c) = &r.conversations {
        let per = c.energy_per_session_j.as_ref().map_or_else(
            || "energy per conversation not attributed".to_string(),
            |d| {
                format!(
                    "{:.2} J per conversation (p50 {:.2}, p99 {:.2})",
                    d.mean, d.p50, d.p99
                )
            },
        );
        let hits = c.later_turn_cache_hit_rate.map_or_else(String::new, |h| {
            format!("; later turns' prompts {:.0} % from the cache", h * 100.0)
        });
        let _ = writeln!(
            s,
            "   sessions    {} conversations, {} turns: {per}{hits}",
            c.sessions, c.turns
        );
    }
    if let Some(d) = &r.device_settings {
        device_lines(s, d);
    }
    if let Some(tl) = &r.timeline {
        let share = tl
            .idle_energy_share
            .map_or_else(|| "n/a".to_string(), |x| format!("{:.0} %", x * 100.0));
        let _ = writeln!(
            s,
            "   over time   {} bins of {} s; {share} of the window's energy ({:.1} J) with no request in flight",
            tl.bins, tl.bin_seconds, tl.idle_energy_j
        );
    }
}

/// The device settings the run was measured under, and what bound each device.
fn device_lines(s: &mut String, d: &llem_results::result::DeviceSettingsRecord) {
    use std::fmt::Write;
    let mut set: Vec<String> = d
        .settings
        .iter()
        .map(|x| format!("{} {} {}", x.device, x.setting, x.applied))
        .collect();
    set.dedup();
    let _ = writeln!(
        s,
        "   device      {}; {}",
        set.join(", "),
        if d.restored {
            "put back after the run"
        } else {
            "NOT put back: run `llem restore`"
        }
    );
    for b in &d.binding {
        let pct = |x: Option<f64>| x.map_or_else(|| "-".into(), |v| format!("{:.0} %", v * 100.0));
        let _ = writeln!(
            s,
            "               {}: power cap held {} of the window, clock setting {}; mean {} (limit {}), SM {}",
            b.domain,
            pct(b.power_cap_share),
            pct(b.clock_setting_share),
            opt(b.mean_power_w, "W", 1),
            opt(b.power_limit_w, "W", 0),
            opt(b.mean_sm_clock_mhz, "MHz", 0)
        );
    }
}

/// The headline's energy lines: the total, per token with its bound, the prefill/decode
/// split and the lifecycle's phases.
fn energy_lines(s: &mut String, r: &ExperimentResult) {
    use std::fmt::Write;
    let source = r.energy_source.as_deref().unwrap_or("not measured");
    let scope = match r.energy_scope.as_deref() {
        Some("gpu") => "GPU",
        Some("cpu") => "CPU package + DRAM",
        _ => "all domains",
    };
    let _ = writeln!(
        s,
        "   energy      {:.2} J {scope} ({source}); system {}",
        r.total_energy_j,
        opt(r.system_energy_j, "J", 2)
    );
    // The headline figure with its bound: resolution at the window's edges, coverage and
    // the sensors' documented accuracy (energy.md, "How sure a figure is").
    let total = match (r.mj_per_tok_total, r.energy_uncertainty.as_ref()) {
        (Some(x), Some(u)) => match u.mj_per_tok {
            Some(b) => format!("{x:.2} ± {b:.2} mJ"),
            None if u.bound_j.is_none() => format!("{x:.2} mJ (an estimate: no bound)"),
            None => format!("{x:.2} mJ"),
        },
        (x, _) => opt(x, "mJ", 2),
    };
    let _ = writeln!(
        s,
        "   per token   {total} total, {} above a {} baseline",
        opt(r.mj_per_tok_adjusted, "mJ", 2),
        opt(r.baseline_power_w, "W", 2)
    );
    if let Some(u) = &r.energy_uncertainty
        && !u.notes.is_empty()
    {
        for n in &u.notes {
            let _ = writeln!(s, "   bound       {n}");
        }
    }
    if let Some(b) = &r.energy_breakdown
        && let (Some(p), Some(d), Some(i)) = (b.prefill_j, b.decode_j, b.idle_j)
    {
        let share = |x: f64| x / (p + d + i).max(f64::MIN_POSITIVE) * 100.0;
        let per_request = r.energy_per_request_j.map_or_else(String::new, |e| {
            format!(
                "; {:.2} J per request (p50 {:.2}, p99 {:.2})",
                e.mean, e.p50, e.p99
            )
        });
        let _ = writeln!(
            s,
            "   split       prefill {p:.1} J ({:.0} %), decode {d:.1} J ({:.0} %), idle {i:.1} J{per_request}",
            share(p),
            share(d)
        );
    }
    if let Some(d) = r
        .energy_breakdown
        .as_ref()
        .and_then(|b| b.difference.as_ref())
    {
        let _ = writeln!(
            s,
            "   difference  prefill {:.1} J (the prompts again for one token: {:.2} s), decode {:.1} J",
            d.prefill_j, d.prefill_run_s, d.decode_j
        );
    }
    if let Some(l) = r.lifecycle_energy_j {
        // What each phase cost, in the order they ran: a cold start is paid once per run.
        let parts: Vec<String> = r
            .phases
            .iter()
            .map(|p| format!("{} {}", p.phase.replace('_', " "), opt(p.energy_j, "J", 1)))
            .collect();
        let _ = writeln!(s, "   lifecycle   {l:.1} J in all: {}", parts.join(", "));
    }
}

/// A flag the first SIGINT/SIGTERM sets: the harness stops at the next decode step and cleans
/// up. A second signal (the flag already set) exits at once with 130.
pub fn cancel_on_signals() -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(
            sig,
            exit::INTERRUPTED,
            cancel.clone(),
        );
        let _ = signal_hook::flag::register(sig, cancel.clone());
    }
    cancel
}

/// Runs the plan's experiment; returns the exit code.
pub fn execute(plan: &StudyPlan, args: &RunArgs) -> i32 {
    llem_app::logging::init(args.verbose);
    let resume = crate::options::resume(args);
    // A study (or any resume) runs each cell in its own process with a manifest; one
    // experiment runs here, in this process.
    let on_slurm = args.executor == Some(crate::cli::ExecutorArg::Slurm)
        || matches!(
            plan.execution.executor,
            llem_config::ExecutorConfig::Slurm(_)
        );
    if !llem_app::plan::is_single(plan) || resume.is_some() || on_slurm {
        return super::study::run_study(plan, args, resume.unwrap_or(ResumeFrom::New));
    }
    if let Some(pc) = plan.configs.first() {
        for w in &pc.warnings {
            eprintln!("llem: warning: {w}");
        }
    }
    let cancel = cancel_on_signals();
    let mut opts = crate::options::run(args);
    let live = match super::live::start(
        &args.live.options(),
        "experiment",
        &plan.study_name,
        &[("experiment", plan.study_name.clone())],
    ) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if let (Some(l), Some(pc)) = (&live, plan.configs.first()) {
        l.metrics
            .configuration(&plan.study_name, &pc.digest.short(), &pc.config.model);
        opts.live = Some(l.metrics.board());
        l.metrics.staleness(opts.sampling_interval);
    }
    let mut silent = llem_app::Silent;
    let mut bars;
    let display: &mut dyn llem_app::Progress = if args.quiet {
        &mut silent
    } else {
        bars = crate::progress::Bars::new();
        &mut bars
    };
    let outcome = match &live {
        Some(l) => {
            let mut tee = llem_app::live::ProgressTee {
                inner: display,
                metrics: &l.metrics,
            };
            llem_app::run_one(plan, &opts, &mut tee, cancel)
        }
        None => llem_app::run_one(plan, &opts, display, cancel),
    };
    super::live::finish(live);
    match outcome {
        Ok(o) => {
            if args.json {
                match serde_json::to_string_pretty(&o.result) {
                    Ok(s) => println!("{s}"),
                    Err(e) => eprintln!("llem: {e}"),
                }
            }
            eprint!("{}", headline(&o.result, &o.cell_dir));
            exit::OK
        }
        Err(e) => {
            eprintln!("llem: {e}");
            exit::of(&e)
        }
    }
}
