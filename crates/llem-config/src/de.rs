//! A serde deserializer over a [`Node`] tree that types scalars by the field they land in and
//! reports failures with the node's position and key path.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use crate::error::{Diagnostic, ErrorKind, did_you_mean};
use crate::source::{SourceMap, Span};
use crate::yaml::{Node, NodeKind, Plain, parse_float, parse_int, resolve_plain};

/// A deserialization failure with the place it happened.
#[derive(Clone, Debug)]
pub struct DeError {
    /// Its class (unknown key, wrong type, missing field, ...).
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
    /// Where, once known.
    pub span: Option<Span>,
    /// Dotted key path, once known.
    pub path: Option<String>,
    /// A suggested fix.
    pub help: Option<String>,
}

impl DeError {
    fn new(kind: ErrorKind, message: String) -> Self {
        DeError {
            kind,
            message,
            span: None,
            path: None,
            help: None,
        }
    }

    fn locate(mut self, span: Span, path: &KeyPath<'_>) -> Self {
        if self.span.is_none() {
            self.span = Some(span);
            self.path = Some(path.render());
        }
        self
    }
}

impl DeError {
    /// A located diagnostic: the message says which key, the location where it is written.
    pub fn into_diagnostic(self, sources: &SourceMap) -> Diagnostic {
        let path = self.path.unwrap_or_default();
        let message = match self.kind {
            ErrorKind::UnknownKey => match path.rsplit_once('.') {
                Some((parent, _)) => format!("{} in `{parent}`", self.message),
                None => self.message,
            },
            ErrorKind::Missing if !path.is_empty() => format!("{} in `{path}`", self.message),
            // Worded as the range check words its violations.
            ErrorKind::Range if !path.is_empty() => format!("`{path}` {}", self.message),
            _ if !path.is_empty() => format!("`{path}`: {}", self.message),
            _ => self.message,
        };
        let mut d = Diagnostic::new(self.kind, message);
        if let Some(span) = self.span {
            d = d.at(sources.location(span));
        }
        if let Some(h) = self.help {
            d = d.with_help(h);
        }
        d
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::new(ErrorKind::Type, msg.to_string())
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError::new(
            ErrorKind::Type,
            format!("expected {exp}, found {}", describe_unexpected(&unexp)),
        )
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        // The non-zero integer types (batch sizes, concurrency caps) refuse 0 in serde, before
        // the range check sees the value: say it as the range check says its bounds.
        if exp.to_string().starts_with("a nonzero ") {
            return DeError::new(ErrorKind::Range, "must be at least 1 (got 0)".into());
        }
        DeError::new(
            ErrorKind::Type,
            format!("expected {exp}, found {}", describe_unexpected(&unexp)),
        )
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        DeError::new(
            ErrorKind::Type,
            format!("expected {exp}, found a list of {len}"),
        )
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let mut e = DeError::new(
            ErrorKind::Type,
            format!(
                "unknown value `{variant}`; expected one of {}",
                list(expected)
            ),
        );
        e.help =
            did_you_mean(variant, expected.iter().copied()).map(|s| format!("did you mean `{s}`?"));
        e
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let mut e = DeError::new(ErrorKind::UnknownKey, format!("unknown key `{field}`"));
        e.help = did_you_mean(field, expected.iter().copied())
            .map(|s| format!("did you mean `{s}`?"))
            .or_else(|| Some(format!("valid keys here: {}", list(expected))));
        e
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::new(
            ErrorKind::Missing,
            format!("missing required key `{field}`"),
        )
    }

    fn duplicate_field(field: &'static str) -> Self {
        DeError::new(ErrorKind::Type, format!("key `{field}` given twice"))
    }
}

fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_unexpected(u: &de::Unexpected<'_>) -> String {
    match u {
        de::Unexpected::Str(s) => format!("`{s}`"),
        de::Unexpected::Unsigned(n) => format!("`{n}`"),
        de::Unexpected::Signed(n) => format!("`{n}`"),
        de::Unexpected::Float(n) => format!("`{n}`"),
        de::Unexpected::Bool(b) => format!("`{b}`"),
        de::Unexpected::Unit => "null".into(),
        de::Unexpected::Seq => "a list".into(),
        de::Unexpected::Map => "a mapping".into(),
        other => other.to_string(),
    }
}

/// A key path kept on the stack while descending, rendered only when an error needs it.
#[derive(Clone, Copy)]
pub(crate) struct KeyPath<'a> {
    parent: Option<&'a KeyPath<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> KeyPath<'a> {
    pub(crate) const ROOT: KeyPath<'static> = KeyPath {
        parent: None,
        seg: Seg::Root,
    };

    fn child(&'a self, seg: Seg<'a>) -> KeyPath<'a> {
        KeyPath {
            parent: Some(self),
            seg,
        }
    }

    fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut cur = Some(self);
        while let Some(p) = cur {
            segs.push(p.seg);
            cur = p.parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

/// Deserializes a `T` from a node, failing with located errors.
pub fn from_node<T: serde::de::DeserializeOwned>(node: &Node) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        path: KeyPath::ROOT,
    })
}

/// Deserializer over one node.
pub(crate) struct NodeDe<'a> {
    pub(crate) node: &'a Node,
    pub(crate) path: KeyPath<'a>,
}

impl NodeDe<'_> {
    fn err(&self, e: DeError) -> DeError {
        e.locate(self.node.span, &self.path)
    }

    fn type_err(&self, expected: &str) -> DeError {
        self.err(DeError::new(
            ErrorKind::Type,
            format!("expected {expected}, found {}", self.node.describe()),
        ))
    }

    fn scalar(&self) -> Option<(&str, bool)> {
        match &self.node.kind {
            NodeKind::Scalar(s) => Some((&s.text, s.quoted)),
            _ => None,
        }
    }

    fn int<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let Some((text, false)) = self.scalar() else {
            return Err(self.type_err("an integer"));
        };
        let Some(v) = parse_int(text) else {
            return Err(self.type_err("an integer"));
        };
        let r = if let Ok(u) = u64::try_from(v) {
            visitor.visit_u64(u)
        } else if let Ok(i) = i64::try_from(v) {
            visitor.visit_i64(i)
        } else {
            return Err(self.type_err("an integer that fits in 64 bits"));
        };
        r.map_err(|e| self.err(e))
    }

    fn float<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let Some((text, false)) = self.scalar() else {
            return Err(self.type_err("a number"));
        };
        match parse_float(text) {
            Some(f) if f.is_finite() => visitor.visit_f64(f).map_err(|e| self.err(e)),
            Some(_) => Err(self.type_err("a finite number")),
            None => Err(self.type_err("a number")),
        }
    }
}

macro_rules! forward_int {
    ($($m:ident)*) => {$(
        fn $m<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            self.int(visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            NodeKind::Scalar(s) if s.quoted => visitor.visit_str(&s.text),
            NodeKind::Scalar(s) => match resolve_plain(&s.text) {
                Plain::Bool(b) => visitor.visit_bool(b),
                Plain::Int(i) => {
                    if let Ok(u) = u64::try_from(i) {
                        visitor.visit_u64(u)
                    } else if let Ok(v) = i64::try_from(i) {
                        visitor.visit_i64(v)
                    } else {
                        visitor.visit_str(&s.text)
                    }
                }
                Plain::Float(f) if f.is_finite() => visitor.visit_f64(f),
                Plain::Float(_) | Plain::Str => visitor.visit_str(&s.text),
            },
            NodeKind::Seq(items) => visitor.visit_seq(SeqDe {
                items,
                pos: 0,
                path: &self.path,
            }),
            NodeKind::Map(m) => visitor.visit_map(MapDe {
                entries: &m.entries,
                pos: 0,
                path: &self.path,
            }),
        };
        r.map_err(|e| self.err(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // The core schema's true/false, plus the YAML 1.1 words that PyYAML-era configs use.
        let b = match self.scalar() {
            Some((text, false)) => match text.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" => Some(true),
                "false" | "no" | "off" => Some(false),
                _ => None,
            },
            _ => None,
        };
        match b {
            Some(b) => visitor.visit_bool(b).map_err(|e| self.err(e)),
            None => Err(self.type_err("true or false")),
        }
    }

    forward_int!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
                 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128);

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.float(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.float(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.scalar() {
            Some((text, _)) => visitor.visit_str(text).map_err(|e| self.err(e)),
            None => Err(self.type_err("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, DeError> {
        Err(self.type_err("bytes (not supported in YAML configs)"))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            visitor.visit_none().map_err(|e| self.err(e))
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            visitor.visit_unit().map_err(|e| self.err(e))
        } else {
            Err(self.type_err("null"))
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Seq(items) => visitor
                .visit_seq(SeqDe {
                    items,
                    pos: 0,
                    path: &self.path,
                })
                .map_err(|e| self.err(e)),
            _ => Err(self.type_err("a list")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Map(m) => visitor
                .visit_map(MapDe {
                    entries: &m.entries,
                    pos: 0,
                    path: &self.path,
                })
                .map_err(|e| self.err(e)),
            _ => Err(self.type_err("a mapping")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        // `section:` with nothing under it reads as an empty section, not as an error.
        if self.node.is_null() {
            return visitor
                .visit_map(MapDe {
                    entries: &[],
                    pos: 0,
                    path: &self.path,
                })
                .map_err(|e| self.err(e));
        }
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.scalar() {
            Some((text, _)) => {
                let de: de::value::StrDeserializer<'_, DeError> = text.into_deserializer();
                visitor.visit_enum(de).map_err(|e| self.err(e))
            }
            None => Err(self.type_err("one of the listed names")),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

struct SeqDe<'a> {
    items: &'a [Node],
    pos: usize,
    path: &'a KeyPath<'a>,
}

impl<'de> de::SeqAccess<'de> for SeqDe<'_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(node) = self.items.get(self.pos) else {
            return Ok(None);
        };
        let path = self.path.child(Seg::Index(self.pos));
        self.pos += 1;
        seed.deserialize(NodeDe { node, path })
            .map(Some)
            .map_err(|e| e.locate(node.span, &path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len().saturating_sub(self.pos))
    }
}

struct MapDe<'a> {
    entries: &'a [crate::yaml::Entry],
    pos: usize,
    path: &'a KeyPath<'a>,
}

impl<'de> de::MapAccess<'de> for MapDe<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(entry) = self.entries.get(self.pos) else {
            return Ok(None);
        };
        let de: de::value::StrDeserializer<'_, DeError> = (&*entry.key).into_deserializer();
        seed.deserialize(de).map(Some).map_err(|e| {
            let path = self.path.child(Seg::Key(&entry.key));
            e.locate(entry.key_span, &path)
        })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some(entry) = self.entries.get(self.pos) else {
            return Err(DeError::new(
                ErrorKind::Type,
                "value requested past the end of a mapping".into(),
            ));
        };
        self.pos += 1;
        let path = self.path.child(Seg::Key(&entry.key));
        seed.deserialize(NodeDe {
            node: &entry.value,
            path,
        })
        .map_err(|e| e.locate(entry.value.span, &path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len().saturating_sub(self.pos))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::source::SourceId;
    use crate::yaml::parse;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
        #[serde(default)]
        f: Option<f64>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        name: String,
        flag: bool,
        inner: Inner,
        #[serde(default)]
        list: Vec<i64>,
    }

    fn de<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, DeError> {
        from_node(&parse(text, SourceId(0)).unwrap())
    }

    #[test]
    fn types_scalars_by_target() {
        let o: Outer =
            de("name: 1234\nflag: yes\ninner: {n: 7, f: 2}\nlist: [-1, 0x10]\n").unwrap();
        assert_eq!(o.name, "1234");
        assert!(o.flag);
        assert_eq!(o.inner.f, Some(2.0));
        assert_eq!(o.list, vec![-1, 16]);
    }

    #[test]
    fn unknown_key_has_position_path_and_suggestion() {
        let e = de::<Outer>("name: a\nflag: true\ninner:\n  nn: 3\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnknownKey);
        assert_eq!(e.span.map(|s| (s.line, s.col)), Some((4, 3)));
        assert_eq!(e.path.as_deref(), Some("inner.nn"));
        assert_eq!(e.help.as_deref(), Some("did you mean `n`?"));
    }

    #[test]
    fn wrong_type_points_at_the_value() {
        let e = de::<Outer>("name: a\nflag: true\ninner:\n  n: many\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Type);
        assert_eq!(e.span.map(|s| (s.line, s.col)), Some((4, 6)));
        assert!(e.message.contains("expected an integer"), "{}", e.message);
        let e = de::<Outer>("name: a\nflag: true\ninner: {n: -3}\n").unwrap_err();
        assert!(e.message.contains("`-3`"), "{}", e.message);
        let e = de::<Outer>("name: a\nflag: true\ninner: {n: 1, f: .inf}\n").unwrap_err();
        assert!(e.message.contains("finite"), "{}", e.message);
    }

    #[test]
    fn zero_for_a_non_zero_type_is_a_range_error() {
        #[derive(Debug, Deserialize)]
        struct Batch {
            #[allow(dead_code)]
            size: std::num::NonZeroU32,
        }
        let e = de::<Batch>("size: 0\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Range);
        assert_eq!(e.message, "must be at least 1 (got 0)");
        assert_eq!(e.span.map(|s| (s.line, s.col)), Some((1, 7)));
    }

    #[test]
    fn missing_field_points_at_the_mapping() {
        let e = de::<Outer>("name: a\ninner: {n: 1}\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Missing);
        assert!(e.message.contains("`flag`"));
    }

    #[test]
    fn quoted_numbers_are_strings_not_numbers() {
        let e = de::<Inner>("n: '5'\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Type);
    }
}
