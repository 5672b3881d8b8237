//! Random draws from llem's seeded generator: the model fits' random starts and the simulated
//! surfaces share them, so a seed means the same thing in both.

use llem_config::rng::SplitMix64;

/// A uniform in [0, 1).
pub(crate) fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal (Box-Muller; the first uniform in (0, 1], so its logarithm is finite).
pub(crate) fn gauss(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - unit(rng);
    let u2 = unit(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
