//! Attribution against a real recording: a powercap tree the test writes at a power that
//! follows a scripted engine's passes (30 W prefilling, 12 W decoding, 5 W between), read by
//! the real RAPL sensor and meter at 100 Hz; the attributed prefill and decode energies must
//! match what the writer put into each within 1 %, and the requests must add up to the
//! window.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llem_energy::sensors::rapl;
use llem_energy::{EnergyCurve, Meter, MeterConfig, Sensor};
use llem_engines::{Step, StepKind};
use llem_harness::attribution;

fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Two batches of two requests from 0.3 s: a 0.4 s prefill, then 20 decode passes of 50 ms
/// with 20 ms between passes; the second request of each batch stops after 10.
fn script() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut t = 0.3;
    for b in 0..2u32 {
        steps.push(Step {
            kind: StepKind::Prefill,
            start_s: t,
            end_s: t + 0.4,
            tokens: vec![(2 * b, 30), (2 * b + 1, 10)],
        });
        t += 0.42;
        for k in 0..20 {
            let mut tokens = vec![(2 * b, 1)];
            if k < 10 {
                tokens.push((2 * b + 1, 1));
            }
            steps.push(Step {
                kind: StepKind::Decode,
                start_s: t,
                end_s: t + 0.05,
                tokens,
            });
            t += 0.07;
        }
    }
    steps
}

/// The power at `t` and the phase it counts to (0 prefill, 1 decode, 2 between passes).
fn power(steps: &[Step], t: f64) -> (f64, usize) {
    match steps.iter().find(|s| t >= s.start_s && t < s.end_s) {
        Some(s) if s.kind == StepKind::Prefill => (30.0, 0),
        Some(_) => (12.0, 1),
        None => (5.0, 2),
    }
}

#[test]
fn prefill_and_decode_energy_match_the_power_the_writer_drew() {
    let root = tempfile::tempdir().unwrap();
    let zone = root.path().join("intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap();
    std::fs::write(zone.join("name"), "package-0\n").unwrap();
    std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
    write_atomically(&zone.join("energy_uj"), "0\n");

    let steps = script();
    let window = (0.2, 3.9);
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let writer_steps = steps.clone();
    let energy_file = zone.join("energy_uj");
    // The writer integrates the scripted power on the shared clock and keeps, per phase,
    // the energy it put in inside the window: the truth the attribution is held to.
    // It also keeps its pauses: a counter left stale by a starved writer misplaces a pass's
    // edge just as a late sample does.
    let writer = std::thread::spawn(move || {
        let (mut last, mut joules) = (0.0_f64, 0.0_f64);
        let mut truth = [0.0_f64; 3];
        let mut pauses: Vec<(f64, f64)> = Vec::new();
        while !flag.load(Ordering::Relaxed) {
            let now = epoch.elapsed().as_secs_f64();
            if now - last > 0.002 {
                pauses.push((last, now));
            }
            // Integrated in 0.1 ms slices so a phase edge inside a slice splits it.
            let mut t = last;
            while t < now {
                let dt = (now - t).min(1e-4);
                let (w, phase) = power(&writer_steps, t + dt / 2.0);
                joules += w * dt;
                if t >= window.0 && t + dt <= window.1 {
                    truth[phase] += w * dt;
                }
                t += dt;
            }
            last = now;
            write_atomically(&energy_file, &format!("{}\n", (joules * 1e6) as u64));
            std::thread::sleep(Duration::from_micros(200));
        }
        (truth, pauses)
    });

    let sensors: Vec<Box<dyn Sensor>> = rapl::discover(root.path())
        .unwrap()
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn Sensor>)
        .collect();
    let cfg = MeterConfig {
        interval: Duration::from_millis(10),
        ..MeterConfig::default()
    };
    let meter = Meter::start(sensors, cfg, epoch).unwrap();
    std::thread::sleep(Duration::from_secs_f64(window.1 + 0.1));
    let telemetry = meter.stop().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (truth, pauses) = writer.join().unwrap();

    let curve = EnergyCurve::of(&telemetry, &["package-0".to_string()]).unwrap();
    let a = attribution::by_steps(&curve, window, &steps);
    let rel = |x: f64, want: f64| ((x - want) / want).abs();
    // 1 % on a machine that kept time. A busy machine stretches some sampling intervals (or
    // the writer's updates) across a pass's edge, where the curve's interpolation cannot
    // place the edge: each such stretch may move up to the largest power step (25 W) times
    // its length from one phase to the other. Those stretches are measured, not assumed.
    let nominal = cfg.interval.as_secs_f64();
    let edges: Vec<f64> = steps.iter().flat_map(|s| [s.start_s, s.end_s]).collect();
    let holds_edge = |a: f64, b: f64| edges.iter().any(|e| *e > a && *e < b);
    let sample_t = &telemetry.series[0].t_s;
    let stretched: f64 = sample_t
        .windows(2)
        .map(|w| (w[0], w[1]))
        .chain(pauses.iter().copied())
        .filter(|(a, b)| b - a > 1.5 * nominal && holds_edge(*a, *b))
        .map(|(a, b)| b - a)
        .sum();
    let slack_j = 25.0 * stretched;
    for (what, got, want) in [
        ("prefill", a.prefill_j, truth[0]),
        ("decode", a.decode_j, truth[1]),
    ] {
        assert!(
            (got - want).abs() < 0.01 * want + slack_j,
            "{what} {got} J vs {want} J drawn (slack {slack_j} J for {stretched} s of stretched \
             intervals across edges)"
        );
    }
    let window_j = telemetry.energy(window.0, window.1).total_j;
    assert!(
        a.sum_warning(window_j).is_none(),
        "{:?}",
        a.sum_warning(window_j)
    );
    // The requests add up to the curve's window exactly, and so to the headline within the
    // check's tolerance (the curve places the window's edges a little differently).
    let requests_j: f64 = a.requests.values().map(|r| r.energy_j).sum();
    let curve_j = curve.between(window.0, window.1);
    assert!(rel(requests_j, curve_j) < 1e-9, "{requests_j} vs {curve_j}");
    assert!(rel(requests_j, window_j) < attribution::SUM_TOLERANCE);
    assert!(
        rel(window_j, truth.iter().sum()) < 0.01,
        "window {window_j} J vs {} J drawn",
        truth.iter().sum::<f64>()
    );
    assert_eq!(a.requests.len(), 4);
}
