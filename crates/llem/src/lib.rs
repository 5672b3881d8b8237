//! `llem`: measure what LLM inference costs. The CLI, as a library: the `llem` binary is
//! [`cli_main`] (the Python wheel carries that binary: its `llem` script, `python -m llem` and
//! the cells of a Python study run it). It parses arguments into
//! `llem-app`'s typed options, calls it, and prints.

// std's print macros panic when the write fails (a full disk under a cell's log, a closed
// terminal); the panic then fails to print too and the process aborts, hiding the cause.
// llem's own output is best-effort: these shadow them crate-wide, dropping write errors.
macro_rules! println {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
macro_rules! eprintln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
macro_rules! eprint {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}
macro_rules! print {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

mod cli;
mod commands;
mod doctor;
mod exit;
mod options;
mod progress;
mod render;
mod study_view;

use clap::Parser;

/// Runs the CLI on `args` (the program name first) and returns the exit code.
pub fn cli_main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = cli::Cli::parse_from(args);
    match args.command {
        cli::Command::Run(a) => commands::run::run(&a),
        cli::Command::Measure(a) => commands::measure::run(&a),
        cli::Command::Config(a) => commands::config::run(&a),
        cli::Command::Doctor(a) => doctor::run(&a),
        cli::Command::Results(a) => commands::results::run(&a),
        cli::Command::Report(a) => commands::report::run(&a),
        cli::Command::Completions(a) => commands::docs::completions(&a),
        cli::Command::Man(a) => commands::docs::man(&a),
        cli::Command::Schedule(a) => commands::schedule::run(&a),
        cli::Command::Cell(a) => commands::cell::run(&a),
        cli::Command::Study(a) => commands::study_status::run(&a),
        cli::Command::Restore => commands::restore::run(),
        cli::Command::SlurmTask(a) => commands::slurm::task(&a),
        cli::Command::SlurmCompile(a) => commands::slurm::compile(&a),
    }
}
