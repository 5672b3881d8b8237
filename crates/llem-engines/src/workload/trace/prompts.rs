//! Prompts of a trace's exact lengths, as token ids, cut from real text (ShareGPT tokenized
//! once with the model's own tokenizer). A request's prompt is its prefix blocks (each hash id
//! one block of [`BLOCK_TOKENS`] tokens, the same id always the same tokens, so requests that
//! share leading ids share that prefix, as the trace's did) followed by text of its own; a
//! trace without block ids gives every request text of its own. Token ids, not text, because
//! text cut to a token count does not always tokenize back to that count.

use llem_config::rng::SplitMix64;

/// Tokens in one prefix block (Mooncake's block size).
pub const BLOCK_TOKENS: usize = super::formats::MOONCAKE_BLOCK_TOKENS as usize;

/// Cuts prompts from a corpus of token ids.
#[derive(Clone, Debug)]
pub struct PromptCutter<'a> {
    corpus: &'a [u32],
    seed: u64,
}

/// Why no prompt can be cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusTooSmall {
    /// Tokens the corpus has.
    pub have: usize,
    /// Tokens one piece needs.
    pub need: usize,
}

impl<'a> PromptCutter<'a> {
    /// A cutter over `corpus`; the same seed cuts the same prompts.
    pub fn new(corpus: &'a [u32], seed: u64) -> PromptCutter<'a> {
        PromptCutter { corpus, seed }
    }

    /// `n` tokens of the corpus starting at a place drawn from `key`, wrapping around its end.
    fn piece(&self, key: u64, n: usize) -> Result<Vec<u32>, CorpusTooSmall> {
        if self.corpus.is_empty() || (n > 0 && self.corpus.len() < n.min(BLOCK_TOKENS)) {
            return Err(CorpusTooSmall {
                have: self.corpus.len(),
                need: n.min(BLOCK_TOKENS),
            });
        }
        let start = SplitMix64::new(self.seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .below(self.corpus.len() as u64) as usize;
        Ok(self
            .corpus
            .iter()
            .cycle()
            .skip(start)
            .take(n)
            .copied()
            .collect())
    }

    /// The prompt of request `request` (its own text is keyed by it): its blocks, then its own
    /// text, exactly `input_tokens` long (a prompt shorter than its blocks is their start).
    pub fn prompt(
        &self,
        request: u64,
        hash_ids: &[u64],
        input_tokens: usize,
    ) -> Result<Vec<u32>, CorpusTooSmall> {
        let mut out = Vec::with_capacity(input_tokens);
        for &id in hash_ids {
            if out.len() >= input_tokens {
                break;
            }
            // Block keys and request keys are drawn apart: a block is never a request's text.
            out.extend(self.piece(id.wrapping_mul(2), BLOCK_TOKENS)?);
        }
        out.truncate(input_tokens);
        let rest = input_tokens - out.len();
        if rest > 0 {
            out.extend(self.piece(request.wrapping_mul(2) | 1, rest)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn exact_lengths_and_shared_blocks_exactly_where_the_ids_agree() {
        let corpus: Vec<u32> = (0..5000).collect();
        let c = PromptCutter::new(&corpus, 7);
        let a = c.prompt(0, &[3, 4], 1100).unwrap();
        let b = c.prompt(1, &[3, 4, 5], 1600).unwrap();
        let d = c.prompt(2, &[3, 9], 1030).unwrap();
        let e = c.prompt(3, &[], 300).unwrap();
        assert_eq!(
            (a.len(), b.len(), d.len(), e.len()),
            (1100, 1600, 1030, 300)
        );
        // Two blocks shared between a and b, one between a and d, then they differ.
        assert_eq!(a[..1024], b[..1024]);
        assert_eq!(a[..512], d[..512]);
        assert_ne!(a[512..1024], d[512..1024]);
        assert_ne!(a[1024..], b[1024..1100]);
        // The same seed cuts the same prompt; another seed another.
        assert_eq!(c.prompt(0, &[3, 4], 1100).unwrap(), a);
        assert_ne!(
            PromptCutter::new(&corpus, 8)
                .prompt(0, &[3, 4], 1100)
                .unwrap(),
            a
        );
        // A prompt shorter than its blocks is their start.
        assert_eq!(c.prompt(9, &[3, 4], 700).unwrap(), a[..700]);
    }

    #[test]
    fn a_corpus_smaller_than_a_block_is_refused() {
        let small: Vec<u32> = (0..100).collect();
        let c = PromptCutter::new(&small, 1);
        assert_eq!(
            c.prompt(0, &[1], 600),
            Err(CorpusTooSmall {
                have: 100,
                need: 512
            })
        );
        // Short prompts without blocks still come from it.
        assert_eq!(c.prompt(0, &[], 80).unwrap().len(), 80);
        assert!(PromptCutter::new(&[], 1).prompt(0, &[], 1).is_err());
    }
}
