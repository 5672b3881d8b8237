//! The energy scope of a headline figure: which measured domains it sums.
//!
//! Seeds 000/001 define `total_energy_j` as the energy of the GPUs the inference ran on. A
//! host also has CPU packages and DRAM, and other GPUs; those are reported beside the
//! headline (the system figure), never folded into it. When the inference runs on the CPU,
//! the CPU is the inference device and its packages plus DRAM are the headline.

use crate::baseline::BaselineRecord;
use crate::sensor::{DomainKind, EnergySource};
use crate::telemetry::{DomainEnergy, WindowEnergy};

/// The devices whose energy a headline figure holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnergyScope {
    /// These GPUs, by CUDA index (the `gpu<i>` domains).
    Gpu(Vec<u32>),
    /// CPU packages and DRAM.
    Cpu,
}

impl EnergyScope {
    /// `gpu` or `cpu`, as `energy_scope` in a result.
    pub fn as_str(&self) -> &'static str {
        match self {
            EnergyScope::Gpu(_) => "gpu",
            EnergyScope::Cpu => "cpu",
        }
    }

    /// Whether `d` belongs to the scope.
    pub fn includes(&self, d: &DomainEnergy) -> bool {
        match self {
            EnergyScope::Gpu(ids) => d.kind == DomainKind::Gpu && ids.contains(&d.device_index),
            EnergyScope::Cpu => matches!(d.kind, DomainKind::CpuPackage | DomainKind::Dram),
        }
    }

    /// The devices in words, for warnings: `GPU 0, 1` or `the CPU`.
    pub fn describe(&self) -> String {
        match self {
            EnergyScope::Gpu(ids) => {
                let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
                format!(
                    "GPU{} {}",
                    if ids.len() == 1 { "" } else { "s" },
                    ids.join(", ")
                )
            }
            EnergyScope::Cpu => "the CPU (package and DRAM)".into(),
        }
    }
}

/// Energy of a set of domains over a window, with its baseline adjustment.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopedEnergy {
    /// Domains summed (`gpu0`, `package-0`, ...).
    pub domains: Vec<String>,
    /// Their energy, J; null when none of them was measured.
    pub energy_j: Option<f64>,
    /// The weakest source among them.
    pub energy_source: Option<EnergySource>,
    /// Their idle power from the baseline, W; null without a baseline or when the baseline
    /// lacks one of them.
    pub baseline_power_w: Option<f64>,
    /// `max(0, energy - baseline x window)`, J.
    pub adjusted_j: Option<f64>,
}

/// The energy of the domains of `window` that `keep` selects, adjusted by the same
/// domains' idle power in `baseline`.
pub fn scoped(
    window: &WindowEnergy,
    keep: impl Fn(&DomainEnergy) -> bool,
    baseline: Option<&BaselineRecord>,
) -> ScopedEnergy {
    let chosen: Vec<&DomainEnergy> = window.domains.iter().filter(|d| keep(d)).collect();
    scoped_of(&chosen, window.duration_s(), baseline)
}

/// The whole node's energy over `window` (its enclosing domains), adjusted by the node's idle
/// power; `None` without a node sensor.
pub fn node_scoped(
    window: &WindowEnergy,
    baseline: Option<&BaselineRecord>,
) -> Option<ScopedEnergy> {
    let chosen: Vec<&DomainEnergy> = window.node.iter().collect();
    (!chosen.is_empty()).then(|| scoped_of(&chosen, window.duration_s(), baseline))
}

fn scoped_of(
    chosen: &[&DomainEnergy],
    duration_s: f64,
    baseline: Option<&BaselineRecord>,
) -> ScopedEnergy {
    let energy_j = (!chosen.is_empty()).then(|| chosen.iter().map(|d| d.energy_j).sum::<f64>());
    let energy_source = chosen.iter().map(|d| d.energy_source).min();
    // Every chosen domain must have its idle power: a baseline missing one would subtract
    // too little and read as efficiency.
    let baseline_power_w = baseline.filter(|_| energy_j.is_some()).and_then(|b| {
        chosen
            .iter()
            .map(|d| b.power_w.get(&d.name).copied())
            .sum::<Option<f64>>()
    });
    let duration = duration_s.max(0.0);
    ScopedEnergy {
        domains: chosen.iter().map(|d| d.name.clone()).collect(),
        adjusted_j: energy_j
            .zip(baseline_power_w)
            .map(|(e, b)| crate::baseline::adjusted_energy_j(e, b, duration)),
        energy_j,
        energy_source,
        baseline_power_w,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::sensor::SensorKind;

    fn domain(name: &str, kind: DomainKind, index: u32, j: f64, src: EnergySource) -> DomainEnergy {
        DomainEnergy {
            name: name.into(),
            kind,
            device_index: index,
            sensor: SensorKind::Rapl,
            energy_j: j,
            energy_source: src,
            counter_j: None,
            integrated_j: None,
            disagreement: None,
            avg_power_w: j / 10.0,
            peak_power_w: None,
            n_samples: 10,
        }
    }

    fn window() -> WindowEnergy {
        let domains = vec![
            domain("gpu0", DomainKind::Gpu, 0, 300.0, EnergySource::Counter),
            domain("gpu1", DomainKind::Gpu, 1, 50.0, EnergySource::Integrated),
            domain(
                "package-0",
                DomainKind::CpuPackage,
                0,
                200.0,
                EnergySource::Counter,
            ),
            domain("dram-0", DomainKind::Dram, 0, 20.0, EnergySource::Counter),
        ];
        WindowEnergy {
            start_s: 0.0,
            end_s: 10.0,
            total_j: domains.iter().map(|d| d.energy_j).sum(),
            domains,
            node: vec![],
            energy_source: Some(EnergySource::Integrated),
            warnings: vec![],
        }
    }

    fn baseline() -> BaselineRecord {
        BaselineRecord {
            power_w: [
                ("gpu0", 5.0),
                ("gpu1", 4.0),
                ("package-0", 8.0),
                ("dram-0", 1.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            total_power_w: 18.0,
            duration_s: 10.0,
            n_samples: 100,
            measured_at_unix_s: 0.0,
            host: "h".into(),
            sampler: "auto".into(),
            devices: vec![],
            uses_since_check: 0,
        }
    }

    #[test]
    fn gpu_scope_holds_only_the_engines_gpus_and_their_baseline() {
        let w = window();
        let s = EnergyScope::Gpu(vec![0]);
        let e = scoped(&w, |d| s.includes(d), Some(&baseline()));
        assert_eq!(e.domains, ["gpu0"]);
        assert_eq!(e.energy_j, Some(300.0));
        assert_eq!(e.energy_source, Some(EnergySource::Counter));
        assert_eq!(e.baseline_power_w, Some(5.0));
        assert_eq!(e.adjusted_j, Some(250.0));
    }

    #[test]
    fn cpu_scope_is_package_plus_dram() {
        let w = window();
        let e = scoped(&w, |d| EnergyScope::Cpu.includes(d), Some(&baseline()));
        assert_eq!(e.domains, ["package-0", "dram-0"]);
        assert_eq!(e.energy_j, Some(220.0));
        assert_eq!(e.baseline_power_w, Some(9.0));
        assert_eq!(e.adjusted_j, Some(130.0));
    }

    #[test]
    fn a_scope_with_nothing_measured_is_null_not_zero() {
        let w = window();
        let e = scoped(
            &w,
            |d| EnergyScope::Gpu(vec![3]).includes(d),
            Some(&baseline()),
        );
        assert_eq!(e.energy_j, None);
        assert_eq!(e.adjusted_j, None);
        assert_eq!(e.baseline_power_w, None);
    }

    #[test]
    fn a_baseline_missing_a_domain_adjusts_nothing() {
        let w = window();
        let mut b = baseline();
        b.power_w.remove("dram-0");
        let e = scoped(&w, |d| EnergyScope::Cpu.includes(d), Some(&b));
        assert_eq!(e.energy_j, Some(220.0));
        assert_eq!(e.baseline_power_w, None);
        assert_eq!(e.adjusted_j, None);
    }

    #[test]
    fn the_system_scope_is_every_domain() {
        let e = scoped(&window(), |_| true, Some(&baseline()));
        assert_eq!(e.energy_j, Some(570.0));
        assert_eq!(e.energy_source, Some(EnergySource::Integrated));
        assert_eq!(e.adjusted_j, Some(570.0 - 180.0));
    }
}
