//! The attribution parts of a result: the window split by phase and request
//! ([`crate::attribution`]), written into `energy_breakdown`, the per-request distributions
//! and `requests.parquet`.

use llem_config::model::PhaseSplit;
use llem_energy::EnergyCurve;
use llem_results::result::{
    DifferenceSplit, Distribution, EnergyBreakdown, NodeEnergy, PhaseSpan, TimelineSummary,
};
use llem_results::{RequestEnergy, RequestRecord, TimeBin};

use super::Measured;
use super::energy::Energies;
use crate::attribution::{self, Attribution};

/// The headline devices' cumulative energy over the run, which the attribution and the
/// timeline cut; `None` (with a warning) when their readings cannot give one.
pub(super) fn curve(
    m: &Measured<'_>,
    energies: &Energies,
    warnings: &mut Vec<String>,
) -> Option<EnergyCurve> {
    energies.head.energy_j?;
    let curve = EnergyCurve::of(m.telemetry, &energies.head.domains);
    if curve.is_none() {
        warnings.push(format!(
            "energy not attributed to prefill, decode and requests, nor cut into time bins: no \
             usable readings of {} over the run",
            energies.head.domains.join(", ")
        ));
    }
    curve
}

/// The headline energy of the window split by phase and request, and what weakens it.
pub(super) fn attribute(
    m: &Measured<'_>,
    energies: &Energies,
    curve: Option<&EnergyCurve>,
    warnings: &mut Vec<String>,
) -> Option<Attribution> {
    let window_j = energies.head.energy_j?;
    let a = split(m, curve?);
    warnings.extend(a.sum_warning(window_j));
    Some(a)
}

/// The window cut along `curve`: by the engine's own passes when it logged them, else by
/// each request's share of the time it was in flight.
fn split(m: &Measured<'_>, curve: &EnergyCurve) -> Attribution {
    if m.steps.is_empty() {
        attribution::by_concurrency(curve, m.window, m.records)
    } else {
        attribution::by_steps(curve, m.window, m.steps)
    }
}

/// `energy_breakdown` with the phase splits `measurement.phase_split` asks for.
pub(super) fn with_phases(
    mut b: EnergyBreakdown,
    a: Option<&Attribution>,
    difference: Option<DifferenceSplit>,
    split: Option<PhaseSplit>,
) -> EnergyBreakdown {
    if let Some(a) = a.filter(|_| split != Some(PhaseSplit::Difference)) {
        b.prefill_j = Some(a.prefill_j);
        b.decode_j = Some(a.decode_j);
        b.idle_j = Some(a.idle_j);
        b.attribution = Some(a.method.into());
    }
    b.difference = difference;
    b
}

/// The difference method's split: the one-token run's energy on the headline's devices
/// (its `prefill_only` phase, measured by [`super::energy::phase_energies`]) is the prefill,
/// the window's less it the decode; a decode at or below zero is reported.
pub(super) fn difference(
    m: &Measured<'_>,
    energies: &Energies,
    phases: &[PhaseSpan],
    warnings: &mut Vec<String>,
) -> Option<DifferenceSplit> {
    let d = m.difference?;
    let window_j = energies.head.energy_j?;
    let prefill_only = phases.iter().find(|p| p.phase == "prefill_only");
    let Some(prefill_j) = prefill_only.and_then(|p| p.energy_j) else {
        warnings.push(
            "phase_split difference: the one-token run's energy was not measured on every \
             headline device; no difference split"
                .into(),
        );
        return None;
    };
    let decode_j = window_j - prefill_j;
    if decode_j <= 0.0 {
        warnings.push(format!(
            "phase_split difference: the one-token run ({prefill_j:.2} J) drew as much as the \
             whole window ({window_j:.2} J); its decode, {decode_j:.2} J, means nothing (too \
             few output tokens per request to tell decode from run-to-run noise)"
        ));
    }
    let (a, b) = d.span;
    Some(DifferenceSplit {
        prefill_j,
        decode_j,
        prefill_run_s: b - a,
        prefill_run_requests: d.requests,
        prefill_run_output_tokens: d.output_tokens,
    })
}

/// The records with their energy (none without an attribution), and the node's share where
/// a node sensor measured it.
pub(super) fn annotated(
    records: &[RequestRecord],
    a: Option<&Attribution>,
    node: Option<&Attribution>,
) -> Vec<RequestRecord> {
    records
        .iter()
        .map(|r| RequestRecord {
            energy: a
                .and_then(|a| a.requests.get(&r.request_id).copied())
                .map(|e| RequestEnergy {
                    node_energy_j: node
                        .and_then(|n| n.requests.get(&r.request_id))
                        .map(|n| n.energy_j),
                    ..e
                }),
            ..r.clone()
        })
        .collect()
}

/// Energy per request and per response token of the successful requests wholly inside the
/// window (one cut by an edge carries only part of its energy).
pub(super) fn distributions(
    records: &[RequestRecord],
    (t0, t1): (f64, f64),
) -> (Option<Distribution>, Option<Distribution>) {
    let inside: Vec<(RequestEnergy, u32)> = records
        .iter()
        .filter(|r| r.success && r.submit_s >= t0 && r.end_s <= t1)
        .filter_map(|r| r.energy.map(|e| (e, r.output_tokens)))
        .collect();
    let per_request = Distribution::of(inside.iter().map(|(e, _)| e.energy_j).collect());
    let per_token = Distribution::of(
        inside
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(e, n)| e.energy_j / f64::from(*n) * 1000.0)
            .collect(),
    );
    (per_request, per_token)
}

/// The window in time bins of `measurement.timeline_bin_seconds` (10 s when unset), and its
/// summary for the result; `None` without an energy curve.
pub(super) fn timeline(
    m: &Measured<'_>,
    curve: Option<&EnergyCurve>,
) -> Option<(TimelineSummary, Vec<TimeBin>)> {
    let curve = curve?;
    let width = m
        .request
        .config
        .measurement
        .timeline_bin_seconds
        .unwrap_or(crate::timeline::DEFAULT_BIN_S);
    let bins = crate::timeline::bins(&|a, b| curve.between(a, b), m.window, m.records, width);
    if bins.is_empty() {
        return None;
    }
    let summary = TimelineSummary {
        file: llem_results::layout::TIMELINE.to_string(),
        bin_seconds: crate::timeline::bin_width(m.window, width),
        bins: bins.len(),
        idle_energy_share: crate::timeline::idle_share(&bins),
        idle_energy_j: bins.iter().map(|b| b.idle_energy_j).sum(),
    };
    Some((summary, bins))
}

/// The node's energy attributed like the headline's (phases and requests), over the node's
/// own curve (its polls interpolated between them); `None` without a node sensor or when its
/// readings give no curve.
pub(super) fn node_attribution(m: &Measured<'_>) -> Option<Attribution> {
    let curve = EnergyCurve::of(m.telemetry, &super::energy::node_domains(m.telemetry))?;
    Some(split(m, &curve))
}

/// `energy_breakdown.node` with its phase split.
pub(super) fn node_phases(mut n: NodeEnergy, a: Option<&Attribution>) -> NodeEnergy {
    if let Some(a) = a {
        n.prefill_j = Some(a.prefill_j);
        n.decode_j = Some(a.decode_j);
        n.idle_j = Some(a.idle_j);
    }
    n
}
