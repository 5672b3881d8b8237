//! Batching strategies (seed 004, MLPerf-aligned): which prompts are decoded together.
//!
//! - `static`: consecutive groups of `batch_size` in dataset order;
//! - `sorted_static`: the same after a stable sort by input length (less straggling);
//! - `dynamic`: in dataset order, a batch closes when adding the next prompt would exceed
//!   `max_tokens_per_batch` prompt tokens or `batch_size` sequences;
//! - `sorted_dynamic`: the same after the sort.
//!
//! A prompt longer than the whole budget gets a batch of its own.

use llem_config::BatchingStrategy;

use super::BatchingSpec;

/// Indices into the prompt list, one vector per batch, in decode order.
pub fn plan(spec: &BatchingSpec, input_tokens: &[u32]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..input_tokens.len()).collect();
    let sorted = matches!(
        spec.strategy,
        BatchingStrategy::SortedStatic | BatchingStrategy::SortedDynamic
    );
    if sorted {
        order.sort_by_key(|&i| input_tokens.get(i).copied().unwrap_or(0));
    }
    let size = spec.batch_size.get() as usize;
    let dynamic = matches!(
        spec.strategy,
        BatchingStrategy::Dynamic | BatchingStrategy::SortedDynamic
    );
    let budget = if dynamic {
        spec.max_tokens_per_batch.map(u64::from)
    } else {
        None
    };
    let mut batches = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut tokens = 0u64;
    for i in order {
        let t = u64::from(input_tokens.get(i).copied().unwrap_or(0));
        let over_budget = budget.is_some_and(|b| !current.is_empty() && tokens + t > b);
        if current.len() == size || over_budget {
            batches.push(std::mem::take(&mut current));
            tokens = 0;
        }
        current.push(i);
        tokens += t;
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(strategy: BatchingStrategy, size: u32, budget: Option<u32>) -> BatchingSpec {
        BatchingSpec {
            strategy,
            batch_size: std::num::NonZeroU32::new(size).unwrap(),
            max_tokens_per_batch: budget,
        }
    }

    #[test]
    fn the_four_strategies() {
        let lens = [50, 10, 40, 20, 30];
        assert_eq!(
            plan(&spec(BatchingStrategy::Static, 2, None), &lens),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
        assert_eq!(
            plan(&spec(BatchingStrategy::SortedStatic, 2, None), &lens),
            vec![vec![1, 3], vec![4, 2], vec![0]]
        );
        assert_eq!(
            plan(&spec(BatchingStrategy::Dynamic, 4, Some(60)), &lens),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
        assert_eq!(
            plan(&spec(BatchingStrategy::SortedDynamic, 4, Some(60)), &lens),
            vec![vec![1, 3, 4], vec![2], vec![0]]
        );
        // Without a budget, dynamic is bounded by the batch size only.
        assert_eq!(
            plan(&spec(BatchingStrategy::Dynamic, 3, None), &lens),
            vec![vec![0, 1, 2], vec![3, 4]]
        );
        // Static ignores the budget.
        assert_eq!(
            plan(&spec(BatchingStrategy::Static, 5, Some(1)), &lens).len(),
            1
        );
    }

    #[test]
    fn an_oversized_prompt_gets_its_own_batch_and_nothing_is_lost() {
        let lens = [5, 100, 5, 5];
        let b = plan(&spec(BatchingStrategy::Dynamic, 8, Some(20)), &lens);
        assert_eq!(b, vec![vec![0], vec![1], vec![2, 3]]);
        let mut all: Vec<usize> = b.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1, 2, 3]);
    }
}
