//! `llem`: measure what LLM inference costs (the CLI lives in the library, [`llem::cli_main`]).

fn main() {
    std::process::exit(llem::cli_main(std::env::args_os()));
}
