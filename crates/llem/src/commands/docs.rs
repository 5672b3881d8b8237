//! `llem completions` and `llem man`: generated from the CLI definition itself, so they never
//! drift from the flags the binary accepts.

use std::io::Write as _;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::exit;

/// Prints the completion script for a shell.
pub fn completions(a: &CompletionsArgs) -> i32 {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "llem", &mut out);
    let _ = std::io::stdout().write_all(&out);
    exit::OK
}

/// Prints `llem.1`, or writes a page per command into `--dir`.
pub fn man(a: &ManArgs) -> i32 {
    let cmd = Cli::command();
    let Some(dir) = &a.dir else {
        let mut out = Vec::new();
        if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
            eprintln!("error: cannot render the manual page: {e}");
            return exit::FAILURE;
        }
        let _ = std::io::stdout().write_all(&out);
        return exit::OK;
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("error: {}: {e}", dir.display());
        return exit::FAILURE;
    }
    match clap_mangen::generate_to(cmd, dir) {
        Ok(()) => {
            println!("manual pages written to {}", dir.display());
            exit::OK
        }
        Err(e) => {
            eprintln!(
                "error: cannot write the manual pages to {}: {e}",
                dir.display()
            );
            exit::FAILURE
        }
    }
}
