//! `llem doctor`: is this host ready to measure, and (`llem doctor study.yaml`) is it ready for
//! this study? Each check is a line marked ok, info, warn or fail, with the exact fix for
//! anything not ok; `--json` prints the same report, `--check` grades the exit code.

mod engines;
mod host;
mod probe;
mod study;

use std::fmt::Write;

use serde::Serialize;

use crate::cli::DoctorArgs;
use crate::exit;

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
    fn new(status: Status, message: impl Into<String>) -> Line {
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

    fn fix(mut self, fix: impl Into<String>) -> Line {
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

    fn count(&self, status: Status) -> usize {
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

    /// The report as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for s in &self.sections {
            let _ = writeln!(out, "{}", s.title);
            for l in &s.lines {
                let mark = match l.status {
                    Status::Ok => "[ok]  ",
                    Status::Info => "[info]",
                    Status::Warn => "[warn]",
                    Status::Fail => "[fail]",
                };
                let _ = writeln!(out, "  {mark} {}", l.message);
                if let Some(f) = &l.fix {
                    let _ = writeln!(out, "         -> {f}");
                }
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "Summary: {} ok, {} info, {} warning(s), {} failure(s)",
            self.count(Status::Ok),
            self.count(Status::Info),
            self.count(Status::Warn),
            self.count(Status::Fail)
        );
        out
    }

    /// The exit code: 1 on a failure; with `check`, 0 all ok, 1 warnings, 2 failures.
    pub fn exit_code(&self, check: bool) -> i32 {
        match (self.worst(), check) {
            (Status::Fail, true) => 2,
            (Status::Warn, true) | (Status::Fail, false) => 1,
            _ => exit::OK,
        }
    }
}

/// Runs `llem doctor`; returns the exit code.
pub fn run(args: &DoctorArgs) -> i32 {
    let env = llem_config::Env::from_process();
    let mut sources = llem_config::source::SourceMap::new();
    let settings = match llem_config::UserSettings::load(&env, &mut sources) {
        Ok(s) => s,
        Err(e) => {
            eprint!("{e}");
            return exit::CONFIG;
        }
    };
    let python = settings.config.python.clone();
    let plan = match &args.config {
        None => None,
        Some(path) => {
            let request = llem_config::PlanRequest {
                config: Some(path),
                config_dir: None,
                overrides: llem_config::Overrides::default(),
                dedup: true,
                env: &env,
            };
            match llem_config::plan(&request) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprint!("{e}");
                    return exit::CONFIG;
                }
            }
        }
    };
    let senv = llem_energy::SensorEnv::from_process(settings.config.measurement.cpu_tdp_w);
    let facts = host::Facts::gather(&senv);
    let docker = engines::Docker::probe();
    let results_dir = plan
        .as_ref()
        .map(|p| p.output_dir.clone())
        .or_else(|| settings.config.output.results_dir.clone())
        .unwrap_or_else(|| "./results".into());

    let mut report = Report::default();
    report.push("Energy sensors", host::sensors(&facts));
    report.push("GPUs", host::gpus(&facts));
    report.push("Engines", engines::engines(python.as_deref()));
    report.push("Docker", engines::docker(&docker));
    report.push(
        "Host",
        vec![
            host::disk(std::path::Path::new(&results_dir)),
            host::clock(),
        ],
    );
    if let Some(plan) = &plan {
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

    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        );
    } else {
        print!("{}", report.render());
    }
    report.exit_code(args.check)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_grades_the_worst_line() {
        let mut r = Report::default();
        r.push("a", vec![Line::ok("x"), Line::info("y")]);
        assert_eq!((r.exit_code(false), r.exit_code(true)), (0, 0));
        r.push("b", vec![Line::warn("z").fix("do this")]);
        assert_eq!((r.exit_code(false), r.exit_code(true)), (0, 1));
        r.push("c", vec![Line::fail("w")]);
        assert_eq!((r.exit_code(false), r.exit_code(true)), (1, 2));
        let j = r.to_json();
        assert_eq!(j["status"], "fail");
        assert_eq!(j["summary"]["warn"], 1);
        assert_eq!(j["sections"][1]["lines"][0]["fix"], "do this");
        assert!(r.render().contains("[warn] z\n         -> do this"));
    }
}
