//! The composite warmup gate (`warmup.gate`): after the warmup prompts, more warmup rounds
//! run until the device is steady over a trailing window — the sampled power's CoV, the
//! spread of the hottest temperature, no throttling — or until the gate's timeout, which the
//! result and a warning say. Served and offline engines alike: a round is the measurement's
//! batch of the workload's first prompts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use llem_config::{ExperimentConfig, WarmupGate};
use llem_energy::throttle::{HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, SW_THERMAL};
use llem_energy::{Meter, TickSummary};
use llem_engines::{Session, Workload};
use llem_results::result::WarmupGateResult;
use llem_results::stats;

use crate::error::HarnessError;
use crate::progress::{Event, Phase, Progress};
use crate::warmup::Batch;

/// Throttle reasons that fail the gate: heat, the power cap, hardware slowdown.
const THROTTLING: u64 = SW_THERMAL | HW_THERMAL | SW_POWER_CAP | HW_SLOWDOWN | HW_POWER_BRAKE;

/// Judges the ticks of `[now_s - window, now_s]`; `interval_s` is the sampling interval.
pub fn judge(
    gate: &WarmupGate,
    ticks: &[TickSummary],
    now_s: f64,
    interval_s: f64,
) -> WarmupGateResult {
    let from = now_s - gate.window_seconds;
    let inside: Vec<&TickSummary> = ticks
        .iter()
        .filter(|t| t.t_s >= from && t.t_s <= now_s)
        .collect();
    let mut reasons = Vec::new();
    let covered = inside.first().map_or(0.0, |t| now_s - t.t_s);
    if covered + (2.0 * interval_s).max(0.5) < gate.window_seconds {
        reasons.push(format!(
            "{covered:.1} s of samples, not yet the {} s window",
            gate.window_seconds
        ));
    }
    let power: Vec<f64> = inside.iter().filter_map(|t| t.power_w).collect();
    let power_cov = (power.len() >= 3).then(|| stats::cv(&power)).flatten();
    match power_cov {
        None => reasons.push("too few power samples to judge".into()),
        Some(cov) if cov > gate.max_power_cov => {
            reasons.push(format!("power CoV {cov:.3} above {}", gate.max_power_cov))
        }
        Some(_) => {}
    }
    let temps: Vec<f64> = inside.iter().filter_map(|t| t.temperature_c).collect();
    let temperature_range_c = temps
        .iter()
        .copied()
        .reduce(f64::max)
        .zip(temps.iter().copied().reduce(f64::min))
        .map(|(hi, lo)| hi - lo);
    if let Some(r) = temperature_range_c
        && r > gate.max_temperature_range_c
    {
        reasons.push(format!(
            "temperature moved {r:.1} °C, above {} °C",
            gate.max_temperature_range_c
        ));
    }
    let throttle_reasons = inside
        .iter()
        .filter_map(|t| t.throttle_reasons)
        .fold(0, |a, b| a | b)
        & THROTTLING;
    if gate.no_throttle && throttle_reasons != 0 {
        reasons.push(format!("throttled (reasons {throttle_reasons:#x})"));
    }
    WarmupGateResult {
        passed: reasons.is_empty(),
        waited_s: 0.0,
        rounds: 0,
        power_cov,
        temperature_range_c,
        throttle_reasons,
        reasons,
    }
}

/// Runs warmup rounds on `session` until the gate of `cfg` passes or times out; `None`
/// without a gate or a meter (the plan refuses a gate without an energy sampler).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    session: &mut dyn Session,
    cfg: &ExperimentConfig,
    workload: &Workload,
    meter: Option<&Meter>,
    epoch: Instant,
    interval_s: f64,
    progress: &mut dyn Progress,
    cancel: &AtomicBool,
) -> Result<Option<WarmupGateResult>, HarnessError> {
    let (Some(gate), Some(meter)) = (cfg.warmup.gate.as_ref(), meter) else {
        return Ok(None);
    };
    if !cfg.warmup.enabled || workload.prompts.is_empty() {
        return Ok(None);
    }
    progress.event(Event::Start {
        phase: Phase::Warmup,
        total: None,
        detail: format!(
            "until steady over {} s: power CoV <= {}, temperature within {} °C{} (at most {} s)",
            gate.window_seconds,
            gate.max_power_cov,
            gate.max_temperature_range_c,
            if gate.no_throttle {
                ", no throttling"
            } else {
                ""
            },
            gate.timeout_seconds
        ),
    });
    let started = Instant::now();
    let batch = session.batching().batch_size.get() as usize;
    let mut rounds = 0u32;
    let mut sent = 0usize;
    let verdict = loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(HarnessError::Cancelled);
        }
        let now = epoch.elapsed().as_secs_f64();
        let v = judge(
            gate,
            &meter.trail(now - gate.window_seconds),
            now,
            interval_s,
        );
        if v.passed || started.elapsed().as_secs_f64() >= gate.timeout_seconds {
            break v;
        }
        let prompts = (sent..sent + batch)
            .filter_map(|i| workload.prompts.get(i % workload.prompts.len()).cloned())
            .collect();
        sent += batch;
        let mut sink = Batch {
            epoch,
            records: Vec::new(),
            cancel,
        };
        session.run(&workload.with_prompts(prompts), &mut sink)?;
        rounds += 1;
    };
    let result = WarmupGateResult {
        waited_s: started.elapsed().as_secs_f64(),
        rounds,
        ..verdict
    };
    progress.event(Event::Finish {
        phase: Phase::Warmup,
        summary: if result.passed {
            format!("steady after {:.0} s ({rounds} rounds)", result.waited_s)
        } else {
            format!(
                "not steady after {:.0} s: {}",
                result.waited_s,
                result.reasons.join("; ")
            )
        },
    });
    Ok(Some(result))
}

/// The warning of a gate that timed out: the run goes on, flagged.
pub(crate) fn warning(g: &WarmupGateResult) -> Option<String> {
    (!g.passed).then(|| {
        format!(
            "warmup gate not passed after {:.0} s ({}): measured anyway; see warmup_result.gate",
            g.waited_s,
            g.reasons.join("; ")
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn ticks(
        power: impl Fn(f64) -> f64,
        temp: impl Fn(f64) -> Option<f64>,
        throttle: u64,
    ) -> Vec<TickSummary> {
        (0..=400)
            .map(|i| {
                let t = f64::from(i) * 0.1;
                TickSummary {
                    t_s: t,
                    power_w: Some(power(t)),
                    temperature_c: temp(t),
                    throttle_reasons: Some(if t > 35.0 { throttle } else { 0 }),
                }
            })
            .collect()
    }

    #[test]
    fn steady_power_and_temperature_pass_and_each_failure_is_named() {
        let gate = WarmupGate::default();
        // 300 W ± 2 %, 70 °C ± 0.5: steady.
        let steady = ticks(
            |t| 300.0 + 6.0 * (t * 7.0).sin(),
            |t| Some(70.0 + 0.5 * (t / 3.0).sin()),
            0,
        );
        let v = judge(&gate, &steady, 40.0, 0.1);
        assert!(v.passed, "{:?}", v.reasons);
        assert!(v.power_cov.unwrap() < 0.02);
        assert!(v.temperature_range_c.unwrap() <= 1.0);

        // Still heating: 1 °C every 5 s.
        let heating = ticks(|_| 300.0, |t| Some(50.0 + t / 5.0), 0);
        let v = judge(&gate, &heating, 40.0, 0.1);
        assert!(!v.passed);
        assert_eq!(v.reasons, ["temperature moved 6.0 °C, above 2 °C"]);

        // Power swinging between 200 and 300 W.
        let swinging = ticks(
            |t| {
                if (t * 2.0) as i64 % 2 == 0 {
                    200.0
                } else {
                    300.0
                }
            },
            |_| None,
            0,
        );
        let v = judge(&gate, &swinging, 40.0, 0.1);
        assert!(v.reasons[0].starts_with("power CoV 0.2"), "{:?}", v.reasons);
        assert_eq!(v.temperature_range_c, None, "no sensor, no test");

        // Throttled by the power cap at the end.
        let capped = ticks(|_| 300.0, |_| Some(70.0), SW_POWER_CAP);
        let v = judge(&gate, &capped, 40.0, 0.1);
        assert_eq!(v.reasons, ["throttled (reasons 0x4)"]);
        assert_eq!(v.throttle_reasons, SW_POWER_CAP);
        let lenient = WarmupGate {
            no_throttle: false,
            ..WarmupGate::default()
        };
        assert!(judge(&lenient, &capped, 40.0, 0.1).passed);

        // Ten seconds of samples are not a thirty-second window.
        let v = judge(&gate, &steady, 10.0, 0.1);
        assert!(
            v.reasons[0].contains("not yet the 30 s window"),
            "{:?}",
            v.reasons
        );
    }
}
