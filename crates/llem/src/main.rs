//! `llem`: measure what LLM inference costs.

mod cli;
mod commands;
mod exit;
mod paths;
mod progress;
mod render;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let code = match args.command {
        cli::Command::Run(a) => commands::run::run(&a),
        cli::Command::Measure(a) => commands::measure::run(&a),
        cli::Command::Config(a) => commands::config::run(&a),
    };
    std::process::exit(code);
}
