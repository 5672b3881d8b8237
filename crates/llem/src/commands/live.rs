//! `--metrics-listen` / `--otlp-endpoint` of `llem run` and `llem measure`: start the
//! exporters, say where they are, and report what failed at the end.

use llem_app::live::LiveExports;

use crate::cli::LiveArgs;
use crate::exit;

/// The exporters the flags ask for (`Ok(None)`: none), or the exit code of why they
/// cannot start.
pub fn start(args: &LiveArgs, kind: &'static str, name: &str) -> Result<Option<LiveExports>, i32> {
    match LiveExports::start(&args.options(), kind, name) {
        Ok(exports) => {
            if let Some(s) = exports.as_ref().and_then(|x| x.server.as_ref()) {
                eprintln!("llem: live metrics at http://{}/metrics", s.address());
            }
            if let (Some(_), Some(url)) = (&exports, &args.otlp_endpoint) {
                eprintln!("llem: pushing live metrics to {url} (OTLP/HTTP)");
            }
            Ok(exports)
        }
        Err(e) => {
            eprintln!("llem: {e}");
            Err(exit::of(&llem_app::AppError::Live(e)))
        }
    }
}

/// Stops the exporters (OTLP sends its final figures first) and says what went wrong.
pub fn finish(exports: Option<LiveExports>) {
    for note in exports.map(LiveExports::finish).unwrap_or_default() {
        eprintln!("llem: warning: {note}");
    }
}
