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
            // Written and printed without credentials (crate::credentials).
            RunnerSpec::External { url } => {
                write!(f, "external:{}", crate::credentials::redact_url(url))
            }
        }
    }
}

impl RunnerSpec {
    /// What this runner adds to an `engine` configuration's identity: nothing on the engine's
    /// default runner (so configurations that name none keep their hashes), else its name with
    /// the image it would pull (`image` from `images:` when the runner names none) or the
    /// server's URL without its userinfo (credentials do not make another server).
    pub fn identity(&self, engine: Engine, image: Option<&str>) -> Option<String> {
        if RunnerSpec::default_for(engine).as_ref() == Some(self) {
            return None;
        }
        Some(match self {
            RunnerSpec::Docker { image: None } => {
                image.map_or_else(|| "docker".to_string(), |i| format!("docker:{i}"))
            }
            RunnerSpec::External { url } => {
                format!("external:{}", crate::credentials::url_without_userinfo(url))
            }
            other => other.to_string(),
        })
    }
}

const FORMS: &str = "`embedded`, `local`, `docker`, `docker:<image>` or `external:<url>`";

impl FromStr for RunnerSpec {
    type Err = crate::error::RunnerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| crate::error::RunnerError {
            given: s.to_string(),
            reason,
        };
        match s {
            "embedded" => return Ok(RunnerSpec::Embedded),
            "local" => return Ok(RunnerSpec::Local),
            "docker" => return Ok(RunnerSpec::Docker { image: None }),
            _ => {}
        }
        if let Some(image) = s.strip_prefix("docker:") {
            if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
                return Err(err(format!(
                    "`{s}`: docker:<image> needs an image reference"
                )));
            }
            return Ok(RunnerSpec::Docker {
                image: Some(image.to_string()),
            });
        }
        if let Some(url) = s.strip_prefix("external:") {
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            let host_ok = url.split("://").nth(1).is_some_and(|rest| !rest.is_empty());
            if !scheme_ok || !host_ok {
                return Err(err(format!(
                    "`{s}`: external:<url> needs an http:// or https:// base URL"
                )));
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
        Err(err(msg))
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

/// The runner of each engine, by engine. A short sorted list rather than a tree: a resolved
/// configuration names one runner, and a tree node for one entry costs ~400 bytes, 40 MB
/// across the configurations of a 100 000-cell plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunnerMap(Vec<(Engine, RunnerSpec)>);

impl RunnerMap {
    /// The runner of `engine`, if one is set.
    pub fn get(&self, engine: &Engine) -> Option<&RunnerSpec> {
        self.find(*engine)
            .ok()
            .and_then(|i| self.0.get(i).map(|(_, r)| r))
    }

    /// Whether `engine` has a runner.
    pub fn contains_key(&self, engine: &Engine) -> bool {
        self.find(*engine).is_ok()
    }

    /// Sets the runner of `engine`, returning the one it replaces.
    pub fn insert(&mut self, engine: Engine, runner: RunnerSpec) -> Option<RunnerSpec> {
        match self.find(engine) {
            Ok(i) => self
                .0
                .get_mut(i)
                .map(|e| std::mem::replace(&mut e.1, runner)),
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (engine, runner));
                None
            }
        }
    }

    /// The entries, by engine name.
    pub fn iter(&self) -> impl Iterator<Item = (&Engine, &RunnerSpec)> {
        self.0.iter().map(|(e, r)| (e, r))
    }

    /// Whether no engine has a runner.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many engines have a runner.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    fn find(&self, engine: Engine) -> Result<usize, usize> {
        self.0.binary_search_by(|(e, _)| e.cmp(&engine))
    }
}

impl<'a> IntoIterator for &'a RunnerMap {
    type Item = (&'a Engine, &'a RunnerSpec);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Engine, RunnerSpec)>,
        fn(&'a (Engine, RunnerSpec)) -> (&'a Engine, &'a RunnerSpec),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(e, r)| (e, r))
    }
}

impl FromIterator<(Engine, RunnerSpec)> for RunnerMap {
    fn from_iter<I: IntoIterator<Item = (Engine, RunnerSpec)>>(iter: I) -> Self {
        let mut m = RunnerMap::default();
        for (e, r) in iter {
            m.insert(e, r);
        }
        m
    }
}

impl serde::Serialize for RunnerMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for RunnerMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let tree = std::collections::BTreeMap::<Engine, RunnerSpec>::deserialize(d)?;
        Ok(tree.into_iter().collect())
    }
}

impl JsonSchema for RunnerMap {
    // Written in place, as the map it is, not as a named section.
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::collections::BTreeMap::<Engine, RunnerSpec>::schema_name()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        std::collections::BTreeMap::<Engine, RunnerSpec>::json_schema(g)
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
    fn runner_map_is_a_sorted_map_that_serialises_as_one() {
        let mut m = RunnerMap::default();
        assert_eq!(
            m.insert(Engine::Vllm, RunnerSpec::Docker { image: None }),
            None
        );
        assert_eq!(m.insert(Engine::LlamaCpp, RunnerSpec::Embedded), None);
        assert_eq!(
            m.insert(Engine::Vllm, RunnerSpec::Local),
            Some(RunnerSpec::Docker { image: None })
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m.get(&Engine::Vllm), Some(&RunnerSpec::Local));
        assert!(!m.contains_key(&Engine::Sglang));
        let json = serde_json::to_string(&m).unwrap();
        let tree: std::collections::BTreeMap<Engine, RunnerSpec> =
            serde_json::from_str(&json).unwrap();
        assert_eq!(
            json,
            serde_json::to_string(&tree).unwrap(),
            "the same JSON as the map it replaces"
        );
        assert_eq!(serde_json::from_str::<RunnerMap>(&json).unwrap(), m);
    }

    #[test]
    fn rejects_bad_forms_with_a_hint() {
        let e = "dokcer".parse::<RunnerSpec>().unwrap_err();
        assert!(e.reason.contains("did you mean `docker`"), "{e}");
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
