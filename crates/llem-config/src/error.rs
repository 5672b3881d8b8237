//! Configuration errors that say where (file, line, column) and what to write instead.

use std::fmt;

use serde::Serialize;

use crate::source::Location;

/// The class of a configuration problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// A file could not be read.
    Io,
    /// The YAML itself is malformed.
    Syntax,
    /// A key that no section has.
    UnknownKey,
    /// A value of the wrong type (a word where a number belongs, an unknown enum value).
    Type,
    /// A required field is missing.
    Missing,
    /// A number outside its documented range.
    Range,
    /// A combination of fields that cannot work together.
    Rule,
    /// A broken `_extends` or `base:` reference.
    Inheritance,
    /// A malformed `sweep:` / `experiments:` block.
    Sweep,
    /// A user config or environment variable problem.
    Environment,
}

/// One located problem.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Its class.
    pub kind: ErrorKind,
    /// What is wrong, in one sentence.
    pub message: String,
    /// Where it was written, when known.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// What to write instead, when there is an obvious fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic without location or help.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Diagnostic {
            kind,
            message: message.into(),
            location: None,
            help: None,
        }
    }

    /// Adds a location.
    pub fn at(mut self, location: Location) -> Self {
        self.location = Some(location);
        self
    }

    /// Adds a hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// One line: `file:line:col: message (help)`.
    pub fn one_line(&self) -> String {
        let mut s = match &self.location {
            Some(loc) => format!("{}: {}", loc, self.message),
            None => self.message.clone(),
        };
        if let Some(h) = &self.help {
            s.push_str(" (");
            s.push_str(h);
            s.push(')');
        }
        s
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.message)?;
        if let Some(loc) = &self.location {
            let gutter = loc.line.to_string().len().max(1);
            let pad = " ".repeat(gutter);
            writeln!(f, "{pad}--> {loc}")?;
            if let Some(text) = &loc.line_text {
                let col = loc.column.saturating_sub(1) as usize;
                let (shown, col) = snippet(text, col);
                let caret = caret_width(&shown, col).min(SNIPPET_CHARS);
                writeln!(f, "{pad} |")?;
                writeln!(f, "{:>gutter$} | {}", loc.line, shown)?;
                writeln!(
                    f,
                    "{pad} | {}{}",
                    " ".repeat(shown.chars().take(col).count()),
                    "^".repeat(caret)
                )?;
            }
        }
        if let Some(h) = &self.help {
            writeln!(f, "  = help: {h}")?;
        }
        Ok(())
    }
}

/// Characters of a source line quoted around the error at most: a 4 MB one-line file must
/// not print 4 MB per error.
const SNIPPET_CHARS: usize = 120;

/// The part of `line` quoted for column `col` (0-based, in characters), with `…` where it is
/// cut, and the column within it.
fn snippet(line: &str, col: usize) -> (String, usize) {
    let n = line.chars().count();
    if n <= SNIPPET_CHARS {
        return (line.to_string(), col);
    }
    let start = col
        .saturating_sub(SNIPPET_CHARS / 3)
        .min(n.saturating_sub(SNIPPET_CHARS));
    let mut s: String = line.chars().skip(start).take(SNIPPET_CHARS).collect();
    let mut at = col - start.min(col);
    if start > 0 {
        s.insert(0, '…');
        at += 1;
    }
    if start + SNIPPET_CHARS < n {
        s.push('…');
    }
    (s, at)
}

/// Width of the token starting at `col`, so the caret underlines a key or value.
fn caret_width(line: &str, col: usize) -> usize {
    let rest: String = line.chars().skip(col).collect();
    let quoted = rest.starts_with(['"', '\'']);
    let width = if quoted {
        let q = rest.chars().next().unwrap_or('"');
        rest.chars()
            .skip(1)
            .position(|c| c == q)
            .map_or(rest.chars().count(), |p| p + 2)
    } else {
        rest.chars()
            .take_while(|c| !matches!(c, ':' | ',' | ']' | '}' | '#') && !c.is_whitespace())
            .count()
    };
    width.max(1)
}

/// One or more configuration problems, reported together.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, most important first.
    pub diagnostics: Vec<Diagnostic>,
}

impl ConfigError {
    /// A single-problem error.
    pub fn one(d: Diagnostic) -> Self {
        ConfigError {
            diagnostics: vec![d],
        }
    }

    /// The first problem's class.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.diagnostics.first().map(|d| d.kind)
    }
}

impl From<Diagnostic> for ConfigError {
    fn from(d: Diagnostic) -> Self {
        ConfigError::one(d)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// The candidate closest to `input`, if one is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_', ' '], "");
    let input_norm = norm(input);
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        let score = if norm(c) == input_norm {
            2.0
        } else {
            strsim::jaro_winkler(&input.to_ascii_lowercase(), &c.to_ascii_lowercase())
        };
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((c, score));
        }
    }
    best.filter(|&(_, s)| s >= 0.8).map(|(c, _)| c)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = ["dtype", "decoder", "dataset", "n_prompts", "batch_size"];
        assert_eq!(did_you_mean("dtypee", keys), Some("dtype"));
        assert_eq!(did_you_mean("n_prompt", keys), Some("n_prompts"));
        assert_eq!(did_you_mean("batchSize", keys), Some("batch_size"));
        assert_eq!(did_you_mean("zzzz", keys), None);
    }

    #[test]
    fn renders_with_caret_under_the_key() {
        let d = Diagnostic::new(ErrorKind::UnknownKey, "unknown key `dtypee`")
            .at(Location {
                file: "s.yaml".into(),
                line: 3,
                column: 3,
                line_text: Some("  dtypee: float16".into()),
            })
            .with_help("did you mean `dtype`?");
        let text = d.to_string();
        assert!(text.contains("--> s.yaml:3:3"), "{text}");
        assert!(text.contains("3 |   dtypee: float16"), "{text}");
        assert!(text.contains("  |   ^^^^^^\n"), "{text}");
        assert!(text.contains("help: did you mean `dtype`?"), "{text}");
    }

    /// A one-line file's errors quote a window around the column, not the whole line.
    #[test]
    fn long_lines_are_cut_around_the_error() {
        let line = format!("decoder: {{{}, tempratur: 1}}", "k: 1, ".repeat(100_000));
        let col = line.find("tempratur").unwrap() + 1;
        let d = Diagnostic::new(ErrorKind::UnknownKey, "unknown key `tempratur`").at(Location {
            file: "one.yaml".into(),
            line: 1,
            column: col as u32,
            line_text: Some(line),
        });
        let text = d.to_string();
        assert!(text.len() < 600, "{} bytes", text.len());
        assert!(text.contains("one.yaml:1:"), "{text}");
        let quoted = text.lines().nth(3).unwrap();
        let caret = text.lines().nth(4).unwrap();
        assert!(
            quoted.contains("| …") && quoted.ends_with("tempratur: 1}"),
            "{quoted}"
        );
        // The caret still stands under the key.
        let at = caret.find('^').unwrap();
        assert_eq!(
            quoted.chars().skip(at).take(9).collect::<String>(),
            "tempratur",
            "{quoted}\n{caret}"
        );
    }
}

/// What kind of value a [`ValueError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A duration (`100ms`, `6h`).
    Duration,
    /// A time of day (`02:00`).
    TimeOfDay,
    /// A day of the week (`mon`, `weekdays`).
    Day,
    /// A Slurm time limit (`HH:MM:SS`, `D-HH`).
    SlurmTime,
}

/// A value written as text (a flag, an environment variable, a YAML string) that is not what
/// it should be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ValueError {
    /// What the value was to be.
    pub kind: ValueKind,
    /// The text as given.
    pub text: String,
    /// What is wrong with it, quoting the text.
    pub reason: String,
}

impl ValueError {
    /// `text` is not a valid `kind`, because `reason`.
    pub fn new(kind: ValueKind, text: &str, reason: String) -> Self {
        ValueError {
            kind,
            text: text.to_string(),
            reason,
        }
    }
}

/// A name that is not one of a fixed set (an engine, an order, a sampler).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown value `{given}`; expected one of {}{}",
    .expected.join(", "),
    .suggestion.as_ref().map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default()
)]
pub struct UnknownName {
    /// The name given.
    pub given: String,
    /// The names there are.
    pub expected: &'static [&'static str],
    /// The nearest one, when one is near.
    pub suggestion: Option<String>,
}

/// A runner that is not `embedded`, `local`, `docker[:<image>]` or `external:<url>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct RunnerError {
    /// The runner as written.
    pub given: String,
    /// What is wrong, quoting it.
    pub reason: String,
}
