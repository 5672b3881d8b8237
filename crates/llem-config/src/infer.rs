//! The engine of a configuration that does not name one: from its engine section, else from
//! its model. The seed's files omit `engine:` and mean transformers (its default), while
//! `llem run -m model.gguf` means the embedded llama.cpp; the model tells them apart.

use std::path::Path;

use crate::model::Engine;
use crate::yaml::Node;

/// An engine chosen for a configuration without `engine:`, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InferredEngine {
    /// The engine.
    pub engine: Engine,
    /// Why, in words for the plan ("`gpt2` is a Hugging Face model id").
    pub reason: String,
}

/// The engine for `tree` (a configuration whose `engine:` is absent or null): the one engine
/// whose section it fills; else llama.cpp for a GGUF model, transformers for a Hugging Face id
/// or a model directory; else the embedded default when no model is named.
pub fn infer_engine(tree: &Node) -> InferredEngine {
    let sections: Vec<Engine> = Engine::WITH_SECTIONS
        .iter()
        .copied()
        .filter(|e| tree.get_path(&[e.as_str()]).is_some_and(|n| !n.is_null()))
        .collect();
    if let [only] = sections[..] {
        return InferredEngine {
            engine: only,
            reason: format!("the configuration has a `{}:` section", only.as_str()),
        };
    }
    let Some(model) = tree.get_path(&["model"]).and_then(Node::as_str) else {
        return InferredEngine {
            engine: Engine::DEFAULT,
            reason: "no model is named; the embedded default".into(),
        };
    };
    from_model(model)
}

/// The engine a model reference implies.
pub fn from_model(model: &str) -> InferredEngine {
    let is_gguf = Path::new(model)
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("gguf"));
    if is_gguf {
        return InferredEngine {
            engine: Engine::LlamaCpp,
            reason: format!("`{model}` is a GGUF file"),
        };
    }
    let dir = Path::new(model);
    if dir.is_dir()
        && !dir.join("config.json").exists()
        && let [one] = ggufs_in(dir).as_slice()
    {
        return InferredEngine {
            engine: Engine::LlamaCpp,
            reason: format!(
                "`{model}` is a directory holding one GGUF file, {}",
                one.file_name().unwrap_or_default().to_string_lossy()
            ),
        };
    }
    let reason = if dir.join("config.json").is_file() {
        format!("`{model}` is a model directory with a config.json")
    } else if dir.is_dir() {
        format!("`{model}` is a directory, not a GGUF file")
    } else {
        format!("`{model}` is a Hugging Face model id, not a GGUF file")
    };
    InferredEngine {
        engine: Engine::Transformers,
        reason,
    }
}

/// The `.gguf` files directly in `dir`, sorted (a model directory holding one is that model).
pub fn ggufs_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.is_file()
                        && f.extension()
                            .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    fn tree(yaml: &str) -> Node {
        crate::yaml::parse(yaml, SourceId(0)).unwrap()
    }

    #[test]
    fn the_model_or_the_one_section_names_the_engine() {
        let cases = [
            (
                "model: SmolLM2-135M-Instruct.Q4_1.gguf",
                Engine::LlamaCpp,
                "GGUF",
            ),
            ("model: /m/x.GGUF", Engine::LlamaCpp, "GGUF"),
            ("model: gpt2", Engine::Transformers, "Hugging Face model id"),
            (
                "model: meta-llama/Llama-3.1-8B",
                Engine::Transformers,
                "Hugging Face",
            ),
            (
                "model: gpt2\nvllm: {max_num_seqs: 8}",
                Engine::Vllm,
                "`vllm:` section",
            ),
            (
                "model: x.gguf\ntransformers: {batch_size: 2}",
                Engine::Transformers,
                "section",
            ),
            // Two sections: the model decides (validation then names the foreign one).
            (
                "model: x.gguf\nvllm: {}\nsglang: {}",
                Engine::LlamaCpp,
                "GGUF",
            ),
            ("model: gpt2\nvllm: null", Engine::Transformers, "model id"),
            ("dataset: {n_prompts: 2}", Engine::LlamaCpp, "no model"),
        ];
        for (yaml, engine, why) in cases {
            let got = infer_engine(&tree(yaml));
            assert_eq!(got.engine, engine, "{yaml}");
            assert!(got.reason.contains(why), "{yaml}: {}", got.reason);
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("m.gguf"), "x").unwrap();
        let got = from_model(d.path().to_str().unwrap());
        assert_eq!(got.engine, Engine::LlamaCpp);
        assert!(
            got.reason.contains("one GGUF file, m.gguf"),
            "{}",
            got.reason
        );
        std::fs::write(d.path().join("config.json"), "{}").unwrap();
        let got = from_model(d.path().to_str().unwrap());
        assert_eq!(got.engine, Engine::Transformers);
        assert!(got.reason.contains("config.json"), "{}", got.reason);
    }
}
