//! The BMC's DCMI power reading (DCMI Get Power Reading: NetFn 0x2C, command 0x02) through
//! `ipmitool dcmi power reading`, in-band (`-I open`, the local BMC through `/dev/ipmi0`) or
//! over LAN (`-I lanplus`). ipmitool speaks every BMC's RMCP+ cipher suites and the kernel
//! interface; llem runs it once per poll, in the poller thread. The password goes to ipmitool
//! through its `IPMI_PASSWORD` variable (`-E`), never on its command line.

use std::process::Command;
use std::time::Duration;

use llem_config::user_config::IpmiConfig;

use super::{NodeReading, NodeSource, NodeUnavailable, child};
use crate::sensor::{SensorError, SensorKind};

/// Longest wait for one ipmitool call (its own LAN retries take about 5 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The DCMI power reading of one BMC.
pub struct Dcmi {
    program: String,
    args: Vec<String>,
    password: Option<String>,
    target: String,
}

fn node_error(message: impl Into<String>) -> SensorError {
    SensorError::Node {
        source_name: "ipmi",
        message: message.into(),
    }
}

impl Dcmi {
    /// Checks the config and takes a first reading; a deactivated reading is refused.
    pub fn open(cfg: Option<&IpmiConfig>) -> Result<Dcmi, NodeUnavailable> {
        let default = IpmiConfig::default();
        let cfg = cfg.unwrap_or(&default);
        let mut args = Vec::new();
        let target;
        let mut password = None;
        match &cfg.host {
            Some(host) => {
                let port = cfg.port.unwrap_or(623);
                args.extend([
                    "-I".to_string(),
                    cfg.interface.clone().unwrap_or_else(|| "lanplus".into()),
                    "-H".into(),
                    host.clone(),
                    "-p".into(),
                    port.to_string(),
                ]);
                if let Some(c) = cfg.cipher_suite {
                    args.extend(["-C".to_string(), c.to_string()]);
                }
                if let Some(u) = &cfg.user {
                    args.extend(["-U".to_string(), u.clone()]);
                }
                let var = cfg
                    .password_env
                    .clone()
                    .unwrap_or_else(|| "LLEM_IPMI_PASSWORD".into());
                password = std::env::var(&var).ok();
                if password.is_some() {
                    args.push("-E".into());
                }
                target = format!("{host}:{port}");
            }
            None => {
                args.extend(["-I".to_string(), "open".into()]);
                target = "the local BMC (in-band, /dev/ipmi0)".into();
            }
        }
        args.extend(["dcmi", "power", "reading"].map(String::from));
        let mut d = Dcmi {
            program: cfg.ipmitool.clone().unwrap_or_else(|| "ipmitool".into()),
            args,
            password,
            target,
        };
        let (_, active) = d.read()?;
        if !active {
            return Err(NodeUnavailable::Deactivated("ipmi"));
        }
        Ok(d)
    }

    /// One call: the reading and whether the BMC says it is active.
    fn read(&mut self) -> Result<(NodeReading, bool), SensorError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).env_remove("IPMI_PASSWORD");
        if let Some(p) = &self.password {
            cmd.env("IPMI_PASSWORD", p);
        }
        let out = child::run(
            cmd,
            b"",
            CALL_TIMEOUT,
            (
                "ipmi",
                "install ipmitool (Debian: apt-get install ipmitool)",
            ),
        )?;
        if !out.status.success() {
            let why = out
                .stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(node_error(format!(
                "ipmitool dcmi power reading from {} failed ({}): {}",
                self.target,
                out.status,
                why.trim()
            )));
        }
        parse(&out.stdout).ok_or_else(|| {
            node_error(format!(
                "{}: no DCMI power reading in ipmitool's output",
                self.target
            ))
        })
    }
}

/// The number after the label's colon: `Instantaneous power reading:   250 Watts` -> 250.
/// Looked for anywhere in the text: ipmitool 1.8 prints the sampling period on the
/// timestamp's line.
fn field(out: &str, label: &str) -> Option<f64> {
    let at = out.find(label)?;
    let rest = out.get(at + label.len()..)?;
    let (_, rest) = rest.split_once(':')?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Reads `ipmitool dcmi power reading`'s output: the reading and whether it is active.
pub fn parse(out: &str) -> Option<(NodeReading, bool)> {
    let power = field(out, "Instantaneous power reading")?;
    let average = field(out, "Average power reading");
    let period = field(out, "Sampling period");
    let state = out
        .lines()
        .find(|l| l.contains("Power reading state is"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, s)| s.trim().to_ascii_lowercase());
    let active = state.as_deref().is_none_or(|s| s.starts_with("activated"));
    Some((
        NodeReading {
            power_w: Some(power),
            average_w: average,
            period_s: period,
            energy_j: None,
        },
        active,
    ))
}

impl NodeSource for Dcmi {
    fn describe(&self) -> String {
        format!("ipmi {} (DCMI power reading)", self.target)
    }
    fn kind(&self) -> SensorKind {
        SensorKind::Ipmi
    }
    fn has_counter(&self) -> bool {
        false
    }
    fn poll(&mut self) -> Result<NodeReading, SensorError> {
        match self.read()? {
            (r, true) => Ok(r),
            (_, false) => Err(node_error(format!(
                "{}: the BMC deactivated its power reading",
                self.target
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_ipmitools_dcmi_output() {
        let out = "\n    Instantaneous power reading:                   250 Watts\n    \
                   Minimum during sampling period:                100 Watts\n    \
                   Maximum during sampling period:                300 Watts\n    \
                   Average power reading over sample period:      240 Watts\n    \
                   IPMI timestamp:                           11/28/26 15:04:10 UTC    \
                   Sampling period:                          00000001 Seconds.\n    \
                   Power reading state is:                   activated\n";
        let (r, active) = parse(out).unwrap();
        assert!(active);
        assert_eq!(r.power_w, Some(250.0));
        assert_eq!(r.average_w, Some(240.0));
        // ipmitool prints the sampling period on the timestamp's line.
        assert_eq!(r.period_s, Some(1.0));
        let out2 = out.replace("activated", "deactivated");
        assert!(!parse(&out2).unwrap().1);
        assert!(parse("Error: Unable to establish IPMI v2 / RMCP+ session").is_none());
    }
}
