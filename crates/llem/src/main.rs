//! `llem`: measure what LLM inference costs.

mod cli;
mod commands;
mod exit;
mod paths;
mod progress;
mod render;
mod study_view;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let code = match args.command {
        cli::Command::Run(a) => commands::run::run(&a),
        cli::Command::Measure(a) => commands::measure::run(&a),
        cli::Command::Config(a) => commands::config::run(&a),
        cli::Command::Results(a) => commands::results::run(&a),
        cli::Command::Report(a) => commands::report::run(&a),
        cli::Command::Schedule(a) => commands::schedule::run(&a),
        cli::Command::Cell(a) => commands::cell::run(&a),
    };
    std::process::exit(code);
}
