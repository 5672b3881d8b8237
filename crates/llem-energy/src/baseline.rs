//! Baseline (idle) power: measured before the workload, optionally cached, subtracted for
//! adjusted energy.
//!
//! Strategies (`baseline.strategy`):
//! - `fresh`: measure every time.
//! - `cached`: reuse the cache file while it is younger than `cache_ttl_seconds` and was
//!   taken on the same host, sampler and devices; otherwise measure and rewrite it.
//! - `validated`: as `cached`, and every `validation_interval` uses take a short spot check
//!   (at most 5 s); if its power differs from the cached one by more than `drift_threshold`,
//!   measure again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llem_config::{BaselineConfig, BaselineStrategy};
use serde::{Deserialize, Serialize};

use crate::error::{BaselineError, MeterError};
use crate::telemetry::WindowEnergy;

/// Longest spot check of the validated strategy.
pub const SPOT_CHECK: Duration = Duration::from_secs(5);

/// A measured baseline, as stored in the cache file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineRecord {
    /// Average idle power per domain, W.
    pub power_w: BTreeMap<String, f64>,
    /// Sum over domains, W.
    pub total_power_w: f64,
    /// Measurement length, s.
    pub duration_s: f64,
    /// Samples in the measurement.
    pub n_samples: usize,
    /// When it was measured (Unix time, s).
    pub measured_at_unix_s: f64,
    /// Host name.
    pub host: String,
    /// Sampler used.
    pub sampler: String,
    /// Devices measured (`name: device`), which must match for the cache to apply.
    pub devices: Vec<String>,
    /// Uses since the last spot check (validated strategy).
    #[serde(default)]
    pub uses_since_check: u32,
}

impl BaselineRecord {
    /// A record from the energy of an idle window.
    pub fn from_window(
        w: &WindowEnergy,
        identity: &BaselineIdentity,
        measured_at_unix_s: f64,
    ) -> BaselineRecord {
        BaselineRecord {
            // The node's idle power is kept beside the others (for the system figure) but
            // never in the total, which it encloses.
            power_w: w
                .domains
                .iter()
                .chain(&w.node)
                .map(|d| (d.name.clone(), d.avg_power_w))
                .collect(),
            total_power_w: w.domains.iter().map(|d| d.avg_power_w).sum(),
            duration_s: w.duration_s(),
            n_samples: w.domains.iter().map(|d| d.n_samples).min().unwrap_or(0),
            measured_at_unix_s,
            host: identity.host.clone(),
            sampler: identity.sampler.clone(),
            devices: identity.devices.clone(),
            uses_since_check: 0,
        }
    }
}

/// What a cached baseline must match.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineIdentity {
    /// Host name.
    pub host: String,
    /// Sampler.
    pub sampler: String,
    /// `name: device` of every domain.
    pub devices: Vec<String>,
}

impl BaselineIdentity {
    /// The cache file for this identity inside `dir`.
    pub fn cache_path(&self, dir: &Path) -> PathBuf {
        // FNV-1a: stable across Rust releases, so the cache survives upgrades.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in std::iter::once(&self.host)
            .chain(std::iter::once(&self.sampler))
            .chain(&self.devices)
        {
            for b in part.bytes().chain(std::iter::once(0)) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        dir.join(format!("baseline_cache_{h:016x}.json"))
    }

    fn matches(&self, r: &BaselineRecord) -> bool {
        r.host == self.host && r.sampler == self.sampler && r.devices == self.devices
    }
}

/// How the baseline in use was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineOrigin {
    /// Measured now.
    Fresh,
    /// Read from the cache.
    Cached,
    /// Read from the cache and confirmed by a spot check.
    Validated,
    /// The spot check drifted, so it was measured again.
    Remeasured,
}

impl BaselineOrigin {
    /// How it was obtained, in words.
    pub fn describe(self) -> &'static str {
        match self {
            BaselineOrigin::Fresh => "measured",
            BaselineOrigin::Cached => "cached",
            BaselineOrigin::Validated => "cached, spot-checked",
            BaselineOrigin::Remeasured => "re-measured after drift",
        }
    }
}

/// The baseline to use and how it was obtained.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineOutcome {
    /// The baseline.
    pub record: BaselineRecord,
    /// How it was obtained.
    pub origin: BaselineOrigin,
    /// Spot-check power and relative drift, when one was taken.
    pub spot_check: Option<(f64, f64)>,
    /// Age of the cached record when it was used, s.
    pub age_s: Option<f64>,
}

fn load(path: &Path) -> Option<BaselineRecord> {
    serde_json::from_slice(&llem_config::files::read_record(path).ok()?).ok()
}

fn save(path: &Path, r: &BaselineRecord) -> Result<(), BaselineError> {
    Ok(llem_results::write_json_atomic(path, r)?)
}

/// Obtains the baseline for `config`, measuring with `measure(duration)` when needed.
pub fn obtain(
    config: &BaselineConfig,
    identity: &BaselineIdentity,
    cache_dir: &Path,
    now_unix_s: f64,
    measure: &mut dyn FnMut(Duration) -> Result<BaselineRecord, BaselineError>,
) -> Result<BaselineOutcome, BaselineError> {
    let duration = Duration::from_secs_f64(config.duration_seconds);
    let path = identity.cache_path(cache_dir);
    let fresh = |measure: &mut dyn FnMut(Duration) -> Result<BaselineRecord, BaselineError>,
                 origin: BaselineOrigin,
                 spot_check: Option<(f64, f64)>|
     -> Result<BaselineOutcome, BaselineError> {
        let record = measure(duration)?;
        save(&path, &record)?;
        Ok(BaselineOutcome {
            record,
            origin,
            spot_check,
            age_s: None,
        })
    };
    if config.strategy == BaselineStrategy::Fresh {
        return fresh(measure, BaselineOrigin::Fresh, None);
    }
    let cached = load(&path).filter(|r| {
        identity.matches(r) && now_unix_s - r.measured_at_unix_s < config.cache_ttl_seconds
    });
    let Some(mut record) = cached else {
        return fresh(measure, BaselineOrigin::Fresh, None);
    };
    let age_s = Some(now_unix_s - record.measured_at_unix_s);
    if config.strategy == BaselineStrategy::Cached {
        return Ok(BaselineOutcome {
            record,
            origin: BaselineOrigin::Cached,
            spot_check: None,
            age_s,
        });
    }
    record.uses_since_check += 1;
    if record.uses_since_check < config.validation_interval {
        save(&path, &record)?;
        return Ok(BaselineOutcome {
            record,
            origin: BaselineOrigin::Cached,
            spot_check: None,
            age_s,
        });
    }
    let spot = measure(duration.min(SPOT_CHECK))?;
    let drift = if record.total_power_w > 0.0 {
        (spot.total_power_w - record.total_power_w).abs() / record.total_power_w
    } else {
        f64::INFINITY
    };
    if drift > config.drift_threshold {
        return fresh(
            measure,
            BaselineOrigin::Remeasured,
            Some((spot.total_power_w, drift)),
        );
    }
    record.uses_since_check = 0;
    save(&path, &record)?;
    Ok(BaselineOutcome {
        record,
        origin: BaselineOrigin::Validated,
        spot_check: Some((spot.total_power_w, drift)),
        age_s,
    })
}

/// Obtains the baseline by sampling `sensors` idle (each measurement in its own meter run);
/// the sensors are handed back either way. `wait` spends each idle period (the caller's
/// sleep, which may end early with an error when the user cancels).
pub fn obtain_with_sensors(
    config: &BaselineConfig,
    identity: &BaselineIdentity,
    cache_dir: &Path,
    sensors: Vec<Box<dyn crate::Sensor>>,
    meter: crate::MeterConfig,
    epoch: std::time::Instant,
    wait: &mut dyn FnMut(Duration) -> Result<(), BaselineError>,
) -> (
    Result<BaselineOutcome, BaselineError>,
    Vec<Box<dyn crate::Sensor>>,
) {
    let mut held = Some(sensors);
    let mut idle = |duration: Duration| -> Result<BaselineRecord, BaselineError> {
        // Held between measurements: a meter that failed to start took them with it.
        let s = held
            .take()
            .ok_or_else(|| MeterError::SamplerDied("the sensors were lost".into()))?;
        let m = crate::Meter::start(s, meter, epoch)?;
        let waited = wait(duration);
        let (t, back) = m.finish()?;
        held = Some(back);
        waited?;
        Ok(BaselineRecord::from_window(
            &t.total_energy(),
            identity,
            llem_results::time::unix_now_s(),
        ))
    };
    let got = obtain(
        config,
        identity,
        cache_dir,
        llem_results::time::unix_now_s(),
        &mut idle,
    );
    (got, held.unwrap_or_default())
}

/// Energy above the baseline: `max(0, raw - baseline_w x window_s)`.
pub fn adjusted_energy_j(raw_j: f64, baseline_w: f64, window_s: f64) -> f64 {
    (raw_j - baseline_w * window_s).max(0.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::type_complexity)]
mod tests {
    use super::*;

    fn identity() -> BaselineIdentity {
        BaselineIdentity {
            host: "h".into(),
            sampler: "auto".into(),
            devices: vec!["gpu0: H100 (GPU-1)".into()],
        }
    }

    fn record(power: f64, at: f64) -> BaselineRecord {
        BaselineRecord {
            power_w: [("gpu0".to_string(), power)].into(),
            total_power_w: power,
            duration_s: 30.0,
            n_samples: 300,
            measured_at_unix_s: at,
            host: "h".into(),
            sampler: "auto".into(),
            devices: identity().devices,
            uses_since_check: 0,
        }
    }

    fn config(strategy: BaselineStrategy) -> BaselineConfig {
        BaselineConfig {
            strategy,
            validation_interval: 3,
            ..BaselineConfig::default()
        }
    }

    /// A measuring function returning `powers` in turn and counting calls and durations.
    fn meter(
        powers: Vec<f64>,
        now: f64,
    ) -> (
        impl FnMut(Duration) -> Result<BaselineRecord, BaselineError>,
        std::rc::Rc<std::cell::RefCell<Vec<Duration>>>,
    ) {
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let c = calls.clone();
        let mut i = 0;
        (
            move |d: Duration| {
                c.borrow_mut().push(d);
                let p = powers[i.min(powers.len() - 1)];
                i += 1;
                Ok(record(p, now))
            },
            calls,
        )
    }

    #[test]
    fn fresh_measures_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let (mut m, calls) = meter(vec![60.0, 61.0], 1000.0);
        let c = config(BaselineStrategy::Fresh);
        obtain(&c, &identity(), dir.path(), 1000.0, &mut m).unwrap();
        let o = obtain(&c, &identity(), dir.path(), 1001.0, &mut m).unwrap();
        assert_eq!(o.origin, BaselineOrigin::Fresh);
        assert_eq!(o.record.total_power_w, 61.0);
        assert_eq!(calls.borrow().len(), 2);
    }

    #[test]
    fn cached_reuses_until_the_ttl_or_a_device_change() {
        let dir = tempfile::tempdir().unwrap();
        let (mut m, calls) = meter(vec![60.0, 70.0, 80.0], 1000.0);
        let c = config(BaselineStrategy::Cached);
        assert_eq!(
            obtain(&c, &identity(), dir.path(), 1000.0, &mut m)
                .unwrap()
                .origin,
            BaselineOrigin::Fresh
        );
        let o = obtain(&c, &identity(), dir.path(), 2000.0, &mut m).unwrap();
        assert_eq!(
            (o.origin, o.record.total_power_w, o.age_s),
            (BaselineOrigin::Cached, 60.0, Some(1000.0))
        );
        // Past the 7200 s TTL.
        assert_eq!(
            obtain(&c, &identity(), dir.path(), 9000.0, &mut m)
                .unwrap()
                .origin,
            BaselineOrigin::Fresh
        );
        // Other devices: other cache file.
        let mut other = identity();
        other.devices.push("gpu1: H100 (GPU-2)".into());
        assert_eq!(
            obtain(&c, &other, dir.path(), 9001.0, &mut m)
                .unwrap()
                .origin,
            BaselineOrigin::Fresh
        );
        assert_eq!(calls.borrow().len(), 3);
    }

    #[test]
    fn validated_spot_checks_every_n_uses_and_remeasures_on_drift() {
        let dir = tempfile::tempdir().unwrap();
        // 60 W measured; spot check 61 W (1.7 % drift: fine); later spot 80 W: remeasure 79 W.
        let (mut m, calls) = meter(vec![60.0, 61.0, 80.0, 79.0], 1000.0);
        let c = config(BaselineStrategy::Validated);
        let id = identity();
        let origins: Vec<BaselineOrigin> = (0..7)
            .map(|i| {
                obtain(&c, &id, dir.path(), 1000.0 + f64::from(i), &mut m)
                    .unwrap()
                    .origin
            })
            .collect();
        use BaselineOrigin::*;
        assert_eq!(
            origins,
            [Fresh, Cached, Cached, Validated, Cached, Cached, Remeasured]
        );
        let durations = calls.borrow().clone();
        assert_eq!(durations.len(), 4);
        assert_eq!(durations[1], SPOT_CHECK, "spot checks are short");
        let o = obtain(&c, &id, dir.path(), 1010.0, &mut m).unwrap();
        assert_eq!(o.record.total_power_w, 79.0);
    }

    #[test]
    fn adjusted_energy_never_negative() {
        assert_eq!(adjusted_energy_j(1000.0, 50.0, 10.0), 500.0);
        assert_eq!(adjusted_energy_j(100.0, 50.0, 10.0), 0.0);
    }
}
