//! The search benchmark: on many response surfaces with known optima, how often the search's
//! answer is right and how much of the grid it measured, against random search at the same
//! budget and the full grid. `bench/search.sh` runs it; `--verbose` prints every trial.

use llem_config::rng::SplitMix64;
use llem_search::Settings;
use llem_search::sim::{Surface, Trial, run_grid, run_random, run_search};

/// One surface: the search's, random search's and the full grid's trials, and the grid's size.
type Row = (Trial, Trial, Trial, usize);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "--verbose");
    let trials: u64 = args
        .iter()
        .skip_while(|a| *a != "--trials")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let fraction: f64 = args
        .iter()
        .skip_while(|a| *a != "--budget")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.3);
    let replay: Option<String> = args.iter().skip_while(|a| *a != "--replay").nth(1).cloned();
    let n_cycles = 3;
    let recorded = replay.as_deref().map(read_sweep);
    let mut rows: Vec<Row> = Vec::new();
    for seed in 0..trials {
        let s = match &recorded {
            // The recorded sweep under ITL limits from its 25th to its 75th percentile.
            Some(sweep) => sweep.surface(seed, trials),
            None => Surface::synthetic(seed),
        };
        let grid_runs = s.space.len() as u32 * n_cycles;
        let budget = (fraction * f64::from(grid_runs)).ceil() as u32;
        let settings = Settings {
            budget_runs: budget,
            n_cycles,
            batch: 1,
            seed,
        };
        let search = run_search(&s, settings, &mut SplitMix64::new(seed ^ 0xA11CE));
        let random = run_random(&s, budget, &mut SplitMix64::new(seed ^ 0xB0B));
        let grid = run_grid(&s, n_cycles, &mut SplitMix64::new(seed ^ 0xC0FFEE));
        if verbose {
            let best = s.best_feasible();
            let rel = |c: Option<usize>| match (c, best) {
                (Some(c), Some(b)) => format!("{:+.1} %", 100.0 * (s.cost(c) / s.cost(b) - 1.0)),
                _ => "-".into(),
            };
            println!(
                "{:<40} best {:?} | search {:?} {} feas {} {:?} runs {}/{budget} distinct {} best judged {:?} | random {:?} {} | grid {:?} {}",
                s.name,
                best,
                search.chosen,
                rel(search.chosen),
                search.chosen.is_some_and(|c| s.feasible(c)),
                search.reason,
                search.runs,
                search.distinct,
                search.best_judged,
                random.chosen,
                rel(random.chosen),
                grid.chosen,
                rel(grid.chosen),
            );
        }
        rows.push((search, random, grid, s.space.len()));
    }
    let n = rows.len() as f64;
    let rate = |f: &dyn Fn(&Row) -> bool| 100.0 * rows.iter().filter(|r| f(r)).count() as f64 / n;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let share_runs = median(
        rows.iter()
            .map(|r| 100.0 * f64::from(r.0.runs) / (r.3 as f64 * f64::from(n_cycles)))
            .collect(),
    );
    let share_distinct = median(
        rows.iter()
            .map(|r| 100.0 * r.0.distinct as f64 / r.3 as f64)
            .collect(),
    );
    let identified = rate(&|r| r.0.reason == Some(llem_search::StopReason::Identified));
    match &replay {
        Some(path) => println!(
            "the recorded sweep {path} under {trials} ITL limits, budget {:.0} % of the grid's runs ({n_cycles} cycles each)",
            fraction * 100.0
        ),
        None => println!(
            "surfaces: {trials}, budget {:.0} % of the grid's runs ({n_cycles} cycles each)",
            fraction * 100.0
        ),
    }
    println!(
        "| method | exact best | within 2 % of best (feasible) | best within answer's interval | right (any of these) | runs (median, % of grid) | configurations measured (median, % of grid) |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| search | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {share_runs:.0} % | {share_distinct:.0} % |",
        rate(&|r| r.0.exact),
        rate(&|r| r.0.within_tolerance),
        rate(&|r| r.0.best_in_interval == Some(true)),
        rate(&|r| r.0.within_tolerance || r.0.best_in_interval == Some(true)),
    );
    println!(
        "| random search, same budget | {:.0} % | {:.0} % | - | {:.0} % | {:.0} % | - |",
        rate(&|r| r.1.exact),
        rate(&|r| r.1.within_tolerance),
        rate(&|r| r.1.within_tolerance),
        fraction * 100.0,
    );
    println!(
        "| full grid | {:.0} % | {:.0} % | - | {:.0} % | 100 % | 100 % |",
        rate(&|r| r.2.exact),
        rate(&|r| r.2.within_tolerance),
        rate(&|r| r.2.within_tolerance),
    );
    println!("search stopped identified: {identified:.0} % (else the budget ran out)");
}

/// A recorded sweep: each configuration's axis values and its runs' figures
/// (`mj_per_tok_total`, `itl_p90_ms`).
struct Sweep {
    candidates: Vec<Vec<(String, serde_json::Value)>>,
    runs: Vec<Vec<Vec<f64>>>,
}

/// Reads `bench/data/embedded-sweep.csv` (bench/search-fixture.sh writes it): a header, then
/// one run per line: batch_size, n_threads, flash_attn, cycle, mj_per_tok_total, itl_p90_ms, ….
fn read_sweep(path: &str) -> Sweep {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let mut sweep = Sweep {
        candidates: Vec::new(),
        runs: Vec::new(),
    };
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split(',').collect();
        let (Some(b), Some(t), Some(fa), Some(e), Some(itl)) = (
            cols.first(),
            cols.get(1),
            cols.get(2),
            cols.get(4),
            cols.get(5),
        ) else {
            continue;
        };
        let (Ok(e), Ok(itl)) = (e.parse::<f64>(), itl.parse::<f64>()) else {
            continue;
        };
        let cand = vec![
            (
                "batch_size".to_string(),
                serde_json::json!(b.parse::<u32>().unwrap_or(0)),
            ),
            (
                "n_threads".to_string(),
                serde_json::json!(t.parse::<u32>().unwrap_or(0)),
            ),
            ("flash_attn".to_string(), serde_json::json!(fa)),
        ];
        match sweep.candidates.iter().position(|c| *c == cand) {
            Some(i) => {
                if let Some(r) = sweep.runs.get_mut(i) {
                    r.push(vec![e, itl]);
                }
            }
            None => {
                sweep.candidates.push(cand);
                sweep.runs.push(vec![vec![e, itl]]);
            }
        }
    }
    sweep
}

impl Sweep {
    /// Trial `i` of `n`: an ITL limit between the 25th and 75th percentile of the
    /// configurations' mean ITL.
    fn surface(&self, i: u64, n: u64) -> Surface {
        let goal = |threshold: f64| llem_search::Goal {
            figures: vec!["mj_per_tok_total".into(), "itl_p90_ms".into()],
            direction: llem_config::search::Direction::Minimize,
            limits: vec![llem_search::Limit {
                bound: llem_config::search::Bound::AtMost,
                threshold,
            }],
            log_scale: vec![true, true],
            confidence: 0.95,
            tolerance: 0.02,
        };
        let probe = Surface::replay(
            String::new(),
            &self.candidates,
            self.runs.clone(),
            goal(0.0),
        );
        let mut itl: Vec<f64> = probe
            .truth
            .iter()
            .filter_map(|t| t.get(1).copied())
            .collect();
        itl.sort_by(f64::total_cmp);
        let at = |q: f64| {
            itl.get(((itl.len().max(1) - 1) as f64 * q).round() as usize)
                .copied()
                .unwrap_or(1.0)
        };
        let q = 0.25 + 0.5 * (i as f64 + 0.5) / n.max(1) as f64;
        let (lo, hi) = (at(0.25).ln(), at(0.75).ln());
        let threshold = (lo + (hi - lo) * (q - 0.25) / 0.5).exp();
        Surface::replay(
            format!("recorded sweep, ITL <= {threshold:.1} ms"),
            &self.candidates,
            self.runs.clone(),
            goal(threshold),
        )
    }
}
