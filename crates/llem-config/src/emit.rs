//! Writes a configuration tree back as YAML (`llem config convert`): block mappings, flow
//! lists of scalars, block lists of mappings; a scalar stays plain when it reads back as the
//! same value, and is double-quoted otherwise. Comments are not in the tree, so they are not
//! written.

use std::fmt::Write;

use crate::yaml::{Node, NodeKind, Plain, resolve_plain};

/// Characters that make a plain scalar read as something else (flow syntax, comments, keys).
const SPECIAL: &[char] = &[
    ':', '#', '{', '}', '[', ']', ',', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '\n',
];

/// The scalar as YAML: plain when that reads back the same, else a double-quoted string.
fn scalar(text: &str, quoted: bool) -> String {
    let plain_ok = !text.is_empty()
        && !text.contains(SPECIAL)
        && !text.starts_with(['-', '?', ' '])
        && !text.ends_with(' ')
        && !matches!(text, "null" | "Null" | "NULL" | "~");
    // A quoted scalar that would read as a number or a boolean keeps its quotes.
    let typed_differently = quoted && resolve_plain(text) != Plain::Str;
    if plain_ok && !typed_differently {
        text.to_string()
    } else {
        serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
    }
}

fn inline(n: &Node) -> Option<String> {
    match &n.kind {
        NodeKind::Null => Some("null".into()),
        NodeKind::Scalar(s) => Some(scalar(&s.text, s.quoted)),
        NodeKind::Seq(items)
            if items
                .iter()
                .all(|i| matches!(i.kind, NodeKind::Scalar(_) | NodeKind::Null)) =>
        {
            let parts: Vec<String> = items.iter().filter_map(inline).collect();
            Some(format!("[{}]", parts.join(", ")))
        }
        NodeKind::Map(m) if m.entries.is_empty() => Some("{}".into()),
        NodeKind::Seq(items) if items.is_empty() => Some("[]".into()),
        _ => None,
    }
}

fn block(n: &Node, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match &n.kind {
        NodeKind::Map(m) => {
            for e in &m.entries {
                let key = scalar(&e.key, false);
                match inline(&e.value) {
                    Some(v) => {
                        let _ = writeln!(out, "{pad}{key}: {v}");
                    }
                    None => {
                        let _ = writeln!(out, "{pad}{key}:");
                        block(&e.value, indent + 2, out);
                    }
                }
            }
        }
        NodeKind::Seq(items) => {
            for item in items.iter() {
                match inline(item) {
                    Some(v) => {
                        let _ = writeln!(out, "{pad}- {v}");
                    }
                    None => {
                        // The first line of the item after `- `, the rest indented under it.
                        let mut inner = String::new();
                        block(item, indent + 2, &mut inner);
                        let trimmed = inner.get(indent + 2..).unwrap_or_default();
                        let _ = write!(out, "{pad}- {trimmed}");
                    }
                }
            }
        }
        _ => {
            if let Some(v) = inline(n) {
                let _ = writeln!(out, "{pad}{v}");
            }
        }
    }
}

/// `tree` as a YAML document.
pub fn to_yaml(tree: &Node) -> String {
    let mut out = String::new();
    match inline(tree) {
        Some(v) if !matches!(tree.kind, NodeKind::Map(_)) => out.push_str(&v),
        _ => block(tree, 0, &mut out),
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    #[test]
    fn what_is_written_reads_back_the_same() {
        let text = "name: \"x: y\"\nmodel: gpt2\ncount: \"42\"\nflag: true\nempty: {}\n\
                    list: [1, 2.5, a]\nsweep:\n  g:\n    - {}\n    - a.b: [x, y]\n      c: 3\n\
                    nested:\n  deep:\n    k: null\n";
        let tree = crate::yaml::parse(text, SourceId(0)).unwrap();
        let written = to_yaml(&tree);
        let back = crate::yaml::parse(&written, SourceId(0)).unwrap();
        assert_eq!(back.to_json(), tree.to_json(), "{written}");
        assert!(written.contains("count: \"42\""), "{written}");
        assert!(written.contains("name: \"x: y\""), "{written}");
        assert!(
            written.contains("    - a.b: [x, y]\n      c: 3\n"),
            "{written}"
        );
    }
}
