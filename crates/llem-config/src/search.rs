//! The `search:` block of a study file: look for the best configuration of the sweep under
//! constraints instead of measuring the whole grid. The sweep says what the candidates are;
//! this block says what "best" means, what must hold, and how many runs the search may use.
//!
//! ```yaml
//! search:
//!   objective: mj_per_tok_total       # a numeric result field (direction from the field)
//!   constraints: ["itl_p90_ms <= 50", "goodput_fraction >= 90%"]
//!   budget: 30%                       # of the grid's configurations, or a number of runs
//!   confidence: 0.95
//!   seed: 7
//! ```

use serde::{Deserialize, Serialize};

use crate::block::{Block, error_at};
use crate::error::{ConfigError, Diagnostic, ErrorKind, did_you_mean};
use crate::source::{Location, SourceMap};
use crate::yaml::Node;

/// A result figure a search can aim at or constrain, named as `result.json` names it.
#[derive(Clone, Copy, Debug)]
pub struct SearchField {
    /// The name (the `result.json` field; latency fields as `latency_stats` names them).
    pub name: &'static str,
    /// Its unit as printed.
    pub unit: &'static str,
    /// True when smaller is better: the objective's default direction.
    pub lower_is_better: bool,
    /// Needs an SLO (`goodput`) in every configuration.
    pub needs_slo: bool,
}

const fn field(name: &'static str, unit: &'static str, lower_is_better: bool) -> SearchField {
    SearchField {
        name,
        unit,
        lower_is_better,
        needs_slo: false,
    }
}

const fn goodput(name: &'static str, unit: &'static str, lower_is_better: bool) -> SearchField {
    SearchField {
        name,
        unit,
        lower_is_better,
        needs_slo: true,
    }
}

/// The fields a search takes. `llem_results::figures` reads each from a result; a test
/// there holds the two lists equal.
pub const SEARCH_FIELDS: &[SearchField] = &[
    field("mj_per_tok_total", "mJ/tok", true),
    field("mj_per_tok_adjusted", "mJ/tok", true),
    field("system_mj_per_tok", "mJ/tok", true),
    field("total_energy_j", "J", true),
    field("energy_adjusted_j", "J", true),
    field("energy_per_request_j", "J", true),
    field("energy_per_response_token_mj", "mJ/tok", true),
    field("tokens_per_joule", "tok/J", false),
    field("avg_tokens_per_second", "tok/s", false),
    field("output_throughput_tokens_per_sec", "tok/s", false),
    field("avg_total_tokens_per_second", "tok/s", false),
    field("ttft_mean_ms", "ms", true),
    field("ttft_median_ms", "ms", true),
    field("ttft_p90_ms", "ms", true),
    field("ttft_p95_ms", "ms", true),
    field("ttft_p99_ms", "ms", true),
    field("itl_mean_ms", "ms", true),
    field("itl_median_ms", "ms", true),
    field("itl_p90_ms", "ms", true),
    field("itl_p95_ms", "ms", true),
    field("itl_p99_ms", "ms", true),
    field("tpot_mean_ms", "ms", true),
    field("tpot_median_ms", "ms", true),
    field("tpot_p90_ms", "ms", true),
    field("tpot_p99_ms", "ms", true),
    field("e2e_mean_ms", "ms", true),
    field("e2e_median_ms", "ms", true),
    field("e2e_p90_ms", "ms", true),
    field("e2e_p99_ms", "ms", true),
    goodput("goodput_fraction", "share", false),
    goodput("goodput_req_per_s", "req/s", false),
    goodput("energy_per_good_request_j", "J", true),
];

/// The field called `name`.
pub fn search_field(name: &str) -> Option<&'static SearchField> {
    SEARCH_FIELDS.iter().find(|f| f.name == name)
}

/// Minimise or maximise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Smaller is better.
    Minimize,
    /// Larger is better.
    Maximize,
}

/// `<=` or `>=` (`<` and `>` read the same: measured figures are continuous).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bound {
    /// The figure must be at most the threshold.
    #[serde(rename = "<=")]
    AtMost,
    /// The figure must be at least the threshold.
    #[serde(rename = ">=")]
    AtLeast,
}

impl Bound {
    /// `<=` or `>=`.
    pub fn symbol(self) -> &'static str {
        match self {
            Bound::AtMost => "<=",
            Bound::AtLeast => ">=",
        }
    }

    /// True when `value` meets `threshold`.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Bound::AtMost => value <= threshold,
            Bound::AtLeast => value >= threshold,
        }
    }
}

/// One constraint: `field op threshold`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Constraint {
    /// The figure.
    pub field: String,
    /// Its bound.
    pub bound: Bound,
    /// The threshold, in the field's unit (a `%` written for a share is divided by 100).
    pub threshold: f64,
    /// Where it was written.
    #[serde(skip)]
    pub location: Option<Location>,
}

impl Constraint {
    /// `itl_p90_ms <= 50`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} {}",
            self.field,
            self.bound.symbol(),
            crate::schema::fmt_num(self.threshold)
        )
    }
}

/// How many runs the search may use, confirmation runs included.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// A number of runs.
    Runs(u32),
    /// A share of the grid's configurations (one run each), 0-1.
    Fraction(f64),
}

impl Budget {
    /// The budget in runs for a grid of `candidates` configurations.
    pub fn runs(self, candidates: usize) -> u32 {
        match self {
            Budget::Runs(n) => n,
            Budget::Fraction(f) => {
                let n = (f * candidates as f64).ceil();
                // Saturates: a fraction of a huge grid is still a count of runs.
                if n >= f64::from(u32::MAX) {
                    u32::MAX
                } else {
                    n.max(1.0) as u32
                }
            }
        }
    }
}

/// The default confidence at which the best configuration is declared.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// The default tolerance: configurations within 2 % of the best are not told apart.
pub const DEFAULT_TOLERANCE: f64 = 0.02;
/// The default budget: 30 % of the grid.
pub const DEFAULT_BUDGET: Budget = Budget::Fraction(0.3);

/// A study's `search:` block, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchSpec {
    /// The figure to optimise.
    pub objective: String,
    /// Which way.
    pub direction: Direction,
    /// What must hold.
    pub constraints: Vec<Constraint>,
    /// The runs it may use.
    pub budget: Budget,
    /// The confidence at which the best is declared (and a constraint judged met), 0.5-0.999.
    pub confidence: f64,
    /// Relative difference below which two configurations count as equally good.
    pub tolerance: f64,
    /// Seed of the proposals: the same seed and the same measurements give the same search.
    pub seed: u64,
    /// Proposals measured at once (a Slurm array's size); 1 measures one at a time.
    pub batch: u32,
}

impl SearchSpec {
    /// One line for the plan: "minimise mj_per_tok_total s.t. itl_p90_ms <= 50; budget 30 %".
    pub fn describe(&self) -> String {
        let dir = match self.direction {
            Direction::Minimize => "minimise",
            Direction::Maximize => "maximise",
        };
        let mut s = format!("{dir} {}", self.objective);
        if !self.constraints.is_empty() {
            let c: Vec<String> = self.constraints.iter().map(Constraint::describe).collect();
            s.push_str(&format!(" subject to {}", c.join(", ")));
        }
        s
    }

    /// Every field the search reads.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.objective.as_str()).chain(self.constraints.iter().map(|c| &*c.field))
    }
}

const KEYS: [&str; 8] = [
    "objective",
    "direction",
    "constraints",
    "budget",
    "confidence",
    "tolerance",
    "seed",
    "batch",
];

/// The `search:` block of `root`: `None` when absent.
pub fn from_root(
    root: &crate::yaml::Map,
    sources: &SourceMap,
) -> Result<Option<SearchSpec>, ConfigError> {
    let Some((block, node)) = Block::of(root, "search", &KEYS, sources)? else {
        return Ok(None);
    };
    let Some((objective_node, objective)) = block.text("objective")? else {
        return Err(error_at(
            sources,
            node,
            ErrorKind::Missing,
            "`search` needs an `objective`: the result field to optimise, e.g. \
             `objective: mj_per_tok_total`"
                .into(),
        ));
    };
    let objective_field = block.field(objective_node, objective, "search.objective")?;
    let direction = match block.text("direction")? {
        None if objective_field.lower_is_better => Direction::Minimize,
        None => Direction::Maximize,
        Some((_, "minimize" | "minimise" | "min")) => Direction::Minimize,
        Some((_, "maximize" | "maximise" | "max")) => Direction::Maximize,
        Some((n, other)) => {
            return Err(block.err(
                n,
                ErrorKind::Type,
                format!("`search.direction` must be minimize or maximize, found `{other}`"),
            ));
        }
    };
    let mut constraints = Vec::new();
    for (n, text) in block.list("constraints")? {
        constraints.push(block.constraint(n, text)?);
    }
    let budget = match block.text("budget")? {
        None => DEFAULT_BUDGET,
        Some((n, s)) => parse_budget(s).map_err(|m| block.err(n, ErrorKind::Range, m))?,
    };
    let confidence = block.number("confidence", DEFAULT_CONFIDENCE, |v| {
        (0.5..=0.999)
            .contains(&v)
            .then_some(v)
            .ok_or("must be between 0.5 and 0.999 (0.95 is usual)")
    })?;
    let tolerance = block.number("tolerance", DEFAULT_TOLERANCE, |v| {
        (0.0..=0.5)
            .contains(&v)
            .then_some(v)
            .ok_or("must be a share between 0 and 0.5 (0.02 = 2 %)")
    })?;
    let seed = block.integer("seed", 0, u64::MAX)?.unwrap_or(0);
    let batch = block.integer("batch", 1, 1024)?.unwrap_or(1) as u32;
    Ok(Some(SearchSpec {
        objective: objective.to_string(),
        direction,
        constraints,
        budget,
        confidence,
        tolerance,
        seed,
        batch,
    }))
}

/// `30%`, `0.3` (a share of the grid) or `40` (runs).
fn parse_budget(s: &str) -> Result<Budget, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "`search.budget` must be a number of runs (40) or a share of the grid (30%), found `{s}`"
        )
    };
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(v > 0.0 && v <= 100.0) {
            return Err(format!(
                "`search.budget` {s}: a share must be above 0 % and at most 100 %"
            ));
        }
        return Ok(Budget::Fraction(v / 100.0));
    }
    if let Ok(n) = t.parse::<u64>() {
        return match u32::try_from(n) {
            Ok(n) if n >= 1 => Ok(Budget::Runs(n)),
            _ => Err(format!(
                "`search.budget` {s}: a number of runs must be 1 to {}",
                u32::MAX
            )),
        };
    }
    let v: f64 = t.parse().map_err(|_| bad())?;
    if v > 0.0 && v < 1.0 {
        Ok(Budget::Fraction(v))
    } else {
        Err(bad())
    }
}

/// `itl_p90_ms <= 50`: the field, the bound and the threshold, or what is wrong.
fn parse_constraint(text: &str) -> Result<(&str, Bound, f64), String> {
    let ops = [
        ("<=", Bound::AtMost),
        (">=", Bound::AtLeast),
        ("<", Bound::AtMost),
        (">", Bound::AtLeast),
    ];
    let Some((at, op, bound)) = ops
        .iter()
        .filter_map(|(op, b)| text.find(op).map(|i| (i, *op, *b)))
        .min_by_key(|(i, op, _)| (*i, std::cmp::Reverse(op.len())))
    else {
        return Err(format!(
            "constraint `{text}` has no comparison: write `field <= value` or `field >= value`"
        ));
    };
    let field = text.get(..at).unwrap_or("").trim();
    let value = text.get(at + op.len()..).unwrap_or("").trim();
    if field.is_empty() {
        return Err(format!("constraint `{text}` names no field before `{op}`"));
    }
    let (number, scale) = match value.strip_suffix('%') {
        Some(v) => (v.trim(), 0.01),
        None => (value, 1.0),
    };
    let v: f64 = number.parse().map_err(|_| {
        format!("constraint `{text}`: `{value}` is not a number (e.g. 50, 0.9 or 90%)")
    })?;
    if !v.is_finite() {
        return Err(format!("constraint `{text}`: the threshold must be finite"));
    }
    Ok((field, bound, v * scale))
}

impl Block<'_> {
    /// A field name of [`SEARCH_FIELDS`], or an error with the nearest one.
    fn field(&self, n: &Node, name: &str, what: &str) -> Result<&'static SearchField, ConfigError> {
        if let Some(f) = search_field(name) {
            return Ok(f);
        }
        let mut d = Diagnostic::new(
            ErrorKind::Type,
            format!("{what}: `{name}` is not a numeric result field a search can use"),
        )
        .at(self.sources.location(n.span));
        d = match did_you_mean(name, SEARCH_FIELDS.iter().map(|f| f.name)) {
            Some(c) => d.with_help(format!("did you mean `{c}`?")),
            None => d.with_help(
                "fields: mj_per_tok_total, system_mj_per_tok, energy_per_request_j, \
                 itl_p90_ms, ttft_p99_ms, output_throughput_tokens_per_sec, goodput_fraction, … \
                 (docs/search.md lists them all)",
            ),
        };
        Err(d.into())
    }

    fn constraint(&self, n: &Node, text: &str) -> Result<Constraint, ConfigError> {
        let (field, bound, threshold) =
            parse_constraint(text).map_err(|m| self.err(n, ErrorKind::Type, m))?;
        self.field(n, field, "search.constraints")?;
        Ok(Constraint {
            field: field.to_string(),
            bound,
            threshold,
            location: Some(self.sources.location(n.span)),
        })
    }

    fn number(
        &self,
        key: &str,
        default: f64,
        check: impl Fn(f64) -> Result<f64, &'static str>,
    ) -> Result<f64, ConfigError> {
        let Some((n, s)) = self.text(key)? else {
            return Ok(default);
        };
        // A share may be written in per cent.
        let (t, scale) = match s.trim().strip_suffix('%') {
            Some(p) => (p.trim(), 0.01),
            None => (s.trim(), 1.0),
        };
        let v: f64 = t.parse::<f64>().map(|v| v * scale).map_err(|_| {
            self.err(
                n,
                ErrorKind::Type,
                format!("`search.{key}` must be a number, found `{s}`"),
            )
        })?;
        check(v).map_err(|why| self.err(n, ErrorKind::Range, format!("`search.{key}` {why}")))
    }

    fn integer(&self, key: &str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
        let Some((n, s)) = self.text(key)? else {
            return Ok(None);
        };
        match s.trim().parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(Some(v)),
            _ => Err(self.err(
                n,
                ErrorKind::Range,
                format!("`search.{key}` must be a whole number from {min} to {max}, found `{s}`"),
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::path::Path;

    fn spec(yaml: &str) -> Result<Option<SearchSpec>, ConfigError> {
        let mut sources = SourceMap::new();
        let id = sources.add_file(Path::new("s.yaml"), yaml.into());
        let root = crate::yaml::parse(yaml, id).unwrap();
        from_root(root.as_map().unwrap(), &sources)
    }

    #[test]
    fn a_whole_block_reads_with_its_defaults_and_directions() {
        let s = spec(
            "search:\n  objective: mj_per_tok_total\n  constraints:\n    - itl_p90_ms <= 50\n    - \"goodput_fraction >= 90%\"\n    - output_throughput_tokens_per_sec>100\n  budget: 30%\n  seed: 7\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.direction, Direction::Minimize);
        assert_eq!(s.budget, Budget::Fraction(0.3));
        assert_eq!(s.budget.runs(48), 15);
        assert_eq!(s.confidence, DEFAULT_CONFIDENCE);
        assert_eq!(s.seed, 7);
        assert_eq!(s.constraints.len(), 3);
        assert_eq!(s.constraints[1].bound, Bound::AtLeast);
        assert!((s.constraints[1].threshold - 0.9).abs() < 1e-12);
        assert_eq!(s.constraints[2].threshold, 100.0);
        assert_eq!(
            s.describe(),
            "minimise mj_per_tok_total subject to itl_p90_ms <= 50, goodput_fraction >= 0.9, \
             output_throughput_tokens_per_sec >= 100"
        );
        let t = spec("search:\n  objective: output_throughput_tokens_per_sec\n  budget: 12\n  tolerance: 5%\n")
            .unwrap()
            .unwrap();
        assert!((t.tolerance - 0.05).abs() < 1e-12);
        assert_eq!(t.direction, Direction::Maximize);
        assert_eq!(t.budget, Budget::Runs(12));
        assert!(spec("name: x\n").unwrap().is_none());
    }

    #[test]
    fn mistakes_are_refused_where_they_were_written_with_the_nearest_name() {
        let e = spec("search:\n  objective: mj_per_tok\n").unwrap_err();
        let d = &e.diagnostics[0];
        assert_eq!(d.location.as_ref().unwrap().line, 2);
        assert_eq!(d.help.as_deref(), Some("did you mean `mj_per_tok_total`?"));
        let e =
            spec("search:\n  objective: mj_per_tok_total\n  constraints: [\"itl_p09_ms <= 5\"]\n")
                .unwrap_err();
        assert_eq!(e.diagnostics[0].location.as_ref().unwrap().line, 3);
        assert!(
            e.diagnostics[0]
                .help
                .as_deref()
                .unwrap()
                .contains("itl_p90_ms")
        );
        let e = spec("search:\n  objectiv: mj_per_tok_total\n").unwrap_err();
        assert_eq!(
            e.diagnostics[0].help.as_deref(),
            Some("did you mean `objective`?")
        );
        for bad in [
            "search:\n  objective: mj_per_tok_total\n  budget: 0%\n",
            "search:\n  objective: mj_per_tok_total\n  budget: 1.5\n",
            "search:\n  objective: mj_per_tok_total\n  confidence: 0.3\n",
            "search:\n  objective: mj_per_tok_total\n  constraints: [\"itl_p90_ms = 5\"]\n",
            "search:\n  objective: mj_per_tok_total\n  constraints: [\"itl_p90_ms <= fast\"]\n",
            "search:\n  objective: mj_per_tok_total\n  direction: down\n",
            "search:\n  constraints: [\"itl_p90_ms <= 5\"]\n",
            "search: 3\n",
        ] {
            let e = spec(bad).unwrap_err();
            assert!(e.diagnostics[0].location.is_some(), "{bad}: {e}");
        }
    }
}
