//! Logging for a process that measures: to stderr at the verbosity asked, and the in-process
//! engine's warnings and errors fed to [`llem_engines::engine_log`] at any
//! verbosity, so a failed load can quote them even when nothing is printed.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Logs to stderr at info (`verbose` 1) or debug (2 and up); `LLEM_LOG` overrides the filter.
/// Engine warnings are kept for error messages at any verbosity. Once per process; later calls
/// change nothing.
pub fn init(verbose: u8) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let printed = (verbose > 0).then(|| {
        let level = if verbose == 1 { "info" } else { "debug" };
        let filter = EnvFilter::try_from_env("LLEM_LOG").unwrap_or_else(|_| EnvFilter::new(level));
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter)
    });
    let _ = tracing_subscriber::registry()
        .with(printed)
        .with(EngineWarnings)
        .try_init();
}

/// The target llama.cpp's log arrives under (the `llama-cpp-2` bindings).
const LLAMA_TARGET: &str = "llama-cpp-2";

/// A layer that keeps llama.cpp's warnings and errors.
pub struct EngineWarnings;

impl<S: Subscriber> Layer<S> for EngineWarnings {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if meta.target() != LLAMA_TARGET || *meta.level() > Level::WARN {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let text = line.message.trim();
        if text.is_empty() {
            return;
        }
        let said = match line.module {
            Some(m) => format!("{m}: {text}"),
            None => text.to_string(),
        };
        llem_engines::engine_log::note(said);
    }
}

#[derive(Default)]
struct Line {
    message: String,
    module: Option<String>,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "module" => self.module = Some(value.to_string()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            "module" => self.module = Some(format!("{value:?}")),
            _ => {}
        }
    }
}
