//! Where a configuration value came from: files, the command line, the environment.
//!
//! Every node of a parsed YAML tree carries a [`Span`]; a [`SourceMap`] turns it back into a
//! file name, line, column and the text of that line for error messages.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Index of a source in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceId(pub u32);

/// A position in a source: 1-based line and column. Line 0 means "no position" (a value set
/// on the command line or by an environment variable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The source this position belongs to.
    pub source: SourceId,
    /// 1-based line, 0 when the source has no lines.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
}

impl Span {
    /// A span that points at a whole source rather than a position in it.
    pub fn whole(source: SourceId) -> Span {
        Span {
            source,
            line: 0,
            col: 0,
        }
    }
}

/// What kind of thing a source is; decides how locations are printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A YAML file on disk.
    File(PathBuf),
    /// A command-line option, e.g. `--model`.
    CommandLine,
    /// An environment variable.
    Environment,
    /// A value llem inserted itself (a decoder preset, a built-in default).
    Builtin,
}

/// One source of configuration values.
#[derive(Clone, Debug)]
pub struct Source {
    /// Name shown in messages: the file path as given, or e.g. `--model`, `LLEM_RUNNER_VLLM`.
    pub name: String,
    /// What kind of source this is.
    pub kind: SourceKind,
    /// The full text, kept to quote the offending line in errors.
    pub text: Option<Arc<str>>,
}

/// All sources of one planning run.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    sources: Vec<Source>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a file and its text.
    pub fn add_file(&mut self, path: &Path, text: Arc<str>) -> SourceId {
        self.push(Source {
            name: path.display().to_string(),
            kind: SourceKind::File(path.to_path_buf()),
            text: Some(text),
        })
    }

    /// Registers a source without text (command line, environment, built-in).
    pub fn add_synthetic(&mut self, name: impl Into<String>, kind: SourceKind) -> SourceId {
        self.push(Source {
            name: name.into(),
            kind,
            text: None,
        })
    }

    fn push(&mut self, source: Source) -> SourceId {
        let id = SourceId(u32::try_from(self.sources.len()).unwrap_or(u32::MAX));
        self.sources.push(source);
        id
    }

    /// The source behind an id, if it belongs to this map.
    pub fn get(&self, id: SourceId) -> Option<&Source> {
        self.sources.get(id.0 as usize)
    }

    /// Resolves a span into a printable location (with the quoted line where known).
    pub fn location(&self, span: Span) -> Location {
        let Some(source) = self.get(span.source) else {
            return Location {
                file: "<unknown>".into(),
                line: 0,
                column: 0,
                line_text: None,
            };
        };
        let line_text = match (&source.text, span.line) {
            (Some(text), line) if line > 0 => text
                .lines()
                .nth((line - 1) as usize)
                .map(|l| l.trim_end_matches('\r').to_string()),
            _ => None,
        };
        Location {
            file: source.name.clone(),
            line: span.line,
            column: span.col,
            line_text,
        }
    }
}

/// A resolved position, ready to print: `file:line:column`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// File path as given, or the name of a synthetic source (`--model`, `LLEM_RUNNER_VLLM`).
    pub file: String,
    /// 1-based line; 0 when the source has no lines.
    pub line: u32,
    /// 1-based column; 0 when the source has no lines.
    pub column: u32,
    /// The text of the line, for quoting under the message.
    #[serde(skip)]
    pub line_text: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}:{}:{}", self.file, self.line, self.column)
        }
    }
}
