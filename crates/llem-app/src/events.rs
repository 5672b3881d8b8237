//! Progress as the messages a study's cell reports on stdout, for every front end that relays
//! a measurement's progress (the cell process, the Python package).

use llem_harness::Event;
use llem_study::CellMessage;

/// A harness event as the JSON line a cell reports it with.
pub fn cell_message(e: Event) -> CellMessage {
    match e {
        Event::Start {
            phase,
            total,
            detail,
        } => CellMessage::Phase {
            phase: phase.as_str().to_string(),
            total,
            detail,
        },
        Event::Advance {
            done,
            tokens,
            elapsed_s,
            power_w,
        } => CellMessage::Advance {
            done,
            tokens,
            elapsed_s,
            power_w,
        },
        Event::Finish { phase, summary } => CellMessage::PhaseDone {
            phase: phase.as_str().to_string(),
            summary,
        },
        Event::Request {
            success,
            input_tokens,
            output_tokens,
            ttft_s,
            tpot_s,
        } => CellMessage::Request {
            success,
            input_tokens,
            output_tokens,
            ttft_s,
            tpot_s,
        },
        Event::Note(message) => CellMessage::Note { message },
        Event::ServerStarted { pgid, container } => CellMessage::Server { pgid, container },
    }
}
