//! `llem restore`: puts back the device settings of every llem that died with them changed
//! (its journal's lock is free). Settings of a live llem are left alone and named.

use crate::exit;

/// Runs `llem restore`; exit 0 when nothing is left changed, 1 when a value could not be put
/// back.
pub fn run() -> i32 {
    let dir = llem_app::host::device_journal_dir();
    let restored = llem_app::device::restore_leftovers();
    let mut failed = false;
    for r in &restored {
        failed |= !r.ok();
        eprintln!("llem: {}", llem_app::device::describe(r));
    }
    let live = llem_app::device::live_journals();
    for path in &live {
        eprintln!(
            "llem: {} belongs to a running llem; its settings are put back when it ends",
            path.display()
        );
    }
    if restored.is_empty() && live.is_empty() {
        eprintln!(
            "llem: no device settings to restore (journals in {})",
            dir.display()
        );
    }
    if failed { exit::FAILURE } else { exit::OK }
}

/// Restores leftovers before a command that measures, saying what was put back.
pub fn leftovers_first() {
    for r in llem_app::device::restore_leftovers() {
        eprintln!("llem: {}", llem_app::device::describe(&r));
    }
}
