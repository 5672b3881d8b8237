//! From the chunks of one streamed response to token-exact timestamps.
//!
//! A chunk that carries `k` tokens yields `k` timestamps spread evenly over the gap since the
//! previous content chunk (the tokens were generated during that gap); the first content
//! chunk's tokens all get its arrival time, which is the TTFT. Per-chunk token counts come
//! from cumulative usage in every chunk (`continuous_usage_stats`) when the server sends it;
//! otherwise each content chunk counts one token and, when the final usage reports a
//! different total, the total is shared out over the chunks in proportion to their text.

/// One chunk as it arrived.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkObs {
    /// Arrival, s on the experiment clock.
    pub t_s: f64,
    /// Bytes of generated text it carried.
    pub text_bytes: u32,
    /// Cumulative `completion_tokens` it reported, when the server sends usage per chunk.
    pub cum_tokens: Option<u32>,
}

/// How token times were obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimingMode {
    /// One token per chunk: every timestamp is a real arrival.
    TrueStreaming,
    /// Some chunks carried several tokens: their times are spread over the gap.
    Proportional,
}

impl TimingMode {
    /// The name written to results.
    pub fn as_str(self) -> &'static str {
        match self {
            TimingMode::TrueStreaming => "true_streaming",
            TimingMode::Proportional => "proportional",
        }
    }
}

/// The tokens of one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Accounted {
    /// Arrival time of every output token.
    pub token_times_s: Vec<f64>,
    /// How they were obtained.
    pub mode: TimingMode,
    /// True when the count came from the server's usage.
    pub from_usage: bool,
}

/// Accounts `chunks` (in arrival order) against the final usage count, if any.
pub fn account(chunks: &[ChunkObs], final_tokens: Option<u32>) -> Accounted {
    let mut out = Vec::new();
    // Tokens per chunk, by the best evidence available.
    let continuous = !chunks.is_empty() && chunks.iter().all(|c| c.cum_tokens.is_some());
    let mut counts: Vec<u32> = Vec::with_capacity(chunks.len());
    if continuous {
        let mut prev = 0u32;
        for c in chunks {
            let cum = c.cum_tokens.unwrap_or(prev).max(prev);
            counts.push(cum - prev);
            prev = cum;
        }
    } else {
        counts.extend(chunks.iter().map(|c| u32::from(c.text_bytes > 0)));
    }
    let counted: u64 = counts.iter().map(|&k| u64::from(k)).sum();
    let from_usage = final_tokens.is_some() || continuous;
    if let Some(total) = final_tokens.filter(|&t| u64::from(t) != counted) {
        share_out(chunks, total, &mut counts);
    }
    let mut mode = TimingMode::TrueStreaming;
    let mut prev_t: Option<f64> = None;
    for (c, &k) in chunks.iter().zip(&counts) {
        if k == 0 {
            continue;
        }
        if k > 1 {
            mode = TimingMode::Proportional;
        }
        match prev_t {
            None => out.extend(std::iter::repeat_n(c.t_s, k as usize)),
            Some(p) => {
                let step = (c.t_s - p) / f64::from(k);
                out.extend((1..=k).map(|j| p + step * f64::from(j)));
            }
        }
        prev_t = Some(c.t_s);
    }
    Accounted {
        token_times_s: out,
        mode,
        from_usage,
    }
}

/// Shares `total` tokens over the chunks in proportion to their text (largest remainder),
/// at least one per text-carrying chunk while tokens last.
fn share_out(chunks: &[ChunkObs], total: u32, counts: &mut [u32]) {
    let bytes: u64 = chunks.iter().map(|c| u64::from(c.text_bytes)).sum();
    counts.iter_mut().for_each(|k| *k = 0);
    if total == 0 {
        return;
    }
    if bytes == 0 {
        // Tokens without text (special tokens, or a server that streams nothing): they all
        // arrived with the last chunk.
        if let Some(last) = counts.last_mut() {
            *last = total;
        }
        return;
    }
    let with_text = chunks.iter().filter(|c| c.text_bytes > 0).count() as u64;
    let mut left = u64::from(total);
    if left >= with_text {
        for (k, c) in counts.iter_mut().zip(chunks) {
            if c.text_bytes > 0 {
                *k = 1;
            }
        }
        left -= with_text;
    }
    let mut rema: Vec<(u64, usize)> = Vec::with_capacity(chunks.len());
    let mut given = 0u64;
    for (i, c) in chunks.iter().enumerate() {
        let exact = left * u64::from(c.text_bytes);
        let whole = exact / bytes;
        if let Some(k) = counts.get_mut(i) {
            *k += u32::try_from(whole).unwrap_or(u32::MAX);
        }
        given += whole;
        rema.push((exact % bytes, i));
    }
    rema.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rema.iter().take((left - given) as usize) {
        if let Some(k) = counts.get_mut(i) {
            *k += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn obs(t: f64, b: u32) -> ChunkObs {
        ChunkObs {
            t_s: t,
            text_bytes: b,
            cum_tokens: None,
        }
    }

    #[test]
    fn one_token_per_chunk_is_true_streaming() {
        let a = account(
            &[obs(0.5, 0), obs(1.0, 3), obs(1.1, 2), obs(1.3, 4)],
            Some(3),
        );
        assert_eq!(a.token_times_s, vec![1.0, 1.1, 1.3]);
        assert_eq!(a.mode, TimingMode::TrueStreaming);
        assert!(a.from_usage);
        let b = account(&[obs(1.0, 3), obs(2.0, 3)], None);
        assert_eq!(b.token_times_s, vec![1.0, 2.0]);
        assert!(!b.from_usage);
    }

    #[test]
    fn continuous_usage_splits_each_chunk_over_its_gap() {
        let c = |t, b, n| ChunkObs {
            t_s: t,
            text_bytes: b,
            cum_tokens: Some(n),
        };
        let a = account(&[c(0.1, 0, 0), c(1.0, 4, 2), c(2.0, 8, 6)], Some(6));
        assert_eq!(a.token_times_s, vec![1.0, 1.0, 1.25, 1.5, 1.75, 2.0]);
        assert_eq!(a.mode, TimingMode::Proportional);
    }

    #[test]
    fn usage_total_is_shared_by_text_length() {
        let a = account(&[obs(1.0, 2), obs(2.0, 6)], Some(4));
        // 1 each, then the 2 left in proportion 2:6 -> 0.5/1.5 -> remainders favour chunk 2.
        assert_eq!(a.token_times_s.len(), 4);
        assert_eq!(a.token_times_s.first(), Some(&1.0));
        assert_eq!(a.token_times_s.last(), Some(&2.0));
        assert_eq!(a.mode, TimingMode::Proportional);
        let none = account(&[obs(1.0, 0)], Some(3));
        assert_eq!(none.token_times_s, vec![1.0, 1.0, 1.0]);
        let zero = account(&[obs(1.0, 5)], Some(0));
        assert!(zero.token_times_s.is_empty());
    }
}
