//! Tensor, expert and data parallel degrees from a vLLM `monolithic.config.yaml`
//! (reference §4.2): four top-level keys are read, the rest of the file is ignored.

use llem_config::source::SourceId;
use llem_config::yaml::{self, Node, NodeKind, Plain};

/// The three degrees of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallelism {
    /// Tensor parallel degree.
    pub tensor: i64,
    /// Expert parallel degree.
    pub expert: i64,
    /// Data parallel degree.
    pub data: i64,
}

/// Python truthiness of a YAML value as PyYAML (YAML 1.1) loads it.
fn truthy(n: &Node) -> bool {
    match &n.kind {
        NodeKind::Null => false,
        NodeKind::Seq(items) => !items.is_empty(),
        NodeKind::Map(m) => !m.entries.is_empty(),
        NodeKind::Scalar(s) if s.quoted => !s.text.is_empty(),
        NodeKind::Scalar(s) => match s.text.as_ref() {
            // YAML 1.1 booleans PyYAML knows beyond the core schema.
            "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => true,
            "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => false,
            t => match yaml::resolve_plain(t) {
                Plain::Bool(b) => b,
                Plain::Int(i) => i != 0,
                Plain::Float(f) => f != 0.0,
                Plain::Str => !t.is_empty(),
            },
        },
    }
}

fn int(n: &Node) -> Option<i64> {
    match &n.kind {
        NodeKind::Scalar(s) if !s.quoted => {
            yaml::parse_int(&s.text).and_then(|i| i64::try_from(i).ok())
        }
        _ => None,
    }
}

/// Derives the degrees from the file's text for a run on `num_gpus` GPUs. Errors say what
/// is wrong with the file.
pub fn from_monolithic_config(text: &str, num_gpus: i64) -> Result<Parallelism, crate::RunError> {
    let root = yaml::parse(text, SourceId(0)).map_err(|e| crate::RunError::Yaml {
        line: e.span.line,
        message: e.message,
    })?;
    let NodeKind::Map(map) = &root.kind else {
        return Err(crate::RunError::Unusable(
            "monolithic.config.yaml is not a mapping",
        ));
    };
    let ep_on = map.get("enable-expert-parallel").is_some_and(truthy);
    let expert = if ep_on {
        map.get("expert-parallel-size")
            .and_then(int)
            .unwrap_or(num_gpus)
    } else {
        1
    };
    let tensor = map
        .get("tensor-parallel-size")
        .and_then(int)
        .unwrap_or(if expert > 1 { 1 } else { num_gpus });
    let data = match map.get("data-parallel-size").and_then(int) {
        Some(0) => num_gpus,
        Some(d) => d,
        None => 1,
    };
    Ok(Parallelism {
        tensor,
        expert,
        data,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn p(text: &str, g: i64) -> (i64, i64, i64) {
        let p = from_monolithic_config(text, g).unwrap();
        (p.tensor, p.expert, p.data)
    }

    #[test]
    fn degrees_by_the_reference_rules() {
        assert_eq!(p("max-model-len: 32768\n", 4), (4, 1, 1));
        assert_eq!(p("enable-expert-parallel: true\n", 8), (1, 8, 1));
        assert_eq!(
            p(
                "enable-expert-parallel: true\nexpert-parallel-size: 4\ntensor-parallel-size: 2\n",
                8
            ),
            (2, 4, 1)
        );
        assert_eq!(p("enable-expert-parallel: false\n", 8), (8, 1, 1));
        // A quoted non-empty string is truthy in Python.
        assert_eq!(p("enable-expert-parallel: \"false\"\n", 8), (1, 8, 1));
        assert_eq!(
            p("data-parallel-size: 0\n# comment\nx: {a: 1}\n", 2),
            (2, 1, 2)
        );
        assert_eq!(p("data-parallel-size: 2\n", 2), (2, 1, 2));
        assert!(from_monolithic_config("- a\n- b\n", 1).is_err());
        assert!(from_monolithic_config("a: [\n", 1).is_err());
    }
}
