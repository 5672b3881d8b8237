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
                let caret = caret_width(text, col);
                writeln!(f, "{pad} |")?;
                writeln!(f, "{:>gutter$} | {}", loc.line, text)?;
                writeln!(
                    f,
                    "{pad} | {}{}",
                    " ".repeat(text.chars().take(col).count()),
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
}
