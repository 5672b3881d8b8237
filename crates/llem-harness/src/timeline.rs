//! A window's energy over time: fixed-width bins (10 s unless set), each with its energy, the
//! part of it spent with no request in flight (idle), its mean power, the tokens generated and
//! requests started and finished in it, and the mean number in flight. Bursty traffic spends
//! much of its energy between bursts; the bins and the idle share say how much, and when.
//!
//! The bins cut one cumulative energy curve, so they add up to the window's energy exactly
//! (the last bin is shorter when the window is not a whole number of bins).

use llem_results::RequestRecord;
pub use llem_results::TimeBin;

/// The default bin width, s.
pub const DEFAULT_BIN_S: f64 = 10.0;
/// The most bins one window is cut into: a finer width is widened to keep to it.
pub const MAX_BINS: usize = 100_000;

/// The stretches of `(t0, t1)` with no request in flight, in time order.
fn idle_stretches((t0, t1): (f64, f64), records: &[RequestRecord]) -> Vec<(f64, f64)> {
    let mut busy: Vec<(f64, f64)> = records
        .iter()
        .map(|r| (r.submit_s.max(t0), r.end_s.min(t1)))
        .filter(|(a, b)| b > a)
        .collect();
    busy.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut idle = Vec::new();
    let mut at = t0;
    for (a, b) in busy {
        if a > at {
            idle.push((at, a));
        }
        at = at.max(b);
    }
    if t1 > at {
        idle.push((at, t1));
    }
    idle
}

/// Overlap of `(a, b)` with `(c, d)`, s.
fn overlap((a, b): (f64, f64), (c, d): (f64, f64)) -> f64 {
    (b.min(d) - a.max(c)).max(0.0)
}

/// The width bins of `width_s` over `window` are cut at: widened past [`MAX_BINS`] bins.
pub fn bin_width((t0, t1): (f64, f64), width_s: f64) -> f64 {
    width_s.max((t1 - t0) / MAX_BINS as f64)
}

/// Cuts `window` (harness clock, s) into bins of `width_s`; `energy_between(a, b)` is the
/// energy between two instants (the window's energy curve).
pub fn bins(
    energy_between: &dyn Fn(f64, f64) -> f64,
    window: (f64, f64),
    records: &[RequestRecord],
    width_s: f64,
) -> Vec<TimeBin> {
    let (t0, t1) = window;
    let span = t1 - t0;
    if !(span > 0.0 && width_s.is_finite() && width_s > 0.0) {
        return Vec::new();
    }
    let width = bin_width(window, width_s);
    let n = (span / width).ceil().max(1.0) as usize;
    let idle = idle_stretches(window, records);
    let bounds = |k: usize| {
        let a = t0 + k as f64 * width;
        (a, (a + width).min(t1))
    };
    let mut out: Vec<TimeBin> = (0..n)
        .map(|k| {
            let (a, b) = bounds(k);
            let energy_j = energy_between(a, b);
            TimeBin {
                start_s: a - t0,
                end_s: b - t0,
                energy_j,
                idle_energy_j: 0.0,
                power_w: if b > a { energy_j / (b - a) } else { 0.0 },
                output_tokens: 0,
                requests_started: 0,
                requests_finished: 0,
                mean_in_flight: 0.0,
            }
        })
        .collect();
    // Which bin an instant falls in, clamped to the window's bins.
    let index = |t: f64| (((t - t0) / width).max(0.0) as usize).min(n - 1);
    // Each idle stretch and each request visits only the bins it overlaps: linear in the
    // requests and bins, not their product.
    for &(c, d) in &idle {
        for k in index(c)..=index(d) {
            let (a, b) = bounds(k);
            if let Some(bin) = out.get_mut(k)
                && d.min(b) > c.max(a)
            {
                bin.idle_energy_j += energy_between(c.max(a), d.min(b));
            }
        }
    }
    for r in records {
        let (c, d) = (r.submit_s.max(t0), r.end_s.min(t1));
        if d <= c {
            continue;
        }
        for k in index(c)..=index(d) {
            let (a, b) = bounds(k);
            if let Some(bin) = out.get_mut(k)
                && b > a
            {
                bin.mean_in_flight += overlap((c, d), (a, b)) / (b - a);
            }
        }
    }
    // Which bin an instant falls in; instants outside the window are in none.
    let bin_of = |t: f64| -> Option<usize> {
        (t >= t0 && t < t1).then(|| (((t - t0) / width) as usize).min(n - 1))
    };
    for r in records {
        if let Some(b) = bin_of(r.submit_s).and_then(|i| out.get_mut(i)) {
            b.requests_started += 1;
        }
        if let Some(b) = bin_of(r.end_s).and_then(|i| out.get_mut(i)) {
            b.requests_finished += 1;
        }
        for &t in &r.token_times_s {
            if let Some(b) = bin_of(t).and_then(|i| out.get_mut(i)) {
                b.output_tokens += 1;
            }
        }
    }
    out
}

/// The share of the bins' energy spent with no request in flight; `None` without energy.
pub fn idle_share(bins: &[TimeBin]) -> Option<f64> {
    let total: f64 = bins.iter().map(|b| b.energy_j).sum();
    (total > 0.0).then(|| bins.iter().map(|b| b.idle_energy_j).sum::<f64>() / total)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use llem_results::FinishReason;

    fn request(submit_s: f64, end_s: f64, tokens: &[f64]) -> RequestRecord {
        RequestRecord {
            session: None,
            request_id: 0,
            batch_index: None,
            input_tokens: 8,
            output_tokens: tokens.len() as u32,
            reference_output_tokens: None,
            cached_input_tokens: None,
            scheduled_s: Some(submit_s),
            submit_s,
            first_token_s: tokens.first().copied(),
            end_s,
            success: true,
            error: None,
            finish_reason: FinishReason::Length,
            token_times_s: tokens.to_vec(),
            energy: None,
        }
    }

    /// Energy of a power of 50 W, plus 100 W from 100 s on: the integral, exactly.
    fn energy(a: f64, b: f64) -> f64 {
        let e = |t: f64| 50.0 * t + 100.0 * (t - 100.0).max(0.0);
        e(b) - e(a)
    }

    #[test]
    fn bins_add_up_to_the_window_and_say_when_it_was_idle() {
        // Window 100-135 s; a burst from 102 to 108 (two requests), nothing, then 121-125.
        let records = [
            request(102.0, 106.0, &[103.0, 104.0, 105.0]),
            request(104.0, 108.0, &[105.5, 107.0]),
            request(121.0, 125.0, &[122.0, 124.0, 124.5, 124.9]),
            // Outside the window: not counted.
            request(90.0, 95.0, &[91.0]),
        ];
        let bins = bins(&energy, (100.0, 135.0), &records, 10.0);
        assert_eq!(bins.len(), 4);
        assert_eq!(
            bins.iter()
                .map(|b| (b.start_s, b.end_s))
                .collect::<Vec<_>>(),
            [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0), (30.0, 35.0)]
        );
        let total: f64 = bins.iter().map(|b| b.energy_j).sum();
        assert!((total - energy(100.0, 135.0)).abs() < 1e-9);
        // 150 W throughout the window (past 100 s): 1500 J per full bin, 750 in the last.
        assert!((bins[0].energy_j - 1500.0).abs() < 1e-9);
        assert!((bins[3].power_w - 150.0).abs() < 1e-9);
        // Bin 0: busy 102-108, idle 4 s; bin 1 idle throughout; bin 2 busy 121-125.
        assert!((bins[0].idle_energy_j - 4.0 * 150.0).abs() < 1e-9);
        assert!((bins[1].idle_energy_j - bins[1].energy_j).abs() < 1e-9);
        assert!((bins[2].idle_energy_j - 6.0 * 150.0).abs() < 1e-9);
        assert_eq!(
            bins.iter()
                .map(|b| (b.output_tokens, b.requests_started, b.requests_finished))
                .collect::<Vec<_>>(),
            [(5, 2, 2), (0, 0, 0), (4, 1, 1), (0, 0, 0)]
        );
        // In flight: 4 s + 4 s of requests over 10 s.
        assert!((bins[0].mean_in_flight - 0.8).abs() < 1e-9);
        // Idle: 4 + 10 + 6 + 5 s of 35, at constant power.
        assert!((idle_share(&bins).unwrap() - 25.0 / 35.0).abs() < 1e-9);
    }

    #[test]
    fn many_overlapping_requests_agree_with_the_bin_by_bin_sums() {
        // Requests of pseudo-random start and length, some past the window's edges.
        let mut x: u64 = 12345;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let records: Vec<RequestRecord> = (0..300)
            .map(|_| {
                let s = 95.0 + next() * 60.0;
                request(s, s + next() * 3.0, &[])
            })
            .collect();
        let window = (100.0, 150.0);
        let got = bins(&energy, window, &records, 1.5);
        let idle = idle_stretches(window, &records);
        for b in &got {
            let (a, z) = (window.0 + b.start_s, window.0 + b.end_s);
            let in_flight: f64 = records
                .iter()
                .map(|r| overlap((r.submit_s, r.end_s), (a, z)))
                .sum::<f64>()
                / (z - a);
            let idle_j: f64 = idle
                .iter()
                .filter(|s| s.1 > a && s.0 < z)
                .map(|&(c, d)| energy(c.max(a), d.min(z)))
                .sum();
            assert!((b.mean_in_flight - in_flight).abs() < 1e-9, "{b:?}");
            assert!((b.idle_energy_j - idle_j).abs() < 1e-9, "{b:?}");
        }
    }

    #[test]
    fn degenerate_windows_and_widths_give_no_bins_and_fine_widths_are_capped() {
        assert!(bins(&energy, (5.0, 5.0), &[], 10.0).is_empty());
        assert!(bins(&energy, (0.0, 5.0), &[], 0.0).is_empty());
        assert!(bins(&energy, (0.0, 5.0), &[], f64::NAN).is_empty());
        let fine = bins(&energy, (0.0, 1000.0), &[], 1e-6);
        assert_eq!(fine.len(), MAX_BINS);
        assert_eq!(idle_share(&[]), None);
    }
}
