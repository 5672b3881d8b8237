//! `llem doctor`: prints the app's checks of this host (and, given a study file, of that
//! study) as text or `--json`; `--check` grades the exit code.

use std::fmt::Write;

use llem_app::doctor::{Report, Status};

use crate::cli::DoctorArgs;
use crate::exit;

/// Runs `llem doctor`; returns the exit code.
pub fn run(args: &DoctorArgs) -> i32 {
    let env = llem_config::Env::from_process();
    let user =
        match llem_config::UserSettings::load(&env, &mut llem_config::source::SourceMap::new()) {
            Ok(s) => s.config,
            Err(e) => {
                eprint!("{e}");
                return exit::CONFIG;
            }
        };
    let plan = match &args.config {
        None => None,
        Some(path) => {
            let opts = llem_app::PlanOptions {
                config: Some(path.clone()),
                dedup: true,
                ..llem_app::PlanOptions::default()
            };
            match llem_app::plan(&opts, &env) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprint!("{e}");
                    return exit::of(&e);
                }
            }
        }
    };
    let report = llem_app::doctor::examine(plan.as_ref(), &user);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        );
    } else {
        print!("{}", render(&report));
    }
    exit_code(&report, args.check)
}

/// The report as text.
fn render(report: &Report) -> String {
    let mut out = String::new();
    for s in &report.sections {
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
        report.count(Status::Ok),
        report.count(Status::Info),
        report.count(Status::Warn),
        report.count(Status::Fail)
    );
    out
}

/// The exit code: 1 on a failure; with `check`, 0 all ok, 1 warnings, 2 failures.
fn exit_code(report: &Report, check: bool) -> i32 {
    match (report.worst(), check) {
        (Status::Fail, true) => 2,
        (Status::Warn, true) | (Status::Fail, false) => 1,
        _ => exit::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llem_app::doctor::{Line, Section};

    #[test]
    fn the_exit_code_grades_the_worst_line() {
        let mut r = Report::default();
        let section = |title: &str, lines| Section {
            title: title.into(),
            lines,
        };
        r.sections.push(section(
            "a",
            vec![Line::new(Status::Ok, "x"), Line::new(Status::Info, "y")],
        ));
        assert_eq!((exit_code(&r, false), exit_code(&r, true)), (0, 0));
        r.sections.push(section(
            "b",
            vec![Line::new(Status::Warn, "z").fix("do this")],
        ));
        assert_eq!((exit_code(&r, false), exit_code(&r, true)), (0, 1));
        r.sections
            .push(section("c", vec![Line::new(Status::Fail, "w")]));
        assert_eq!((exit_code(&r, false), exit_code(&r, true)), (1, 2));
        assert!(render(&r).contains("[warn] z\n         -> do this"));
    }
}
