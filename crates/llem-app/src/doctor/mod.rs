//! The doctor's checks: is this host ready to measure, and is it ready for this study? Each
//! check is a line marked ok, info, warn or fail, with the exact fix for anything not ok.
//! Front ends print the [`Report`] (`llem doctor`, `--json`) and grade it.

mod engines;
mod host;
mod probe;
mod study;

use llem_config::StudyPlan;
use llem_config::user_config::UserConfig;
use serde::Serialize;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// A fact worth knowing that changes nothing (an engine not installed).
    Info,
    /// Measurements will run, but a figure may mean less than it should.
    Warn,
    /// Something will fail.
    Fail,
}

/// One check.
#[derive(Clone, Debug, Serialize)]
pub struct Line {
    /// Its outcome.
    pub status: Status,
    /// What was found.
    pub message: String,
    /// What to do about it.
    pub fix: Option<String>,
}

impl Line {
    /// A check that came out `status`.
    pub fn new(status: Status, message: impl Into<String>) -> Line {
        Line {
            status,
            message: message.into(),
            fix: None,
        }
    }

    fn ok(message: impl Into<String>) -> Line {
        Line::new(Status::Ok, message)
    }

    fn info(message: impl Into<String>) -> Line {
        Line::new(Status::Info, message)
    }

    fn warn(message: impl Into<String>) -> Line {
        Line::new(Status::Warn, message)
    }

    fn fail(message: impl Into<String>) -> Line {
        Line::new(Status::Fail, message)
    }

    /// With what to do about it.
    pub fn fix(mut self, fix: impl Into<String>) -> Line {
        self.fix = Some(fix.into());
        self
    }
}

/// A titled group of checks.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    /// The title.
    pub title: String,
    /// Its checks.
    pub lines: Vec<Line>,
}

/// Every section.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// In the order printed.
    pub sections: Vec<Section>,
}

impl Report {
    fn push(&mut self, title: &str, lines: Vec<Line>) {
        if !lines.is_empty() {
            self.sections.push(Section {
                title: title.to_string(),
                lines,
            });
        }
    }

    /// How many checks came out `status`.
    pub fn count(&self, status: Status) -> usize {
        self.sections
            .iter()
            .flat_map(|s| &s.lines)
            .filter(|l| l.status == status)
            .count()
    }

    /// The worst outcome.
    pub fn worst(&self) -> Status {
        self.sections
            .iter()
            .flat_map(|s| &s.lines)
            .map(|l| l.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// The report as JSON: `status`, `summary` (counts), `sections` (the Python llem's shape,
    /// with `info` added).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "status": self.worst(),
            "summary": {
                "ok": self.count(Status::Ok),
                "info": self.count(Status::Info),
                "warn": self.count(Status::Warn),
                "fail": self.count(Status::Fail),
            },
            "sections": self.sections,
        })
    }
}

/// Whether llem may change device settings here, and journals left changed: a leftover
/// (its llem died) is a failure until `llem restore` puts it back.
fn device_settings() -> Vec<Line> {
    let mut lines = Vec::new();
    if llem_energy::settings::privileged() {
        lines.push(Line::ok(
            "this process may call NVML's setters (root or CAP_SYS_ADMIN): `device:` GPU power \
             limits and locked clocks can be swept (CPU settings need their sysfs files \
             writable: `llem doctor study.yaml` checks each)",
        ));
    } else {
        lines.push(
            Line::info(
                "no root or CAP_SYS_ADMIN: configurations with `device:` GPU settings are \
                 refused (measuring needs neither)",
            )
            .fix(llem_energy::settings::error::PRIVILEGE_HINT),
        );
    }
    for path in crate::device::leftover_journals() {
        lines.push(
            Line::fail(format!(
                "device settings left changed by an llem that died: {}",
                path.display()
            ))
            .fix("llem restore"),
        );
    }
    for path in crate::device::live_journals() {
        lines.push(Line::info(format!(
            "device settings changed by a running llem (put back when it ends): {}",
            path.display()
        )));
    }
    lines
}

/// Examines this host and, given a plan, whether its study can run here, with the user
/// config (`python`, `measurement.cpu_tdp_w`, `output.results_dir`) the plan was made with.
pub fn examine(plan: Option<&StudyPlan>, user: &UserConfig) -> Report {
    let python = user.python.clone();
    let senv = llem_energy::SensorEnv::from_process(user.measurement.cpu_tdp_w)
        .with_node(&user.measurement.node_power);
    let facts = host::Facts::gather(&senv);
    let docker = engines::Docker::probe();
    let results_dir = plan
        .map(|p| p.output_dir.clone())
        .or_else(|| user.output.results_dir.clone())
        .unwrap_or_else(|| "./results".into());

    let mut report = Report::default();
    report.push("Energy sensors", host::sensors(&facts));
    report.push("GPUs", host::gpus(&facts));
    report.push("Device settings", device_settings());
    report.push("Engines", engines::engines(python.as_deref()));
    report.push("Docker", engines::docker(&docker));
    report.push(
        "Host",
        vec![
            host::disk(std::path::Path::new(&results_dir)),
            host::clock(),
        ],
    );
    if let Some(plan) = plan {
        let n = plan.configs.len();
        let title = format!(
            "Study {} ({n} configuration{})",
            plan.study_name,
            if n == 1 { "" } else { "s" }
        );
        report.push(
            &title,
            study::checks(plan, &facts, &docker, python.as_deref()),
        );
    }
    report
}

/// The energy sensor families this host has, each with its domains or why it is absent.
pub struct SensorInventory {
    /// Each family, in `energy_sampler` order.
    pub families: Vec<llem_energy::select::FamilyReport>,
    /// The powercap tree looked at (`LLEM_POWERCAP_ROOT`).
    pub powercap_root: std::path::PathBuf,
    /// The sysfs root looked at (`LLEM_SYSFS_ROOT`).
    pub sysfs_root: std::path::PathBuf,
    /// The hwmon root looked at for a node power meter (`LLEM_HWMON_ROOT`).
    pub hwmon_root: std::path::PathBuf,
}

/// Probes every sensor family (node power as the user config says), for `llem config`.
pub fn sensor_inventory(m: &llem_config::user_config::UserMeasurement) -> SensorInventory {
    let senv = llem_energy::SensorEnv::from_process(m.cpu_tdp_w).with_node(&m.node_power);
    SensorInventory {
        families: llem_energy::select::inventory(&senv),
        powercap_root: senv.powercap_root.clone(),
        sysfs_root: senv.sysfs_root.clone(),
        hwmon_root: senv.hwmon_root.clone(),
    }
}

/// Whether an engine can run on this host, and how (or why not), for `llem config`.
pub fn engine_availability(engine: llem_config::Engine, python: Option<&str>) -> String {
    llem_engines::registry::availability(engine, python)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_line_grades_the_report() {
        let mut r = Report::default();
        r.push("a", vec![Line::ok("x"), Line::info("y")]);
        assert_eq!(r.worst(), Status::Info);
        r.push("b", vec![Line::warn("z").fix("do this")]);
        assert_eq!(r.worst(), Status::Warn);
        r.push("c", vec![Line::fail("w")]);
        assert_eq!(r.worst(), Status::Fail);
        let j = r.to_json();
        assert_eq!(j["status"], "fail");
        assert_eq!(j["summary"]["warn"], 1);
        assert_eq!(j["sections"][1]["lines"][0]["fix"], "do this");
    }
}
