//! A YAML document as a tree whose every node knows where it was written.
//!
//! Scalars keep their text and whether they were quoted; their type (bool, int, float,
//! string) is decided later by the field they land in, so `n_prompts: 100` is an integer and
//! `model: 1234` a string. Anchors, aliases and `<<` merge keys are resolved while parsing;
//! children are shared (`Arc`), so cloning a tree for each grid point of a sweep is cheap.

use std::collections::HashMap;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

use crate::source::{SourceId, Span};

/// Deepest nesting accepted; configuration files are a handful of levels deep.
const MAX_DEPTH: usize = 64;
/// Most nodes a document may expand to (aliases counted at their full size), so a
/// "billion laughs" file is refused instead of exhausting memory or time.
const MAX_NODES: usize = 2_000_000;

/// One value of the tree with its position.
#[derive(Clone, Debug)]
pub struct Node {
    /// Where the value was written.
    pub span: Span,
    /// The value.
    pub kind: NodeKind,
}

/// The shape of a node.
#[derive(Clone, Debug)]
pub enum NodeKind {
    /// `null`, `~` or nothing.
    Null,
    /// Any other scalar, typed on use.
    Scalar(Scalar),
    /// A list.
    Seq(Arc<Vec<Node>>),
    /// A mapping, in the order written.
    Map(Arc<Map>),
}

/// Scalar text as written.
#[derive(Clone, Debug)]
pub struct Scalar {
    /// The text after YAML unescaping.
    pub text: Arc<str>,
    /// True for quoted and block scalars (always strings); false for plain ones.
    pub quoted: bool,
}

/// A mapping: entries in the order written, keys unique.
#[derive(Clone, Debug, Default)]
pub struct Map {
    /// The entries.
    pub entries: Vec<Entry>,
}

/// One `key: value` pair.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The key text.
    pub key: Arc<str>,
    /// Where the key was written.
    pub key_span: Span,
    /// The value.
    pub value: Node,
}

/// A YAML syntax or structure error.
#[derive(Clone, Debug)]
pub struct YamlError {
    /// What went wrong.
    pub message: String,
    /// Where.
    pub span: Span,
}

impl Map {
    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    /// The entry under `key`.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| &*e.key == key)
    }

    /// Mutable access to the value under `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries
            .iter_mut()
            .find(|e| &*e.key == key)
            .map(|e| &mut e.value)
    }

    /// Sets `key` to `value`, replacing an existing entry in place or appending.
    pub fn insert(&mut self, key: &str, key_span: Span, value: Node) {
        if let Some(e) = self.entries.iter_mut().find(|e| &*e.key == key) {
            e.value = value;
            e.key_span = key_span;
        } else {
            self.entries.push(Entry {
                key: Arc::from(key),
                key_span,
                value,
            });
        }
    }

    /// Removes `key`, returning its entry.
    pub fn remove(&mut self, key: &str) -> Option<Entry> {
        let idx = self.entries.iter().position(|e| &*e.key == key)?;
        Some(self.entries.remove(idx))
    }

    /// True when `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }
}

impl Node {
    /// A null node.
    pub fn null(span: Span) -> Node {
        Node {
            span,
            kind: NodeKind::Null,
        }
    }

    /// An empty mapping.
    pub fn empty_map(span: Span) -> Node {
        Node {
            span,
            kind: NodeKind::Map(Arc::new(Map::default())),
        }
    }

    /// A plain (untyped) scalar, typed on use like one written in YAML.
    pub fn plain(text: &str, span: Span) -> Node {
        Node {
            span,
            kind: NodeKind::Scalar(Scalar {
                text: Arc::from(text),
                quoted: false,
            }),
        }
    }

    /// A string scalar (never read as a number or boolean).
    pub fn string(text: &str, span: Span) -> Node {
        Node {
            span,
            kind: NodeKind::Scalar(Scalar {
                text: Arc::from(text),
                quoted: true,
            }),
        }
    }

    /// The mapping, if this node is one.
    pub fn as_map(&self) -> Option<&Map> {
        match &self.kind {
            NodeKind::Map(m) => Some(m),
            _ => None,
        }
    }

    /// Mutable mapping access (copy-on-write of this level only).
    pub fn as_map_mut(&mut self) -> Option<&mut Map> {
        match &mut self.kind {
            NodeKind::Map(m) => Some(Arc::make_mut(m)),
            _ => None,
        }
    }

    /// The list, if this node is one.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// The scalar text, if this node is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar(s) => Some(&s.text),
            _ => None,
        }
    }

    /// True for null.
    pub fn is_null(&self) -> bool {
        matches!(self.kind, NodeKind::Null)
    }

    /// A short description of the node's type for messages: "a mapping", "a list", ...
    pub fn describe(&self) -> String {
        const DESCRIBED_CHARS: usize = 60;
        match &self.kind {
            NodeKind::Null => "null".into(),
            NodeKind::Seq(_) => "a list".into(),
            NodeKind::Map(_) => "a mapping".into(),
            // Quoted in errors: a value pasted by mistake may be a whole file.
            NodeKind::Scalar(s) if s.text.chars().count() > DESCRIBED_CHARS => format!(
                "`{}…` ({} characters)",
                s.text.chars().take(DESCRIBED_CHARS).collect::<String>(),
                s.text.chars().count()
            ),
            NodeKind::Scalar(s) => format!("`{}`", s.text),
        }
    }

    /// The node at a path of mapping keys.
    pub fn get_path(&self, path: &[&str]) -> Option<&Node> {
        let mut node = self;
        for key in path {
            node = node.as_map()?.get(key)?;
        }
        Some(node)
    }

    /// Mutable access to the node at a path (copy-on-write along the path).
    pub fn get_path_mut(&mut self, path: &[&str]) -> Option<&mut Node> {
        match path.split_first() {
            None => Some(self),
            Some((key, rest)) => self.as_map_mut()?.get_mut(key)?.get_path_mut(rest),
        }
    }

    /// The span of the value at `path`, or of the deepest mapping on the way that exists
    /// (where a missing key would have to be written).
    pub fn locate<S: AsRef<str>>(&self, path: &[S]) -> Span {
        let mut node = self;
        for key in path {
            match node.as_map().and_then(|m| m.entry(key.as_ref())) {
                Some(entry) => node = &entry.value,
                None => return node.span,
            }
        }
        node.span
    }

    /// Sets the value at a path of mapping keys, creating mappings on the way (a null on the
    /// way counts as an empty mapping, as `transformers:` with nothing under it does).
    ///
    /// On failure returns the path prefix that holds a non-mapping value.
    pub fn set_path(&mut self, path: &[&str], value: Node) -> Result<(), usize> {
        let Some((last, parents)) = path.split_last() else {
            *self = value;
            return Ok(());
        };
        let span = value.span;
        let mut node = self;
        for (depth, key) in parents.iter().enumerate() {
            if node.is_null() {
                *node = Node::empty_map(span);
            }
            let map = node.as_map_mut().ok_or(depth)?;
            if !map.contains(key) {
                map.insert(key, span, Node::empty_map(span));
            }
            node = map.get_mut(key).ok_or(depth)?;
        }
        if node.is_null() {
            *node = Node::empty_map(span);
        }
        let map = node.as_map_mut().ok_or(parents.len())?;
        map.insert(last, span, value);
        Ok(())
    }

    /// Core-schema JSON view of the tree (for showing raw grid points).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Scalar(s) if s.quoted => Value::String(s.text.to_string()),
            NodeKind::Scalar(s) => match resolve_plain(&s.text) {
                Plain::Bool(b) => Value::Bool(b),
                Plain::Int(i) => i64::try_from(i)
                    .map(Value::from)
                    .or_else(|_| u64::try_from(i).map(Value::from))
                    .unwrap_or_else(|_| Value::String(s.text.to_string())),
                Plain::Float(f) => serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or_else(|| Value::String(s.text.to_string())),
                Plain::Str => Value::String(s.text.to_string()),
            },
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Map(m) => Value::Object(
                m.entries
                    .iter()
                    .map(|e| (e.key.to_string(), e.value.to_json()))
                    .collect(),
            ),
        }
    }
}

/// Merges `overlay` onto `base`: mappings merge key by key (recursively), anything else in
/// the overlay replaces what the base had. Base key order is kept; new keys are appended.
pub fn deep_merge(base: &Node, overlay: &Node) -> Node {
    match (&base.kind, &overlay.kind) {
        (NodeKind::Map(b), NodeKind::Map(o)) => {
            let mut merged: Map = (**b).clone();
            for entry in &o.entries {
                let value = match merged.get(&entry.key) {
                    Some(existing) => deep_merge(existing, &entry.value),
                    None => entry.value.clone(),
                };
                merged.insert(&entry.key, entry.key_span, value);
            }
            Node {
                span: base.span,
                kind: NodeKind::Map(Arc::new(merged)),
            }
        }
        _ => overlay.clone(),
    }
}

/// How a plain scalar reads under the YAML 1.2 core schema.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Plain {
    /// `true`/`false` in any of the core spellings.
    Bool(bool),
    /// A decimal, octal (`0o`) or hex (`0x`) integer.
    Int(i128),
    /// A float, including `.inf` and `.nan`.
    Float(f64),
    /// Anything else.
    Str,
}

/// Types a plain scalar by the YAML 1.2 core schema.
pub fn resolve_plain(text: &str) -> Plain {
    match text {
        "true" | "True" | "TRUE" => return Plain::Bool(true),
        "false" | "False" | "FALSE" => return Plain::Bool(false),
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return Plain::Int(i);
    }
    if let Some(f) = parse_float(text) {
        return Plain::Float(f);
    }
    Plain::Str
}

/// Parses a YAML integer: optional sign, decimal digits (with `_` separators as YAML 1.1
/// allowed), or `0x`/`0o` forms.
pub fn parse_int(text: &str) -> Option<i128> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, text.get(1..)?),
        b'+' => (false, text.get(1..)?),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = body.strip_prefix("0x") {
        (16, h)
    } else if let Some(o) = body.strip_prefix("0o") {
        (8, o)
    } else {
        (10, body)
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || !digits.chars().all(|c| c == '_' || c.is_digit(radix))
    {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let v = i128::from_str_radix(&clean, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// Parses a YAML float (also accepts integers), including `.inf`, `-.inf`, `.nan`.
pub fn parse_float(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    match lower.as_str() {
        ".inf" | "+.inf" => return Some(f64::INFINITY),
        "-.inf" => return Some(f64::NEG_INFINITY),
        ".nan" => return Some(f64::NAN),
        _ => {}
    }
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let mut seen_digit = false;
    let mut seen_exp = false;
    let mut prev = ' ';
    for c in body.chars() {
        match c {
            '0'..='9' => seen_digit = true,
            '_' if !seen_exp => {}
            '.' if !seen_exp => {}
            'e' | 'E' if seen_digit && !seen_exp => seen_exp = true,
            '+' | '-' if prev == 'e' || prev == 'E' => {}
            _ => return None,
        }
        prev = c;
    }
    if !seen_digit || body.matches('.').count() > 1 {
        return None;
    }
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    clean.parse::<f64>().ok()
}

enum Frame {
    Seq {
        span: Span,
        anchor: usize,
        items: Vec<Node>,
        size: usize,
    },
    Map {
        span: Span,
        anchor: usize,
        entries: Vec<Entry>,
        index: KeyIndex,
        key: Option<(Arc<str>, Span, bool)>,
        merges: Vec<Node>,
        size: usize,
    },
}

/// Where a key stands among a mapping's entries: a scan while the mapping is small, a hash
/// index once it is not, so a file of 100 000 keys is checked for duplicates in linear time.
#[derive(Default)]
struct KeyIndex(Option<HashMap<Arc<str>, usize>>);

impl KeyIndex {
    /// Entries past which the index is built.
    const SCAN_LIMIT: usize = 16;

    fn find(&self, entries: &[Entry], key: &str) -> Option<usize> {
        match &self.0 {
            Some(ix) => ix.get(key).copied(),
            None => entries.iter().position(|e| &*e.key == key),
        }
    }

    /// Records the entry just pushed.
    fn pushed(&mut self, entries: &[Entry]) {
        match &mut self.0 {
            Some(ix) => {
                if let Some(e) = entries.last() {
                    ix.insert(e.key.clone(), entries.len() - 1);
                }
            }
            None if entries.len() > Self::SCAN_LIMIT => {
                self.0 = Some(
                    entries
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (e.key.clone(), i))
                        .collect(),
                );
            }
            None => {}
        }
    }
}

struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Node, usize)>,
    root: Option<Node>,
    total: usize,
    /// Whether an alias was expanded (the size limit then speaks of aliases).
    aliased: bool,
}

/// Parses one YAML document into a tree. An empty document is a null node.
pub fn parse(text: &str, source: SourceId) -> Result<Node, YamlError> {
    let mut b = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        total: 0,
        aliased: false,
    };
    let mut documents = 0usize;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| YamlError {
            message: e.info().to_string(),
            span: Span {
                source,
                line: to_u32(e.marker().line()),
                col: to_u32(e.marker().col() + 1),
            },
        })?;
        let span = Span {
            source,
            line: to_u32(span.start.line()),
            col: to_u32(span.start.col() + 1),
        };
        match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(YamlError {
                        message: "a configuration file holds one YAML document; found a second \
                                  (`---`)"
                            .into(),
                        span,
                    });
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                let node = scalar_node(&value, style, tag.as_deref(), span);
                b.finish(node, anchor, 1)?;
            }
            Event::Alias(id) => {
                let (node, size) = b.anchors.get(&id).cloned().ok_or_else(|| YamlError {
                    message: "alias refers to an anchor that is not defined before it".into(),
                    span,
                })?;
                b.aliased = true;
                b.finish(node, 0, size)?;
            }
            Event::SequenceStart(anchor, _) => {
                b.open(Frame::Seq {
                    span,
                    anchor,
                    items: Vec::new(),
                    size: 1,
                })?;
            }
            Event::MappingStart(anchor, _) => {
                b.open(Frame::Map {
                    span,
                    anchor,
                    entries: Vec::new(),
                    index: KeyIndex::default(),
                    key: None,
                    merges: Vec::new(),
                    size: 1,
                })?;
            }
            Event::SequenceEnd => match b.stack.pop() {
                Some(Frame::Seq {
                    span,
                    anchor,
                    items,
                    size,
                }) => {
                    let node = Node {
                        span,
                        kind: NodeKind::Seq(Arc::new(items)),
                    };
                    b.finish(node, anchor, size)?;
                }
                _ => return Err(internal(span)),
            },
            Event::MappingEnd => match b.stack.pop() {
                Some(Frame::Map {
                    span,
                    anchor,
                    mut entries,
                    merges,
                    size,
                    ..
                }) => {
                    apply_merges(&mut entries, &merges)?;
                    let node = Node {
                        span,
                        kind: NodeKind::Map(Arc::new(Map { entries })),
                    };
                    b.finish(node, anchor, size)?;
                }
                _ => return Err(internal(span)),
            },
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
    }
    Ok(b.root.unwrap_or(Node::null(Span {
        source,
        line: 1,
        col: 1,
    })))
}

fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn internal(span: Span) -> YamlError {
    YamlError {
        message: "malformed YAML event stream".into(),
        span,
    }
}

fn scalar_node(value: &str, style: ScalarStyle, tag: Option<&Tag>, span: Span) -> Node {
    let core_tag = tag
        .filter(|t| t.is_yaml_core_schema() || t.handle == "!!")
        .map(|t| t.suffix.as_str());
    let plain = style == ScalarStyle::Plain;
    let is_null_text = matches!(value, "" | "~" | "null" | "Null" | "NULL");
    match core_tag {
        Some("null") => Node::null(span),
        Some("str") => Node::string(value, span),
        _ if plain && is_null_text => Node::null(span),
        _ => Node {
            span,
            kind: NodeKind::Scalar(Scalar {
                text: Arc::from(value),
                quoted: !plain,
            }),
        },
    }
}

fn apply_merges(entries: &mut Vec<Entry>, merges: &[Node]) -> Result<(), YamlError> {
    // YAML merge keys: keys written in the mapping win; among merged mappings the earlier
    // one wins. Walk sources in order and only add keys not present yet.
    if merges.is_empty() {
        return Ok(());
    }
    let mut present: std::collections::HashSet<Arc<str>> =
        entries.iter().map(|e| e.key.clone()).collect();
    for source in merges {
        let maps: Vec<&Node> = match &source.kind {
            NodeKind::Map(_) => vec![source],
            NodeKind::Seq(items) => items.iter().collect(),
            _ => {
                return Err(YamlError {
                    message: "a merge key `<<` needs a mapping or a list of mappings".into(),
                    span: source.span,
                });
            }
        };
        for m in maps {
            let Some(map) = m.as_map() else {
                return Err(YamlError {
                    message: "a merge key `<<` needs a mapping or a list of mappings".into(),
                    span: m.span,
                });
            };
            for e in &map.entries {
                if present.insert(e.key.clone()) {
                    entries.push(e.clone());
                }
            }
        }
    }
    Ok(())
}

impl Builder {
    fn open(&mut self, frame: Frame) -> Result<(), YamlError> {
        let span = match &frame {
            Frame::Seq { span, .. } | Frame::Map { span, .. } => *span,
        };
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(YamlError {
                message: "mapping keys must be plain strings, not lists or mappings".into(),
                span,
            });
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError {
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
                span,
            });
        }
        self.stack.push(frame);
        Ok(())
    }

    fn finish(&mut self, node: Node, anchor: usize, size: usize) -> Result<(), YamlError> {
        self.total = self.total.saturating_add(size);
        if self.total > MAX_NODES {
            return Err(YamlError {
                message: if self.aliased {
                    format!(
                        "the document expands to more than {MAX_NODES} values (through \
                         aliases); refusing to load it"
                    )
                } else {
                    format!("the document holds more than {MAX_NODES} values; refusing to load it")
                },
                span: node.span,
            });
        }
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => {
                self.root = Some(node);
                Ok(())
            }
            Some(Frame::Seq {
                items, size: acc, ..
            }) => {
                *acc = acc.saturating_add(size);
                items.push(node);
                Ok(())
            }
            Some(Frame::Map {
                entries,
                index,
                key,
                merges,
                size: acc,
                ..
            }) => {
                *acc = acc.saturating_add(size);
                match key.take() {
                    None => {
                        let (text, is_merge) = match &node.kind {
                            NodeKind::Scalar(s) => (s.text.clone(), !s.quoted && &*s.text == "<<"),
                            NodeKind::Null => (Arc::from("null"), false),
                            _ => {
                                return Err(YamlError {
                                    message: "mapping keys must be plain strings, not lists or \
                                              mappings"
                                        .into(),
                                    span: node.span,
                                });
                            }
                        };
                        *key = Some((text, node.span, is_merge));
                        Ok(())
                    }
                    Some((k, key_span, true)) => {
                        let _ = (k, key_span);
                        merges.push(node);
                        Ok(())
                    }
                    Some((k, key_span, false)) => {
                        if let Some(first) = index.find(entries, &k).and_then(|i| entries.get(i)) {
                            return Err(YamlError {
                                message: format!(
                                    "duplicate key `{k}` (first written at line {})",
                                    first.key_span.line
                                ),
                                span: key_span,
                            });
                        }
                        entries.push(Entry {
                            key: k,
                            key_span,
                            value: node,
                        });
                        index.pushed(entries);
                        Ok(())
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn p(text: &str) -> Node {
        parse(text, SourceId(0)).unwrap()
    }

    #[test]
    fn positions_are_one_based() {
        let n = p("a: 1\nb:\n  c: x\n");
        let c = n.get_path(&["b", "c"]).unwrap();
        assert_eq!((c.span.line, c.span.col), (3, 6));
        let b = n.as_map().unwrap().entry("b").unwrap();
        assert_eq!((b.key_span.line, b.key_span.col), (2, 1));
    }

    #[test]
    fn scalars_keep_text_and_quoting() {
        let n = p("a: 16\nb: '16'\nc: ~\nd:\n");
        assert_eq!(n.get_path(&["a"]).unwrap().as_str(), Some("16"));
        assert!(matches!(&n.get_path(&["b"]).unwrap().kind, NodeKind::Scalar(s) if s.quoted));
        assert!(n.get_path(&["c"]).unwrap().is_null());
        assert!(n.get_path(&["d"]).unwrap().is_null());
    }

    #[test]
    fn merge_keys_do_not_override_explicit_keys() {
        let n = p("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n");
        let u = n.get_path(&["use"]).unwrap().as_map().unwrap();
        assert_eq!(u.get("x").unwrap().as_str(), Some("1"));
        assert_eq!(u.get("y").unwrap().as_str(), Some("3"));
        // explicit key after the merge: order of entries puts explicit first
        let n = p("base: &b {x: 1}\nuse: {<<: [*b, {x: 9, z: 2}], w: 0}\n");
        let u = n.get_path(&["use"]).unwrap().as_map().unwrap();
        assert_eq!(u.get("x").unwrap().as_str(), Some("1"));
        assert_eq!(u.get("z").unwrap().as_str(), Some("2"));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let e = parse("a: 1\nb: 2\na: 3\n", SourceId(0)).unwrap_err();
        assert!(e.message.contains("duplicate key `a`"), "{}", e.message);
        assert_eq!(e.span.line, 3);
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let prev = i - 1;
            doc.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let e = parse(&doc, SourceId(0)).unwrap_err();
        assert!(e.message.contains("expands to more than"));
        assert!(e.message.contains("through aliases"));
        // A plain file that is simply too large says so, without blaming aliases.
        let big = "[".to_string() + &"1,".repeat(2_000_001) + "1]";
        let e = parse(&big, SourceId(0)).unwrap_err();
        assert!(
            e.message.contains("holds more than") && !e.message.contains("alias"),
            "{}",
            e.message
        );
    }

    /// Past the scan limit the keys are indexed: a duplicate among 50 000 keys is found and
    /// named with the line of the first, and merges keep the written keys.
    #[test]
    fn duplicates_in_large_mappings_are_found() {
        let mut doc: String = (0..50_000).map(|i| format!("k{i}: {i}\n")).collect();
        doc.push_str("k123: again\n");
        let e = parse(&doc, SourceId(0)).unwrap_err();
        assert!(
            e.message
                .contains("duplicate key `k123` (first written at line 124)"),
            "{}",
            e.message
        );
        let merged: String = "base: &b {a: 1, b: 2}\nm:\n  <<: *b\n".to_string()
            + &(0..40)
                .map(|i| format!("  x{i}: {i}\n"))
                .collect::<String>()
            + "  a: 9\n";
        let n = p(&merged);
        let m = n.get_path(&["m"]).unwrap().as_map().unwrap();
        assert_eq!(m.entries.len(), 42);
        assert_eq!(m.get("a").unwrap().as_str(), Some("9"));
        assert_eq!(m.get("b").unwrap().as_str(), Some("2"));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let doc = "[".repeat(200);
        assert!(parse(&doc, SourceId(0)).is_err());
    }

    #[test]
    fn second_document_is_an_error() {
        assert!(parse("a: 1\n---\nb: 2\n", SourceId(0)).is_err());
    }

    #[test]
    fn core_schema_numbers() {
        assert_eq!(resolve_plain("42"), Plain::Int(42));
        assert_eq!(resolve_plain("-0x1f"), Plain::Int(-31));
        assert_eq!(resolve_plain("1_000"), Plain::Int(1000));
        assert_eq!(resolve_plain("1e3"), Plain::Float(1000.0));
        assert_eq!(resolve_plain("0.5"), Plain::Float(0.5));
        assert_eq!(resolve_plain(".5"), Plain::Float(0.5));
        assert_eq!(resolve_plain("1.2.3"), Plain::Str);
        assert_eq!(resolve_plain("e3"), Plain::Str);
        assert_eq!(resolve_plain("fp8"), Plain::Str);
        assert_eq!(resolve_plain("True"), Plain::Bool(true));
        assert!(matches!(resolve_plain(".inf"), Plain::Float(f) if f.is_infinite()));
    }

    #[test]
    fn set_path_creates_and_replaces() {
        let mut n = p("vllm:\n  engine: {block_size: 8}\n");
        let span = n.span;
        n.set_path(&["vllm", "engine", "block_size"], Node::plain("16", span))
            .unwrap();
        n.set_path(&["vllm", "sampling", "n"], Node::plain("2", span))
            .unwrap();
        assert_eq!(
            n.get_path(&["vllm", "engine", "block_size"])
                .unwrap()
                .as_str(),
            Some("16")
        );
        assert_eq!(
            n.get_path(&["vllm", "sampling", "n"]).unwrap().as_str(),
            Some("2")
        );
        let mut n = p("model: x\n");
        assert_eq!(
            n.set_path(&["model", "sub"], Node::plain("1", span)),
            Err(1)
        );
    }

    #[test]
    fn deep_merge_merges_maps_and_replaces_the_rest() {
        let base = p("dataset: {source: a, n_prompts: 5}\nlist: [1, 2]\n");
        let over = p("dataset: {n_prompts: 50}\nlist: [3]\n");
        let m = deep_merge(&base, &over);
        assert_eq!(
            m.get_path(&["dataset", "source"]).unwrap().as_str(),
            Some("a")
        );
        assert_eq!(
            m.get_path(&["dataset", "n_prompts"]).unwrap().as_str(),
            Some("50")
        );
        assert_eq!(m.get_path(&["list"]).unwrap().as_seq().unwrap().len(), 1);
    }
}
