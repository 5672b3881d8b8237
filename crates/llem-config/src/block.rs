//! A small top-level block of a study file (`schedule:`, `search:`), read key by key: an
//! unknown key is refused with the nearest one, and every error points at its node.

use crate::error::{ConfigError, Diagnostic, ErrorKind, did_you_mean};
use crate::source::SourceMap;
use crate::yaml::{Map, Node};

/// An error of `kind` at node `n` of the file.
pub(crate) fn error_at(
    sources: &SourceMap,
    n: &Node,
    kind: ErrorKind,
    message: String,
) -> ConfigError {
    Diagnostic::new(kind, message)
        .at(sources.location(n.span))
        .into()
}

/// The block's mapping, its name and the keys it has.
pub(crate) struct Block<'a> {
    /// `schedule`, `search`.
    pub(crate) name: &'static str,
    /// The keys it takes.
    pub(crate) keys: &'static [&'static str],
    /// The mapping.
    pub(crate) map: &'a Map,
    /// Where it was written.
    pub(crate) sources: &'a SourceMap,
}

impl<'a> Block<'a> {
    /// The block `name` of the file's top-level mapping, its keys checked: `None` when the
    /// file has none, an error when it is not a mapping or has a key not in `keys`. Also
    /// returns the block's own node, for errors about the block as a whole.
    pub(crate) fn of(
        root: &'a Map,
        name: &'static str,
        keys: &'static [&'static str],
        sources: &'a SourceMap,
    ) -> Result<Option<(Block<'a>, &'a Node)>, ConfigError> {
        let Some(node) = root.get(name) else {
            return Ok(None);
        };
        let Some(map) = node.as_map() else {
            return Err(error_at(
                sources,
                node,
                ErrorKind::Type,
                format!("`{name}` must be a mapping, found {}", node.describe()),
            ));
        };
        let block = Block {
            name,
            keys,
            map,
            sources,
        };
        block.check_keys()?;
        Ok(Some((block, node)))
    }

    /// An error at `n`.
    pub(crate) fn err(&self, n: &Node, kind: ErrorKind, message: String) -> ConfigError {
        error_at(self.sources, n, kind, message)
    }

    /// Refuses a key the block does not have, with the nearest one.
    pub(crate) fn check_keys(&self) -> Result<(), ConfigError> {
        for e in &self.map.entries {
            if !self.keys.contains(&&*e.key) {
                let mut d = Diagnostic::new(
                    ErrorKind::UnknownKey,
                    format!("unknown key `{}.{}`", self.name, e.key),
                )
                .at(self.sources.location(e.key_span));
                if let Some(c) = did_you_mean(&e.key, self.keys.iter().copied()) {
                    d = d.with_help(format!("did you mean `{c}`?"));
                }
                return Err(d.into());
            }
        }
        Ok(())
    }

    /// A scalar as text; `None` when absent or null.
    pub(crate) fn text(&self, key: &str) -> Result<Option<(&'a Node, &'a str)>, ConfigError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(n) if n.is_null() => Ok(None),
            Some(n) => match n.as_str() {
                Some(s) => Ok(Some((n, s))),
                None => Err(self.err(
                    n,
                    ErrorKind::Type,
                    format!(
                        "`{}.{key}` must be a single value, found {}",
                        self.name,
                        n.describe()
                    ),
                )),
            },
        }
    }

    /// A string or a list of strings; empty when absent or null.
    pub(crate) fn list(&self, key: &str) -> Result<Vec<(&'a Node, &'a str)>, ConfigError> {
        let n = match self.map.get(key) {
            None => return Ok(Vec::new()),
            Some(n) if n.is_null() => return Ok(Vec::new()),
            Some(n) => n,
        };
        match (n.as_seq(), n.as_str()) {
            (Some(items), _) => items
                .iter()
                .map(|i| {
                    i.as_str().map(|s| (i, s)).ok_or_else(|| {
                        self.err(
                            i,
                            ErrorKind::Type,
                            format!(
                                "`{}.{key}` items must be strings, found {}",
                                self.name,
                                i.describe()
                            ),
                        )
                    })
                })
                .collect(),
            (None, Some(s)) => Ok(vec![(n, s)]),
            (None, None) => Err(self.err(
                n,
                ErrorKind::Type,
                format!(
                    "`{}.{key}` must be a string or a list, found {}",
                    self.name,
                    n.describe()
                ),
            )),
        }
    }
}
