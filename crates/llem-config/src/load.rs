//! Reading configuration files: YAML into trees, `_extends` chains, `base:` files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::aliases::normalize_keys;
use crate::error::{ConfigError, Diagnostic, ErrorKind};
use crate::files;
use crate::source::{SourceMap, Span};
use crate::yaml::{self, Node, NodeKind, deep_merge};

/// Key that names the parent file(s) of an experiment mapping.
pub const EXTENDS_KEY: &str = "_extends";

/// Reads files into trees; owns the sources of one planning run.
pub struct Loader<'a> {
    /// Where every loaded value came from.
    pub sources: &'a mut SourceMap,
}

impl<'a> Loader<'a> {
    /// A loader recording into `sources`.
    pub fn new(sources: &'a mut SourceMap) -> Self {
        Loader { sources }
    }

    fn located(&self, d: Diagnostic, span: Option<Span>) -> ConfigError {
        match span {
            Some(s) => d.at(self.sources.location(s)).into(),
            None => d.into(),
        }
    }

    /// A file that is not UTF-8: located at its first invalid byte.
    fn not_utf8(&mut self, path: &Path, e: &std::string::FromUtf8Error) -> ConfigError {
        let valid = e
            .as_bytes()
            .get(..e.utf8_error().valid_up_to())
            .unwrap_or_default();
        let before = String::from_utf8_lossy(valid);
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let bad = e.as_bytes().get(valid.len()).copied().unwrap_or(0);
        let id = self
            .sources
            .add_file(path, Arc::from(String::from_utf8_lossy(e.as_bytes())));
        let span = Span {
            source: id,
            line: u32::try_from(line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
        };
        ConfigError::from(
            Diagnostic::new(
                ErrorKind::Syntax,
                format!("not UTF-8 text (byte 0x{bad:02x}): YAML files are UTF-8"),
            )
            .at(self.sources.location(span))
            .with_help("re-save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"),
        )
    }

    fn not_found(&self, path: &Path, referrer: Option<Span>) -> ConfigError {
        let mut d = Diagnostic::new(
            ErrorKind::Inheritance,
            format!("file not found: {}", path.display()),
        );
        if referrer.is_some() {
            d = d.with_help(
                "paths in `base:` and `_extends` are relative to the file that names them",
            );
        }
        self.located(d, referrer)
    }

    /// Reads a YAML file that must hold a mapping (an empty file is an empty mapping).
    /// `referrer` is where the file was named (`_extends`, `base:`), for errors.
    pub fn read_mapping(
        &mut self,
        path: &Path,
        referrer: Option<Span>,
    ) -> Result<Node, ConfigError> {
        if referrer.is_some() && !has_config_extension(path) {
            return Err(self.located(
                Diagnostic::new(
                    ErrorKind::Inheritance,
                    format!(
                        "{} is not a configuration file: `base:` and `_extends` name a \
                         .yaml, .yml or .json file",
                        path.display()
                    ),
                ),
                referrer,
            ));
        }
        let bytes = match files::read_regular(path, files::CONFIG_MAX_BYTES) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.not_found(path, referrer));
            }
            Err(e) => {
                return Err(self.located(
                    Diagnostic::new(
                        ErrorKind::Io,
                        format!("cannot read {}: {e}", path.display()),
                    ),
                    referrer,
                ));
            }
        };
        let text: Arc<str> = match String::from_utf8(bytes) {
            Ok(t) => Arc::from(t),
            Err(e) => return Err(self.not_utf8(path, &e)),
        };
        let id = self.sources.add_file(path, text.clone());
        let node = yaml::parse(&text, id).map_err(|e| {
            ConfigError::from(
                Diagnostic::new(ErrorKind::Syntax, format!("invalid YAML: {}", e.message))
                    .at(self.sources.location(e.span)),
            )
        })?;
        let mut node = match &node.kind {
            NodeKind::Null => Node::empty_map(node.span),
            NodeKind::Map(_) => node,
            // Pointed at where the file was named, not into it: a file that is not a
            // configuration may be anything (`/etc/passwd`), and its text is not quoted.
            other => {
                let found = match other {
                    NodeKind::Seq(_) => "a list",
                    _ => "a single value",
                };
                return Err(self.located(
                    Diagnostic::new(
                        ErrorKind::Type,
                        format!(
                            "{} is not a configuration file: it holds {found}, not a mapping \
                             of keys (`model: ...`)",
                            path.display()
                        ),
                    ),
                    referrer,
                ));
            }
        };
        normalize_keys(&mut node, self.sources)?;
        Ok(node)
    }

    /// Reads a file and resolves its `_extends` chain.
    pub fn load(
        &mut self,
        path: &Path,
        referrer: Option<Span>,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Node, ConfigError> {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        self.load_in(path, &dir, referrer, stack)
    }

    /// [`Loader::load`] with the file's own `_extends` relative to `dir` instead of the file's
    /// directory (a file written out for a caller, whose paths are relative to the caller).
    pub fn load_in(
        &mut self,
        path: &Path,
        dir: &Path,
        referrer: Option<Span>,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Node, ConfigError> {
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) => c,
            Err(_) => return Err(self.not_found(path, referrer)),
        };
        if stack.contains(&canonical) {
            return Err(self.cycle(stack, &canonical, referrer));
        }
        stack.push(canonical);
        let node = self.read_mapping(path, referrer)?;
        let node = self.resolve_extends(node, dir, stack)?;
        stack.pop();
        Ok(node)
    }

    fn cycle(&self, stack: &[PathBuf], again: &Path, referrer: Option<Span>) -> ConfigError {
        let name = |p: &Path| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        };
        let start = stack.iter().position(|p| p == again).unwrap_or(0);
        let mut chain: Vec<String> = stack.iter().skip(start).map(|p| name(p)).collect();
        chain.push(name(again));
        self.located(
            Diagnostic::new(
                ErrorKind::Inheritance,
                format!("`_extends` cycle: {}", chain.join(" -> ")),
            ),
            referrer,
        )
    }

    /// Applies a mapping's `_extends` (paths relative to `dir`): parents are merged in the
    /// order listed, then the mapping's own keys on top. The key is removed.
    pub fn resolve_extends(
        &mut self,
        mut node: Node,
        dir: &Path,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Node, ConfigError> {
        let Some(entry) = node.as_map_mut().and_then(|m| m.remove(EXTENDS_KEY)) else {
            return Ok(node);
        };
        let parents: Vec<(String, Span)> = match &entry.value.kind {
            NodeKind::Scalar(s) => vec![(s.text.to_string(), entry.value.span)],
            NodeKind::Seq(items) if items.iter().all(|i| i.as_str().is_some()) => items
                .iter()
                .map(|i| (i.as_str().unwrap_or_default().to_string(), i.span))
                .collect(),
            _ => {
                return Err(self.located(
                    Diagnostic::new(
                        ErrorKind::Inheritance,
                        "`_extends` takes a file path or a list of file paths",
                    ),
                    Some(entry.value.span),
                ));
            }
        };
        let mut merged: Option<Node> = None;
        for (rel, span) in parents {
            let path = dir.join(&rel);
            let parent = self.load(&path, Some(span), stack)?;
            merged = Some(match merged {
                None => parent,
                Some(m) => deep_merge(&m, &parent),
            });
        }
        Ok(match merged {
            Some(m) => {
                let mut out = deep_merge(&m, &node);
                out.span = node.span;
                out
            }
            None => node,
        })
    }
}

/// Whether `path` is named like a configuration file.
fn has_config_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["yaml", "yml", "json"].contains(&e.to_ascii_lowercase().as_str()))
}
