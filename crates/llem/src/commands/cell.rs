//! `llem __cell SPEC`: one study cell in a child process. Progress goes to stdout as JSON
//! lines, logs to stderr (the runner points it at the cell's `cell.log`), artefacts into the
//! cell directory. Exit codes as `llem run`: 0, 1 failure, 2 configuration, 130 interrupted.

use llem_app::{Event, Progress};
use llem_study::CellMessage;
use llem_study::child::{emit, read_spec, watch_parent};

use crate::cli::CellArgs;
use crate::exit;

/// Progress as JSON lines on stdout.
struct JsonLines;

impl Progress for JsonLines {
    fn event(&mut self, e: Event) {
        emit(&llem_app::events::cell_message(e));
    }
}

fn fail(error_type: &str, message: String, code: i32) -> i32 {
    eprintln!("llem: {message}");
    emit(&CellMessage::Failed {
        error_type: error_type.to_string(),
        message,
    });
    code
}

/// Runs one cell; returns the exit code.
pub fn run(args: &CellArgs) -> i32 {
    watch_parent(exit::INTERRUPTED);
    llem_app::logging::init(1);
    let spec = match read_spec(&args.spec) {
        Ok(s) => s,
        Err(e) => return fail("SpecError", e.to_string(), exit::CONFIG),
    };
    // SIGTERM from the runner (timeout, Ctrl-C) stops at the next decode step; a second one
    // exits at once. SIGINT likewise, for a cell run by hand.
    let cancel = crate::commands::execute::cancel_on_signals();
    match llem_app::cell::run_cell(spec, &mut JsonLines, cancel) {
        Ok(_) => {
            emit(&CellMessage::Completed {
                result_file: llem_results::layout::RESULT.to_string(),
            });
            exit::OK
        }
        Err(e) => fail(llem_app::cell::error_type(&e), e.to_string(), exit::of(&e)),
    }
}
