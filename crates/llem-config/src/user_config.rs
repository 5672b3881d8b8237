//! The user config file (`~/.config/llenergymeasure/config.yaml`) and `LLEM_*` variables.
//!
//! Precedence, lowest first: built-in defaults < user config file < `LLEM_*` variables <
//! experiment/study YAML < command line. Values from the file and the environment are kept
//! as tree nodes whose spans name their origin, so `llem config -v` can say where each value
//! came from and errors point at the file line or the variable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Diagnostic, ErrorKind, did_you_mean};
use crate::model::names::str_enum;
use crate::model::{EnergySampler, Engine, RunnerSpec};
use crate::source::{SourceKind, SourceMap, Span};
use crate::yaml::{self, Node};

str_enum! {
    /// Log verbosity.
    pub enum LogLevel {
        /// Warnings and errors.
        Warning = "WARNING" | "warning" | "WARN" | "warn",
        /// Progress information.
        Info = "INFO" | "info",
        /// Everything.
        Debug = "DEBUG" | "debug",
    }
}

str_enum! {
    /// Progress display.
    pub enum ProgressMode {
        /// Live display on a terminal, plain lines otherwise.
        Auto = "auto",
        /// Plain lines.
        Plain = "plain",
        /// Nothing.
        Quiet = "quiet",
    }
}

/// The user config file, typed. Every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UserConfig {
    /// Where results and models live.
    pub output: UserOutput,
    /// Default runner per engine (overridden by a study's `runners:`).
    pub runners: BTreeMap<Engine, RunnerSpec>,
    /// Container image per engine.
    pub images: BTreeMap<Engine, String>,
    /// Measurement defaults of this machine.
    pub measurement: UserMeasurement,
    /// Thermal pauses of this machine.
    pub execution: UserExecution,
    /// Display.
    pub ui: UserUi,
    /// Python interpreter for the transformers worker (default `python3`).
    pub python: Option<String>,
}

/// `output:` of the user config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UserOutput {
    /// Default results directory (default `./results`).
    pub results_dir: Option<String>,
    /// Hugging Face model cache (default `~/.cache/huggingface`).
    pub model_cache_dir: Option<String>,
}

/// `measurement:` of the user config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UserMeasurement {
    /// Energy sampler used when an experiment does not name one.
    pub energy_sampler: Option<EnergySampler>,
    /// Grid carbon intensity, gCO2 per kWh (at most 2 000: the dirtiest grids are near 1 000).
    #[schemars(range(min = 0.0, max = 2000.0))]
    pub carbon_intensity_gco2_kwh: Option<f64>,
    /// Data-centre power usage effectiveness (1.0 = none; at most 5, past any real facility).
    #[schemars(range(min = 1.0, max = 5.0))]
    pub datacenter_pue: Option<f64>,
    /// CPU thermal design power for the estimate sampler, in watts (at most 10 000: a host's
    /// sockets together, not a typo's 1e308 that turns every figure into infinity).
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 10000.0))]
    pub cpu_tdp_w: Option<f64>,
    /// Whole-node power (BMC over IPMI DCMI, Redfish, or the hwmon ACPI power meter), read
    /// beside the GPU and CPU sensors; its energy is what `system` means when measured.
    pub node_power: NodePowerConfig,
}

str_enum! {
    /// Which node power source to read.
    pub enum NodePowerSource {
        /// A configured Redfish or IPMI BMC, else the hwmon power meter when one is found,
        /// else none (said in the result).
        Auto = "auto",
        /// Do not read node power.
        Off = "none",
        /// hwmon (the ACPI power meter, or the device named by `hwmon_name`).
        Hwmon = "hwmon",
        /// IPMI DCMI power reading through `ipmitool`.
        Ipmi = "ipmi",
        /// Redfish `Chassis` power through `curl`.
        Redfish = "redfish",
    }
}

/// `measurement.node_power:` of the user config. Credentials are never written here: the
/// password is read from the environment variable the config names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NodePowerConfig {
    /// auto (default), none, hwmon, ipmi or redfish. A source named here that cannot be read
    /// fails the run; `auto` notes why it measured no node power and goes on.
    pub source: Option<NodePowerSource>,
    /// Time between reads of the node source, s (default 1; BMCs update about once a
    /// second; at least 0.05, at most 60).
    #[schemars(range(min = 0.05, max = 60.0))]
    pub poll_interval_s: Option<f64>,
    /// The hwmon device to read, by its `name` file (default `power_meter`, the ACPI power
    /// meter); its `energy*_input` counter where it has one, else `power1_average`/`_input`.
    pub hwmon_name: Option<String>,
    /// The BMC over IPMI (DCMI Get Power Reading).
    pub ipmi: Option<IpmiConfig>,
    /// The BMC over Redfish.
    pub redfish: Option<RedfishConfig>,
}

/// `measurement.node_power.ipmi:`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct IpmiConfig {
    /// BMC address for IPMI over LAN; absent: the local BMC in-band (`/dev/ipmi0`, root).
    pub host: Option<String>,
    /// UDP port (default 623).
    pub port: Option<u16>,
    /// User name on the BMC.
    pub user: Option<String>,
    /// Environment variable holding the password (default `LLEM_IPMI_PASSWORD`).
    pub password_env: Option<String>,
    /// ipmitool interface over LAN (default `lanplus`, IPMI 2.0).
    pub interface: Option<String>,
    /// RMCP+ cipher suite (`ipmitool -C`, e.g. 3 or 17); unset, ipmitool asks the BMC, which
    /// costs a BMC that does not answer Get Channel Cipher Suites 10 s per reading.
    #[schemars(range(max = 255))]
    pub cipher_suite: Option<u8>,
    /// The ipmitool executable (default `ipmitool` on PATH).
    pub ipmitool: Option<String>,
}

/// `measurement.node_power.redfish:`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RedfishConfig {
    /// The BMC's base URL (`https://10.0.0.5`).
    pub url: Option<String>,
    /// The chassis id under `/redfish/v1/Chassis/` (default: the first that reports power).
    pub chassis: Option<String>,
    /// User name.
    pub user: Option<String>,
    /// Environment variable holding the password (default `LLEM_REDFISH_PASSWORD`).
    pub password_env: Option<String>,
    /// Accept the BMC's self-signed certificate (default false).
    pub insecure_tls: Option<bool>,
}

/// `execution:` of the user config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UserExecution {
    /// Pause between experiments, seconds (default 60; at most a day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub experiment_gap_seconds: Option<f64>,
    /// Pause between cycles, seconds (default 300; at most a day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub cycle_gap_seconds: Option<f64>,
}

/// `ui:` of the user config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UserUi {
    /// WARNING, INFO or DEBUG.
    pub log_level: Option<LogLevel>,
    /// Ask before destructive actions (false for CI and batch systems).
    pub prompt: Option<bool>,
    /// auto, plain, quiet.
    pub progress_mode: Option<ProgressMode>,
}

/// A snapshot of the environment variables llem reads.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The variables of this process that matter to llem.
    pub fn from_process() -> Env {
        Env::from_pairs(
            std::env::vars()
                .filter(|(k, _)| k.starts_with("LLEM_") || k == "XDG_CONFIG_HOME" || k == "HOME"),
        )
    }

    /// An environment from explicit pairs (tests, embedding).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Env {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// A variable's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// All `LLEM_*` variables, sorted.
    pub fn llem_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars
            .iter()
            .filter(|(k, _)| k.starts_with("LLEM_"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// `LLEM_*` variables that map onto user config keys.
const ENV_KEYS: &[(&str, &[&str])] = &[
    ("LLEM_OUTPUT_DIR", &["output", "results_dir"]),
    ("LLEM_MODEL_CACHE_DIR", &["output", "model_cache_dir"]),
    ("LLEM_ENERGY_SAMPLER", &["measurement", "energy_sampler"]),
    (
        "LLEM_CARBON_INTENSITY",
        &["measurement", "carbon_intensity_gco2_kwh"],
    ),
    ("LLEM_DATACENTER_PUE", &["measurement", "datacenter_pue"]),
    ("LLEM_CPU_TDP_W", &["measurement", "cpu_tdp_w"]),
    (
        "LLEM_EXPERIMENT_GAP_SECONDS",
        &["execution", "experiment_gap_seconds"],
    ),
    (
        "LLEM_CYCLE_GAP_SECONDS",
        &["execution", "cycle_gap_seconds"],
    ),
    ("LLEM_LOG_LEVEL", &["ui", "log_level"]),
    ("LLEM_PYTHON", &["python"]),
];

/// `LLEM_*` variables read elsewhere (sensors, assets), listed so typos can be flagged.
const OTHER_ENV: &[&str] = &[
    "LLEM_CONFIG_PATH",
    "LLEM_NO_PROMPT",
    "LLEM_POWERCAP_ROOT",
    "LLEM_HWMON_ROOT",
    "LLEM_IPMI_PASSWORD",
    "LLEM_REDFISH_PASSWORD",
    "LLEM_SYSFS_ROOT",
    "LLEM_DEVICE_JOURNAL_DIR",
    "LLEM_ASSETS",
    "LLEM_WORKER_TIMEOUT_S",
    "LLEM_LLAMA_SERVER",
    "LLEM_API_KEY",
    // Set by a study for its cells; outside `LLEM_RUNNER_*`, which names user config keys.
    crate::credentials::RUNNER_CREDENTIALS_ENV,
];

/// Every `LLEM_*` variable llem knows (per-engine ones spelled with `<ENGINE>`).
pub fn known_env_vars() -> Vec<String> {
    let mut v: Vec<String> = ENV_KEYS.iter().map(|(k, _)| (*k).to_string()).collect();
    v.extend(OTHER_ENV.iter().map(|s| (*s).to_string()));
    for e in Engine::ALL {
        let up = e.as_str().to_ascii_uppercase();
        v.push(format!("LLEM_RUNNER_{up}"));
        v.push(format!("LLEM_IMAGE_{up}"));
    }
    v
}

/// Where the user config file is looked for: `LLEM_CONFIG_PATH`, else
/// `$XDG_CONFIG_HOME/llenergymeasure/config.yaml`, else `~/.config/llenergymeasure/config.yaml`.
pub fn user_config_path(env: &Env) -> PathBuf {
    if let Some(p) = env.get("LLEM_CONFIG_PATH").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = env
        .get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"));
    base.join("llenergymeasure").join("config.yaml")
}

/// The user's settings: the file (if any) with `LLEM_*` overrides applied.
#[derive(Clone, Debug)]
pub struct UserSettings {
    /// Where the file was looked for.
    pub path: PathBuf,
    /// Whether it exists.
    pub file_found: bool,
    /// The merged tree; spans say whether a value came from the file or a variable.
    pub tree: Node,
    /// The typed view.
    pub config: UserConfig,
    /// Problems that do not stop llem (unknown `LLEM_*` variables).
    pub warnings: Vec<String>,
}

impl UserSettings {
    /// Reads the user config file (missing is fine) and applies `LLEM_*` variables.
    pub fn load(env: &Env, sources: &mut SourceMap) -> Result<UserSettings, ConfigError> {
        let path = user_config_path(env);
        let read = crate::files::read_regular_string(&path, crate::files::CONFIG_MAX_BYTES);
        let (mut tree, file_found) = match read {
            Ok(text) => {
                let text: Arc<str> = Arc::from(text);
                let id = sources.add_file(&path, text.clone());
                let node = yaml::parse(&text, id).map_err(|e| {
                    Diagnostic::new(ErrorKind::Syntax, e.message).at(sources.location(e.span))
                })?;
                let node = match node.kind {
                    yaml::NodeKind::Null => Node::empty_map(node.span),
                    yaml::NodeKind::Map(_) => node,
                    _ => {
                        return Err(Diagnostic::new(
                            ErrorKind::Type,
                            "the user config must be a mapping of sections",
                        )
                        .at(sources.location(node.span))
                        .into());
                    }
                };
                (node, true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = sources.add_synthetic("<built-in defaults>", SourceKind::Builtin);
                (Node::empty_map(Span::whole(id)), false)
            }
            Err(e) => {
                return Err(Diagnostic::new(
                    ErrorKind::Io,
                    format!("cannot read user config {}: {e}", path.display()),
                )
                .into());
            }
        };

        let mut warnings = Vec::new();
        let known = known_env_vars();
        for (key, value) in env.llem_vars() {
            let target: Option<(Vec<String>, bool)> =
                if let Some((_, p)) = ENV_KEYS.iter().find(|(k, _)| *k == key) {
                    let quoted = matches!(
                        key,
                        "LLEM_OUTPUT_DIR" | "LLEM_MODEL_CACHE_DIR" | "LLEM_PYTHON"
                    );
                    Some((p.iter().map(|s| (*s).to_string()).collect(), quoted))
                } else if let Some(e) = key.strip_prefix("LLEM_RUNNER_") {
                    Some((vec!["runners".into(), e.to_ascii_lowercase()], true))
                } else if let Some(e) = key.strip_prefix("LLEM_IMAGE_") {
                    Some((vec!["images".into(), e.to_ascii_lowercase()], true))
                } else if key == "LLEM_NO_PROMPT" {
                    (!value.is_empty() && value != "0")
                        .then(|| (vec!["ui".to_string(), "prompt".to_string()], false))
                } else {
                    if !OTHER_ENV.contains(&key) {
                        let mut w = format!("unknown environment variable {key}");
                        if let Some(c) = did_you_mean(key, known.iter().map(String::as_str)) {
                            w.push_str(&format!(" (did you mean {c}?)"));
                        }
                        warnings.push(w);
                    }
                    None
                };
            let Some((path_keys, quoted)) = target else {
                continue;
            };
            let id = sources.add_synthetic(key, SourceKind::Environment);
            let span = Span::whole(id);
            let node = if key == "LLEM_NO_PROMPT" {
                Node::plain("false", span)
            } else if quoted {
                Node::string(value, span)
            } else {
                Node::plain(value, span)
            };
            let keys: Vec<&str> = path_keys.iter().map(String::as_str).collect();
            if tree.set_path(&keys, node).is_err() {
                return Err(Diagnostic::new(
                    ErrorKind::Type,
                    format!(
                        "{key} cannot be applied: the user config's `{}` is not a mapping",
                        keys.first().copied().unwrap_or("")
                    ),
                )
                .into());
            }
        }

        // `runners: {pytorch: docker}` must fill transformers defaults like the canonical name.
        crate::aliases::normalize_aliases(&mut tree, sources)?;
        let config: UserConfig =
            crate::de::from_node(&tree).map_err(|e| e.into_diagnostic(sources))?;
        let violations = crate::schema::user_config_rules().check(&config);
        if let Some(v) = violations.into_iter().next() {
            let span = tree.locate(&v.path);
            return Err(Diagnostic::new(ErrorKind::Range, v.message)
                .at(sources.location(span))
                .into());
        }
        for (engine, runner) in &config.runners {
            if !runner.supports(*engine) {
                let span = tree.locate(&["runners".to_string(), engine.as_str().to_string()]);
                return Err(Diagnostic::new(
                    ErrorKind::Rule,
                    format!("engine `{engine}` cannot use runner `{runner}`"),
                )
                .at(sources.location(span))
                .into());
            }
        }
        Ok(UserSettings {
            path,
            file_found,
            tree,
            config,
            warnings,
        })
    }

    /// The user's node at a path, if the file or a variable set it.
    pub fn node(&self, path: &[&str]) -> Option<&Node> {
        self.tree.get_path(path).filter(|n| !n.is_null())
    }
    /// Every value the file or a variable sets, as `(dotted key, value as written, where it
    /// came from)`: `line N` of the file, the variable's name, or `default`.
    pub fn set_values(&self, sources: &SourceMap) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        leaves(&self.tree, "", &mut out);
        out.into_iter()
            .map(|(key, value, node)| (key, value, origin(node, sources)))
            .collect()
    }
}

/// Where `node`'s value came from.
fn origin(node: &Node, sources: &SourceMap) -> String {
    match sources.get(node.span.source).map(|s| &s.kind) {
        Some(SourceKind::File(_)) => format!("line {}", node.span.line),
        Some(SourceKind::Environment) => sources
            .get(node.span.source)
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        _ => "default".into(),
    }
}

/// The scalar and list values under `node`, keyed by their dotted path.
fn leaves<'a>(node: &'a Node, prefix: &str, out: &mut Vec<(String, String, &'a Node)>) {
    match &node.kind {
        yaml::NodeKind::Map(m) => {
            for e in &m.entries {
                let key = if prefix.is_empty() {
                    e.key.to_string()
                } else {
                    format!("{prefix}.{}", e.key)
                };
                leaves(&e.value, &key, out);
            }
        }
        yaml::NodeKind::Null => {}
        yaml::NodeKind::Scalar(s) => out.push((prefix.to_string(), s.text.to_string(), node)),
        yaml::NodeKind::Seq(_) => out.push((prefix.to_string(), node.to_json().to_string(), node)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn path_precedence() {
        let env = Env::from_pairs([("HOME", "/home/u")]);
        assert_eq!(
            user_config_path(&env),
            PathBuf::from("/home/u/.config/llenergymeasure/config.yaml")
        );
        let env = Env::from_pairs([("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/x")]);
        assert_eq!(
            user_config_path(&env),
            PathBuf::from("/x/llenergymeasure/config.yaml")
        );
        let env = Env::from_pairs([("XDG_CONFIG_HOME", "/x"), ("LLEM_CONFIG_PATH", "/c.yaml")]);
        assert_eq!(user_config_path(&env), PathBuf::from("/c.yaml"));
    }

    fn settings(file: &str, vars: &[(&str, &str)]) -> Result<UserSettings, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, file).unwrap();
        let mut pairs: Vec<(String, String)> =
            vec![("LLEM_CONFIG_PATH".into(), path.display().to_string())];
        pairs.extend(vars.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        let mut sources = SourceMap::new();
        UserSettings::load(&Env::from_pairs(pairs), &mut sources)
    }

    #[test]
    fn each_set_value_says_whether_the_file_or_a_variable_set_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "runners:\n  vllm: docker\nmeasurement:\n  datacenter_pue: 1.2\n",
        )
        .unwrap();
        let env = Env::from_pairs([
            ("LLEM_CONFIG_PATH", path.display().to_string()),
            ("LLEM_CARBON_INTENSITY", "300".into()),
        ]);
        let mut sources = SourceMap::new();
        let s = UserSettings::load(&env, &mut sources).unwrap();
        let set = s.set_values(&sources);
        let find = |k: &str| set.iter().find(|(key, _, _)| key == k).cloned();
        assert_eq!(
            find("runners.vllm"),
            Some(("runners.vllm".into(), "docker".into(), "line 2".into()))
        );
        assert_eq!(find("measurement.datacenter_pue").unwrap().2, "line 4");
        let (_, value, origin) = find("measurement.carbon_intensity_gco2_kwh").unwrap();
        assert_eq!(
            (value.as_str(), origin.as_str()),
            ("300", "LLEM_CARBON_INTENSITY")
        );
    }

    #[test]
    fn environment_overrides_the_file() {
        let s = settings(
            "runners:\n  vllm: docker\nmeasurement:\n  datacenter_pue: 1.2\n",
            &[
                ("LLEM_RUNNER_VLLM", "local"),
                ("LLEM_CARBON_INTENSITY", "300"),
            ],
        )
        .unwrap();
        assert_eq!(
            s.config.runners.get(&Engine::Vllm),
            Some(&RunnerSpec::Local)
        );
        assert_eq!(s.config.measurement.datacenter_pue, Some(1.2));
        assert_eq!(s.config.measurement.carbon_intensity_gco2_kwh, Some(300.0));
    }

    #[test]
    fn bad_values_name_their_origin() {
        let e = settings("", &[("LLEM_DATACENTER_PUE", "0.5")]).unwrap_err();
        let d = &e.diagnostics[0];
        assert_eq!(d.location.as_ref().unwrap().file, "LLEM_DATACENTER_PUE");
        assert!(d.message.contains("at least 1"), "{}", d.message);
        let e = settings("measurment: {}\n", &[]).unwrap_err();
        assert_eq!(
            e.diagnostics[0].help.as_deref(),
            Some("did you mean `measurement`?")
        );
        assert_eq!(e.diagnostics[0].location.as_ref().unwrap().line, 1);
    }

    /// Physical constants a user gives are bounded: a typo cannot make every figure inf or NaN.
    #[test]
    fn physical_constants_are_bounded() {
        for (var, value, want) in [
            ("LLEM_CPU_TDP_W", "1e308", "at most 10000"),
            ("LLEM_CPU_TDP_W", "0", "greater than 0"),
            ("LLEM_CARBON_INTENSITY", "1e9", "at most 2000"),
            ("LLEM_DATACENTER_PUE", "50", "at most 5"),
        ] {
            let e = settings("", &[(var, value)]).unwrap_err();
            let d = &e.diagnostics[0];
            assert_eq!(d.location.as_ref().unwrap().file, var);
            assert!(d.message.contains(want), "{var}={value}: {}", d.message);
        }
        let s = settings("", &[("LLEM_CPU_TDP_W", "350")]).unwrap();
        assert_eq!(s.config.measurement.cpu_tdp_w, Some(350.0));
    }

    /// The variable a study hands its cells their runner credentials in is not user
    /// configuration: a cell reads the user config with it set, and gets the file's values.
    #[test]
    fn the_cells_credentials_variable_is_not_a_runner() {
        let s = settings(
            "measurement:\n  datacenter_pue: 1.3\n",
            &[(crate::credentials::RUNNER_CREDENTIALS_ENV, "{}")],
        )
        .unwrap();
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        assert!(s.config.runners.is_empty());
        assert_eq!(s.config.measurement.datacenter_pue, Some(1.3));
    }

    #[test]
    fn unknown_llem_variables_are_flagged() {
        let s = settings("", &[("LLEM_RUNER_VLLM", "local")]).unwrap();
        assert_eq!(s.warnings.len(), 1);
        assert!(
            s.warnings[0].contains("did you mean LLEM_RUNNER_VLLM"),
            "{:?}",
            s.warnings
        );
    }
}
