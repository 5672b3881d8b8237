//! Feeds the in-process engine's warnings and errors to [`llem_harness::engines::engine_log`],
//! so a failed load can quote them even when nothing is printed.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

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
        llem_harness::engines::engine_log::note(said);
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
