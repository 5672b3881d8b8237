//! A BMC's chassis power over Redfish: `Chassis/{id}/EnvironmentMetrics` `PowerWatts.Reading`
//! where the BMC has it (Redfish 2020.4 on), else the older `Chassis/{id}/Power`
//! `PowerControl[0].PowerConsumedWatts` (with `PowerMetrics`' average and its interval).
//!
//! Requests go through `curl`, once per poll in the poller thread: BMCs serve HTTPS with
//! their own certificates and llem's default build carries no TLS stack, while curl is on
//! every server. The credentials reach curl on its standard input (`-K -`), never on its
//! command line, and are never written to results.

use std::process::Command;
use std::time::Duration;

use llem_config::user_config::RedfishConfig;
use serde_json::Value;

use super::{NodeReading, NodeSource, NodeUnavailable, child};
use crate::sensor::{SensorError, SensorKind};

/// Longest wait for one request, s.
const CALL_TIMEOUT_S: u64 = 5;

/// Which resource holds the chassis power.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Resource {
    /// `EnvironmentMetrics` (`PowerWatts.Reading`).
    EnvironmentMetrics,
    /// `Power` (`PowerControl[0].PowerConsumedWatts`).
    Power,
}

/// One chassis's power.
pub struct Redfish {
    base: String,
    user: Option<String>,
    password: Option<String>,
    insecure: bool,
    /// The resource's path (`/redfish/v1/Chassis/1/Power`).
    path: String,
    resource: Resource,
}

fn node_error(message: impl Into<String>) -> SensorError {
    SensorError::Node {
        source_name: "redfish",
        message: message.into(),
    }
}

/// A curl config string: quotes and backslashes escaped.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `url` without credentials written into it (`https://user:pw@bmc` -> `https://bmc`), for
/// anything shown or stored.
fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_string(),
    }
}

fn odata_id(v: &Value) -> Option<String> {
    v.get("@odata.id")?.as_str().map(String::from)
}

impl Redfish {
    /// Finds the chassis and the resource with its power, and takes a first reading.
    pub fn open(cfg: Option<&RedfishConfig>) -> Result<Redfish, NodeUnavailable> {
        let cfg = cfg.ok_or(NodeUnavailable::Missing {
            source_name: "redfish",
            key: "redfish.url",
        })?;
        let base = cfg
            .url
            .clone()
            .ok_or(NodeUnavailable::Missing {
                source_name: "redfish",
                key: "redfish.url",
            })?
            .trim_end_matches('/')
            .to_string();
        let var = cfg
            .password_env
            .clone()
            .unwrap_or_else(|| "LLEM_REDFISH_PASSWORD".into());
        let mut r = Redfish {
            base,
            user: cfg.user.clone(),
            password: std::env::var(&var).ok(),
            insecure: cfg.insecure_tls.unwrap_or(false),
            path: String::new(),
            resource: Resource::Power,
        };
        let chassis: Vec<String> = match &cfg.chassis {
            Some(id) => vec![format!("/redfish/v1/Chassis/{id}")],
            None => r
                .get("/redfish/v1/Chassis")?
                .get("Members")
                .and_then(Value::as_array)
                .map(|m| m.iter().filter_map(odata_id).collect())
                .unwrap_or_default(),
        };
        for c in &chassis {
            let doc = r.get(c)?;
            let candidates = [
                (Resource::EnvironmentMetrics, doc.get("EnvironmentMetrics")),
                (Resource::Power, doc.get("Power")),
            ];
            for (resource, link) in candidates {
                let Some(path) = link.and_then(odata_id) else {
                    continue;
                };
                r.path = path;
                r.resource = resource;
                if r.poll().is_ok() {
                    return Ok(r);
                }
            }
        }
        Err(NodeUnavailable::Sensor(node_error(format!(
            "{}: no chassis reports power (EnvironmentMetrics.PowerWatts or \
             Power.PowerControl[0].PowerConsumedWatts) among {}",
            shown(&r.base),
            if chassis.is_empty() {
                "no chassis".to_string()
            } else {
                chassis.join(", ")
            }
        ))))
    }

    /// GETs `path` and parses the JSON.
    fn get(&self, path: &str) -> Result<Value, SensorError> {
        let url = format!("{}{path}", self.base);
        let said = format!("{}{path}", shown(&self.base));
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--fail", "-K", "-", "--max-time"])
            .arg(CALL_TIMEOUT_S.to_string())
            .args(["-H", "Accept: application/json"]);
        if self.insecure {
            cmd.arg("-k");
        }
        cmd.arg("--url").arg(&url);
        let mut config = String::new();
        if let Some(u) = &self.user {
            let p = self.password.as_deref().unwrap_or("");
            config.push_str(&format!("user = {}\n", quoted(&format!("{u}:{p}"))));
        }
        let out = child::run(
            cmd,
            config.as_bytes(),
            Duration::from_secs(CALL_TIMEOUT_S + 2),
            ("redfish", "install curl (Debian: apt-get install curl)"),
        )?;
        if !out.status.success() {
            return Err(node_error(format!(
                "GET {said}: {}",
                out.stderr.trim().replace(&url, &said)
            )));
        }
        serde_json::from_str(&out.stdout)
            .map_err(|e| node_error(format!("GET {said}: not JSON ({e})")))
    }
}

/// The reading in a resource's JSON.
fn reading(resource: Resource, doc: &Value) -> Option<NodeReading> {
    let num = |v: Option<&Value>| v.and_then(Value::as_f64);
    match resource {
        Resource::EnvironmentMetrics => Some(NodeReading {
            power_w: Some(num(doc.pointer("/PowerWatts/Reading"))?),
            ..NodeReading::default()
        }),
        Resource::Power => {
            let control = doc.pointer("/PowerControl/0")?;
            Some(NodeReading {
                power_w: Some(num(control.get("PowerConsumedWatts"))?),
                average_w: num(control.pointer("/PowerMetrics/AverageConsumedWatts")),
                period_s: num(control.pointer("/PowerMetrics/IntervalInMin")).map(|m| m * 60.0),
                energy_j: None,
            })
        }
    }
}

impl NodeSource for Redfish {
    fn describe(&self) -> String {
        format!("redfish {}{}", shown(&self.base), self.path)
    }
    fn kind(&self) -> SensorKind {
        SensorKind::Redfish
    }
    fn has_counter(&self) -> bool {
        false
    }
    fn poll(&mut self) -> Result<NodeReading, SensorError> {
        let doc = self.get(&self.path)?;
        reading(self.resource, &doc).ok_or_else(|| {
            node_error(format!(
                "{}{}: no power reading in the resource",
                shown(&self.base),
                self.path
            ))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_resources() {
        let power: Value = serde_json::json!({"PowerControl": [{"PowerConsumedWatts": 412.0,
            "PowerMetrics": {"IntervalInMin": 1, "AverageConsumedWatts": 398}}]});
        let r = reading(Resource::Power, &power).unwrap();
        assert_eq!(r.power_w, Some(412.0));
        assert_eq!(r.average_w, Some(398.0));
        assert_eq!(r.period_s, Some(60.0));
        let env: Value = serde_json::json!({"PowerWatts": {"Reading": 377.5}});
        let r = reading(Resource::EnvironmentMetrics, &env).unwrap();
        assert_eq!(r.power_w, Some(377.5));
        assert!(reading(Resource::Power, &serde_json::json!({"PowerControl": []})).is_none());
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(
            shown("https://admin:pw@10.0.0.5:443"),
            "https://10.0.0.5:443"
        );
        assert_eq!(shown("https://10.0.0.5"), "https://10.0.0.5");
    }
}
