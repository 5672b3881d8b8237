//! Where an engine runs: `embedded`, `local`, `docker`, `docker:<image>`, `external:<url>`.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;

use super::names::Engine;

/// How an engine is started (or reached).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunnerSpec {
    /// In the llem process itself (llamacpp only).
    Embedded,
    /// A process on this host (the engine's own CLI or worker).
    Local,
    /// A container; `image` overrides the engine's default image.
    Docker {
        /// Image reference, e.g. `vllm/vllm-openai:v0.11.0`.
        image: Option<String>,
    },
    /// An already running OpenAI-compatible server.
    External {
        /// Base URL, e.g. `http://10.0.0.5:8000`.
        url: String,
    },
}

/// The kind of a [`RunnerSpec`], without its argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunnerKind {
    /// In-process.
    Embedded,
    /// Host process.
    Local,
    /// Container.
    Docker,
    /// Remote URL.
    External,
}

impl RunnerSpec {
    /// The kind, without its argument.
    pub fn kind(&self) -> RunnerKind {
        match self {
            RunnerSpec::Embedded => RunnerKind::Embedded,
            RunnerSpec::Local => RunnerKind::Local,
            RunnerSpec::Docker { .. } => RunnerKind::Docker,
            RunnerSpec::External { .. } => RunnerKind::External,
        }
    }

    /// The runner an engine gets when nothing names one; `None` when one must be named.
    pub fn default_for(engine: Engine) -> Option<RunnerSpec> {
        match engine {
            Engine::LlamaCpp => Some(RunnerSpec::Embedded),
            Engine::OpenAi => None,
            Engine::Transformers
            | Engine::Vllm
            | Engine::TensorRt
            | Engine::Sglang
            | Engine::Tgi => Some(RunnerSpec::Local),
        }
    }

    /// True when `engine` can run this way.
    pub fn supports(&self, engine: Engine) -> bool {
        match (engine, self.kind()) {
            (Engine::LlamaCpp, _) => true,
            (Engine::Transformers, k) => matches!(k, RunnerKind::Local | RunnerKind::Docker),
            (Engine::OpenAi, k) => k == RunnerKind::External,
            (Engine::Vllm | Engine::TensorRt | Engine::Sglang | Engine::Tgi, k) => {
                k != RunnerKind::Embedded
            }
        }
    }

    /// True when the engine is reached as a server (so `traffic:` applies).
    pub fn is_server(&self, engine: Engine) -> bool {
        match engine {
            Engine::Transformers => false,
            Engine::LlamaCpp => self.kind() != RunnerKind::Embedded,
            Engine::Vllm | Engine::TensorRt | Engine::Sglang | Engine::Tgi | Engine::OpenAi => true,
        }
    }
}

impl fmt::Display for RunnerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunnerSpec::Embedded => f.write_str("embedded"),
            RunnerSpec::Local => f.write_str("local"),
            RunnerSpec::Docker { image: None } => f.write_str("docker"),
            RunnerSpec::Docker { image: Some(i) } => write!(f, "docker:{i}"),
            RunnerSpec::External { url } => write!(f, "external:{url}"),
        }
    }
}

const FORMS: &str = "`embedded`, `local`, `docker`, `docker:<image>` or `external:<url>`";

impl FromStr for RunnerSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "embedded" => return Ok(RunnerSpec::Embedded),
            "local" => return Ok(RunnerSpec::Local),
            "docker" => return Ok(RunnerSpec::Docker { image: None }),
            _ => {}
        }
        if let Some(image) = s.strip_prefix("docker:") {
            if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
                return Err(format!("`{s}`: docker:<image> needs an image reference"));
            }
            return Ok(RunnerSpec::Docker {
                image: Some(image.to_string()),
            });
        }
        if let Some(url) = s.strip_prefix("external:") {
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            let host_ok = url.split("://").nth(1).is_some_and(|rest| !rest.is_empty());
            if !scheme_ok || !host_ok {
                return Err(format!(
                    "`{s}`: external:<url> needs an http:// or https:// base URL"
                ));
            }
            return Ok(RunnerSpec::External {
                url: url.trim_end_matches('/').to_string(),
            });
        }
        let head = s.split(':').next().unwrap_or(s);
        let mut msg = format!("unknown runner `{s}`; expected {FORMS}");
        if let Some(c) =
            crate::error::did_you_mean(head, ["embedded", "local", "docker", "external"])
        {
            msg.push_str(&format!(" (did you mean `{c}`?)"));
        }
        Err(msg)
    }
}

impl serde::Serialize for RunnerSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for RunnerSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RunnerSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(FORMS)
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RunnerSpec, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

impl JsonSchema for RunnerSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RunnerSpec".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "embedded (llamacpp, in-process), local, docker, docker:<image>, external:<url>",
            "pattern": "^(embedded|local|docker|docker:\\S+|external:https?://.+)$"
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_and_round_trips() {
        for s in [
            "embedded",
            "local",
            "docker",
            "docker:vllm/vllm-openai:v0.11.0",
            "external:http://127.0.0.1:8000",
        ] {
            let r: RunnerSpec = s.parse().unwrap();
            assert_eq!(r.to_string(), s);
        }
    }

    #[test]
    fn rejects_bad_forms_with_a_hint() {
        let e = "dokcer".parse::<RunnerSpec>().unwrap_err();
        assert!(e.contains("did you mean `docker`"), "{e}");
        assert!("external:localhost:8000".parse::<RunnerSpec>().is_err());
        assert!("docker:".parse::<RunnerSpec>().is_err());
    }

    #[test]
    fn engine_support() {
        assert!(RunnerSpec::Embedded.supports(Engine::LlamaCpp));
        assert!(!RunnerSpec::Embedded.supports(Engine::Vllm));
        assert!(!RunnerSpec::Local.supports(Engine::OpenAi));
        let ext = RunnerSpec::External {
            url: "http://x".into(),
        };
        assert!(!ext.supports(Engine::Transformers));
        assert!(ext.is_server(Engine::LlamaCpp));
        assert!(!RunnerSpec::Embedded.is_server(Engine::LlamaCpp));
    }
}
