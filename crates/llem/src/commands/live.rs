//! `--metrics-listen` / `--otlp-endpoint` of `llem run` and `llem measure`: start the
//! exporters, say where they are, and report what failed at the end.

use llem_app::live::{LiveExports, LiveOptions};

use crate::exit;

/// The exporters `opts` asks for (`Ok(None)`: none), or the exit code of why they cannot
/// start; `grouping` labels this process's group on a Pushgateway.
pub fn start(
    opts: &LiveOptions,
    kind: &'static str,
    name: &str,
    grouping: &[(&str, String)],
) -> Result<Option<LiveExports>, i32> {
    match LiveExports::start(opts, kind, name, grouping) {
        Ok(exports) => {
            if let Some(s) = exports.as_ref().and_then(|x| x.server.as_ref()) {
                eprintln!("llem: live metrics at http://{}/metrics", s.address());
            }
            if let (Some(_), Some(url)) = (&exports, &opts.otlp_endpoint) {
                eprintln!("llem: pushing live metrics to {url} (OTLP/HTTP)");
            }
            if let (Some(_), Some(url)) = (&exports, &opts.push_gateway) {
                eprintln!("llem: pushing live metrics to the Pushgateway at {url}");
            }
            Ok(exports)
        }
        Err(e) => Err(refuse(e)),
    }
}

/// Says why live metrics cannot start; the exit code.
pub fn refuse(e: llem_app::LiveError) -> i32 {
    eprintln!("llem: {e}");
    exit::of(&llem_app::AppError::Live(e))
}

/// Stops the exporters (OTLP sends its final figures first) and says what went wrong.
pub fn finish(exports: Option<LiveExports>) {
    for note in exports.map(LiveExports::finish).unwrap_or_default() {
        eprintln!("llem: warning: {note}");
    }
}
