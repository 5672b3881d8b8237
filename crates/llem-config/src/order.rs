//! Execution order of configurations across cycles.
//!
//! sequential A A A B B B; interleave A B A B A B; reverse A B B A A B (forward, reversed,
//! forward, ...); shuffle: a fresh seeded permutation per cycle; latin_square: rows of a
//! balanced Williams design, cycle `c` using row `c mod rows`.

use crate::model::ExperimentOrder;
use crate::rng::SplitMix64;

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Cycle, from 0.
    pub cycle: u32,
    /// Index of the configuration.
    pub config: usize,
}

/// The runs of `k` configurations over `n_cycles`, in execution order.
pub fn execution_order(k: usize, n_cycles: u32, order: ExperimentOrder, seed: u64) -> Vec<Slot> {
    let mut out = Vec::with_capacity(k.saturating_mul(n_cycles as usize));
    match order {
        ExperimentOrder::Sequential => {
            for config in 0..k {
                out.extend((0..n_cycles).map(|cycle| Slot { cycle, config }));
            }
        }
        ExperimentOrder::Interleave => {
            for cycle in 0..n_cycles {
                out.extend((0..k).map(|config| Slot { cycle, config }));
            }
        }
        ExperimentOrder::Reverse => {
            for cycle in 0..n_cycles {
                if cycle % 2 == 0 {
                    out.extend((0..k).map(|config| Slot { cycle, config }));
                } else {
                    out.extend((0..k).rev().map(|config| Slot { cycle, config }));
                }
            }
        }
        ExperimentOrder::Shuffle => {
            let mut rng = SplitMix64::new(seed);
            let mut perm: Vec<usize> = (0..k).collect();
            for cycle in 0..n_cycles {
                perm.sort_unstable();
                rng.shuffle(&mut perm);
                out.extend(perm.iter().map(|&config| Slot { cycle, config }));
            }
        }
        ExperimentOrder::LatinSquare => {
            let rows = williams_rows(k);
            for cycle in 0..n_cycles {
                if let Some(row) = rows.get(cycle as usize % rows.len().max(1)) {
                    out.extend(row.iter().map(|&config| Slot { cycle, config }));
                }
            }
        }
    }
    out
}

/// Rows of a balanced Williams design for `k` conditions: `k` rows when `k` is even, `2k`
/// (each row and its reverse) when odd. Across all rows every condition stands in every
/// position equally often and immediately precedes every other condition equally often
/// (once for even `k`, twice for odd `k`), which balances first-order carryover.
pub fn williams_rows(k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return Vec::new();
    }
    // First row 0, 1, k-1, 2, k-2, ...; row i adds i to every entry (mod k).
    let first: Vec<usize> = (0..k)
        .map(|j| {
            if j == 0 {
                0
            } else if j % 2 == 1 {
                j.div_ceil(2)
            } else {
                k - j / 2
            }
        })
        .collect();
    let mut rows: Vec<Vec<usize>> = (0..k)
        .map(|i| first.iter().map(|&c| (c + i) % k).collect())
        .collect();
    if k % 2 == 1 {
        let reversed: Vec<Vec<usize>> = rows
            .iter()
            .map(|r| r.iter().rev().copied().collect())
            .collect();
        rows.extend(reversed);
    }
    rows
}

/// Number of rows of the Williams design for `k` conditions.
pub fn williams_row_count(k: usize) -> usize {
    if k % 2 == 1 { 2 * k } else { k }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn orders(k: usize, n: u32, o: ExperimentOrder) -> Vec<usize> {
        execution_order(k, n, o, 42)
            .iter()
            .map(|s| s.config)
            .collect()
    }

    #[test]
    fn fixed_orders_match_the_seed() {
        assert_eq!(
            orders(2, 3, ExperimentOrder::Sequential),
            [0, 0, 0, 1, 1, 1]
        );
        assert_eq!(
            orders(2, 3, ExperimentOrder::Interleave),
            [0, 1, 0, 1, 0, 1]
        );
        assert_eq!(orders(2, 3, ExperimentOrder::Reverse), [0, 1, 1, 0, 0, 1]);
        let cycles: Vec<u32> = execution_order(2, 3, ExperimentOrder::Sequential, 0)
            .iter()
            .map(|s| s.cycle)
            .collect();
        assert_eq!(cycles, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn shuffle_is_a_permutation_per_cycle() {
        let s = execution_order(5, 4, ExperimentOrder::Shuffle, 9);
        for c in 0..4u32 {
            let mut cycle: Vec<usize> = s
                .iter()
                .filter(|x| x.cycle == c)
                .map(|x| x.config)
                .collect();
            cycle.sort_unstable();
            assert_eq!(cycle, [0, 1, 2, 3, 4]);
        }
    }

    #[test]
    fn williams_is_balanced_for_2_to_9() {
        for k in 2..=9usize {
            let rows = williams_rows(k);
            assert_eq!(rows.len(), williams_row_count(k));
            let per = if k % 2 == 0 { 1 } else { 2 };
            let mut follows = vec![vec![0usize; k]; k];
            let mut position = vec![vec![0usize; k]; k];
            for row in &rows {
                let mut sorted = row.clone();
                sorted.sort_unstable();
                assert_eq!(
                    sorted,
                    (0..k).collect::<Vec<_>>(),
                    "k={k}: row not a permutation"
                );
                for (p, &c) in row.iter().enumerate() {
                    position[c][p] += 1;
                }
                for w in row.windows(2) {
                    follows[w[0]][w[1]] += 1;
                }
            }
            for a in 0..k {
                for b in 0..k {
                    let want = if a == b { 0 } else { per };
                    assert_eq!(follows[a][b], want, "k={k}: {a} before {b}");
                    assert_eq!(position[a][b], per, "k={k}: {a} at position {b}");
                }
            }
        }
    }
}
