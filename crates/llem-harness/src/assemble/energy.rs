//! The energy parts of a result: per-domain records, the breakdown with its baseline, the
//! per-process entry, and throttling — all read from the window's one
//! [`llem_energy::WindowSummary`].

use llem_energy::telemetry::DomainEnergy;
use llem_energy::{CarbonFactors, DomainKind, EnergyScope, ScopedEnergy, Telemetry, WindowEnergy};
use llem_engines::placement::Placement;
use llem_results::result::{
    AggregationMetadata, DomainEnergyRecord, Emissions, EnergyBreakdown, KindEnergy,
    MultiGpuMetrics, NodeEnergy, PhaseSpan, ProcessResult, ThermalThrottleInfo,
};

use super::Measured;

fn name_of<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// One record per measured domain, as `energy_breakdown.domains` lists them.
pub(super) fn domain_records(window: &WindowEnergy) -> Vec<DomainEnergyRecord> {
    window
        .domains
        .iter()
        .map(|d| DomainEnergyRecord {
            name: d.name.clone(),
            kind: name_of(&d.kind),
            sensor: name_of(&d.sensor),
            energy_j: d.energy_j,
            energy_source: d.energy_source.as_str().into(),
            counter_j: d.counter_j,
            integrated_j: d.integrated_j,
            disagreement: d.disagreement,
            avg_power_w: d.avg_power_w,
            peak_power_w: d.peak_power_w,
            n_samples: d.n_samples,
        })
        .collect()
}

/// Energy of every domain of `kind`, J.
pub(super) fn kind_j(window: &WindowEnergy, kind: DomainKind) -> f64 {
    window
        .domains
        .iter()
        .filter(|d| d.kind == kind)
        .fold(0.0, |a, d| a + d.energy_j)
}

/// The headline scope of where the engine computed.
pub(super) fn scope_of(p: &Placement) -> EnergyScope {
    match p {
        Placement::Cpu => EnergyScope::Cpu,
        Placement::Gpus(g) => EnergyScope::Gpu(g.clone()),
    }
}

/// The two energy figures of a result: the headline (the inference device) and the system
/// (every measured domain), each with its own baseline.
pub(super) struct Energies {
    /// What the headline holds.
    pub scope: EnergyScope,
    /// The inference device's energy.
    pub head: ScopedEnergy,
    /// The system figure: the node's energy where a node sensor measured it, else every
    /// measured component's.
    pub system: ScopedEnergy,
    /// The measured components summed (GPUs, CPU packages, DRAM), beside the node.
    pub components: ScopedEnergy,
    /// Whether `system` is the node's.
    pub system_is_node: bool,
}

impl Energies {
    pub(super) fn of(m: &Measured<'_>, window: &WindowEnergy) -> Energies {
        let scope = scope_of(&m.placement);
        let baseline = m.baseline.map(|b| &b.record);
        // Part of the engine's GPUs is not their energy: one that went unmeasured (no sensor,
        // or lost mid-run) leaves the headline null rather than short.
        let complete = unmeasured_gpus(window, &scope).is_empty();
        let components = llem_energy::scoped(window, |_| true, baseline);
        let node = llem_energy::node_scoped(window, baseline);
        Energies {
            head: llem_energy::scoped(window, |d| complete && scope.includes(d), baseline),
            system_is_node: node.is_some(),
            system: node.unwrap_or_else(|| components.clone()),
            components,
            scope,
        }
    }

    /// `node` or `components`: what the system figure is.
    pub(super) fn system_scope(&self) -> &'static str {
        if self.system_is_node {
            "node"
        } else {
            "components"
        }
    }

    /// Why the headline is missing while other domains were measured.
    pub(super) fn warning(&self, m: &Measured<'_>, window: &WindowEnergy) -> Option<String> {
        if self.head.energy_j.is_some() || self.system.energy_j.is_none() {
            return None;
        }
        let missing = unmeasured_gpus(window, &self.scope);
        let what = if missing.is_empty() {
            self.scope.describe()
        } else {
            EnergyScope::Gpu(missing).describe()
        };
        Some(format!(
            "headline energy not measured: the engine ran on {}, but no sensor measured {what} \
             over the window (sensors: {}); total_energy_j is 0 and system_energy_j holds what \
             was measured",
            self.scope.describe(),
            m.sensors.join("; ")
        ))
    }
}

/// The phases with their energy on the headline's devices (and the node's, where a node
/// sensor measured it): from the telemetry over each span, or for the baseline its idle power
/// on those devices times its length. With every phase measured, their sum is the
/// experiment's lifecycle energy; the second figure is the node's lifecycle energy.
pub(super) fn phase_energies(
    m: &Measured<'_>,
    energies: &Energies,
) -> (Vec<PhaseSpan>, Option<f64>, Option<f64>) {
    let baseline_w = |names: &[String]| -> Option<f64> {
        let b = m.baseline?;
        let powers: Option<Vec<f64>> = names
            .iter()
            .map(|d| b.record.power_w.get(d).copied())
            .collect();
        powers.filter(|v| !v.is_empty()).map(|v| v.iter().sum())
    };
    let node_name = node_domains(m.telemetry);
    let phases: Vec<PhaseSpan> = m
        .phases
        .iter()
        .map(|p| {
            let span = (p.end_s - p.start_s).max(0.0);
            let (energy_j, node_energy_j) = if p.phase == "baseline" {
                (
                    baseline_w(&energies.head.domains).map(|w| w * span),
                    baseline_w(&node_name).map(|w| w * span),
                )
            } else if m.telemetry.series.is_empty() {
                (None, None)
            } else {
                let we = m.telemetry.energy(p.start_s, p.end_s);
                let complete = unmeasured_gpus(&we, &energies.scope).is_empty();
                (
                    llem_energy::scoped(&we, |d| complete && energies.scope.includes(d), None)
                        .energy_j,
                    we.node.first().map(|n| n.energy_j),
                )
            };
            PhaseSpan {
                energy_j,
                node_energy_j,
                ..p.clone()
            }
        })
        .collect();
    let sum = |get: fn(&PhaseSpan) -> Option<f64>| {
        phases
            .iter()
            .map(get)
            .sum::<Option<f64>>()
            .filter(|_| !phases.is_empty())
    };
    let total = sum(|p| p.energy_j);
    let node_total = sum(|p| p.node_energy_j);
    (phases, total, node_total)
}

/// One kind of device's energy, when any of its domains was measured.
fn kind_energy(window: &WindowEnergy, kind: DomainKind) -> Option<KindEnergy> {
    let of_kind: Vec<_> = window.domains.iter().filter(|d| d.kind == kind).collect();
    let weakest = of_kind.iter().map(|d| d.energy_source).min()?;
    let mut sensors: Vec<String> = Vec::new();
    for d in &of_kind {
        let s = name_of(&d.sensor);
        if !sensors.contains(&s) {
            sensors.push(s);
        }
    }
    Some(KindEnergy {
        energy_j: of_kind.iter().map(|d| d.energy_j).sum(),
        energy_source: weakest.as_str().into(),
        sensors,
        domains: of_kind.iter().map(|d| d.name.clone()).collect(),
    })
}

/// The GPUs of `scope` (CUDA indices) without a measured domain in `window`.
fn unmeasured_gpus(window: &WindowEnergy, scope: &EnergyScope) -> Vec<u32> {
    match scope {
        EnergyScope::Gpu(ids) => ids
            .iter()
            .copied()
            .filter(|i| gpu_domain(window, *i).is_none())
            .collect(),
        EnergyScope::Cpu => Vec::new(),
    }
}

/// The measured domain of GPU `index` (CUDA index), if any.
fn gpu_domain(window: &WindowEnergy, index: u32) -> Option<&DomainEnergy> {
    window
        .domains
        .iter()
        .find(|d| d.kind == DomainKind::Gpu && d.device_index == index)
}

/// Energy of each GPU the engine ran on, J, in its order (`energy_per_device_j`); null on
/// the CPU or when none of them was measured.
pub(super) fn per_gpu_j(window: &WindowEnergy, scope: &EnergyScope) -> Option<Vec<f64>> {
    let EnergyScope::Gpu(ids) = scope else {
        return None;
    };
    let gpu_j: Vec<f64> = ids
        .iter()
        .filter_map(|i| gpu_domain(window, *i).map(|d| d.energy_j))
        .collect();
    (!gpu_j.is_empty()).then_some(gpu_j)
}

/// `energy_breakdown`: the headline and system energy, each kind of device, the baseline
/// and how it was obtained.
pub(super) fn breakdown(m: &Measured<'_>, window: &WindowEnergy, e: &Energies) -> EnergyBreakdown {
    EnergyBreakdown {
        raw_j: e.head.energy_j.unwrap_or(0.0),
        adjusted_j: e.head.adjusted_j,
        baseline_power_w: e.head.baseline_power_w,
        scope: Some(e.scope.as_str().into()),
        scope_domains: e.head.domains.clone(),
        gpu: kind_energy(window, DomainKind::Gpu),
        cpu_package: kind_energy(window, DomainKind::CpuPackage),
        dram: kind_energy(window, DomainKind::Dram),
        node: None,
        system_j: e.system.energy_j,
        system_baseline_power_w: e.system.baseline_power_w,
        system_adjusted_j: e.system.adjusted_j,
        baseline_method: m.baseline.map(|b| {
            format!(
                "{} ({})",
                m.request.config.baseline.strategy,
                b.origin.describe()
            )
        }),
        baseline_timestamp: m
            .baseline
            .map(|b| llem_results::time::iso8601_utc(b.record.measured_at_unix_s)),
        baseline_cache_age_sec: m.baseline.and_then(|b| b.age_s),
        domains: domain_records(window),
        prefill_j: None,
        decode_j: None,
        idle_j: None,
        attribution: None,
        difference: None,
    }
}

/// What bounds the headline energy, per output token too.
pub(super) fn uncertainty(
    m: &Measured<'_>,
    window: &WindowEnergy,
    e: &Energies,
    output_tokens: u64,
) -> Option<llem_results::result::EnergyUncertainty> {
    let total = e.head.energy_j?;
    let heads: Vec<&DomainEnergy> = window
        .domains
        .iter()
        .filter(|d| e.head.domains.contains(&d.name))
        .collect();
    let mut u = llem_energy::uncertainty::of(m.telemetry, &heads, window.start_s, window.end_s);
    u.mj_per_tok = u
        .bound_j
        .filter(|_| output_tokens > 0 && total > 0.0)
        .map(|j| j / output_tokens as f64 * 1000.0);
    Some(u)
}

/// Per-process results, and their aggregate when the engine ran on several GPUs.
pub(super) struct Processes {
    pub results: Vec<ProcessResult>,
    pub multi_gpu: Option<MultiGpuMetrics>,
    pub aggregation: Option<AggregationMetadata>,
}

/// One process per GPU rank when the engine used several GPUs (each rank's energy is its
/// GPU's; the host's is not split between ranks), else the one process.
pub(super) fn processes(
    m: &Measured<'_>,
    window: &WindowEnergy,
    e: &Energies,
    (input, output): (u64, u64),
    duration: f64,
) -> Processes {
    let gpu_of = |i: u32| gpu_domain(window, i);
    let ranks: Vec<u32> = match &e.scope {
        EnergyScope::Gpu(ids) if ids.len() > 1 => ids.clone(),
        _ => Vec::new(),
    };
    if ranks.is_empty() {
        let single_gpu = match &e.scope {
            EnergyScope::Gpu(ids) => ids.first().copied(),
            EnergyScope::Cpu => None,
        };
        return Processes {
            results: vec![ProcessResult {
                process_index: 0,
                gpu_id: single_gpu,
                input_tokens: input,
                output_tokens: output,
                inference_time_sec: duration,
                energy_j: e.head.energy_j.unwrap_or(0.0),
                gpu_energy_j: single_gpu.and_then(gpu_of).map_or(0.0, |d| d.energy_j),
                cpu_energy_j: kind_j(window, DomainKind::CpuPackage),
                ram_energy_j: kind_j(window, DomainKind::Dram),
            }],
            multi_gpu: None,
            aggregation: None,
        };
    }
    let mut warnings = vec![
        "the ranks of one engine serve the same requests in lockstep: each rank's tokens and \
         time are the engine's; energy is per GPU and summed"
            .to_string(),
    ];
    if m.request
        .config
        .sglang
        .as_deref()
        .and_then(|s| s.dp_size)
        .is_some_and(|d| d > 1)
    {
        warnings.push(
            "data-parallel ranks split the requests, but the server does not say how: \
             per-rank tokens are the engine's totals"
                .into(),
        );
    }
    let missing: Vec<String> = ranks
        .iter()
        .filter(|i| gpu_of(**i).is_none())
        .map(|i| format!("gpu{i}"))
        .collect();
    if !missing.is_empty() {
        warnings.push(format!(
            "no energy sensor for {}: their ranks read 0 J",
            missing.join(", ")
        ));
    }
    let results: Vec<ProcessResult> = ranks
        .iter()
        .zip(0u32..)
        .map(|(gpu, rank)| {
            let j = gpu_of(*gpu).map_or(0.0, |d| d.energy_j);
            ProcessResult {
                process_index: rank,
                gpu_id: Some(*gpu),
                input_tokens: input,
                output_tokens: output,
                inference_time_sec: duration,
                energy_j: j,
                gpu_energy_j: j,
                cpu_energy_j: 0.0,
                ram_energy_j: 0.0,
            }
        })
        .collect();
    let per_gpu: Vec<f64> = results.iter().map(|p| p.gpu_energy_j).collect();
    let lo = per_gpu.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per_gpu.iter().copied().fold(0.0, f64::max);
    let n = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
    Processes {
        multi_gpu: Some(MultiGpuMetrics {
            num_gpus: n,
            gpu_indices: ranks.clone(),
            total_energy_j: per_gpu.iter().sum(),
            energy_imbalance: (lo > 0.0).then(|| hi / lo),
            energy_per_gpu_j: per_gpu,
        }),
        aggregation: Some(AggregationMetadata {
            method: "energy_summed_throughput_averaged".into(),
            num_processes: n,
            same_window: true,
            warnings,
        }),
        results,
    }
}

/// CO2 of the headline and the system energy; null when nothing was measured.
pub(super) fn emissions(
    m: &Measured<'_>,
    e: &Energies,
    warnings: &mut Vec<String>,
) -> Option<Emissions> {
    e.system.energy_j?;
    let (f, notes) = CarbonFactors::resolve(
        m.request.carbon_intensity_gco2_kwh,
        m.request.datacenter_pue,
    );
    warnings.extend(notes);
    let co2 = |j: f64| llem_energy::co2_g(j, f);
    Some(Emissions {
        co2_g: e.head.energy_j.map(co2),
        co2_adjusted_g: e.head.adjusted_j.map(co2),
        system_co2_g: e.system.energy_j.map(co2),
        carbon_intensity_gco2_kwh: f.intensity_gco2_kwh,
        datacenter_pue: f.pue,
        intensity_source: if f.configured {
            "configured"
        } else {
            "world_average"
        }
        .into(),
    })
}

pub(super) fn throttle_info(
    t: &Telemetry,
    start: f64,
    end: f64,
    throttle: &[llem_energy::throttle::Throttle],
) -> ThermalThrottleInfo {
    use llem_energy::throttle::{
        HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, SW_THERMAL,
    };
    let mut info = ThermalThrottleInfo::default();
    for s in &t.series {
        for i in 0..s.len() {
            let Some(&ts) = s.t_s.get(i) else { continue };
            if ts < start || ts > end {
                continue;
            }
            if let Some(temp) = s.temperature_c.get(i).copied().filter(|v| !v.is_nan()) {
                let temp = f64::from(temp);
                info.max_temperature_c = Some(info.max_temperature_c.map_or(temp, |m| m.max(temp)));
            }
            let Some(bits) = s.throttle_reasons(i) else {
                continue;
            };
            info.sw_thermal |= bits & SW_THERMAL != 0;
            info.hw_thermal |= bits & HW_THERMAL != 0;
            info.hw_power |= bits & (HW_POWER_BRAKE | HW_SLOWDOWN) != 0;
            info.power |= bits & (SW_POWER_CAP | HW_POWER_BRAKE) != 0;
            if bits & (SW_THERMAL | HW_THERMAL | SW_POWER_CAP | HW_POWER_BRAKE | HW_SLOWDOWN) != 0 {
                info.throttle_timestamps.push(ts);
            }
        }
    }
    info.thermal = info.sw_thermal || info.hw_thermal;
    info.throttle_duration_sec = throttle
        .iter()
        .map(|th| th.thermal_s.max(th.power_cap_s).max(th.hw_slowdown_s))
        .fold(0.0, f64::max);
    info.detected = info.thermal || info.power || info.hw_power;
    info
}

/// The recording's node domains (at most one: `node`).
pub(super) fn node_domains(t: &Telemetry) -> Vec<String> {
    t.series
        .iter()
        .filter(|s| s.domain.kind == DomainKind::Node)
        .map(|s| s.domain.name.clone())
        .collect()
}

/// How many node update periods a window must span before its node energy is more than its
/// edges: below it the edge bound (a period of node power at each edge) dominates.
const NODE_PERIODS_PER_WINDOW: f64 = 10.0;

/// `energy_breakdown.node`: the node's energy, the measured components', and what they
/// leave of it, each with its bound; warnings when the node reading is too coarse for the
/// window or falls below the components beyond the bounds.
pub(super) fn node_record(
    m: &Measured<'_>,
    window: &WindowEnergy,
    e: &Energies,
    warnings: &mut Vec<String>,
) -> Option<NodeEnergy> {
    let node = window.node.first()?;
    let (t0, t1) = (window.start_s, window.end_s);
    let node_u = llem_energy::uncertainty::of(m.telemetry, &[node], t0, t1);
    let comps: Vec<&DomainEnergy> = window.domains.iter().collect();
    let comp_u = (!comps.is_empty())
        .then(|| llem_energy::uncertainty::of(m.telemetry, &comps, t0, t1))
        .and_then(|u| u.bound_j);
    let components_j = e.components.energy_j.unwrap_or(0.0);
    let unattributed_j = node.energy_j - components_j;
    // Nothing measured beside the node leaves nothing to reconcile: its bound is the node's.
    let components_bound_j = if comps.is_empty() { Some(0.0) } else { comp_u };
    let unattributed_bound_j = node_u.bound_j.zip(components_bound_j).map(|(a, b)| a + b);
    let series = m
        .telemetry
        .series
        .iter()
        .find(|s| s.domain.name == node.name);
    let period = series.and_then(|s| s.update_period_s);
    let duration = window.duration_s().max(0.0);
    let coarse = period.is_some_and(|p| duration < NODE_PERIODS_PER_WINDOW * p);
    if let Some(p) = period.filter(|_| coarse) {
        warnings.push(format!(
            "node power ({}) updates every {p:.2} s, coarse for a {duration:.2} s window: each \
             edge is uncertain by up to a period of node power (node bound {})",
            name_of(&node.sensor),
            node_u
                .bound_j
                .map_or_else(|| "unknown".to_string(), |b| format!("±{b:.1} J"))
        ));
    }
    // The windows methodology cuts the run into shorter windows still: the node is coarser
    // for each of them than for the whole.
    let cfg = &m.request.config.measurement;
    if cfg.methodology == llem_config::Methodology::Windows
        && let Some(p) = period
    {
        let w = cfg.windows_or_default().window_seconds;
        if w < NODE_PERIODS_PER_WINDOW * p {
            warnings.push(format!(
                "node power ({}) updates every {p:.2} s, coarse for the {w:.1} s windows of \
                 methodology windows: a window's node energy would be uncertain by up to \
                 {:.0} % at its edges, so the windows are judged on the headline devices only",
                name_of(&node.sensor),
                200.0 * p / w
            ));
        }
    }
    if let Some(b) = unattributed_bound_j
        && unattributed_j < -b
    {
        warnings.push(format!(
            "node energy ({:.1} J) is {:.1} J below the measured components ({components_j:.1} \
             J), beyond the bound ±{b:.1} J: the node meter likely averages over a longer \
             period than it reports or lags the window{}, or it does not power every \
             measured device (a GPU in another chassis)",
            node.energy_j,
            -unattributed_j,
            period.map_or_else(String::new, |p| format!(" (update period {p:.2} s)"))
        ));
    }
    Some(NodeEnergy {
        energy_j: node.energy_j,
        energy_source: node.energy_source.as_str().into(),
        sensor: name_of(&node.sensor),
        device: series.map(|s| s.domain.device.clone()).unwrap_or_default(),
        update_period_s: period,
        avg_power_w: node.avg_power_w,
        n_samples: node.n_samples,
        bound_j: node_u.bound_j,
        uncertainty: Some(node_u.clone()),
        components_j,
        components: e.components.domains.clone(),
        components_bound_j,
        unattributed_j,
        unattributed_bound_j,
        baseline_power_w: e
            .system_is_node
            .then_some(e.system.baseline_power_w)
            .flatten(),
        adjusted_j: e.system_is_node.then_some(e.system.adjusted_j).flatten(),
        coarse_for_window: coarse,
        prefill_j: None,
        decode_j: None,
        idle_j: None,
    })
}
