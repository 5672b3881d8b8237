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
    let n_cycles = 3;
    let mut rows: Vec<Row> = Vec::new();
    for seed in 0..trials {
        let s = Surface::synthetic(seed);
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
    println!(
        "surfaces: {trials}, budget {:.0} % of the grid's runs ({n_cycles} cycles each)",
        fraction * 100.0
    );
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
