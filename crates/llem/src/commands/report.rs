//! `llem report DIR -o report.html`: the HTML report of `llem_records::report`.

use crate::cli::ReportArgs;
use crate::commands::results::{display_name, load_both};
use crate::exit;

/// Runs `llem report` and returns the exit code.
pub fn run(args: &ReportArgs) -> i32 {
    let (runs, diffusion) = match load_both(&args.dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::FAILURE;
        }
    };
    let runs = if args.stable { runs.stable() } else { runs };
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| format!("llem report: {}", display_name(&args.dir)));
    // A search study's answer leads its report; a directory of many studies has none.
    let search = llem_records::search_doc::read(&args.dir).unwrap_or_else(|e| {
        eprintln!("warning: {e}; the report has no search section");
        None
    });
    let html = llem_records::report::render(&runs, &diffusion, search.as_ref(), &title);
    match llem_results::write_atomic(&args.output, html.as_bytes()) {
        Ok(()) => {
            let diffusion_runs = if diffusion.is_empty() {
                String::new()
            } else {
                format!(", {} diffusion runs", diffusion.len())
            };
            eprintln!(
                "wrote {} ({} runs{diffusion_runs}, {} KiB)",
                args.output.display(),
                runs.len(),
                html.len() / 1024
            );
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_report_reads_the_search_file_the_runner_writes() {
        assert_eq!(
            llem_records::search_doc::SEARCH_FILE,
            llem_study::runner::SEARCH_FILE
        );
    }
}
