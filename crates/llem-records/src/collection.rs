//! The shared core of the run collections ([`super::Runs`], [`super::DiffusionRuns`]): one
//! vector of records behind an `Arc`, and the indices a filter kept. Filters keep order, copy
//! no record, and chain; groups are collections too.

use std::sync::Arc;

/// Records and the indices of those in this view.
#[derive(Debug)]
pub struct Collection<T> {
    all: Arc<[T]>,
    idx: Arc<[u32]>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Self {
            all: self.all.clone(),
            idx: self.idx.clone(),
        }
    }
}

impl<T> Default for Collection<T> {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl<T> Collection<T> {
    /// All of `records`, in the given order.
    pub fn new(records: Vec<T>) -> Self {
        let n = u32::try_from(records.len()).unwrap_or(u32::MAX);
        Self {
            all: records.into(),
            idx: (0..n).collect(),
        }
    }

    /// Number of records in the view.
    pub fn len(&self) -> usize {
        self.idx.len()
    }

    /// True when the view is empty.
    pub fn is_empty(&self) -> bool {
        self.idx.is_empty()
    }

    /// The records, in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.idx.iter().filter_map(|i| self.all.get(*i as usize))
    }

    /// The `i`-th record.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.idx.get(i).and_then(|j| self.all.get(*j as usize))
    }

    /// The records for which `keep` is true.
    pub fn filter(&self, keep: impl Fn(&T) -> bool) -> Self {
        let idx: Vec<u32> = self
            .idx
            .iter()
            .copied()
            .filter(|i| self.all.get(*i as usize).is_some_and(&keep))
            .collect();
        self.with_indices(idx)
    }

    /// Groups by a key computed from each record, in one pass; groups in order of first
    /// appearance, records in order within each.
    pub fn group_by_key<K: std::hash::Hash + Eq + Clone>(
        &self,
        key: impl Fn(&T) -> K,
    ) -> Vec<(K, Self)> {
        let mut groups: Vec<(K, Vec<u32>)> = Vec::new();
        let mut at: std::collections::HashMap<K, usize> = Default::default();
        for i in self.idx.iter().copied() {
            let Some(r) = self.all.get(i as usize) else {
                continue;
            };
            let k = key(r);
            let g = *at.entry(k.clone()).or_insert_with(|| {
                groups.push((k, Vec::new()));
                groups.len() - 1
            });
            if let Some((_, v)) = groups.get_mut(g) {
                v.push(i);
            }
        }
        groups
            .into_iter()
            .map(|(k, idx)| (k, self.with_indices(idx)))
            .collect()
    }

    /// The first `n` records.
    pub fn head(&self, n: usize) -> Self {
        self.with_indices(self.idx.iter().take(n).copied().collect())
    }

    /// The records at view positions `positions`, in that order (repeats allowed); positions
    /// past the end are skipped.
    pub fn pick(&self, positions: &[usize]) -> Self {
        self.with_indices(
            positions
                .iter()
                .filter_map(|p| self.idx.get(*p).copied())
                .collect(),
        )
    }

    fn with_indices(&self, idx: Vec<u32>) -> Self {
        Self {
            all: self.all.clone(),
            idx: idx.into(),
        }
    }
}
