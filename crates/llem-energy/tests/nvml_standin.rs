//! The real NVML path — discovery, sensor, meter, window energy, throttle detection, device
//! selection — against a stand-in `libnvidia-ml.so.1` the test builds and scripts
//! (`support/nvml_standin.c`): the driver is the one part replaced.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use llem_testkit::nvml_standin as standin;

use std::time::{Duration, Instant};

use llem_config::model::EnergySampler;
use llem_energy::sensors::nvml::{self, NvmlMode};
use llem_energy::throttle::{self, HW_POWER_BRAKE, SW_THERMAL};
use llem_energy::{EnergySource, Meter, MeterConfig, SensorEnv, Telemetry};

/// Three GPUs: an H100 with the energy counter and instantaneous power, a V100-era board with
/// neither, an A100 in MIG mode.
const FLEET: &str = "driver 550.54.15
gpu uuid=GPU-aaaa-1111 name=NVIDIA_H100_80GB_HBM3 power_w=300 base_mj=4000000000000
gpu uuid=GPU-bbbb-2222 name=Tesla_P100 counter=0 instant=0 persistence=0 power_w=90
gpu uuid=GPU-cccc-3333 name=NVIDIA_A100 mig=1 power_w=60
";

fn env(cuda_visible_devices: Option<&str>) -> SensorEnv {
    SensorEnv {
        powercap_root: "/nonexistent".into(),
        sysfs_root: "/nonexistent".into(),
        proc_root: "/proc".into(),
        cuda_visible_devices: cuda_visible_devices.map(str::to_string),
        cpu_tdp_w: None,
        nvml: true,
        hwmon_root: "/nonexistent".into(),
        node: Default::default(),
    }
}

/// Samples `sensors` every `interval` (slow fields every `detail`) for `seconds`, with times
/// from `epoch`.
fn record_from(
    sensors: Vec<Box<dyn llem_energy::Sensor>>,
    epoch: Instant,
    (interval, detail): (Duration, Duration),
    seconds: f64,
) -> Telemetry {
    let meter = Meter::start(
        sensors,
        MeterConfig {
            interval,
            detail_interval: detail,
            ..MeterConfig::default()
        },
        epoch,
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    meter.stop().unwrap()
}

/// Samples `sensors` every `interval` for `seconds`.
fn record(
    sensors: Vec<Box<dyn llem_energy::Sensor>>,
    interval: Duration,
    seconds: f64,
) -> Telemetry {
    record_from(sensors, Instant::now(), (interval, interval), seconds)
}

#[test]
fn gpus_are_found_by_index_and_uuid_and_mig_is_refused() {
    if standin::in_child(
        "nvml_standin::gpus_are_found_by_index_and_uuid_and_mig_is_refused",
        FLEET,
    ) {
        return;
    }
    let nvml = nvml::init().unwrap();
    let gpus = nvml::gpus(&nvml, Some("1,GPU-aaaa")).unwrap();
    let seen: Vec<(u32, u32, &str, &str, bool, bool)> = gpus
        .iter()
        .map(|g| {
            (
                g.nvml_index,
                g.cuda_index,
                g.uuid.as_str(),
                g.name.as_str(),
                g.counter,
                g.instant_power,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, 0, "GPU-bbbb-2222", "Tesla P100", false, false),
            (0, 1, "GPU-aaaa-1111", "NVIDIA H100 80GB HBM3", true, true),
        ]
    );
    assert_eq!(gpus[0].persistence, Some(false));

    // The whole fleet includes the MIG board: refused with the way out, not measured.
    let err = nvml::gpus(&nvml, None).unwrap_err().to_string();
    assert!(
        err.contains("GPU 2 (GPU-cccc-3333) is in MIG mode"),
        "{err}"
    );
    assert!(err.contains("-mig 0"), "{err}");
    let err = nvml::gpus(&nvml, Some("MIG-GPU-cccc-3333/1/0"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("MIG instance"), "{err}");

    // Device locks name physical GPUs: NVML indices, in CUDA order.
    assert_eq!(nvml::visible_indices(Some("GPU-cccc,0")), [2, 0]);
    assert_eq!(nvml::visible_indices(None), [0, 1, 2]);

    // The samplers: `zeus` needs the counter; `nvml` takes power where there is no counter.
    let err = llem_energy::select(EnergySampler::Zeus, &env(Some("1")))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("has no energy counter"), "{err}");
    let chosen = llem_energy::select(EnergySampler::Nvml, &env(Some("1"))).unwrap();
    assert_eq!(chosen.sensors.len(), 1);
    let sensor = &chosen.sensors[0];
    assert_eq!(sensor.domain().name, "gpu0");
    assert_eq!(sensor.driver_version().as_deref(), Some("550.54.15"));
    let notes = sensor.notes().join("\n");
    assert!(notes.contains("persistence mode is off"), "{notes}");
    assert!(notes.contains("no instantaneous power field"), "{notes}");
}

#[test]
fn no_driver_is_a_reason_not_a_crash() {
    // No script: the library loads, but the driver behind it is not there.
    if standin::in_child_with("nvml_standin::no_driver_is_a_reason_not_a_crash", None) {
        return;
    }
    let err = nvml::init().unwrap_err();
    assert_eq!(err.to_string(), "the NVIDIA kernel driver is not loaded");
    let err = llem_energy::select(EnergySampler::Nvml, &env(None))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not loaded"), "{err}");
}

/// A step from 300 W to 120 W at 0.6 s, on a counter that already read 4·10⁹ J.
const STEP: &str = "gpu uuid=GPU-aaaa name=H100 power_w=300 power2_w=120 power2_at_s=0.6 \
base_mj=4000000000000 temp_c=61 sm_clock_mhz=1980 mem_total_mib=81559 mem_used_mib=2048 \
util_gpu=97 util_mem=41
gpu uuid=GPU-bbbb name=H100 instant=0 power_w=300 power2_w=120 power2_at_s=0.6
";

/// Energy and power every 20 ms, the slow fields every 100 ms.
const EVERY_20_MS: (Duration, Duration) = (Duration::from_millis(20), Duration::from_millis(100));

/// Joules of the scripted step between `a` and `b` s after the driver was loaded.
fn step_j(a: f64, b: f64) -> f64 {
    let e = |t: f64| 300.0 * t.min(0.6) + 120.0 * (t - 0.6).max(0.0);
    e(b) - e(a)
}

#[test]
fn the_counter_is_rebased_and_agrees_with_integrated_instant_power() {
    if standin::in_child(
        "nvml_standin::the_counter_is_rebased_and_agrees_with_integrated_instant_power",
        STEP,
    ) {
        return;
    }
    let loaded = Instant::now();
    let sensors = llem_energy::select(EnergySampler::Auto, &env(None))
        .unwrap()
        .sensors;
    let epoch = Instant::now();
    let offset = epoch.duration_since(loaded).as_secs_f64();
    let t = record_from(sensors, epoch, EVERY_20_MS, 1.3);
    let window = t.total_energy();
    let truth = step_j(t.start_s + offset, t.end_s + offset);

    // gpu0: counter rebased to the first read (not 4·10⁹ J), and power integrated alike.
    let gpu0 = &window.domains[0];
    assert_eq!(gpu0.name, "gpu0");
    // (Rebased at the sensor's first read: the update-period measurement before sampling
    // took it, so the first sample holds that measurement's fraction of a joule.)
    // (At most its 0.3 s budget of 300 W: far from 4·10⁹ J.)
    assert!(
        t.series[0].energy_j[0] < 90.0,
        "{}",
        t.series[0].energy_j[0]
    );
    assert_eq!(gpu0.energy_source, EnergySource::Counter);
    let counter = gpu0.counter_j.unwrap();
    let integrated = gpu0.integrated_j.unwrap();
    assert!(
        (counter - truth).abs() / truth < 0.02,
        "{counter} vs {truth}"
    );
    assert!(
        (integrated - counter).abs() / counter < 0.03,
        "instant power integrated to {integrated} J, counter {counter} J"
    );
    assert!(gpu0.peak_power_w.unwrap() > 299.0);
    // The slow fields arrive with the detail reads.
    let s = &t.series[0];
    let i = (0..s.len())
        .find(|i| !s.temperature_c[*i].is_nan())
        .unwrap();
    assert_eq!(s.temperature_c[i], 61.0);
    // Instant and one-second average power are recorded apart: after the step the instant
    // reading is the new 120 W while the average still carries the 300 W before it.
    let after: Vec<usize> = (0..s.len())
        .filter(|&i| (0.75..1.2).contains(&(s.t_s[i] + offset)))
        .collect();
    assert!(!after.is_empty());
    for &i in &after {
        assert!(
            (s.power_w[i] - 120.0).abs() < 1.0,
            "instant {}",
            s.power_w[i]
        );
        assert!(s.power_avg_w[i] > 140.0, "average {}", s.power_avg_w[i]);
    }
    // A board without instant power gives its average as both.
    let g1 = &t.series[1];
    let k = after[0];
    assert!((g1.power_w[k] - g1.power_avg_w[k]).abs() < 1e-9);

    // gpu1 has no instantaneous power: NVML's one-second average lags the step, so its
    // integral disagrees with the counter and says so; the counter is still the headline.
    let gpu1 = &window.domains[1];
    assert_eq!(gpu1.energy_source, EnergySource::Counter);
    assert!((gpu1.energy_j - truth).abs() / truth < 0.02);
    assert!(gpu1.disagreement.unwrap() > 0.05, "{gpu1:?}");
    assert!(
        window
            .warnings
            .iter()
            .any(|w| w.starts_with("gpu1: energy counter and integrated power disagree")),
        "{:?}",
        window.warnings
    );
}

#[test]
fn power_only_is_integrated_from_instant_power() {
    if standin::in_child(
        "nvml_standin::power_only_is_integrated_from_instant_power",
        STEP,
    ) {
        return;
    }
    let loaded = Instant::now();
    let mut sensors = nvml::discover(NvmlMode::PowerOnly, Some("0")).unwrap();
    assert!(!llem_energy::Sensor::has_counter(&sensors[0]));
    let epoch = Instant::now();
    let offset = epoch.duration_since(loaded).as_secs_f64();
    let sensor: Box<dyn llem_energy::Sensor> = Box::new(sensors.remove(0));
    let t = record_from(vec![sensor], epoch, EVERY_20_MS, 1.3);
    let d = &t.total_energy().domains[0];
    let truth = step_j(t.start_s + offset, t.end_s + offset);
    assert_eq!(d.energy_source, EnergySource::Integrated);
    assert!(d.counter_j.is_none());
    assert!(
        (d.energy_j - truth).abs() / truth < 0.03,
        "{d:?} vs {truth}"
    );
}

/// gpu0 held by heat from 0.3 to 0.8 s; gpu1 by a power brake from 0.2 to 0.4 s.
const THROTTLED: &str = "gpu uuid=GPU-aaaa power_w=250 throttle=0x20 throttle_from_s=0.3 \
throttle_until_s=0.8
gpu uuid=GPU-bbbb power_w=250 throttle=0x80 throttle_from_s=0.2 throttle_until_s=0.4
";

#[test]
fn throttle_reasons_become_durations_per_gpu() {
    if standin::in_child(
        "nvml_standin::throttle_reasons_become_durations_per_gpu",
        THROTTLED,
    ) {
        return;
    }
    assert_eq!((SW_THERMAL, HW_POWER_BRAKE), (0x20, 0x80));
    let sensors = llem_energy::select(EnergySampler::Nvml, &env(None))
        .unwrap()
        .sensors;
    let t = record(sensors, Duration::from_millis(10), 1.1);
    let summary = llem_energy::window(&t, t.start_s, t.end_s, None);
    let th = &summary.throttle;
    assert_eq!(th.len(), 2);
    assert_eq!(th[0].domain, "gpu0");
    // Each edge of a span is seen at the first sample after it: off by at most the longest
    // gap between samples this run had (a loaded machine stretches it).
    let tolerance = 2.0 * t.stats.max_gap_s.max(0.025);
    assert!((th[0].thermal_s - 0.5).abs() < tolerance, "{th:?}");
    assert_eq!((th[0].power_cap_s, th[0].hw_slowdown_s), (0.0, 0.0));
    assert!((th[1].hw_slowdown_s - 0.2).abs() < tolerance, "{th:?}");
    assert_eq!(th[1].thermal_s, 0.0);
    let warnings = summary.warnings.join("\n");
    assert!(
        warnings.contains(&format!(
            "gpu0 was throttled: thermal {:.1} s",
            th[0].thermal_s
        )),
        "{warnings}"
    );
    // Outside the throttled span nothing is counted.
    let late = throttle::throttling(&t, 0.9, t.end_s);
    assert!(late.iter().all(|x| !x.any()), "{late:?}");
}

/// gpu1 falls off the bus 0.5 s after the driver is loaded.
const LOST: &str = "gpu uuid=GPU-aaaa power_w=200
gpu uuid=GPU-bbbb power_w=200 lost_after_s=0.5
";

#[test]
fn a_gpu_lost_mid_run_has_no_energy_rather_than_part_of_it() {
    if standin::in_child(
        "nvml_standin::a_gpu_lost_mid_run_has_no_energy_rather_than_part_of_it",
        LOST,
    ) {
        return;
    }
    let sensors = llem_energy::select(EnergySampler::Auto, &env(None))
        .unwrap()
        .sensors;
    let t = record(sensors, Duration::from_millis(20), 1.5);
    assert!(t.series[1].errors > 0);
    let window = t.total_energy();
    let names: Vec<&str> = window.domains.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["gpu0"],
        "the lost GPU must not count as its first 0.5 s"
    );
    let why = window.warnings.join("\n");
    assert!(
        why.contains("gpu1: no readings") && why.contains("its energy for the window is unknown"),
        "{why}"
    );
    // A window that ends before the loss is still measured in full.
    let early = t.energy(t.start_s, t.start_s + 0.3);
    assert_eq!(early.domains.len(), 2, "{:?}", early.warnings);
}
