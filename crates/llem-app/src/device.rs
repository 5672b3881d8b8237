//! Device settings on this machine: the plan's checked before its first cell, and journals
//! left by an llem that died restored (at every start of a run, a study's cell, `llem
//! measure`, after each cell of a local study, and by `llem restore`).

use llem_config::StudyPlan;
use llem_energy::SensorEnv;
use llem_energy::settings::Devices;
use llem_energy::settings::journal::{self, Restored};

use crate::host;

/// Problems with the plan's device settings on this machine, one line each (none: fine).
pub fn check(plan: &StudyPlan) -> Vec<String> {
    let env = SensorEnv::from_process(plan.user.measurement.cpu_tdp_w);
    let mut problems: Vec<String> = Vec::new();
    for pc in &plan.configs {
        if let Err(lines) = llem_harness::device_settings::check(&pc.config, &env) {
            for l in lines {
                if !problems.contains(&l) {
                    problems.push(l);
                }
            }
        }
    }
    problems
}

/// Restores every journal in the journal directory whose owner is gone.
pub fn restore_leftovers() -> Vec<Restored> {
    journal::restore_leftovers(&host::device_journal_dir(), &mut Devices::new())
}

/// Journals held by a running llem (their settings are in force now).
pub fn live_journals() -> Vec<std::path::PathBuf> {
    journal::survey(&host::device_journal_dir()).0
}

/// Journals whose owner is gone, not yet restored.
pub fn leftover_journals() -> Vec<std::path::PathBuf> {
    journal::survey(&host::device_journal_dir()).1
}

/// One line per restored journal, saying what was put back (or what was not, and why).
pub fn describe(r: &Restored) -> String {
    let who = r.journal.as_ref().map_or_else(
        || "an unreadable journal".to_string(),
        |j| format!("process {} ({})", j.pid, j.owner),
    );
    let values: Vec<String> = r
        .outcomes
        .iter()
        .map(|o| match &o.result {
            Ok(_) => format!("{} {} -> {}", o.device, o.setting, o.original),
            Err(e) => format!(
                "{} {} NOT restored to {}: {e}",
                o.device, o.setting, o.original
            ),
        })
        .collect();
    let head = if r.ok() {
        "restored device settings left by"
    } else {
        "FAILED to restore device settings left by"
    };
    let mut line = format!("{head} {who}: {}", values.join(", "));
    if let Some(e) = &r.error {
        line.push_str(&format!(" ({}: {e})", r.path.display()));
    } else if !r.ok() {
        line.push_str(&format!(
            " (journal kept: {}; `llem restore` retries)",
            r.path.display()
        ));
    }
    line
}
